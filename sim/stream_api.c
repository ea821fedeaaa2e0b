/* stream_api.c - the cudaStream* entry points, host functions, and the
 * private seam NCCL (sim) enqueues its device work through. Capture and its
 * queries are capture.c's. */
#include <stdlib.h>

#include "api_callback.h"
#include "internal.h"

#include <cupti.h> /* the callback ids and params structs */

static cudaError_t stream_create(cudaStream_t *out, unsigned flags, int priority)
{
    fs_init();
    if (!out || (flags & ~(unsigned)cudaStreamNonBlocking)) return fs_ret(cudaErrorInvalidValue);
    /* Out-of-range priorities are clamped, as the runtime documents. */
    if (priority > 0) priority = 0;
    if (priority < -5) priority = -5;
    struct fs_device *dev = fs_cur_dev();
    if (!dev) return fs_ret(cudaErrorNoDevice);
    struct fs_stream *s = fs_stream_new(dev, FS_STREAM_USER, flags, priority);
    if (!s) return fs_ret(cudaErrorMemoryAllocation);
    *out = (cudaStream_t)s;
    return cudaSuccess;
}

/* stream_create as CUPTI sees it (api_callback.h). */
static cudaError_t stream_create_call(cudaStream_t *out, unsigned flags, int priority,
                                      unsigned cbid, const char *name, const void *params)
{
    cudaError_t ret;
    FS_SIM_API_CALL(2, cbid, name, params, ret, stream_create(out, flags, priority));
    return ret;
}

FS_API cudaError_t cudaStreamCreate(cudaStream_t *out)
{
    cudaStreamCreate_v3020_params p = {out};
    return stream_create_call(out, cudaStreamDefault, 0,
                              CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreate_v3020, "cudaStreamCreate",
                              &p);
}

FS_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
    cudaStreamCreateWithFlags_v5000_params p = {out, flags};
    return stream_create_call(out, flags, 0,
                              CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithFlags_v5000,
                              "cudaStreamCreateWithFlags", &p);
}

FS_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *out, unsigned int flags, int priority)
{
    cudaStreamCreateWithPriority_v5050_params p = {out, flags, priority};
    return stream_create_call(out, flags, priority,
                              CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithPriority_v5050,
                              "cudaStreamCreateWithPriority", &p);
}

static cudaError_t stream_destroy(cudaStream_t h)
{
    struct fs_stream *s;
    cudaError_t err = fs_stream_resolve(h, 0, &s);
    if (err) return fs_ret(err);
    /* The default streams cannot be destroyed. */
    if (s->kind != FS_STREAM_USER) return fs_ret(cudaErrorInvalidResourceHandle);
    fs_stream_destroy(s);
    return cudaSuccess;
}

FS_API cudaError_t cudaStreamDestroy(cudaStream_t h)
{
    cudaStreamDestroy_v5050_params p = {h};
    cudaError_t ret;
    FS_SIM_API_CALL(2, CUPTI_RUNTIME_TRACE_CBID_cudaStreamDestroy_v5050, "cudaStreamDestroy", &p,
                    ret, stream_destroy(h));
    return ret;
}

static cudaError_t stream_query(cudaStream_t h, int pt)
{
    struct fs_stream *s;
    cudaError_t err = fs_stream_resolve(h, pt, &s);
    if (!err) err = fs_capture_refuse(s);
    if (err) return fs_ret(err);
    return fs_stream_done(s, fs_stream_last(s)) ? cudaSuccess : cudaErrorNotReady;
}

FS_API cudaError_t cudaStreamQuery(cudaStream_t h)
{
    return stream_query(h, 0);
}
SIM_RT_ALIAS(cudaStreamQuery);

FS_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t h)
{
    return stream_query(h, 1);
}
SIM_RT_ALIAS(cudaStreamQuery_ptsz);

