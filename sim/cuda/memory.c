/* memory.c - the driver's device memory, pointer queries and stream memory
 * operations, on the device model's memory and address registry (the same
 * allocations cudaMalloc makes and cudaPointerGetAttributes sees).
 *
 * cuMemAllocAsync and cuMemFreeAsync are cudaMallocAsync and cudaFreeAsync
 * on the stream's device's current pool (../mempool.c), with the driver's
 * codes and without the runtime's last error.
 *
 * cuMemsetD32Async and cuStreamWriteValue32 are device work on their
 * stream, ordered like a copy (fs_sim_stream_enqueue); in a dry run
 * (FSDPSHIM_SIM_DATA=0) they keep their order and checks and write
 * nothing. */
#include <stdlib.h>

#include "../api_callback.h"
#include "driver.h"

#include <cupti.h> /* the callback ids and params structs */

static CUresult cuMemAlloc_v2_impl(CUdeviceptr *dptr, size_t size)
{
    struct fs_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    if (!dptr || size == 0) /* the driver, unlike cudaMalloc, refuses 0 */
        return CUDA_ERROR_INVALID_VALUE;
    void *p;
    if (fs_capacity_refused(dev, size, fs_devmem_alloc(dev, size, FS_RANGE_MALLOC, &p)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

static CUresult cuMemFree_v2_impl(CUdeviceptr dptr)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!dptr) return CUDA_SUCCESS;
    return fs_devmem_free((void *)(uintptr_t)dptr) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

FS_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    struct fs_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
    /* The current context's device is the runtime's current device. */
    return fs_devmem_info(free_bytes, total) ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}

CUresult sim_cu_result(cudaError_t err)
{
    switch (err) {
    case cudaSuccess:
        return CUDA_SUCCESS;
    case cudaErrorInvalidResourceHandle:
        return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorNotReady:
        return CUDA_ERROR_NOT_READY;
    case cudaErrorNoDevice:
        return CUDA_ERROR_NO_DEVICE;
    case cudaErrorMemoryAllocation:
        return CUDA_ERROR_OUT_OF_MEMORY;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Size 0 succeeds with a null pointer, as cudaMallocAsync does (an H100,
 * driver 580, answered CUDA_SUCCESS), unlike cuMemAlloc. */
static CUresult mem_alloc_async(CUdeviceptr *dptr, size_t size, CUstream stream, int per_thread)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    if ((res = sim_cu_stream_context(stream))) return res;
    void *p;
    res = sim_cu_result(fs_pool_malloc_async(&p, size, (cudaStream_t)stream, per_thread));
    if (res == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)p;
    return res;
}

static CUresult mem_free_async(CUdeviceptr dptr, CUstream stream, int per_thread)
{
    CUresult res = sim_cu_ready();
    if (res || (res = sim_cu_stream_context(stream))) return res;
    return sim_cu_result(
        fs_pool_free_async((void *)(uintptr_t)dptr, (cudaStream_t)stream, per_thread));
}

/* The enclosing allocation (or VMM mapping) of dptr. */
FS_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    struct fs_range r;
    if (!fs_registry_find((uintptr_t)dptr, &r) || !fs_range_is_device(&r) || !r.live)
        return CUDA_ERROR_NOT_FOUND;
    if (base) *base = (CUdeviceptr)r.base;
    if (size) *size = r.size;
    return CUDA_SUCCESS;
}

/* One attribute of a known range r (known: 0 for memory the sim does not
 * know, which only cuPointerGetAttributes answers for). */
static CUresult pointer_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr, int known,
                                  const struct fs_range *r)
{
    int device = known && fs_range_is_device(r);
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = device ? sim_primary_ctx(r->device) : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = !known ? 0 : device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        /* Unified addressing: device and host see one address. */
        *(CUdeviceptr *)data = known ? ptr : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (device) return CUDA_ERROR_INVALID_VALUE; /* no host mapping */
        *(void **)data = known ? (void *)(uintptr_t)ptr : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned *)data = 0; /* the sim has no managed memory of its own */
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = known ? r->device : -2; /* -2: CU_DEVICE_INVALID */
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = known ? (CUdeviceptr)r->base : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = known ? r->size : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = known;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(int *)data = known && r->kind == FS_RANGE_MALLOC;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE; /* an attribute the sim does not track */
    }
}

/* Memory the sim does not know is CUDA_ERROR_INVALID_VALUE, as documented. */
FS_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    struct fs_range r;
    if (!data || !ptr || !fs_registry_find((uintptr_t)ptr, &r)) return CUDA_ERROR_INVALID_VALUE;
    return pointer_attribute(data, attribute, ptr, 1, &r);
}

/* Unlike cuPointerGetAttribute, unknown memory is not an error: each
 * attribute gets its "not CUDA memory" value. */
