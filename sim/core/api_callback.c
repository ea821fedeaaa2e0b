/* api_callback.c - the hook of the simulated CUPTI on API enter and exit
 * (declared in sim.h). The hook is one atomic pointer: a call that entered
 * while it was set is reported on exit too, even if CUPTI unsubscribed
 * meanwhile (its dispatcher then finds nothing enabled), so a subscriber
 * never sees an exit without its enter. */
#include "sim.h"

#include <stddef.h>

static sim_api_hook_fn hook;
static uint32_t next_correlation_id = 1;

SIM_SEAM void sim_api_hook_set(sim_api_hook_fn fn)
{
    __atomic_store_n(&hook, fn, __ATOMIC_RELEASE);
}

SIM_SEAM void sim_api_enter(struct sim_api_call *call)
{
    /* The runtime initialises itself, and the driver with it (which loads
     * a CUDA_INJECTION64_PATH tool that may subscribe), before it reports
     * its first call, as on a GPU; driver calls need cuInit first anyway. */
    if (call->domain == 2) sim_init();
    sim_api_hook_fn fn = __atomic_load_n(&hook, __ATOMIC_ACQUIRE);
    call->hooked = fn != NULL;
    if (!fn) return;
    call->correlation = 0;
    call->correlation_id = __atomic_fetch_add(&next_correlation_id, 1, __ATOMIC_RELAXED);
    fn(call, 0);
}

SIM_SEAM void sim_api_exit(struct sim_api_call *call)
{
    sim_api_hook_fn fn = __atomic_load_n(&hook, __ATOMIC_ACQUIRE);
    if (call->hooked && fn) fn(call, 1);
}
