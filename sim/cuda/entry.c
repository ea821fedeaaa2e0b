/* entry.c - cuGetProcAddress and the error names and messages.
 *
 * cuGetProcAddress looks up the driver's base names ("cuMemAlloc" finds
 * the cuMemAlloc_v2 ABI): each row below is one ABI of a base name and the
 * CUDA version that introduced it (cudaTypedefs.h's PFN_<base>_v<version>);
 * a lookup gets the newest ABI not newer than the version asked for, and
 * the per-thread default stream variant where the flags (or, by default,
 * the caller's build) ask for one. The table is the driver's whole surface:
 * test sim_torch_imports checks that every function libcuda.so.1 exports
 * is found through it, and sim_driver_api that cuda.h's memory, copy, set,
 * stream, event, context, pointer, module and launch functions are, ABI for
 * ABI. The runtime's cudaGetDriverEntryPoint* come here (../cudart/driver_entry.c). */

/* The table hands out deprecated entry points too (cuCtxGetSharedMemConfig):
 * the driver still exports them. */
#define CUDA_ENABLE_DEPRECATED 1

#include <string.h>

#include "driver_internal.h"

struct entry {
    const char *name;
    void *fn;
    void *per_thread; /* the _ptsz variant, or NULL when stream 0 is not involved */
    int since;        /* CUDA version of this ABI */
};

#define ROW(name, fn, since)                                                                       \
    {                                                                                              \
        name, (void *)fn, NULL, since                                                              \
    }
#define ROW_PT(name, fn, pt, since)                                                                \
    {                                                                                              \
        name, (void *)fn, (void *)pt, since                                                        \
    }

