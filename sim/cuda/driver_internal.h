/* driver_internal.h - what the files of the simulated driver (libcuda.so.1) share.
 *
 * The driver works on the device model of the simulated runtime
 * (../core/sim.h), reached through libcudart.so.13's private node
 * FSDPSHIM_SIM_PRIVATE (docs/sim.md, "Layout", says why this way round). Driver calls
 * report CUresult codes and never touch the runtime's last error. */
#ifndef SIM_CUDA_DRIVER_INTERNAL_H
#define SIM_CUDA_DRIVER_INTERNAL_H

#include "sim.h"

/* Exports `legacy`, an older ABI name of an entry point whose signature did
 * not change (cuCtxPushCurrent for cuCtxPushCurrent_v2), as an alias of
 * `impl`. cuda.h defines the old names as macros for the new; # and ##
 * take the argument as written, so the symbol gets the old name. */
#define SIM_CU_ALIAS(legacy, impl)                                                                 \
    extern __typeof__(impl) sim_alias_##legacy __asm__(#legacy)                                    \
        __attribute__((alias(#impl), visibility("default")))

/* An entry point as CUPTI sees it (sim.h, ../core/api_callback.c), as an
 * expression: name's params struct filled with the arguments (...), the
 * callbacks on entry and exit around `work`, and work's result. The
 * callback id and the name the subscriber sees are name's own. */
#define SIM_CU_TRACED(name, work, ...)                                                             \
    __extension__({                                                                                \
        name##_params params_ = {__VA_ARGS__};                                                     \
        CUresult ret;                                                                              \
        SIM_API_CALL(1, CUPTI_DRIVER_TRACE_CBID_##name, #name, &params_, ret, (work));             \
        ret;                                                                                       \
    })

/* ---- context.c: initialisation, devices, contexts ---- */
/* CUDA_SUCCESS once the driver is initialised: by cuInit, or by the
 * runtime's first call (the runtime initialises the driver on a GPU too);
 * else CUDA_ERROR_NOT_INITIALIZED. */
CUresult sim_cu_ready(void);
/* The device of the thread's current context; CUDA_ERROR_INVALID_CONTEXT
 * when it has none (after sim_cu_ready). */
CUresult sim_cu_current_device(struct sim_device **out);
/* sim_cu_ready, then sim_cu_current_device: for calls that work in the
 * current context. */
CUresult sim_cu_ready_in_context(struct sim_device **out);
/* A call on the legacy or the per-thread stream works in the current
 * context, which the thread must have (CUDA_ERROR_INVALID_CONTEXT); an
 * explicit stream names its own: CUDA_SUCCESS. */
CUresult sim_cu_stream_context(CUstream s);
/* The primary context of a device (NULL for an invalid ordinal), and the
 * ordinal of a context (-1 for anything that is not one). */
CUcontext sim_primary_ctx(int device);
int sim_ctx_device(CUcontext ctx);

/* ---- result.c ---- */
/* The driver's code for a runtime status the model answered with. */
CUresult sim_cu_result(cudaError_t err);
/* A call into the runtime's own work (a sim_rt_ alias, below, or a seam)
 * as a driver call: its status in the driver's codes, the runtime's last
 * error left as it was. */
#define SIM_RT(call) sim_cu_result(SIM_QUIETLY(call))

/* The model's own calls for the driver (sim_drv_*: streams, events,
 * captures, copies, pinned host memory, function attributes) are part of
 * the seam, declared in ../core/sim.h. */

/* ---- the runtime entry points whose work a driver call is, by their
 * second names (SIM_RT_ALIAS in ../core/sim.h), to be called through
 * SIM_RT ---- */
#define SIM_RT_DECLARE(name) extern __typeof__(name) sim_rt_##name
/* the _ptsz variants, which cuda_runtime_api.h declares only for builds
 * with CUDA_API_PER_THREAD_DEFAULT_STREAM */
cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream);
cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t stream, int *priority);
cudaError_t cudaStreamGetId_ptsz(cudaStream_t stream, unsigned long long *id);
cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t fn, void *user,
                                       unsigned int flags);
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                               const cudaGraphNode_t *deps,
                                               const cudaGraphEdgeData *edges, size_t n,
                                               enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *status,
                                          unsigned long long *id, cudaGraph_t *graph,
                                          const cudaGraphNode_t **deps,
                                          const cudaGraphEdgeData **edges, size_t *n);
cudaError_t cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t stream, cudaGraphNode_t *deps,
                                                     const cudaGraphEdgeData *edges, size_t n,
                                                     unsigned int flags);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func,
                                     void **args);
