/* stream.c - the driver's streams, events, host functions and copies, on the
 * device model's own (the runtime's streams and events: a CUstream is a
 * cudaStream_t, a CUevent a cudaEvent_t, as on a GPU).
 *
 * Each call is the runtime call's implementation reached through a seam of
 * libcudart.so.13 (driver.h), with the driver's codes and without the
 * runtime's last error. A call on the legacy or per-thread stream works in
 * the current context, which the thread must have; an explicit stream or
 * event names its own device. The _ptsz/_ptds variants take stream 0 as the
 * per-thread stream. */
#include "driver.h"

/* Initialised, and, for the default streams, a current context. */
static CUresult ready_on(CUstream s)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_stream_context(s);
}

/* ---- streams ---- */

FS_API CUresult cuStreamCreate(CUstream *out, unsigned int flags)
{
    struct fs_device *dev; /* the call's context, which must exist */
    CUresult res = sim_cu_ready_in_context(&dev);
    cudaStream_t s;

    if (res) return res;
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    res = sim_cu_result(sim_drv_stream_create(&s, flags, 0));
    if (res == CUDA_SUCCESS) *out = (CUstream)s;
    return res;
}

FS_API CUresult cuStreamDestroy_v2(CUstream s)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_stream_destroy((cudaStream_t)s));
}

static CUresult stream_synchronize(CUstream s, int pt)
{
    CUresult res = ready_on(s);
    return res ? res : sim_cu_result(sim_drv_stream_synchronize((cudaStream_t)s, pt));
}

FS_API CUresult cuStreamSynchronize(CUstream s)
{
    return stream_synchronize(s, 0);
}

FS_API CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    return stream_synchronize(s, 1);
}

static CUresult stream_get_flags(CUstream s, unsigned int *flags, int pt)
{
    CUresult res = ready_on(s);
    return res ? res : sim_cu_result(sim_drv_stream_get_flags((cudaStream_t)s, flags, pt));
}

FS_API CUresult cuStreamGetFlags(CUstream s, unsigned int *flags)
{
    return stream_get_flags(s, flags, 0);
}

FS_API CUresult cuStreamGetFlags_ptsz(CUstream s, unsigned int *flags)
{
    return stream_get_flags(s, flags, 1);
}

static CUresult stream_get_device(CUstream s, CUdevice *device, int pt)
{
    CUresult res = ready_on(s);
    return res ? res : sim_cu_result(sim_drv_stream_get_device((cudaStream_t)s, device, pt));
}

FS_API CUresult cuStreamGetDevice(CUstream s, CUdevice *device)
{
    return stream_get_device(s, device, 0);
}

FS_API CUresult cuStreamGetDevice_ptsz(CUstream s, CUdevice *device)
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

FS_API CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status)
{
    return stream_is_capturing(s, status, 0);
}

FS_API CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status)
{
    return stream_is_capturing(s, status, 1);
}

static CUresult stream_wait_event(CUstream s, CUevent ev, unsigned int flags, int pt)
{
    CUresult res = ready_on(s);
    if (res) return res;
    return sim_cu_result(sim_drv_stream_wait_event((cudaStream_t)s, (cudaEvent_t)ev, flags, pt));
}

FS_API CUresult cuStreamWaitEvent(CUstream s, CUevent ev, unsigned int flags)
{
    return stream_wait_event(s, ev, flags, 0);
}

FS_API CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent ev, unsigned int flags)
{
    return stream_wait_event(s, ev, flags, 1);
}

static CUresult launch_host_func(CUstream s, CUhostFn fn, void *user, int pt)
{
    CUresult res = ready_on(s);
    if (res) return res;
    return sim_cu_result(sim_drv_launch_host_func((cudaStream_t)s, fn, user, pt));
}

FS_API CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *user)
{
    return launch_host_func(s, fn, user, 0);
}

FS_API CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *user)
{
    return launch_host_func(s, fn, user, 1);
}

/* ---- events ---- */

FS_API CUresult cuEventCreate(CUevent *out, unsigned int flags)
{
    struct fs_device *dev; /* the call's context, which must exist */
    CUresult res = sim_cu_ready_in_context(&dev);
    cudaEvent_t ev;

    if (res) return res;
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    res = sim_cu_result(sim_drv_event_create(&ev, flags));
    if (res == CUDA_SUCCESS) *out = (CUevent)ev;
    return res;
}

static CUresult event_record(CUevent ev, CUstream s, int pt)
{
    CUresult res = ready_on(s);
    return res ? res : sim_cu_result(sim_drv_event_record((cudaEvent_t)ev, (cudaStream_t)s, 0, pt));
}

FS_API CUresult cuEventRecord(CUevent ev, CUstream s)
{
    return event_record(ev, s, 0);
}

FS_API CUresult cuEventRecord_ptsz(CUevent ev, CUstream s)
{
    return event_record(ev, s, 1);
}

FS_API CUresult cuEventQuery(CUevent ev)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_event_query((cudaEvent_t)ev));
}

FS_API CUresult cuEventSynchronize(CUevent ev)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_event_synchronize((cudaEvent_t)ev));
}

FS_API CUresult cuEventDestroy_v2(CUevent ev)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_event_destroy((cudaEvent_t)ev));
}

/* ---- page-locked host memory, which copies use asynchronously ---- */

FS_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_host_alloc(pp, bytesize));
}

FS_API CUresult cuMemFreeHost(void *p)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_host_free(p));
}

/* ---- copies between device and host memory ---- */

static CUresult copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, CUstream s,
                     int pt, int async)
{
    CUresult res = ready_on(s);
    if (res) return res;
    return sim_cu_result(sim_drv_memcpy(dst, src, n, kind, (cudaStream_t)s, pt, async));
}

#define DEVICE(p) ((void *)(uintptr_t)(p))

FS_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    return copy(DEVICE(dst), src, n, cudaMemcpyHostToDevice, NULL, 0, 0);
}

FS_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
    return copy(DEVICE(dst), src, n, cudaMemcpyHostToDevice, NULL, 1, 0);
}

FS_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    return copy(dst, DEVICE(src), n, cudaMemcpyDeviceToHost, NULL, 0, 0);
}

FS_API CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
    return copy(dst, DEVICE(src), n, cudaMemcpyDeviceToHost, NULL, 1, 0);
}

FS_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    return copy(DEVICE(dst), src, n, cudaMemcpyHostToDevice, s, 0, 1);
}

FS_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    return copy(DEVICE(dst), src, n, cudaMemcpyHostToDevice, s, 1, 1);
}

FS_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    return copy(dst, DEVICE(src), n, cudaMemcpyDeviceToHost, s, 0, 1);
}

FS_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    return copy(dst, DEVICE(src), n, cudaMemcpyDeviceToHost, s, 1, 1);
}