static cudaError_t stream_synchronize(cudaStream_t h, int pt)
{
    struct fs_stream *s;
    cudaError_t err = fs_stream_resolve(h, pt, &s);
    if (!err) err = fs_capture_refuse(s);
    if (err) return fs_ret(err);
    fs_stream_wait(s, fs_stream_last(s));
    fs_pool_trim_threshold(s->dev->pool);
    return cudaSuccess;
}

FS_API cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
    return stream_synchronize(h, 0);
}

FS_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t h)
{
    return stream_synchronize(h, 1);
}

static cudaError_t stream_get_flags(cudaStream_t h, unsigned int *flags, int pt)
{
    struct fs_stream *s;
    if (!flags) return fs_ret(cudaErrorInvalidValue);
    cudaError_t err = fs_stream_resolve(h, pt, &s);
    if (err) return fs_ret(err);
    *flags = s->flags;
    return cudaSuccess;
}

FS_API cudaError_t cudaStreamGetFlags(cudaStream_t h, unsigned int *flags)
{
    return stream_get_flags(h, flags, 0);
}

FS_API cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t h, unsigned int *flags)
{
    return stream_get_flags(h, flags, 1);
}

static cudaError_t stream_get_priority(cudaStream_t h, int *priority, int pt)
{
    struct fs_stream *s;
    if (!priority) return fs_ret(cudaErrorInvalidValue);
    cudaError_t err = fs_stream_resolve(h, pt, &s);
    if (err) return fs_ret(err);
    *priority = s->priority;
    return cudaSuccess;
}

FS_API cudaError_t cudaStreamGetPriority(cudaStream_t h, int *priority)
{
    return stream_get_priority(h, priority, 0);
}
SIM_RT_ALIAS(cudaStreamGetPriority);

FS_API cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t h, int *priority)
{
    return stream_get_priority(h, priority, 1);
}
SIM_RT_ALIAS(cudaStreamGetPriority_ptsz);

static cudaError_t stream_get_device(cudaStream_t h, int *device, int pt)
{
    struct fs_stream *s;
    if (!device) return fs_ret(cudaErrorInvalidValue);
    cudaError_t err = fs_stream_resolve(h, pt, &s);
    if (err) return fs_ret(err);
    *device = s->dev->ordinal;
    return cudaSuccess;
}

FS_API cudaError_t cudaStreamGetDevice(cudaStream_t h, int *device)
{
    return stream_get_device(h, device, 0);
}

FS_API cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t h, int *device)
{
    return stream_get_device(h, device, 1);
}

static cudaError_t stream_get_id(cudaStream_t h, unsigned long long *id, int pt)
{
    struct fs_stream *s;
    if (!id) return fs_ret(cudaErrorInvalidValue);
    cudaError_t err = fs_stream_resolve(h, pt, &s);
    if (err) return fs_ret(err);
    *id = s->id;
    return cudaSuccess;
}

FS_API cudaError_t cudaStreamGetId(cudaStream_t h, unsigned long long *id)
{
    return stream_get_id(h, id, 0);
}
SIM_RT_ALIAS(cudaStreamGetId);

FS_API cudaError_t cudaStreamGetId_ptsz(cudaStream_t h, unsigned long long *id)
{
    return stream_get_id(h, id, 1);
}
SIM_RT_ALIAS(cudaStreamGetId_ptsz);

static cudaError_t launch_host_func(cudaStream_t h, cudaHostFn_t fn, void *user, int pt);

/* ---- the simulated driver's streams (sim/cuda/stream.c): the same calls,
 * leaving the runtime's last error as it was ---- */

FS_SEAM cudaError_t sim_drv_stream_create(cudaStream_t *out, unsigned flags, int priority)
{
    return SIM_QUIETLY(stream_create(out, flags, priority));
}

FS_SEAM cudaError_t sim_drv_stream_destroy(cudaStream_t h)
{
    return SIM_QUIETLY(stream_destroy(h));
}

FS_SEAM cudaError_t sim_drv_stream_synchronize(cudaStream_t h, int pt)
{
    return SIM_QUIETLY(stream_synchronize(h, pt));
}

