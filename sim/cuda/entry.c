/* entry.c - cuGetProcAddress and the error names and messages.
 *
 * cuGetProcAddress looks up the driver's base names ("cuMemAlloc" finds
 * the cuMemAlloc_v2 ABI): each row below is one ABI of a base name and the
 * CUDA version that introduced it; a lookup gets the newest ABI not newer
 * than the version asked for, and the per-thread default stream variant
 * where the flags (or, by default, the caller's build) ask for one. The
 * table is the driver's whole surface: test sim_driver_exports checks that
 * every function libcuda.so.1 exports is found through it.
 * The runtime's cudaGetDriverEntryPoint* come here (../driver.c). */
#include <string.h>

#include "driver.h"

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
    ROW("cuGetProcAddress", cuGetProcAddress_v2, 12000),
    ROW("cuGetErrorName", cuGetErrorName, 6000),
    ROW("cuGetErrorString", cuGetErrorString, 6000),
    ROW("cuInit", cuInit, 2000),
    ROW("cuDriverGetVersion", cuDriverGetVersion, 2020),
    ROW("cuDeviceGet", cuDeviceGet, 2000),
    ROW("cuDeviceGetCount", cuDeviceGetCount, 2000),
    ROW("cuDeviceGetName", cuDeviceGetName, 2000),
    ROW("cuDeviceGetUuid", cuDeviceGetUuid_v2, 11040),
    ROW("cuDeviceTotalMem", cuDeviceTotalMem_v2, 3020),
    ROW("cuDeviceGetAttribute", cuDeviceGetAttribute, 2000),
    ROW("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 7000),
    ROW("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2, 11000),
    ROW("cuDevicePrimaryCtxSetFlags", cuDevicePrimaryCtxSetFlags_v2, 11000),
    ROW("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState, 7000),
    ROW("cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset_v2, 11000),
    ROW("cuCtxCreate", cuCtxCreate_v2, 3020),
    ROW("cuCtxCreate", cuCtxCreate_v4, 12050),
    ROW("cuCtxDestroy", cuCtxDestroy_v2, 4000),
    ROW("cuCtxGetCurrent", cuCtxGetCurrent, 4000),
    ROW("cuCtxSetCurrent", cuCtxSetCurrent, 4000),
    ROW("cuCtxPushCurrent", cuCtxPushCurrent_v2, 4000),
    ROW("cuCtxPopCurrent", cuCtxPopCurrent_v2, 4000),
    ROW("cuCtxGetDevice", cuCtxGetDevice, 2000),
    ROW("cuCtxGetFlags", cuCtxGetFlags, 7000),
    ROW("cuCtxSynchronize", cuCtxSynchronize, 2000),
    ROW_PT("cuStreamGetCtx", cuStreamGetCtx, cuStreamGetCtx, 9020),
    ROW_PT("cuStreamGetCtx", cuStreamGetCtx_v2, cuStreamGetCtx_v2, 12050),
    ROW("cuStreamCreate", cuStreamCreate, 2000),
    ROW("cuStreamDestroy", cuStreamDestroy_v2, 4000),
    ROW_PT("cuStreamSynchronize", cuStreamSynchronize, cuStreamSynchronize_ptsz, 2000),
    ROW_PT("cuStreamGetFlags", cuStreamGetFlags, cuStreamGetFlags_ptsz, 5050),
    ROW_PT("cuStreamGetDevice", cuStreamGetDevice, cuStreamGetDevice_ptsz, 12080),
    ROW_PT("cuStreamIsCapturing", cuStreamIsCapturing, cuStreamIsCapturing_ptsz, 10000),
    ROW_PT("cuStreamWaitEvent", cuStreamWaitEvent, cuStreamWaitEvent_ptsz, 3020),
    ROW_PT("cuLaunchHostFunc", cuLaunchHostFunc, cuLaunchHostFunc_ptsz, 10000),
    ROW("cuEventCreate", cuEventCreate, 2000),
    ROW_PT("cuEventRecord", cuEventRecord, cuEventRecord_ptsz, 2000),
    ROW("cuEventQuery", cuEventQuery, 2000),
    ROW("cuEventSynchronize", cuEventSynchronize, 2000),
    ROW("cuEventDestroy", cuEventDestroy_v2, 4000),
    ROW_PT("cuMemcpyHtoD", cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, 3020),
    ROW_PT("cuMemcpyDtoH", cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, 3020),
    ROW_PT("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, 3020),
    ROW_PT("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz, 3020),
    ROW("cuMemAllocHost", cuMemAllocHost_v2, 3020),
    ROW("cuMemFreeHost", cuMemFreeHost, 2000),
    ROW("cuMemAlloc", cuMemAlloc_v2, 3020),
    ROW("cuMemFree", cuMemFree_v2, 3020),
    ROW("cuMemGetInfo", cuMemGetInfo_v2, 3020),
    ROW_PT("cuMemAllocAsync", cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020),
    ROW_PT("cuMemFreeAsync", cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020),
    ROW("cuMemGetAddressRange", cuMemGetAddressRange_v2, 3020),
    ROW("cuPointerGetAttribute", cuPointerGetAttribute, 4000),
    ROW("cuPointerGetAttributes", cuPointerGetAttributes, 7000),
    ROW_PT("cuMemsetD32Async", cuMemsetD32Async, cuMemsetD32Async_ptsz, 3020),
    ROW_PT("cuStreamWriteValue32", cuStreamWriteValue32_v2, cuStreamWriteValue32_v2_ptsz, 11070),
    ROW("cuMemAddressReserve", cuMemAddressReserve, 10020),
    ROW("cuMemAddressFree", cuMemAddressFree, 10020),
    ROW("cuMemCreate", cuMemCreate, 10020),
    ROW("cuMemRelease", cuMemRelease, 10020),
    ROW("cuMemMap", cuMemMap, 10020),
    ROW("cuMemUnmap", cuMemUnmap, 10020),
    ROW("cuMemSetAccess", cuMemSetAccess, 10020),
    ROW("cuMemGetAllocationGranularity", cuMemGetAllocationGranularity, 10020),
    ROW("cuMemGetAllocationPropertiesFromHandle", cuMemGetAllocationPropertiesFromHandle, 10020),
    ROW("cuMemRetainAllocationHandle", cuMemRetainAllocationHandle, 11000),
    ROW("cuMemExportToShareableHandle", cuMemExportToShareableHandle, 10020),
    ROW("cuMemImportFromShareableHandle", cuMemImportFromShareableHandle, 10020),
    ROW("cuDeviceGetDevResource", cuDeviceGetDevResource, 12040),
    ROW("cuDevSmResourceSplitByCount", cuDevSmResourceSplitByCount, 12040),
    ROW("cuDevResourceGenerateDesc", cuDevResourceGenerateDesc, 12040),
    ROW("cuGreenCtxCreate", cuGreenCtxCreate, 12040),
    ROW("cuGreenCtxDestroy", cuGreenCtxDestroy, 12040),
    ROW("cuCtxFromGreenCtx", cuCtxFromGreenCtx, 12040),
    ROW("cuGreenCtxStreamCreate", cuGreenCtxStreamCreate, 12050),
    ROW("cuMulticastCreate", cuMulticastCreate, 12010),
    ROW("cuMulticastAddDevice", cuMulticastAddDevice, 12010),
    ROW("cuMulticastBindMem", cuMulticastBindMem, 12010),
    ROW("cuMulticastUnbind", cuMulticastUnbind, 12010),
    ROW("cuLogsRegisterCallback", cuLogsRegisterCallback, 12080),
    ROW("cuLogsUnregisterCallback", cuLogsUnregisterCallback, 12080),
    ROW("cuTensorMapEncodeTiled", cuTensorMapEncodeTiled, 12000),
    ROW("cuModuleLoad", cuModuleLoad, 2000),
    ROW("cuModuleLoadData", cuModuleLoadData, 2000),
    ROW("cuModuleLoadDataEx", cuModuleLoadDataEx, 2010),
    ROW("cuModuleUnload", cuModuleUnload, 2000),
    ROW("cuModuleGetFunction", cuModuleGetFunction, 2000),
    ROW("cuLinkCreate", cuLinkCreate_v2, 6050),
    ROW("cuLinkAddData", cuLinkAddData_v2, 6050),
    ROW("cuLinkComplete", cuLinkComplete, 5050),
    ROW("cuFuncGetAttribute", cuFuncGetAttribute, 2020),
    ROW("cuFuncSetAttribute", cuFuncSetAttribute, 9000),
    ROW("cuFuncSetCacheConfig", cuFuncSetCacheConfig, 3000),
    ROW_PT("cuLaunchKernel", cuLaunchKernel, cuLaunchKernel_ptsz, 4000),
    ROW("cuKernelGetAttribute", cuKernelGetAttribute, 12000),
    ROW_PT("cuLaunchCooperativeKernel", cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz,
           9000),
    ROW("cuOccupancyMaxActiveBlocksPerMultiprocessor", cuOccupancyMaxActiveBlocksPerMultiprocessor,
        6050),
};

/* Allowed before cuInit: it is how a program finds cuInit. */
FS_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
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
FS_API CUresult sim_get_proc_address_v1(const char *symbol, void **pfn, int version,
                                        cuuint64_t flags) __asm__("cuGetProcAddress");
FS_API CUresult sim_get_proc_address_v1(const char *symbol, void **pfn, int version,
                                        cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

/* Both allowed before cuInit; an unknown code is CUDA_ERROR_INVALID_VALUE
 * with *str set to NULL, as cuda.h documents. */
FS_API CUresult cuGetErrorName(CUresult error, const char **str)
{
    return fs_cu_get_error_name(error, str);
}

FS_API CUresult cuGetErrorString(CUresult error, const char **str)
{
    return fs_cu_get_error_string(error, str);
}