FS_API CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute *attributes,
                                       void **data, CUdeviceptr ptr)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!attributes || !data) return CUDA_ERROR_INVALID_VALUE;
    struct fs_range r;
    int known = ptr && fs_registry_find((uintptr_t)ptr, &r);
    for (unsigned i = 0; i < count; i++) {
        if (!data[i]) return CUDA_ERROR_INVALID_VALUE;
        if ((res = pointer_attribute(data[i], attributes[i], ptr, known, &r))) return res;
    }
    return CUDA_SUCCESS;
}

struct fill32 {
    uint32_t *dst;
    uint32_t value;
    size_t count;
};

static void run_fill32(void *arg)
{
    struct fill32 *f = arg;
    if (fs_sim_moves_data())
        for (size_t i = 0; i < f->count; i++)
            __atomic_store_n(&f->dst[i], f->value, __ATOMIC_RELAXED);
    free(f);
}

/* Writes count 32-bit values at dst in the stream's order. The range must
 * be memory the device reaches (device or pinned host memory), 4-byte
 * aligned. */
static CUresult fill32(CUstream stream, int per_thread, CUdeviceptr dst, uint32_t value,
                       size_t count)
{
    CUresult res = sim_cu_ready();
    if (res || (res = sim_cu_stream_context(stream))) return res;
    if (dst % 4 || count > SIZE_MAX / 4 ||
        (count && !fs_registry_covers((uintptr_t)dst, count * 4)))
        return CUDA_ERROR_INVALID_VALUE;
    struct fill32 *f = malloc(sizeof *f);
    if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
    *f = (struct fill32){(uint32_t *)(uintptr_t)dst, value, count};
    cudaError_t err = fs_sim_stream_enqueue((cudaStream_t)stream, per_thread, run_fill32, f);
    if (err) free(f);
    return sim_cu_result(err);
}

FS_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count, CUstream stream)
{
    return fill32(stream, 0, dst, value, count);
}

FS_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int value, size_t count,
                                      CUstream stream)
{
    return fill32(stream, 1, dst, value, count);
}

static CUresult write_value32(CUstream stream, int per_thread, CUdeviceptr addr, cuuint32_t value,
                              unsigned flags)
{
    /* Every write is ordered after the stream's earlier work: the barrier
     * the default flag asks for is already there. */
    if (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) return CUDA_ERROR_INVALID_VALUE;
    return fill32(stream, per_thread, addr, value, 1);
}

FS_API CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                        unsigned int flags)
{
    return write_value32(stream, 0, addr, value, flags);
}
SIM_CU_ALIAS(cuStreamWriteValue32, cuStreamWriteValue32_v2);

FS_API CUresult cuStreamWriteValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                             unsigned int flags)
{
    return write_value32(stream, 1, addr, value, flags);
}
SIM_CU_ALIAS(cuStreamWriteValue32_ptsz, cuStreamWriteValue32_v2_ptsz);

/* ---- the entry points as CUPTI sees them (../api_callback.h) ---- */

FS_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
    cuMemAlloc_v2_params p = {dptr, size};
    CUresult ret;
    FS_SIM_API_CALL(1, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2", &p, ret,
                    cuMemAlloc_v2_impl(dptr, size));
    return ret;
}

FS_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    cuMemFree_v2_params p = {dptr};
    CUresult ret;
    FS_SIM_API_CALL(1, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2", &p, ret,
                    cuMemFree_v2_impl(dptr));
    return ret;
}

/* The stream-ordered calls and their _ptsz variants, whose params structs
 * have one layout (as ../mempool.c does for the runtime's). */
static CUresult mem_alloc_async_call(CUdeviceptr *dptr, size_t size, CUstream stream,
                                     int per_thread, unsigned cbid, const char *name)
{
    cuMemAllocAsync_params p = {dptr, size, stream};
    CUresult ret;
    FS_SIM_API_CALL(1, cbid, name, &p, ret, mem_alloc_async(dptr, size, stream, per_thread));
    return ret;
}

FS_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream stream)
{
    return mem_alloc_async_call(dptr, size, stream, 0, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
                                "cuMemAllocAsync");
}

FS_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream)
{
    return mem_alloc_async_call(dptr, size, stream, 1, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
                                "cuMemAllocAsync_ptsz");
}

static CUresult mem_free_async_call(CUdeviceptr dptr, CUstream stream, int per_thread,
                                    unsigned cbid, const char *name)
{
    cuMemFreeAsync_params p = {dptr, stream};
    CUresult ret;
    FS_SIM_API_CALL(1, cbid, name, &p, ret, mem_free_async(dptr, stream, per_thread));
    return ret;
}

FS_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    return mem_free_async_call(dptr, stream, 0, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
                               "cuMemFreeAsync");
}

FS_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
    return mem_free_async_call(dptr, stream, 1, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
                               "cuMemFreeAsync_ptsz");
}
