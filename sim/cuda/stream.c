/* stream.c - the driver's streams, events, host functions and stream
 * capture, on the device model's own (the runtime's streams and events: a
 * CUstream is a cudaStream_t, a CUevent a cudaEvent_t, a CUgraph a
 * cudaGraph_t, as on a GPU).
 *
 * Each call is the runtime call's implementation reached through a seam of
 * libcudart.so.13 or its sim_rt_ name (driver_internal.h), with the driver's codes
 * and without the runtime's last error. A call on the legacy or per-thread
 * stream works in the current context, which the thread must have; an
 * explicit stream or event names its own device. The _ptsz variants take
 * stream 0 as the per-thread stream. */
#include "driver_internal.h"

/* Initialised, and, for the default streams, a current context. */
static CUresult ready_on(CUstream s)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_stream_context(s);
}

/* ---- streams ---- */

/* The checks of a call that creates a stream or an event in the current
 * context, which must exist, and stores it in *out. */
static CUresult ready_to_create(const void *out)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    return out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The priority is clamped to the device's range, as the runtime's is. */
static CUresult stream_create(CUstream *out, unsigned int flags, int priority)
{
    cudaStream_t s;
    CUresult res = ready_to_create(out);
    if (res == CUDA_SUCCESS) res = sim_cu_result(sim_drv_stream_create(&s, flags, priority));
    if (res == CUDA_SUCCESS) *out = (CUstream)s;
    return res;
}

SIM_API CUresult cuStreamCreate(CUstream *out, unsigned int flags)
{
    return stream_create(out, flags, 0);
}

SIM_API CUresult cuStreamCreateWithPriority(CUstream *out, unsigned int flags, int priority)
{
    return stream_create(out, flags, priority);
}

SIM_API CUresult cuStreamDestroy_v2(CUstream s)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_stream_destroy((cudaStream_t)s));
}

static CUresult stream_synchronize(CUstream s, int pt)
{
    CUresult res = ready_on(s);
    return res ? res : sim_cu_result(sim_drv_stream_synchronize((cudaStream_t)s, pt));
}

SIM_API CUresult cuStreamSynchronize(CUstream s)
{
    return stream_synchronize(s, 0);
}

SIM_API CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    return stream_synchronize(s, 1);
}

static CUresult stream_get_flags(CUstream s, unsigned int *flags, int pt)
{
    CUresult res = ready_on(s);
    return res ? res : sim_cu_result(sim_drv_stream_get_flags((cudaStream_t)s, flags, pt));
}

SIM_API CUresult cuStreamGetFlags(CUstream s, unsigned int *flags)
{
    return stream_get_flags(s, flags, 0);
}

SIM_API CUresult cuStreamGetFlags_ptsz(CUstream s, unsigned int *flags)
{
    return stream_get_flags(s, flags, 1);
}

/* An entry point and its _ptsz variant, each the runtime call's work for
 * the stream as the calling thread names it. */