/* ../cudart/stream_management.c, event_management.c, stream_capture.c */
SIM_RT_DECLARE(cudaStreamQuery);
SIM_RT_DECLARE(cudaStreamQuery_ptsz);
SIM_RT_DECLARE(cudaStreamGetPriority);
SIM_RT_DECLARE(cudaStreamGetPriority_ptsz);
SIM_RT_DECLARE(cudaStreamGetId);
SIM_RT_DECLARE(cudaStreamGetId_ptsz);
SIM_RT_DECLARE(cudaStreamAddCallback);
SIM_RT_DECLARE(cudaStreamAddCallback_ptsz);
SIM_RT_DECLARE(cudaEventElapsedTime);
SIM_RT_DECLARE(cudaStreamBeginCapture);
SIM_RT_DECLARE(cudaStreamBeginCapture_ptsz);
SIM_RT_DECLARE(cudaStreamBeginCaptureToGraph);
SIM_RT_DECLARE(cudaStreamBeginCaptureToGraph_ptsz);
SIM_RT_DECLARE(cudaStreamEndCapture);
SIM_RT_DECLARE(cudaStreamEndCapture_ptsz);
SIM_RT_DECLARE(cudaStreamGetCaptureInfo);
SIM_RT_DECLARE(cudaStreamGetCaptureInfo_ptsz);
SIM_RT_DECLARE(cudaStreamUpdateCaptureDependencies);
SIM_RT_DECLARE(cudaStreamUpdateCaptureDependencies_ptsz);
/* ../cudart/device_management.c, peer.c */
SIM_RT_DECLARE(cudaDeviceGetStreamPriorityRange);
SIM_RT_DECLARE(cudaDeviceEnablePeerAccess);
SIM_RT_DECLARE(cudaDeviceDisablePeerAccess);
/* ../cudart/stream_ordered_allocator.c, pinned_memory.c, managed.c */
SIM_RT_DECLARE(cudaMemPoolCreate);
SIM_RT_DECLARE(cudaMemPoolDestroy);
SIM_RT_DECLARE(cudaMemPoolSetAccess);
SIM_RT_DECLARE(cudaMemPoolGetAccess);
SIM_RT_DECLARE(cudaMemPoolTrimTo);
SIM_RT_DECLARE(cudaMemPoolSetAttribute);
SIM_RT_DECLARE(cudaMemPoolGetAttribute);
SIM_RT_DECLARE(cudaDeviceGetDefaultMemPool);
SIM_RT_DECLARE(cudaDeviceGetMemPool);
SIM_RT_DECLARE(cudaDeviceSetMemPool);
SIM_RT_DECLARE(cudaHostRegister);
SIM_RT_DECLARE(cudaHostUnregister);
SIM_RT_DECLARE(cudaHostGetDevicePointer);
SIM_RT_DECLARE(cudaMallocManaged);
/* ../cudart/library_management.c, kernel_launch.c, function_attributes.c */
SIM_RT_DECLARE(cudaLibraryLoadData);
SIM_RT_DECLARE(cudaLibraryLoadFromFile);
SIM_RT_DECLARE(cudaLibraryUnload);
SIM_RT_DECLARE(cudaLibraryGetKernel);
SIM_RT_DECLARE(cudaLibraryGetKernelCount);
SIM_RT_DECLARE(cudaLibraryEnumerateKernels);
SIM_RT_DECLARE(cudaLibraryGetGlobal);
SIM_RT_DECLARE(cudaLibraryGetManaged);
SIM_RT_DECLARE(cudaLibraryGetUnifiedFunction);
SIM_RT_DECLARE(cudaLaunchKernelExC);
SIM_RT_DECLARE(cudaLaunchKernelExC_ptsz);
SIM_RT_DECLARE(cudaFuncSetAttribute);
SIM_RT_DECLARE(cudaKernelSetAttributeForDevice);
SIM_RT_DECLARE(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);

/* ---- context.c: the CUDA 3.2 ABI of cuCtxCreate, which cuda.h no longer
 * declares ---- */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

/* ---- the per-thread default stream variants, which cuda.h declares only
 * for builds with CUDA_API_PER_THREAD_DEFAULT_STREAM (its prototypes, as
 * that build declares them) ---- */
CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags);
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX,
                                        unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int sharedMemBytes, CUstream hStream,
                                        void **kernelParams);
CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void **kernelParams, void **extra);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream);
CUresult cuMemBatchDecompressAsync_ptsz(CUmemDecompressParams *paramsArray, size_t count,
                                        unsigned int flags, size_t *errorIndex, CUstream stream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream);
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy);
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy);
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream);
CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                      unsigned long long flags, CUstream hStream);
CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream);
CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy);
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy);
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream);
CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                    size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                    size_t numAttrs, CUstream hStream);
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream);
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount);
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream);
CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount);
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                   CUstream hStream);
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount);
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                CUcontext srcContext, size_t ByteCount, CUstream hStream);
CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount);
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount);
CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
                               CUstream hStream);
CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N);
CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                 size_t Width, size_t Height, CUstream hStream);
CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                               size_t Width, size_t Height);
CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                 size_t Width, size_t Height, CUstream hStream);
CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                               size_t Width, size_t Height);
CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                size_t Width, size_t Height, CUstream hStream);
CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                              size_t Width, size_t Height);
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream);
CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N);
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N);
CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData,
                                  unsigned int flags);
CUresult cuStreamBatchMemOp_v2_ptsz(CUstream stream, unsigned int count,
                                    CUstreamBatchMemOpParams *paramArray, unsigned int flags);
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          const CUgraphEdgeData *dependencyData,
                                          size_t numDependencies, CUstreamCaptureMode mode);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        const CUgraphEdgeData **edgeData_out,
                                        size_t *numDependencies_out);
CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx);
CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx);
CUresult cuStreamGetDevice_ptsz(CUstream hStream, CUdevice *device);
CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags);
CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId);
CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority);
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus);
CUresult cuStreamQuery_ptsz(CUstream hStream);
CUresult cuStreamSynchronize_ptsz(CUstream hStream);
CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream hStream, CUgraphNode *dependencies,
                                                   const CUgraphEdgeData *dependencyData,
                                                   size_t numDependencies, unsigned int flags);
CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags);
CUresult cuStreamWaitValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                     unsigned int flags);
CUresult cuStreamWaitValue64_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                     unsigned int flags);
CUresult cuStreamWriteValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                      unsigned int flags);
CUresult cuStreamWriteValue64_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                      unsigned int flags);

/* ---- older ABIs under names cuda.h now gives to newer ones: declared with
 * their symbols, for entry.c's table ---- */
/* Those whose signature did not change: aliases (SIM_CU_ALIAS). */
#define SIM_CU_ALIAS_DECLARE(legacy, impl)                                                         \
    extern __typeof__(impl) sim_alias_##legacy __asm__(#legacy)
SIM_CU_ALIAS_DECLARE(cuCtxPushCurrent, cuCtxPushCurrent_v2);
SIM_CU_ALIAS_DECLARE(cuCtxPopCurrent, cuCtxPopCurrent_v2);
SIM_CU_ALIAS_DECLARE(cuDeviceGetUuid, cuDeviceGetUuid_v2);
SIM_CU_ALIAS_DECLARE(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2);
SIM_CU_ALIAS_DECLARE(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2);
SIM_CU_ALIAS_DECLARE(cuDevicePrimaryCtxSetFlags, cuDevicePrimaryCtxSetFlags_v2);
SIM_CU_ALIAS_DECLARE(cuEventElapsedTime, cuEventElapsedTime_v2);
SIM_CU_ALIAS_DECLARE(cuMemHostRegister, cuMemHostRegister_v2);
SIM_CU_ALIAS_DECLARE(cuStreamBatchMemOp, cuStreamBatchMemOp_v2);
SIM_CU_ALIAS_DECLARE(cuStreamBatchMemOp_ptsz, cuStreamBatchMemOp_v2_ptsz);
SIM_CU_ALIAS_DECLARE(cuStreamWriteValue32, cuStreamWriteValue32_v2);
SIM_CU_ALIAS_DECLARE(cuStreamWriteValue32_ptsz, cuStreamWriteValue32_v2_ptsz);
SIM_CU_ALIAS_DECLARE(cuStreamWriteValue64, cuStreamWriteValue64_v2);
SIM_CU_ALIAS_DECLARE(cuStreamWriteValue64_ptsz, cuStreamWriteValue64_v2_ptsz);
SIM_CU_ALIAS_DECLARE(cuStreamWaitValue32, cuStreamWaitValue32_v2);
SIM_CU_ALIAS_DECLARE(cuStreamWaitValue32_ptsz, cuStreamWaitValue32_v2_ptsz);
SIM_CU_ALIAS_DECLARE(cuStreamWaitValue64, cuStreamWaitValue64_v2);
SIM_CU_ALIAS_DECLARE(cuStreamWaitValue64_ptsz, cuStreamWaitValue64_v2_ptsz);
/* Those with a signature of their own. */
#define SIM_BATCH_V1_PARAMS                                                                        \
    CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs,  \
        size_t *idxs, size_t nattrs, size_t *fail, CUstream s
#define SIM_BATCH_3D_V1_PARAMS                                                                     \
    size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail, unsigned long long flags, CUstream s
CUresult sim_memcpy_batch_v1(SIM_BATCH_V1_PARAMS) __asm__("cuMemcpyBatchAsync");
CUresult sim_memcpy_batch_v1_ptsz(SIM_BATCH_V1_PARAMS) __asm__("cuMemcpyBatchAsync_ptsz");
CUresult sim_memcpy_3d_batch_v1(SIM_BATCH_3D_V1_PARAMS) __asm__("cuMemcpy3DBatchAsync");
CUresult sim_memcpy_3d_batch_v1_ptsz(SIM_BATCH_3D_V1_PARAMS) __asm__("cuMemcpy3DBatchAsync_ptsz");
CUresult
sim_update_capture_deps_v1(CUstream s, CUgraphNode *deps, size_t n,
                           unsigned int flags) __asm__("cuStreamUpdateCaptureDependencies");
CUresult sim_update_capture_deps_v1_ptsz(
    CUstream s, CUgraphNode *deps, size_t n,
    unsigned int flags) __asm__("cuStreamUpdateCaptureDependencies_ptsz");
CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                   CUgraph *graph, const CUgraphNode **deps, size_t *n);
CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                        CUgraph *graph, const CUgraphNode **deps, size_t *n);
/* The CUDA 11.4 ABI of cuCtxCreate, which cuda.h no longer declares. */
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int nparams,
                        unsigned int flags, CUdevice dev);

#endif /* SIM_CUDA_DRIVER_INTERNAL_H */
