/* stream_api.c - the cudaStream* entry points, host functions, and the
 * private seam NCCL (sim) enqueues its device work through. Capture and its
 * queries are capture.c's. */
#include <stdlib.h>

#include "api_callback.h"
#include "internal.h"

#include <cupti.h> /* the callback ids and params structs */

static cudaError_t stream_create(cudaStream_t *out, unsigned flags, int priority)
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

/* stream_create as CUPTI sees it (api_callback.h). */
static cudaError_t stream_create_call(cudaStream_t *out, unsigned flags, int priority,
                                      unsigned cbid, const char *name, const void *params)
{
    cudaError_t ret;
    SIM_API_CALL(2, cbid, name, params, ret, stream_create(out, flags, priority));
    return ret;
}

SIM_API cudaError_t cudaStreamCreate(cudaStream_t *out)
{
    cudaStreamCreate_v3020_params p = {out};
    return stream_create_call(out, cudaStreamDefault, 0,
                              CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreate_v3020, "cudaStreamCreate",
                              &p);
}

SIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
    cudaStreamCreateWithFlags_v5000_params p = {out, flags};
    return stream_create_call(out, flags, 0,
                              CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithFlags_v5000,
                              "cudaStreamCreateWithFlags", &p);
}

SIM_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *out, unsigned int flags,
                                                 int priority)
{
    cudaStreamCreateWithPriority_v5050_params p = {out, flags, priority};
    return stream_create_call(out, flags, priority,
                              CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithPriority_v5050,
                              "cudaStreamCreateWithPriority", &p);
}

static cudaError_t stream_destroy(cudaStream_t h)
{
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(h, 0, &s);
    if (err) return sim_record_error(err);
    /* The default streams cannot be destroyed. */
    if (s->kind != SIM_STREAM_USER) return sim_record_error(cudaErrorInvalidResourceHandle);
    sim_stream_destroy(s);
    return cudaSuccess;
}

SIM_API cudaError_t cudaStreamDestroy(cudaStream_t h)
{
    cudaStreamDestroy_v5050_params p = {h};
    cudaError_t ret;
    SIM_API_CALL(2, CUPTI_RUNTIME_TRACE_CBID_cudaStreamDestroy_v5050, "cudaStreamDestroy", &p, ret,
                 stream_destroy(h));
    return ret;
}

static cudaError_t stream_query(cudaStream_t h, int pt)
{
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (!err) err = sim_capture_refuse(s);
    if (err) return sim_record_error(err);
    return sim_stream_done(s, sim_stream_last(s)) ? cudaSuccess : cudaErrorNotReady;
}

SIM_API cudaError_t cudaStreamQuery(cudaStream_t h)
{
    return stream_query(h, 0);
}
SIM_RT_ALIAS(cudaStreamQuery);

SIM_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t h)
{
    return stream_query(h, 1);
}
SIM_RT_ALIAS(cudaStreamQuery_ptsz);

static cudaError_t stream_synchronize(cudaStream_t h, int pt)
{
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (!err) err = sim_capture_refuse(s);
    if (err) return sim_record_error(err);
    sim_stream_wait(s, sim_stream_last(s));
    sim_mempool_trim_threshold(s->dev->mempool);
    return cudaSuccess;
}

SIM_API cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
    return stream_synchronize(h, 0);
}

SIM_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t h)
{
    return stream_synchronize(h, 1);
}

static cudaError_t stream_get_flags(cudaStream_t h, unsigned int *flags, int pt)
{
    struct sim_stream *s;
    if (!flags) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (err) return sim_record_error(err);
    *flags = s->flags;
    return cudaSuccess;
}

SIM_API cudaError_t cudaStreamGetFlags(cudaStream_t h, unsigned int *flags)
{
    return stream_get_flags(h, flags, 0);
}

SIM_API cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t h, unsigned int *flags)
{
    return stream_get_flags(h, flags, 1);
}

static cudaError_t stream_get_priority(cudaStream_t h, int *priority, int pt)
{
    struct sim_stream *s;
    if (!priority) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (err) return sim_record_error(err);
    *priority = s->priority;
    return cudaSuccess;
}

SIM_API cudaError_t cudaStreamGetPriority(cudaStream_t h, int *priority)
{
    return stream_get_priority(h, priority, 0);
}
SIM_RT_ALIAS(cudaStreamGetPriority);

SIM_API cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t h, int *priority)
{
    return stream_get_priority(h, priority, 1);
}
SIM_RT_ALIAS(cudaStreamGetPriority_ptsz);

static cudaError_t stream_get_device(cudaStream_t h, int *device, int pt)
{
    struct sim_stream *s;
    if (!device) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (err) return sim_record_error(err);
    *device = s->dev->ordinal;
    return cudaSuccess;
}