#define STREAM_PAIR(name, params, args, rt_call)                                                   \
    SIM_API CUresult name params                                                                   \
    {                                                                                              \
        CUresult res = ready_on(s);                                                                \
        return res ? res : SIM_RT(sim_rt_##rt_call args);                                          \
    }                                                                                              \
    SIM_API CUresult name##_ptsz params                                                            \
    {                                                                                              \
        CUresult res = ready_on(s);                                                                \
        return res ? res : SIM_RT(sim_rt_##rt_call##_ptsz args);                                   \
    }

STREAM_PAIR(cuStreamQuery, (CUstream s), ((cudaStream_t)s), cudaStreamQuery)
STREAM_PAIR(cuStreamGetPriority, (CUstream s, int *priority), ((cudaStream_t)s, priority),
            cudaStreamGetPriority)
STREAM_PAIR(cuStreamGetId, (CUstream s, unsigned long long *id), ((cudaStream_t)s, id),
            cudaStreamGetId)
/* The callback's status argument is a cudaError_t there, CUresult here: the
 * sim only ever passes success, 0 in both. */
STREAM_PAIR(cuStreamAddCallback, (CUstream s, CUstreamCallback fn, void *user, unsigned int flags),
            ((cudaStream_t)s, (cudaStreamCallback_t)(void (*)(void))fn, user, flags),
            cudaStreamAddCallback)

/* ---- stream capture (../core/capture.c) ---- */

_Static_assert(sizeof(CUgraphEdgeData) == sizeof(cudaGraphEdgeData), "edge data");
_Static_assert((int)CU_STREAM_CAPTURE_MODE_RELAXED == (int)cudaStreamCaptureModeRelaxed, "mode");

STREAM_PAIR(cuStreamBeginCapture_v2, (CUstream s, CUstreamCaptureMode mode),
            ((cudaStream_t)s, (enum cudaStreamCaptureMode)mode), cudaStreamBeginCapture)
STREAM_PAIR(cuStreamBeginCaptureToGraph,
            (CUstream s, CUgraph graph, const CUgraphNode *deps, const CUgraphEdgeData *edges,
             size_t n, CUstreamCaptureMode mode),
            ((cudaStream_t)s, (cudaGraph_t)graph, (const cudaGraphNode_t *)deps,
             (const cudaGraphEdgeData *)edges, n, (enum cudaStreamCaptureMode)mode),
            cudaStreamBeginCaptureToGraph)
STREAM_PAIR(cuStreamEndCapture, (CUstream s, CUgraph *graph),
            ((cudaStream_t)s, (cudaGraph_t *)graph), cudaStreamEndCapture)
STREAM_PAIR(cuStreamGetCaptureInfo_v3,
            (CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
             const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *n),
            ((cudaStream_t)s, (enum cudaStreamCaptureStatus *)status, (unsigned long long *)id,
             (cudaGraph_t *)graph, (const cudaGraphNode_t **)deps,
             (const cudaGraphEdgeData **)edges, n),
            cudaStreamGetCaptureInfo)
STREAM_PAIR(cuStreamUpdateCaptureDependencies_v2,
            (CUstream s, CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n,
             unsigned int flags),
            ((cudaStream_t)s, (cudaGraphNode_t *)deps, (const cudaGraphEdgeData *)edges, n, flags),
            cudaStreamUpdateCaptureDependencies)
/* The CUDA 11.3 ABIs, without edge data: every edge the default one. */
STREAM_PAIR(cuStreamGetCaptureInfo_v2,
            (CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
             const CUgraphNode **deps, size_t *n),
            ((cudaStream_t)s, (enum cudaStreamCaptureStatus *)status, (unsigned long long *)id,
             (cudaGraph_t *)graph, (const cudaGraphNode_t **)deps, NULL, n),
            cudaStreamGetCaptureInfo)
/* (cuda.h spells the CUDA 12.3 ABI with this one's name: sim_ names with
 * the symbols given.) */
STREAM_PAIR(sim_update_capture_deps_v1,
            (CUstream s, CUgraphNode *deps, size_t n, unsigned int flags),
            ((cudaStream_t)s, (cudaGraphNode_t *)deps, NULL, n, flags),
            cudaStreamUpdateCaptureDependencies)

/* No stream of the sim belongs to a green context (it makes none). */
SIM_API CUresult cuStreamGetGreenCtx(CUstream s, CUgreenCtx *green)
{
    CUresult res = ready_on(s);
    if (res) return res;
    if (!green) return CUDA_ERROR_INVALID_VALUE;
    if (s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD && s &&
        sim_stream_device((cudaStream_t)s) < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    *green = NULL;
    return CUDA_SUCCESS;
}

static CUresult stream_get_device(CUstream s, CUdevice *device, int pt)
{
    CUresult res = ready_on(s);
    return res ? res : sim_cu_result(sim_drv_stream_get_device((cudaStream_t)s, device, pt));
}

SIM_API CUresult cuStreamGetDevice(CUstream s, CUdevice *device)
{
    return stream_get_device(s, device, 0);
}

SIM_API CUresult cuStreamGetDevice_ptsz(CUstream s, CUdevice *device)
{
    return stream_get_device(s, device, 1);
}

static CUresult stream_is_capturing(CUstream s, CUstreamCaptureStatus *status, int pt)
{
    CUresult res = ready_on(s);
    if (res) return res;
    return sim_cu_result(
        sim_drv_stream_is_capturing((cudaStream_t)s, pt, (enum cudaStreamCaptureStatus *)status));
}

SIM_API CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    return stream_is_capturing(s, status, 0);
}

SIM_API CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status)
{
    return stream_is_capturing(s, status, 1);
}

static CUresult stream_wait_event(CUstream s, CUevent ev, unsigned int flags, int pt)
{
    CUresult res = ready_on(s);
    if (res) return res;
    return sim_cu_result(sim_drv_stream_wait_event((cudaStream_t)s, (cudaEvent_t)ev, flags, pt));
}

SIM_API CUresult cuStreamWaitEvent(CUstream s, CUevent ev, unsigned int flags)
{
    return stream_wait_event(s, ev, flags, 0);
}

SIM_API CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent ev, unsigned int flags)
{
    return stream_wait_event(s, ev, flags, 1);
}