static const struct entry entries[] = {
    /* initialisation and errors (entry.c, context.c) */
    ROW("cuGetProcAddress", cuGetProcAddress_v2, 12000),
    ROW("cuGetErrorName", cuGetErrorName, 6000),
    ROW("cuGetErrorString", cuGetErrorString, 6000),
    ROW("cuInit", cuInit, 2000),
    ROW("cuDriverGetVersion", cuDriverGetVersion, 2020),
    /* devices and contexts (context.c) */
    ROW("cuDeviceGet", cuDeviceGet, 2000),
    ROW("cuDeviceGetAttribute", cuDeviceGetAttribute, 2000),
    ROW("cuDeviceGetCount", cuDeviceGetCount, 2000),
    ROW("cuDeviceGetName", cuDeviceGetName, 2000),
    ROW("cuDeviceGetUuid", sim_alias_cuDeviceGetUuid, 9020),
    ROW("cuDeviceGetUuid", cuDeviceGetUuid_v2, 11040),
    ROW("cuDeviceTotalMem", cuDeviceTotalMem_v2, 3020),
    ROW("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState, 7000),
    ROW("cuDevicePrimaryCtxRelease", sim_alias_cuDevicePrimaryCtxRelease, 7000),
    ROW("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2, 11000),
    ROW("cuDevicePrimaryCtxReset", sim_alias_cuDevicePrimaryCtxReset, 7000),
    ROW("cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset_v2, 11000),
    ROW("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 7000),
    ROW("cuDevicePrimaryCtxSetFlags", sim_alias_cuDevicePrimaryCtxSetFlags, 7000),
    ROW("cuDevicePrimaryCtxSetFlags", cuDevicePrimaryCtxSetFlags_v2, 11000),
    ROW("cuCtxCreate", cuCtxCreate_v2, 3020),
    ROW("cuCtxCreate", cuCtxCreate_v3, 11040),
    ROW("cuCtxCreate", cuCtxCreate_v4, 12050),
    ROW("cuCtxDestroy", cuCtxDestroy_v2, 4000),
    ROW("cuCtxDisablePeerAccess", cuCtxDisablePeerAccess, 4000),
    ROW("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess, 4000),
    ROW("cuCtxGetApiVersion", cuCtxGetApiVersion, 3020),
    ROW("cuCtxGetCacheConfig", cuCtxGetCacheConfig, 3020),
    ROW("cuCtxGetCurrent", cuCtxGetCurrent, 4000),
    ROW("cuCtxGetDevice", cuCtxGetDevice, 2000),
    ROW("cuCtxGetDevice", cuCtxGetDevice_v2, 13000),
    ROW("cuCtxGetExecAffinity", cuCtxGetExecAffinity, 11040),
    ROW("cuCtxGetFlags", cuCtxGetFlags, 7000),
    ROW("cuCtxGetId", cuCtxGetId, 12000),
    ROW("cuCtxGetLimit", cuCtxGetLimit, 3010),
    ROW("cuCtxGetSharedMemConfig", cuCtxGetSharedMemConfig, 4020),
    ROW("cuCtxGetStreamPriorityRange", cuCtxGetStreamPriorityRange, 5050),
    ROW("cuCtxPopCurrent", sim_alias_cuCtxPopCurrent, 2000),
    ROW("cuCtxPopCurrent", cuCtxPopCurrent_v2, 4000),
    ROW("cuCtxPushCurrent", sim_alias_cuCtxPushCurrent, 2000),
    ROW("cuCtxPushCurrent", cuCtxPushCurrent_v2, 4000),
    ROW("cuCtxResetPersistingL2Cache", cuCtxResetPersistingL2Cache, 11000),
    ROW("cuCtxSetCacheConfig", cuCtxSetCacheConfig, 3020),
    ROW("cuCtxSetCurrent", cuCtxSetCurrent, 4000),
    ROW("cuCtxSetFlags", cuCtxSetFlags, 12010),
    ROW("cuCtxSetLimit", cuCtxSetLimit, 3010),
    ROW("cuCtxSetSharedMemConfig", cuCtxSetSharedMemConfig, 4020),
    ROW("cuCtxSynchronize", cuCtxSynchronize, 2000),
    ROW("cuCtxSynchronize", cuCtxSynchronize_v2, 13000),
    /* streams, events, capture (stream.c, context.c), stream memory operations (memop.c) */
    ROW_PT("cuStreamAddCallback", cuStreamAddCallback, cuStreamAddCallback_ptsz, 5000),
    ROW_PT("cuStreamBatchMemOp", sim_alias_cuStreamBatchMemOp, sim_alias_cuStreamBatchMemOp_ptsz,
           8000),
    ROW_PT("cuStreamBatchMemOp", cuStreamBatchMemOp_v2, cuStreamBatchMemOp_v2_ptsz, 11070),
    ROW_PT("cuStreamBeginCapture", cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz, 10010),
    ROW_PT("cuStreamBeginCaptureToGraph", cuStreamBeginCaptureToGraph,
           cuStreamBeginCaptureToGraph_ptsz, 12030),
    ROW("cuStreamCreate", cuStreamCreate, 2000),
    ROW("cuStreamCreateWithPriority", cuStreamCreateWithPriority, 5050),
    ROW("cuStreamDestroy", cuStreamDestroy_v2, 4000),
    ROW_PT("cuStreamEndCapture", cuStreamEndCapture, cuStreamEndCapture_ptsz, 10000),
    ROW_PT("cuStreamGetCaptureInfo", cuStreamGetCaptureInfo_v2, cuStreamGetCaptureInfo_v2_ptsz,
           11030),
    ROW_PT("cuStreamGetCaptureInfo", cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo_v3_ptsz,
           12030),
    ROW_PT("cuStreamGetCtx", cuStreamGetCtx, cuStreamGetCtx_ptsz, 9020),
    ROW_PT("cuStreamGetCtx", cuStreamGetCtx_v2, cuStreamGetCtx_v2_ptsz, 12050),
    ROW_PT("cuStreamGetDevice", cuStreamGetDevice, cuStreamGetDevice_ptsz, 12080),
    ROW_PT("cuStreamGetFlags", cuStreamGetFlags, cuStreamGetFlags_ptsz, 5050),
    ROW("cuStreamGetGreenCtx", cuStreamGetGreenCtx, 12040),
    ROW_PT("cuStreamGetId", cuStreamGetId, cuStreamGetId_ptsz, 12000),
    ROW_PT("cuStreamGetPriority", cuStreamGetPriority, cuStreamGetPriority_ptsz, 5050),
    ROW_PT("cuStreamIsCapturing", cuStreamIsCapturing, cuStreamIsCapturing_ptsz, 10000),
    ROW_PT("cuStreamQuery", cuStreamQuery, cuStreamQuery_ptsz, 2000),
    ROW_PT("cuStreamSynchronize", cuStreamSynchronize, cuStreamSynchronize_ptsz, 2000),
    ROW_PT("cuStreamUpdateCaptureDependencies", sim_update_capture_deps_v1,
           sim_update_capture_deps_v1_ptsz, 11030),
    ROW_PT("cuStreamUpdateCaptureDependencies", cuStreamUpdateCaptureDependencies_v2,
           cuStreamUpdateCaptureDependencies_v2_ptsz, 12030),
    ROW_PT("cuStreamWaitEvent", cuStreamWaitEvent, cuStreamWaitEvent_ptsz, 3020),
    ROW_PT("cuStreamWaitValue32", sim_alias_cuStreamWaitValue32, sim_alias_cuStreamWaitValue32_ptsz,
           8000),
    ROW_PT("cuStreamWaitValue32", cuStreamWaitValue32_v2, cuStreamWaitValue32_v2_ptsz, 11070),
    ROW_PT("cuStreamWaitValue64", sim_alias_cuStreamWaitValue64, sim_alias_cuStreamWaitValue64_ptsz,
           9000),
    ROW_PT("cuStreamWaitValue64", cuStreamWaitValue64_v2, cuStreamWaitValue64_v2_ptsz, 11070),
    ROW_PT("cuStreamWriteValue32", sim_alias_cuStreamWriteValue32,
           sim_alias_cuStreamWriteValue32_ptsz, 8000),
    ROW_PT("cuStreamWriteValue32", cuStreamWriteValue32_v2, cuStreamWriteValue32_v2_ptsz, 11070),
    ROW_PT("cuStreamWriteValue64", sim_alias_cuStreamWriteValue64,
           sim_alias_cuStreamWriteValue64_ptsz, 9000),
    ROW_PT("cuStreamWriteValue64", cuStreamWriteValue64_v2, cuStreamWriteValue64_v2_ptsz, 11070),
    ROW_PT("cuLaunchHostFunc", cuLaunchHostFunc, cuLaunchHostFunc_ptsz, 10000),
    ROW("cuEventCreate", cuEventCreate, 2000),
    ROW("cuEventDestroy", cuEventDestroy_v2, 4000),
    ROW("cuEventElapsedTime", sim_alias_cuEventElapsedTime, 2000),
    ROW("cuEventElapsedTime", cuEventElapsedTime_v2, 12080),
    ROW("cuEventQuery", cuEventQuery, 2000),
    ROW_PT("cuEventRecord", cuEventRecord, cuEventRecord_ptsz, 2000),
    ROW_PT("cuEventRecordWithFlags", cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz, 11010),
    ROW("cuEventSynchronize", cuEventSynchronize, 2000),
    /* copies and sets (copy.c) */
    ROW_PT("cuMemcpy", cuMemcpy, cuMemcpy_ptds, 4000),
    ROW_PT("cuMemcpy2D", cuMemcpy2D_v2, cuMemcpy2D_v2_ptds, 3020),
    ROW_PT("cuMemcpy2DAsync", cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz, 3020),
    ROW_PT("cuMemcpy2DUnaligned", cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds, 3020),
    ROW_PT("cuMemcpy3D", cuMemcpy3D_v2, cuMemcpy3D_v2_ptds, 3020),
    ROW_PT("cuMemcpy3DAsync", cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz, 3020),
    ROW_PT("cuMemcpy3DBatchAsync", sim_memcpy_3d_batch_v1, sim_memcpy_3d_batch_v1_ptsz, 12080),
    ROW_PT("cuMemcpy3DBatchAsync", cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync_v2_ptsz, 13000),
    ROW_PT("cuMemcpy3DPeer", cuMemcpy3DPeer, cuMemcpy3DPeer_ptds, 4000),
    ROW_PT("cuMemcpy3DPeerAsync", cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz, 4000),
    ROW_PT("cuMemcpyAsync", cuMemcpyAsync, cuMemcpyAsync_ptsz, 4000),
    ROW_PT("cuMemcpyBatchAsync", sim_memcpy_batch_v1, sim_memcpy_batch_v1_ptsz, 12080),
    ROW_PT("cuMemcpyBatchAsync", cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz, 13000),
    ROW_PT("cuMemcpyDtoD", cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds, 3020),
    ROW_PT("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz, 3020),
    ROW_PT("cuMemcpyDtoH", cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, 3020),
    ROW_PT("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz, 3020),
    ROW_PT("cuMemcpyHtoD", cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, 3020),
    ROW_PT("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, 3020),
    ROW_PT("cuMemcpyPeer", cuMemcpyPeer, cuMemcpyPeer_ptds, 4000),
    ROW_PT("cuMemcpyPeerAsync", cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz, 4000),
    ROW_PT("cuMemsetD16", cuMemsetD16_v2, cuMemsetD16_v2_ptds, 3020),
    ROW_PT("cuMemsetD16Async", cuMemsetD16Async, cuMemsetD16Async_ptsz, 3020),
    ROW_PT("cuMemsetD2D16", cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds, 3020),
    ROW_PT("cuMemsetD2D16Async", cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz, 3020),
    ROW_PT("cuMemsetD2D32", cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds, 3020),
    ROW_PT("cuMemsetD2D32Async", cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz, 3020),
    ROW_PT("cuMemsetD2D8", cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds, 3020),
    ROW_PT("cuMemsetD2D8Async", cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz, 3020),
    ROW_PT("cuMemsetD32", cuMemsetD32_v2, cuMemsetD32_v2_ptds, 3020),
    ROW_PT("cuMemsetD32Async", cuMemsetD32Async, cuMemsetD32Async_ptsz, 3020),
    ROW_PT("cuMemsetD8", cuMemsetD8_v2, cuMemsetD8_v2_ptds, 3020),
    ROW_PT("cuMemsetD8Async", cuMemsetD8Async, cuMemsetD8Async_ptsz, 3020),
    /* memory and pointers (memory.c), pools (pool.c) */
    ROW("cuDeviceGetMemPool", cuDeviceGetMemPool, 11020),
    ROW("cuDeviceSetMemPool", cuDeviceSetMemPool, 11020),
    ROW("cuMemAllocHost", cuMemAllocHost_v2, 3020),
    ROW("cuMemFreeHost", cuMemFreeHost, 2000),
    ROW("cuMemHostAlloc", cuMemHostAlloc, 2020),
    ROW("cuMemHostGetDevicePointer", cuMemHostGetDevicePointer_v2, 3020),
    ROW("cuMemHostGetFlags", cuMemHostGetFlags, 2030),
    ROW("cuMemHostRegister", sim_alias_cuMemHostRegister, 4000),
    ROW("cuMemHostRegister", cuMemHostRegister_v2, 6050),
    ROW("cuMemHostUnregister", cuMemHostUnregister, 4000),
    ROW("cuMemAlloc", cuMemAlloc_v2, 3020),
    ROW_PT("cuMemAllocAsync", cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020),
    ROW_PT("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, 11020),
    ROW("cuMemAllocManaged", cuMemAllocManaged, 6000),
    ROW("cuMemAllocPitch", cuMemAllocPitch_v2, 3020),
    ROW("cuMemFree", cuMemFree_v2, 3020),
    ROW_PT("cuMemFreeAsync", cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020),
    ROW("cuMemGetInfo", cuMemGetInfo_v2, 3020),
    ROW("cuMemGetAddressRange", cuMemGetAddressRange_v2, 3020),
    ROW("cuMemPoolCreate", cuMemPoolCreate, 11020),
    ROW("cuMemPoolDestroy", cuMemPoolDestroy, 11020),
    ROW("cuMemPoolGetAccess", cuMemPoolGetAccess, 11020),
    ROW("cuMemPoolGetAttribute", cuMemPoolGetAttribute, 11020),
    ROW("cuMemPoolSetAccess", cuMemPoolSetAccess, 11020),
    ROW("cuMemPoolSetAttribute", cuMemPoolSetAttribute, 11020),
    ROW("cuMemPoolTrimTo", cuMemPoolTrimTo, 11020),
    ROW("cuMemGetDefaultMemPool", cuMemGetDefaultMemPool, 13000),
    ROW("cuMemGetMemPool", cuMemGetMemPool, 13000),
    ROW("cuMemSetMemPool", cuMemSetMemPool, 13000),
    ROW("cuDeviceGetDefaultMemPool", cuDeviceGetDefaultMemPool, 11020),
    ROW("cuPointerGetAttribute", cuPointerGetAttribute, 4000),
    ROW("cuPointerGetAttributes", cuPointerGetAttributes, 7000),
    ROW("cuPointerSetAttribute", cuPointerSetAttribute, 6000),
    /* virtual memory (vmm.c) */
    ROW("cuMemAddressFree", cuMemAddressFree, 10020),
    ROW("cuMemAddressReserve", cuMemAddressReserve, 10020),
    ROW("cuMemCreate", cuMemCreate, 10020),
    ROW("cuMemRelease", cuMemRelease, 10020),
    ROW("cuMemMap", cuMemMap, 10020),
    ROW("cuMemUnmap", cuMemUnmap, 10020),
    ROW("cuMemSetAccess", cuMemSetAccess, 10020),
    ROW("cuMemGetAccess", cuMemGetAccess, 10020),
    ROW("cuMemGetAllocationGranularity", cuMemGetAllocationGranularity, 10020),
    ROW("cuMemGetAllocationPropertiesFromHandle", cuMemGetAllocationPropertiesFromHandle, 10020),
    ROW("cuMemRetainAllocationHandle", cuMemRetainAllocationHandle, 11000),
    ROW("cuMemExportToShareableHandle", cuMemExportToShareableHandle, 10020),
    ROW("cuMemImportFromShareableHandle", cuMemImportFromShareableHandle, 10020),
    /* what the sim answers as a GPU without the feature, logs, tensor maps (absent.c) */
    ROW("cuDeviceGetDevResource", cuDeviceGetDevResource, 12040),
    ROW("cuCtxFromGreenCtx", cuCtxFromGreenCtx, 12040),
    ROW("cuCtxGetDevResource", cuCtxGetDevResource, 12040),
    ROW("cuMemGetHandleForAddressRange", cuMemGetHandleForAddressRange, 11070),
    ROW_PT("cuMemBatchDecompressAsync", cuMemBatchDecompressAsync, cuMemBatchDecompressAsync_ptsz,
           12060),
    ROW("cuDevSmResourceSplitByCount", cuDevSmResourceSplitByCount, 12040),
    ROW("cuDevResourceGenerateDesc", cuDevResourceGenerateDesc, 12040),
    ROW("cuGreenCtxCreate", cuGreenCtxCreate, 12040),
    ROW("cuGreenCtxDestroy", cuGreenCtxDestroy, 12040),
    ROW("cuGreenCtxStreamCreate", cuGreenCtxStreamCreate, 12050),
    ROW("cuMulticastAddDevice", cuMulticastAddDevice, 12010),
    ROW("cuMulticastBindMem", cuMulticastBindMem, 12010),
    ROW("cuMulticastCreate", cuMulticastCreate, 12010),
    ROW("cuMulticastUnbind", cuMulticastUnbind, 12010),
    ROW("cuLogsRegisterCallback", cuLogsRegisterCallback, 12090),
    ROW("cuLogsUnregisterCallback", cuLogsUnregisterCallback, 12090),
    ROW("cuTensorMapEncodeTiled", cuTensorMapEncodeTiled, 12000),
    ROW("cuLinkAddData", cuLinkAddData_v2, 6050),
    ROW("cuLinkComplete", cuLinkComplete, 5050),
    ROW("cuLinkCreate", cuLinkCreate_v2, 6050),
    /* modules and libraries (module.c), functions and launches (launch.c) */
    ROW("cuModuleEnumerateFunctions", cuModuleEnumerateFunctions, 12040),
    ROW("cuModuleGetFunction", cuModuleGetFunction, 2000),
    ROW("cuModuleGetFunctionCount", cuModuleGetFunctionCount, 12040),
    ROW("cuModuleGetGlobal", cuModuleGetGlobal_v2, 3020),
    ROW("cuModuleGetLoadingMode", cuModuleGetLoadingMode, 11070),
    ROW("cuModuleLoad", cuModuleLoad, 2000),
    ROW("cuModuleLoadData", cuModuleLoadData, 2000),
    ROW("cuModuleLoadDataEx", cuModuleLoadDataEx, 2010),
    ROW("cuModuleLoadFatBinary", cuModuleLoadFatBinary, 2000),
    ROW("cuModuleUnload", cuModuleUnload, 2000),
    ROW("cuLibraryEnumerateKernels", cuLibraryEnumerateKernels, 12040),
    ROW("cuLibraryGetGlobal", cuLibraryGetGlobal, 12000),
    ROW("cuLibraryGetKernel", cuLibraryGetKernel, 12000),
    ROW("cuLibraryGetKernelCount", cuLibraryGetKernelCount, 12040),
    ROW("cuLibraryGetManaged", cuLibraryGetManaged, 12000),
    ROW("cuLibraryGetUnifiedFunction", cuLibraryGetUnifiedFunction, 12000),
    ROW("cuLibraryLoadData", cuLibraryLoadData, 12000),
    ROW("cuLibraryLoadFromFile", cuLibraryLoadFromFile, 12000),
    ROW("cuLibraryUnload", cuLibraryUnload, 12000),
    ROW("cuKernelGetAttribute", cuKernelGetAttribute, 12000),
    ROW("cuKernelGetFunction", cuKernelGetFunction, 12000),
    ROW("cuKernelSetAttribute", cuKernelSetAttribute, 12000),
    ROW("cuFuncGetAttribute", cuFuncGetAttribute, 2020),
    ROW("cuFuncSetAttribute", cuFuncSetAttribute, 9000),
    ROW("cuFuncSetCacheConfig", cuFuncSetCacheConfig, 3000),
    ROW_PT("cuLaunchCooperativeKernel", cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz,
           9000),
    ROW_PT("cuLaunchKernel", cuLaunchKernel, cuLaunchKernel_ptsz, 4000),
    ROW_PT("cuLaunchKernelEx", cuLaunchKernelEx, cuLaunchKernelEx_ptsz, 11060),
    ROW("cuOccupancyMaxActiveBlocksPerMultiprocessor", cuOccupancyMaxActiveBlocksPerMultiprocessor,
        6050),
    ROW("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
        cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, 7000),
};

/* Allowed before cuInit: it is how a program finds cuInit. */
SIM_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn ||
        flags > (CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;
    const struct entry *best = NULL;
    int named = 0;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        if (strcmp(symbol, entries[i].name) != 0) continue;
        named = 1;
        if (entries[i].since <= version && (!best || entries[i].since > best->since))
            best = &entries[i];
    }
    *pfn = NULL;
    if (status)
        *status = best    ? CU_GET_PROC_ADDRESS_SUCCESS
                  : named ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                          : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!best) return CUDA_ERROR_NOT_FOUND;
    /* The library itself is built without per-thread default streams, so
     * the default flag means the legacy stream. */
    *pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->per_thread
               ? best->per_thread
               : best->fn;
    return CUDA_SUCCESS;
}

/* The same lookup under its original name, cuGetProcAddress (no status),
 * which cuda.h now spells cuGetProcAddress_v2. */
SIM_API CUresult sim_get_proc_address_v1(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags) __asm__("cuGetProcAddress");
SIM_API CUresult sim_get_proc_address_v1(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

/* Both allowed before cuInit; an unknown code is CUDA_ERROR_INVALID_VALUE
 * with *str set to NULL, as cuda.h documents. */
SIM_API CUresult cuGetErrorName(CUresult error, const char **str)
{
    return sim_cu_get_error_name(error, str);
}

SIM_API CUresult cuGetErrorString(CUresult error, const char **str)
{
    return sim_cu_get_error_string(error, str);
}