SIM_API cudaError_t cudaStreamGetDevice(cudaStream_t h, int *device)
{
    return stream_get_device(h, device, 0);
}

SIM_API cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t h, int *device)
{
    return stream_get_device(h, device, 1);
}

static cudaError_t stream_get_id(cudaStream_t h, unsigned long long *id, int pt)
{
    struct sim_stream *s;
    if (!id) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (err) return sim_record_error(err);
    *id = s->id;
    return cudaSuccess;
}

SIM_API cudaError_t cudaStreamGetId(cudaStream_t h, unsigned long long *id)
{
    return stream_get_id(h, id, 0);
}
SIM_RT_ALIAS(cudaStreamGetId);

SIM_API cudaError_t cudaStreamGetId_ptsz(cudaStream_t h, unsigned long long *id)
{
    return stream_get_id(h, id, 1);
}
SIM_RT_ALIAS(cudaStreamGetId_ptsz);

static cudaError_t launch_host_func(cudaStream_t h, cudaHostFn_t fn, void *user, int pt);

/* ---- the simulated driver's streams (sim/cuda/stream.c): the same calls,
 * leaving the runtime's last error as it was ---- */

SIM_SEAM cudaError_t sim_drv_stream_create(cudaStream_t *out, unsigned flags, int priority)
{
    return SIM_QUIETLY(stream_create(out, flags, priority));
}

SIM_SEAM cudaError_t sim_drv_stream_destroy(cudaStream_t h)
{
    return SIM_QUIETLY(stream_destroy(h));
}

SIM_SEAM cudaError_t sim_drv_stream_synchronize(cudaStream_t h, int pt)
{
    return SIM_QUIETLY(stream_synchronize(h, pt));
}

SIM_SEAM cudaError_t sim_drv_stream_get_flags(cudaStream_t h, unsigned *flags, int pt)
{
    return SIM_QUIETLY(stream_get_flags(h, flags, pt));
}

SIM_SEAM cudaError_t sim_drv_launch_host_func(cudaStream_t h, cudaHostFn_t fn, void *user, int pt)
{
    return SIM_QUIETLY(launch_host_func(h, fn, user, pt));
}

SIM_SEAM cudaError_t sim_drv_stream_get_device(cudaStream_t h, int *device, int pt)
{
    return SIM_QUIETLY(stream_get_device(h, device, pt));
}

/* ---- host functions ---- */

static cudaError_t launch_host_func(cudaStream_t h, cudaHostFn_t fn, void *user, int pt)
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

SIM_API cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *user)
{
    return launch_host_func(h, fn, user, 0);
}

SIM_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t h, cudaHostFn_t fn, void *user)
{
    return launch_host_func(h, fn, user, 1);
}

struct callback {
    cudaStreamCallback_t fn;
    cudaStream_t stream;
    void *user;
};

static void run_callback(void *p)
{
    struct callback *cb = p;
    cb->fn(cb->stream, cudaSuccess, cb->user);
    free(cb);
}

static cudaError_t add_callback(cudaStream_t h, cudaStreamCallback_t fn, void *user, unsigned flags,
                                int pt)
{
    struct sim_stream *s;
    if (!fn || flags != 0) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    /* Stream callbacks cannot be captured (host functions can). */
    if (!err) err = sim_capture_refuse(s);
    if (err) return sim_record_error(err);
    struct callback *cb = malloc(sizeof *cb);
    if (!cb) return sim_record_error(cudaErrorMemoryAllocation);
    *cb = (struct callback){fn, h, user};
    if (!sim_stream_submit(s, run_callback, cb, 1, NULL)) {
        free(cb);
        return sim_record_error(cudaErrorInvalidResourceHandle);
    }
    return cudaSuccess;
}

SIM_API cudaError_t cudaStreamAddCallback(cudaStream_t h, cudaStreamCallback_t fn, void *user,
                                          unsigned int flags)
{
    return add_callback(h, fn, user, flags, 0);
}
SIM_RT_ALIAS(cudaStreamAddCallback);

SIM_API cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t h, cudaStreamCallback_t fn, void *user,
                                               unsigned int flags)
{
    return add_callback(h, fn, user, flags, 1);
}
SIM_RT_ALIAS(cudaStreamAddCallback_ptsz);

/* ---- the seam used by the simulated NCCL (sim_private.h) ---- */

SIM_API cudaError_t sim_stream_enqueue(cudaStream_t stream, int per_thread, sim_work_fn fn,
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

SIM_API cudaError_t sim_stream_enqueue_work(cudaStream_t stream, int per_thread,
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

SIM_API int sim_stream_device(cudaStream_t stream)
{
    struct sim_stream *s;
    if (sim_stream_resolve(stream, 0, &s)) return -1;
    return s->dev->ordinal;
}
