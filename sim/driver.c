/* driver.c - the driver API entry points a program reaches through
 * cudaGetDriverEntryPoint[ByVersion], as PyTorch and the shim do.
 *
 * The names looked up are the driver's base names ("cuMemAlloc" finds the
 * cuMemAlloc_v2 ABI), as cuGetProcAddress documents. An unknown name is not
 * an error: the call succeeds with *funcPtr = NULL and
 * cudaDriverEntryPointSymbolNotFound. Driver calls report CUresult codes and
 * never touch the runtime's last error. */
#include <string.h>

#include "internal.h"

/* The VMM entry points live in vmm.c. */
CUresult fs_cu_mem_get_allocation_granularity(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option);
CUresult fs_cu_mem_create(CUmemGenericAllocationHandle *handle, size_t size,
                          const CUmemAllocationProp *prop, unsigned long long flags);
CUresult fs_cu_mem_release(CUmemGenericAllocationHandle h);
CUresult fs_cu_mem_address_reserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                   CUdeviceptr addr, unsigned long long flags);
CUresult fs_cu_mem_address_free(CUdeviceptr ptr, size_t size);
CUresult fs_cu_mem_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                       unsigned long long flags);
CUresult fs_cu_mem_unmap(CUdeviceptr ptr, size_t size);
CUresult fs_cu_mem_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                              size_t count);

static CUresult cu_mem_alloc_v2(CUdeviceptr *dptr, size_t size)
{
    fs_init();
    if (!dptr || size == 0) /* the driver, unlike cudaMalloc, refuses 0 */
        return CUDA_ERROR_INVALID_VALUE;
    struct fs_device *dev = fs_cur_dev();
    void *p;
    if (!dev) return CUDA_ERROR_NO_DEVICE;
    if (fs_capacity_refused(dev, size, fs_devmem_alloc(dev, size, FS_RANGE_MALLOC, NULL, &p)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

static CUresult cu_mem_free_v2(CUdeviceptr dptr)
{
    fs_init();
    if (!dptr) return CUDA_SUCCESS;
    return fs_devmem_free((void *)(uintptr_t)dptr) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult cu_mem_get_info_v2(size_t *free_bytes, size_t *total)
{
    fs_init();
    if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
    return fs_devmem_info(free_bytes, total) ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}

/* The enclosing allocation (or VMM mapping) of dptr. */
static CUresult cu_mem_get_address_range_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
    struct fs_range r;
    if (!fs_registry_find((uintptr_t)dptr, &r) || !fs_range_is_device(&r) || !r.live)
        return CUDA_ERROR_NOT_FOUND;
    if (base) *base = (CUdeviceptr)r.base;
    if (size) *size = r.size;
    return CUDA_SUCCESS;
}

static CUresult cu_device_get_attribute(int *value, CUdevice_attribute attr, CUdevice dev)
{
    fs_init();
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    if (!fs_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    return fs_device_attribute((int)attr, dev, value) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUresult cu_driver_get_version(int *version)
{
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    *version = CUDART_VERSION;
    return CUDA_SUCCESS;
}

static const struct {
    const char *name;
    void *fn;
} entry_points[] = {
    {"cuMemAlloc", (void *)cu_mem_alloc_v2},
    {"cuMemFree", (void *)cu_mem_free_v2},
    {"cuMemGetInfo", (void *)cu_mem_get_info_v2},
    {"cuMemGetAddressRange", (void *)cu_mem_get_address_range_v2},
    {"cuMemAddressReserve", (void *)fs_cu_mem_address_reserve},
    {"cuMemAddressFree", (void *)fs_cu_mem_address_free},
    {"cuMemCreate", (void *)fs_cu_mem_create},
    {"cuMemRelease", (void *)fs_cu_mem_release},
    {"cuMemMap", (void *)fs_cu_mem_map},
    {"cuMemUnmap", (void *)fs_cu_mem_unmap},
    {"cuMemSetAccess", (void *)fs_cu_mem_set_access},
    {"cuMemGetAllocationGranularity", (void *)fs_cu_mem_get_allocation_granularity},
    {"cuDeviceGetAttribute", (void *)cu_device_get_attribute},
    {"cuDriverGetVersion", (void *)cu_driver_get_version},
    {"cuGetErrorString", (void *)fs_cu_get_error_string},
    {"cuGetErrorName", (void *)fs_cu_get_error_name},
};

static cudaError_t lookup(const char *symbol, void **fn, unsigned long long flags,
                          enum cudaDriverEntryPointQueryResult *status)
{
    if (!symbol || !fn ||
        flags > (cudaEnableDefault | cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream))
        return fs_ret(cudaErrorInvalidValue);
    *fn = NULL;
    if (status) *status = cudaDriverEntryPointSymbolNotFound;
    for (size_t i = 0; i < sizeof entry_points / sizeof entry_points[0]; i++) {
        if (strcmp(symbol, entry_points[i].name) == 0) {
            *fn = entry_points[i].fn;
            if (status) *status = cudaDriverEntryPointSuccess;
            break;
        }
    }
    return cudaSuccess;
}

FS_API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                           enum cudaDriverEntryPointQueryResult *status)
{
    return lookup(symbol, fn, flags, status);
}

FS_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn,
                                                unsigned long long flags,
                                                enum cudaDriverEntryPointQueryResult *status)
{
    return lookup(symbol, fn, flags, status);
}

FS_API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                                    unsigned int version, unsigned long long flags,
                                                    enum cudaDriverEntryPointQueryResult *status)
{
    (void)version; /* every entry point the sim has exists since CUDA 12.0 at least */
    return lookup(symbol, fn, flags, status);
}

FS_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **fn, unsigned int version, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *status)
{
    (void)version;
    return lookup(symbol, fn, flags, status);
}
