/* api_callback.h - the seam through which the simulated CUPTI (sim/cupti/)
 * sees API calls of the simulated runtime and driver (api_callback.c).
 *
 * On a GPU the driver calls CUPTI's callbacks on API enter and exit; here the
 * entry points that CUPTI's subscriber may care about (sim/cupti/cupti.c
 * lists them) bracket their work with sim_api_enter / sim_api_exit,
 * naming the toolkit's callback id (cupti_runtime_cbid.h,
 * cupti_driver_cbid.h) and passing the toolkit's params struct
 * (generated_cuda_runtime_api_meta.h, generated_cuda_meta.h). While no CUPTI
 * is loaded that costs one relaxed load per call. */
#ifndef SIM_API_CALLBACK_H
#define SIM_API_CALLBACK_H

#include <stdint.h>

#define SIM_SEAM __attribute__((visibility("default")))

/* One call of an entry point, from enter to exit. */
struct sim_api_call {
    int domain;              /* CUpti_CallbackDomain: 1 driver, 2 runtime */
    unsigned cbid;           /* the toolkit's callback id */
    const char *name;        /* the entry point's name */
    const void *params;      /* the toolkit's <name>_params struct */
    void *ret;               /* cudaError_t * or CUresult *, read at exit */
    uint64_t correlation;    /* the subscriber's, kept from enter to exit */
    uint32_t correlation_id; /* one per call, process-wide */
    int hooked;              /* enter reached the hook: exit must too */
};

/* Called on enter (exit 0) and exit (exit 1) of every bracketed call while
 * set. */
typedef void (*sim_api_hook_fn)(struct sim_api_call *call, int exit);

/* Sets the hook (NULL: none). Only the simulated CUPTI calls it. */
SIM_SEAM void sim_api_hook_set(sim_api_hook_fn hook);

SIM_SEAM void sim_api_enter(struct sim_api_call *call);
SIM_SEAM void sim_api_exit(struct sim_api_call *call);

/* An entry point's work, bracketed: ret = (work) between enter and exit,
 * for the call named by domain (1 driver, 2 runtime), cbid and name, whose
 * arguments are in *params. */
#define SIM_API_CALL(dom, id, fname, params_ptr, ret, work)                                        \
    do {                                                                                           \
        struct sim_api_call call_ = {.domain = (dom),                                              \
                                     .cbid = (id),                                                 \
                                     .name = (fname),                                              \
                                     .params = (params_ptr),                                       \
                                     .ret = &(ret)};                                               \
        sim_api_enter(&call_);                                                                     \
        (ret) = (work);                                                                            \
        sim_api_exit(&call_);                                                                      \
    } while (0)

#endif /* SIM_API_CALLBACK_H */
