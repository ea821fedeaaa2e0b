/* fork.c - what a forked child inherits.
 *
 * Stream workers are threads, and threads do not survive fork. The child
 * therefore starts without streams and events (handles from the parent are
 * cudaErrorInvalidResourceHandle in it; the default streams are made afresh
 * on first use), while memory, pinned ranges, pools and VMM objects carry
 * over: the child has its own copy of every private mapping, and of device
 * memory (sim/core/arena.c remaps it privately). VMM mappings are MAP_SHARED
 * memfds and stay shared with the parent, as does memory opened from an IPC
 * handle.
 *
 * Every lock that guards that inherited state is taken before the fork (in
 * an order no other path contradicts: IPC events, IPC handles, pools, the
 * pages of cudaMalloc memory, arena, modules, devices, registry, streams,
 * events) so the child never sees it
 * half-updated, and released in reverse after it. The simulated driver's VMM
 * lock comes before all of them: its handler is registered after this one
 * (sim/cuda/vmm.c), so it runs first. */
#include "sim.h"

#ifdef __SANITIZE_THREAD__
#include <sanitizer/tsan_interface.h>
#endif

void sim_fork_rwlock(pthread_rwlock_t *lock, enum sim_fork_phase phase)
{
    if (phase == SIM_FORK_PREPARE) {
        pthread_rwlock_wrlock(lock);
    } else if (phase == SIM_FORK_PARENT) {
        pthread_rwlock_unlock(lock);
    } else {
        /* The fresh lock is the release of the one the prepare took, which
         * TSan must be told: else it holds that lock for ever in the child
         * and sees lock-order cycles in the child's other handlers
         * (sim/core/arena.c). */
#ifdef __SANITIZE_THREAD__
        __tsan_mutex_pre_unlock(lock, 0);
        __tsan_mutex_post_unlock(lock, 0);
#endif
        pthread_rwlock_init(lock, NULL);
    }
}

static void prepare(void)
{
    sim_ipc_event_fork(SIM_FORK_PREPARE);
    sim_ipc_fork(SIM_FORK_PREPARE);
    sim_mempools_fork(SIM_FORK_PREPARE);
    sim_vram_fork(SIM_FORK_PREPARE);
    sim_arena_fork(SIM_FORK_PREPARE);
    sim_modules_fork(SIM_FORK_PREPARE);
    sim_devices_fork(SIM_FORK_PREPARE);
    sim_registry_fork(SIM_FORK_PREPARE);
    sim_streams_fork(SIM_FORK_PREPARE);
    sim_events_fork(SIM_FORK_PREPARE);
}

static void after(enum sim_fork_phase phase)
{
    sim_events_fork(phase);
    sim_streams_fork(phase);
    sim_registry_fork(phase);
    sim_devices_fork(phase);
    sim_modules_fork(phase);
    sim_arena_fork(phase);
    sim_vram_fork(phase);
    sim_mempools_fork(phase);
    sim_ipc_fork(phase);
    sim_ipc_event_fork(phase);
}

static void parent(void)
{
    after(SIM_FORK_PARENT);
}

static void child(void)
{
    after(SIM_FORK_CHILD);
}

void sim_fork_install(void)
{
    pthread_atfork(prepare, parent, child);
}
