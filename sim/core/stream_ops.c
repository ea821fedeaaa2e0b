/* stream_ops.c - the runtime's stream calls (create, destroy, synchronize,
 * the flag and device queries, host functions) with their checks and
 * last-error rules, shared by the runtime's entry points
 * (sim/cudart/stream_management.c) and the driver's (sim_drv_stream_*); and
 * the seam through which NCCL, cuBLAS and cuDNN enqueue device work
 * (sim_stream_enqueue*). The streams themselves are stream_worker.c's. */
#include <stdlib.h>

#include "sim.h"

#include <cupti.h> /* the callback ids and params structs */

cudaError_t sim_stream_create(cudaStream_t *out, unsigned flags, int priority)
{
    sim_init();
    if (!out || (flags & ~(unsigned)cudaStreamNonBlocking))
        return sim_record_error(cudaErrorInvalidValue);
    /* Out-of-range priorities are clamped, as the runtime documents. */
    if (priority > 0) priority = 0;
    if (priority < -5) priority = -5;
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return sim_record_error(cudaErrorNoDevice);
    struct sim_stream *s = sim_stream_new(dev, SIM_STREAM_USER, flags, priority);
    if (!s) return sim_record_error(cudaErrorMemoryAllocation);
    *out = (cudaStream_t)s;
    return cudaSuccess;
}

cudaError_t sim_stream_destroy_checked(cudaStream_t h)
{
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(h, 0, &s);
    if (err) return sim_record_error(err);
    /* The default streams cannot be destroyed. */
    if (s->kind != SIM_STREAM_USER) return sim_record_error(cudaErrorInvalidResourceHandle);
    sim_stream_destroy(s);
    return cudaSuccess;
}

cudaError_t sim_stream_synchronize(cudaStream_t h, int pt)
{
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (!err) err = sim_capture_refuse(s);
    if (err) return sim_record_error(err);
    sim_stream_wait(s, sim_stream_last(s));
    sim_mempool_trim_threshold(s->dev->mempool);
    return cudaSuccess;
}

cudaError_t sim_stream_get_flags(cudaStream_t h, unsigned int *flags, int pt)
{
    struct sim_stream *s;
    if (!flags) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (err) return sim_record_error(err);
    *flags = s->flags;
    return cudaSuccess;
}

cudaError_t sim_stream_get_device(cudaStream_t h, int *device, int pt)
{
    struct sim_stream *s;
    if (!device) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (err) return sim_record_error(err);
    *device = s->dev->ordinal;
    return cudaSuccess;
}

/* ---- the simulated driver's streams (sim/cuda/stream.c): the same calls,
 * leaving the runtime's last error as it was ---- */

SIM_SEAM cudaError_t sim_drv_stream_create(cudaStream_t *out, unsigned flags, int priority)
{
    return SIM_QUIETLY(sim_stream_create(out, flags, priority));
}

SIM_SEAM cudaError_t sim_drv_stream_destroy(cudaStream_t h)
{
    return SIM_QUIETLY(sim_stream_destroy_checked(h));
}

SIM_SEAM cudaError_t sim_drv_stream_synchronize(cudaStream_t h, int pt)
{
    return SIM_QUIETLY(sim_stream_synchronize(h, pt));
}

SIM_SEAM cudaError_t sim_drv_stream_get_flags(cudaStream_t h, unsigned *flags, int pt)
{
    return SIM_QUIETLY(sim_stream_get_flags(h, flags, pt));
}

SIM_SEAM cudaError_t sim_drv_launch_host_func(cudaStream_t h, cudaHostFn_t fn, void *user, int pt)
{
    return SIM_QUIETLY(sim_launch_host_func(h, fn, user, pt));
}

SIM_SEAM cudaError_t sim_drv_stream_get_device(cudaStream_t h, int *device, int pt)
{
    return SIM_QUIETLY(sim_stream_get_device(h, device, pt));
}

/* ---- host functions ---- */

cudaError_t sim_launch_host_func(cudaStream_t h, cudaHostFn_t fn, void *user, int pt)
{
    struct sim_stream *s;
    if (!fn) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (err) return sim_record_error(err);
    uint64_t seq;
    err = sim_stream_add_work(s, &(struct sim_work){cudaGraphNodeTypeHost, fn, NULL, user, 1}, NULL,
                              &seq);
    return err ? sim_record_error(err) : cudaSuccess;
}

/* ---- the device-work seam of NCCL, cuBLAS and cuDNN (sim.h) ---- */

SIM_SEAM cudaError_t sim_stream_enqueue(cudaStream_t stream, int per_thread, sim_work_fn fn,
                                        void *arg)
{
    struct sim_stream *s;
    if (!fn) return cudaErrorInvalidValue;
    cudaError_t err = sim_stream_resolve(stream, per_thread, &s);
    if (!err) err = sim_capture_refuse(s); /* fn consumes arg: it cannot be replayed */
    if (err) return err;
    /* Device work: stream ordered, but not serialised with host functions. */
    return sim_stream_submit(s, fn, arg, 0, NULL) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

SIM_SEAM cudaError_t sim_stream_enqueue_work(cudaStream_t stream, int per_thread,
                                             enum cudaGraphNodeType type, sim_work_fn run,
                                             sim_work_fn drop, void *arg)
{
    struct sim_stream *s;
    if (!run) return cudaErrorInvalidValue;
    cudaError_t err = sim_stream_resolve(stream, per_thread, &s);
    if (err) return err;
    uint64_t seq;
    return sim_stream_add_work(s, &(struct sim_work){type, run, drop, arg, 0}, NULL, &seq);
}

SIM_SEAM int sim_stream_device(cudaStream_t stream)
{
    struct sim_stream *s;
    if (sim_stream_resolve(stream, 0, &s)) return -1;
    return s->dev->ordinal;
}
