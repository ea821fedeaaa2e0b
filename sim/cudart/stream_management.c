/* stream_management.c - the runtime's cudaStream* entry points,
 * cudaLaunchHostFunc and cudaStreamAddCallback, each bracketed for CUPTI's
 * subscriber where it asks, onto the stream calls of sim/core/stream_ops.c.
 * Capture and its queries are stream_capture.c's. */
#include <stdlib.h>

#include "traced.h"

SIM_API cudaError_t cudaStreamCreate(cudaStream_t *out)
{
    return SIM_RT_TRACED(cudaStreamCreate, v3020, sim_stream_create(out, cudaStreamDefault, 0),
                         out);
}

SIM_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
    return SIM_RT_TRACED(cudaStreamCreateWithFlags, v5000, sim_stream_create(out, flags, 0), out,
                         flags);
}

SIM_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *out, unsigned int flags,
                                                 int priority)
{
    return SIM_RT_TRACED(cudaStreamCreateWithPriority, v5050,
                         sim_stream_create(out, flags, priority), out, flags, priority);
}

SIM_API cudaError_t cudaStreamDestroy(cudaStream_t h)
{
    return SIM_RT_TRACED(cudaStreamDestroy, v5050, sim_stream_destroy_checked(h), h);
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

SIM_API cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
    return sim_stream_synchronize(h, 0);
}

SIM_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t h)
{
    return sim_stream_synchronize(h, 1);
}

SIM_API cudaError_t cudaStreamGetFlags(cudaStream_t h, unsigned int *flags)
{
    return sim_stream_get_flags(h, flags, 0);
}

SIM_API cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t h, unsigned int *flags)
{
    return sim_stream_get_flags(h, flags, 1);
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

SIM_API cudaError_t cudaStreamGetDevice(cudaStream_t h, int *device)
{
    return sim_stream_get_device(h, device, 0);
}

SIM_API cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t h, int *device)
{
    return sim_stream_get_device(h, device, 1);
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

SIM_API cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *user)
{
    return sim_launch_host_func(h, fn, user, 0);
}

SIM_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t h, cudaHostFn_t fn, void *user)
{
    return sim_launch_host_func(h, fn, user, 1);
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