FS_SEAM cudaError_t sim_drv_stream_get_flags(cudaStream_t h, unsigned *flags, int pt)
{
    return SIM_QUIETLY(stream_get_flags(h, flags, pt));
}

FS_SEAM cudaError_t sim_drv_launch_host_func(cudaStream_t h, cudaHostFn_t fn, void *user, int pt)
{
    return SIM_QUIETLY(launch_host_func(h, fn, user, pt));
}

FS_SEAM cudaError_t sim_drv_stream_get_device(cudaStream_t h, int *device, int pt)
{
    return SIM_QUIETLY(stream_get_device(h, device, pt));
}

/* ---- host functions ---- */

static cudaError_t launch_host_func(cudaStream_t h, cudaHostFn_t fn, void *user, int pt)
{
    struct fs_stream *s;
    if (!fn) return fs_ret(cudaErrorInvalidValue);
    cudaError_t err = fs_stream_resolve(h, pt, &s);
    if (err) return fs_ret(err);
    uint64_t seq;
    err = fs_stream_enqueue(s, &(struct fs_work){cudaGraphNodeTypeHost, fn, NULL, user, 1}, NULL,
                            &seq);
    return err ? fs_ret(err) : cudaSuccess;
}

FS_API cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *user)
{
    return launch_host_func(h, fn, user, 0);
}

FS_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t h, cudaHostFn_t fn, void *user)
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
    struct fs_stream *s;
    if (!fn || flags != 0) return fs_ret(cudaErrorInvalidValue);
    cudaError_t err = fs_stream_resolve(h, pt, &s);
    /* Stream callbacks cannot be captured (host functions can). */
    if (!err) err = fs_capture_refuse(s);
    if (err) return fs_ret(err);
    struct callback *cb = malloc(sizeof *cb);
    if (!cb) return fs_ret(cudaErrorMemoryAllocation);
    *cb = (struct callback){fn, h, user};
    if (!fs_stream_submit(s, run_callback, cb, 1, NULL)) {
        free(cb);
        return fs_ret(cudaErrorInvalidResourceHandle);
    }
    return cudaSuccess;
}

FS_API cudaError_t cudaStreamAddCallback(cudaStream_t h, cudaStreamCallback_t fn, void *user,
                                         unsigned int flags)
{
    return add_callback(h, fn, user, flags, 0);
}
SIM_RT_ALIAS(cudaStreamAddCallback);

FS_API cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t h, cudaStreamCallback_t fn, void *user,
                                              unsigned int flags)
{
    return add_callback(h, fn, user, flags, 1);
}
SIM_RT_ALIAS(cudaStreamAddCallback_ptsz);

/* ---- the seam used by the simulated NCCL (sim_private.h) ---- */

FS_API cudaError_t fs_sim_stream_enqueue(cudaStream_t stream, int per_thread, fs_sim_work_fn fn,
                                         void *arg)
{
    struct fs_stream *s;
    if (!fn) return cudaErrorInvalidValue;
    cudaError_t err = fs_stream_resolve(stream, per_thread, &s);
    if (!err) err = fs_capture_refuse(s); /* fn consumes arg: it cannot be replayed */
    if (err) return err;
    /* Device work: stream ordered, but not serialised with host functions. */
    return fs_stream_submit(s, fn, arg, 0, NULL) ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

FS_API cudaError_t fs_sim_stream_enqueue_work(cudaStream_t stream, int per_thread,
                                              enum cudaGraphNodeType type, fs_sim_work_fn run,
                                              fs_sim_work_fn drop, void *arg)
{
    struct fs_stream *s;
    if (!run) return cudaErrorInvalidValue;
    cudaError_t err = fs_stream_resolve(stream, per_thread, &s);
    if (err) return err;
    uint64_t seq;
    return fs_stream_enqueue(s, &(struct fs_work){type, run, drop, arg, 0}, NULL, &seq);
}

FS_API int fs_sim_stream_device(cudaStream_t stream)
{
    struct fs_stream *s;
    if (fs_stream_resolve(stream, 0, &s)) return -1;
    return s->dev->ordinal;
}
