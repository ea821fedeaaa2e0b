/* driver.h - what the files of the simulated driver (libcuda.so.1) share.
 *
 * The driver works on the device model of the simulated runtime
 * (../internal.h), reached through libcudart.so.13's private node
 * FSDPSHIM_SIM_PRIVATE (sim/driver.c says why this way round). Driver calls
 * report CUresult codes and never touch the runtime's last error. */
#ifndef SIM_CUDA_DRIVER_H
#define SIM_CUDA_DRIVER_H

#include "../internal.h"

/* Exports `legacy`, an older ABI name of an entry point whose signature did
 * not change (cuCtxPushCurrent for cuCtxPushCurrent_v2), as an alias of
 * `impl`. cuda.h defines the old names as macros for the new; # and ##
 * take the argument as written, so the symbol gets the old name. */
#define SIM_CU_ALIAS(legacy, impl)                                                                 \
    extern __typeof__(impl) sim_alias_##legacy __asm__(#legacy)                                    \
        __attribute__((alias(#impl), visibility("default")))

/* ---- context.c: initialisation, devices, contexts ---- */
/* CUDA_SUCCESS once the driver is initialised: by cuInit, or by the
 * runtime's first call (the runtime initialises the driver on a GPU too);
 * else CUDA_ERROR_NOT_INITIALIZED. */
CUresult sim_cu_ready(void);
/* The device of the thread's current context; CUDA_ERROR_INVALID_CONTEXT
 * when it has none (after sim_cu_ready). */
CUresult sim_cu_current_device(struct fs_device **out);
/* sim_cu_ready, then sim_cu_current_device: for calls that work in the
 * current context. */
CUresult sim_cu_ready_in_context(struct fs_device **out);
/* A call on the legacy or the per-thread stream works in the current
 * context, which the thread must have (CUDA_ERROR_INVALID_CONTEXT); an
 * explicit stream names its own: CUDA_SUCCESS. */
CUresult sim_cu_stream_context(CUstream s);
/* The primary context of a device (NULL for an invalid ordinal), and the
 * ordinal of a context (-1 for anything that is not one). */
CUcontext sim_primary_ctx(int device);
int sim_ctx_device(CUcontext ctx);

/* ---- memory.c ---- */
/* The driver's code for a runtime status the model answered with. */
CUresult sim_cu_result(cudaError_t err);

/* ---- the model's streams, events, captures and copies, for stream.c:
 * seams of libcudart.so.13 under FSDPSHIM_SIM_PRIVATE, each the runtime
 * call's own implementation, leaving the runtime's last error as it was
 * (pt: the per-thread default stream variant) ---- */
/* ../stream_api.c */
cudaError_t sim_drv_stream_create(cudaStream_t *out, unsigned flags, int priority);
cudaError_t sim_drv_stream_destroy(cudaStream_t h);
cudaError_t sim_drv_stream_synchronize(cudaStream_t h, int pt);
cudaError_t sim_drv_stream_get_flags(cudaStream_t h, unsigned *flags, int pt);
cudaError_t sim_drv_stream_get_device(cudaStream_t h, int *device, int pt);
cudaError_t sim_drv_launch_host_func(cudaStream_t h, cudaHostFn_t fn, void *user, int pt);
/* ../event.c */
cudaError_t sim_drv_event_create(cudaEvent_t *out, unsigned flags);
cudaError_t sim_drv_event_record(cudaEvent_t h, cudaStream_t s, unsigned flags, int pt);
cudaError_t sim_drv_event_query(cudaEvent_t h);
cudaError_t sim_drv_event_synchronize(cudaEvent_t h);
cudaError_t sim_drv_event_destroy(cudaEvent_t h);
cudaError_t sim_drv_stream_wait_event(cudaStream_t s, cudaEvent_t h, unsigned flags, int pt);
/* ../capture.c */
cudaError_t sim_drv_stream_is_capturing(cudaStream_t h, int pt,
                                        enum cudaStreamCaptureStatus *status);
/* ../hostmem.c */
cudaError_t sim_drv_host_alloc(void **ptr, size_t size);
cudaError_t sim_drv_host_free(void *ptr);
/* ../copy.c */
cudaError_t sim_drv_memcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                           cudaStream_t s, int per_thread, int async);

/* ---- context.c: the CUDA 3.2 ABI of cuCtxCreate, which cuda.h no longer
 * declares ---- */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

/* ---- the per-thread default stream variants, which cuda.h declares only
 * for builds with CUDA_API_PER_THREAD_DEFAULT_STREAM ---- */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream);
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int value, size_t count, CUstream stream);
CUresult cuStreamWriteValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                      unsigned int flags);
CUresult cuStreamSynchronize_ptsz(CUstream s);
CUresult cuStreamGetFlags_ptsz(CUstream s, unsigned int *flags);
CUresult cuStreamGetDevice_ptsz(CUstream s, CUdevice *device);
CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *status);
CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent ev, unsigned int flags);
CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *user);
CUresult cuEventRecord_ptsz(CUevent ev, CUstream s);
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s);
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuLaunchKernel_ptsz(CUfunction func, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem,
                             CUstream stream, void **params, void **extra);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction func, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int smem, CUstream stream,
                                        void **params);

#endif /* SIM_CUDA_DRIVER_H */
