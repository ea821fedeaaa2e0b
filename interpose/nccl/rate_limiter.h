/* rate_limiter.h - the all-gather rate limiter (SPEC section 7): FSDP's
 * limit_all_gathers, done below the framework.
 *
 * The NCCL glue (nccl.c) drives it around every ncclAllGather:
 *
 *     wait_end = fs_ratelimit_wait(device);      before issuing
 *     fs_ratelimit_launched(wait_end);           just before the real call
 *     ... the real ncclAllGather ...
 *     fs_ratelimit_mark_output(recvbuff);        once it was issued
 *
 * The free side needs nothing from the runtime glue beyond the free hook of
 * shim.h: the first marked output installs it, and from then on the free of
 * a marked block hands its fence here. */
#ifndef FS_RATE_LIMITER_H
#define FS_RATE_LIMITER_H

#include <stdbool.h>
#include <stdint.h>

/* True when FSDPSHIM_CONF turns the limiter on (ag_limit or ag_limit_mb). */
bool fs_ratelimit_enabled(void);

/* Before an all-gather is issued on `device`: drops the queued fences that
 * have completed, then, while `device` has ag_limit freed outputs still in
 * use on the GPU, or more than ag_limit_mb of them, waits on the host for
 * the oldest one (its events only, never a device synchronisation).
 * Returns the monotonic time in ns at which the last wait ended, or 0 when
 * the call did not wait. Safe inside ncclGroupStart/End (see
 * docs/collectives.md). Call it inside the shim (fs_shim_enter held). */
uint64_t fs_ratelimit_wait(int device);

/* The all-gather is being handed to NCCL now: when fs_ratelimit_wait()
 * waited (wait_end != 0), records the gap since the wait ended. */
void fs_ratelimit_launched(uint64_t wait_end);

/* Marks the shim block holding `recvbuff` (any address inside it) as an
 * all-gather output, so that its free queues the free's fence. Blocks the
 * shim does not own are ignored. */
void fs_ratelimit_mark_output(const void *recvbuff);

/* What the limiter did on `device`, for the live statistics page: waits so
 * far and their total time, and the freed all-gather outputs it counts as
 * still in use on the GPU (queued, or being waited on) with their bytes.
 * Completed ones leave the count at the next all-gather or marked free.
 * Takes the device's queue lock briefly. */
typedef struct fs_ratelimit_live {
    uint64_t waits, wait_ns;
    uint64_t in_flight, in_flight_bytes;
} fs_ratelimit_live;
void fs_ratelimit_figures(int device, fs_ratelimit_live *out);

#endif /* FS_RATE_LIMITER_H */