static CUresult launch_host_func(CUstream s, CUhostFn fn, void *user, int pt)
{
    CUresult res = ready_on(s);
    if (res) return res;
    return sim_cu_result(sim_drv_launch_host_func((cudaStream_t)s, fn, user, pt));
}

SIM_API CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *user)
{
    return launch_host_func(s, fn, user, 0);
}

SIM_API CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *user)
{
    return launch_host_func(s, fn, user, 1);
}

/* ---- events ---- */

SIM_API CUresult cuEventCreate(CUevent *out, unsigned int flags)
{
    cudaEvent_t ev;
    CUresult res = ready_to_create(out);
    if (res == CUDA_SUCCESS) res = sim_cu_result(sim_drv_event_create(&ev, flags));
    if (res == CUDA_SUCCESS) *out = (CUevent)ev;
    return res;
}

/* CU_EVENT_RECORD_EXTERNAL is cudaEventRecordExternal. */
static CUresult event_record(CUevent ev, CUstream s, unsigned flags, int pt)
{
    CUresult res = ready_on(s);
    if (res) return res;
    return sim_cu_result(sim_drv_event_record((cudaEvent_t)ev, (cudaStream_t)s, flags, pt));
}

SIM_API CUresult cuEventRecord(CUevent ev, CUstream s)
{
    return event_record(ev, s, 0, 0);
}

SIM_API CUresult cuEventRecord_ptsz(CUevent ev, CUstream s)
{
    return event_record(ev, s, 0, 1);
}

SIM_API CUresult cuEventRecordWithFlags(CUevent ev, CUstream s, unsigned int flags)
{
    return event_record(ev, s, flags, 0);
}

SIM_API CUresult cuEventRecordWithFlags_ptsz(CUevent ev, CUstream s, unsigned int flags)
{
    return event_record(ev, s, flags, 1);
}

SIM_API CUresult cuEventQuery(CUevent ev)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_event_query((cudaEvent_t)ev));
}

SIM_API CUresult cuEventSynchronize(CUevent ev)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_event_synchronize((cudaEvent_t)ev));
}

SIM_API CUresult cuEventDestroy_v2(CUevent ev)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_event_destroy((cudaEvent_t)ev));
}

/* CUDA 12.8's ABI changed what may be timed, not the signature; both are
 * cudaEventElapsedTime's answer. */
SIM_API CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    return SIM_RT(sim_rt_cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
}
SIM_CU_ALIAS(cuEventElapsedTime, cuEventElapsedTime_v2);
