/* memory.c - the driver's device, managed and page-locked host memory, and
 * pointer queries, on the device model's memory and address registry (the
 * same allocations cudaMalloc makes and cudaPointerGetAttributes sees).
 *
 * cuMemAllocAsync and cuMemFreeAsync are cudaMallocAsync and cudaFreeAsync
 * on the stream's device's current pool (../core/mempool.c), with the driver's
 * codes and without the runtime's last error; the pools themselves are
 * pool.c's. cuMemAllocManaged, cuMemHostAlloc, cuMemHostRegister and the
 * rest are the runtime calls' own work (SIM_RT). */
#include <stdlib.h>

#include "driver_internal.h"

#include <cupti.h> /* the callback ids and params structs */

static CUresult cuMemAlloc_v2_impl(CUdeviceptr *dptr, size_t size)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    if (!dptr || size == 0) /* the driver, unlike cudaMalloc, refuses 0 */
        return CUDA_ERROR_INVALID_VALUE;
    void *p;
    if (sim_capacity_refused(dev, size, sim_devmem_alloc(dev, size, SIM_RANGE_MALLOC, &p)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

static CUresult cuMemFree_v2_impl(CUdeviceptr dptr)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!dptr) return CUDA_SUCCESS;
    return sim_devmem_free((void *)(uintptr_t)dptr) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SIM_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
    /* The current context's device is the runtime's current device. */
    return sim_devmem_info(free_bytes, total) ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
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
    res = sim_cu_result(sim_mempool_malloc_async(&p, size, (cudaStream_t)stream, per_thread));
    if (res == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)p;
    return res;
}

static CUresult mem_free_async(CUdeviceptr dptr, CUstream stream, int per_thread)
{
    CUresult res = sim_cu_ready();
    if (res || (res = sim_cu_stream_context(stream))) return res;
    return sim_cu_result(
        sim_mempool_free_async((void *)(uintptr_t)dptr, (cudaStream_t)stream, per_thread));
}

/* Rows of widthInBytes at a pitch the device chooses: a multiple of the
 * 512-byte texture alignment the sim reports (../core/vram.c's granule), which
 * every element size divides. The element size must be 4, 8 or 16, as
 * documented. */
SIM_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                    unsigned int element_size)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    if (!dptr || !pitch || !width || !height ||
        (element_size != 4 && element_size != 8 && element_size != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t row = sim_round_up(width, SIM_ALLOC_GRANULE), bytes;
    if (row < width || __builtin_mul_overflow(row, height, &bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    if ((res = cuMemAlloc_v2(dptr, bytes))) return res;
    *pitch = row;
    return CUDA_SUCCESS;
}

/* cudaMallocManaged on the current context's device (../cudart/managed.c). */
SIM_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    return SIM_RT(sim_rt_cudaMallocManaged((void **)dptr, size, flags));
}

/* The enclosing allocation (or VMM mapping) of dptr. */
SIM_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    struct sim_range r;
    if (!sim_registry_find((uintptr_t)dptr, &r) || !sim_range_is_device(&r) || !r.live)
        return CUDA_ERROR_NOT_FOUND;
    if (base) *base = (CUdeviceptr)r.base;
    if (size) *size = r.size;
    return CUDA_SUCCESS;
}

/* One attribute of a known range r (known: 0 for memory the sim does not
 * know, which only cuPointerGetAttributes answers for). */
static CUresult pointer_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr, int known,
                                  const struct sim_range *r)
{
    int device = known && sim_range_is_device(r);
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
        *(unsigned *)data = known && r->kind == SIM_RANGE_MANAGED;
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
        *(int *)data = known && r->kind == SIM_RANGE_MALLOC;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(int *)data = known && (r->flags & SIM_RANGE_SYNC_MEMOPS);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        /* A pool block's pool (../core/mempool.c hands out its pools' addresses). */
        *(CUmemoryPool *)data =
            known && r->kind == SIM_RANGE_MEMPOOL ? (CUmemoryPool)r->mempool : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(void **)data = device ? (void *)r->base : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = device ? r->size : 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE; /* an attribute the sim does not track */
    }
}

/* Memory the sim does not know is CUDA_ERROR_INVALID_VALUE, as documented. */
SIM_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    struct sim_range r;
    if (!data || !ptr || !sim_registry_find((uintptr_t)ptr, &r)) return CUDA_ERROR_INVALID_VALUE;
    return pointer_attribute(data, attribute, ptr, 1, &r);
}

/* Only CU_POINTER_ATTRIBUTE_SYNC_MEMOPS can be set, as documented, on
 * memory the sim knows; copies and sets then honour it (../core/copy_engine.c). */
SIM_API CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attribute,
                                       CUdeviceptr ptr)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!value || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) return CUDA_ERROR_INVALID_VALUE;
    int on = *(const int *)value != 0;
    if (!ptr || !sim_registry_set_flags((uintptr_t)ptr, on ? SIM_RANGE_SYNC_MEMOPS : 0,
                                        on ? 0 : SIM_RANGE_SYNC_MEMOPS))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Unlike cuPointerGetAttribute, unknown memory is not an error: each
 * attribute gets its "not CUDA memory" value. */
SIM_API CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute *attributes,
                                        void **data, CUdeviceptr ptr)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!attributes || !data) return CUDA_ERROR_INVALID_VALUE;
    struct sim_range r;
    int known = ptr && sim_registry_find((uintptr_t)ptr, &r);
    for (unsigned i = 0; i < count; i++) {
        if (!data[i]) return CUDA_ERROR_INVALID_VALUE;
        if ((res = pointer_attribute(data[i], attributes[i], ptr, known, &r))) return res;
    }
    return CUDA_SUCCESS;
}

/* ---- the entry points as CUPTI sees them (sim.h, ../core/api_callback.c) ---- */

SIM_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
    return SIM_CU_TRACED(cuMemAlloc_v2, cuMemAlloc_v2_impl(dptr, size), dptr, size);
}

SIM_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    return SIM_CU_TRACED(cuMemFree_v2, cuMemFree_v2_impl(dptr), dptr);
}

SIM_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream stream)
{
    return SIM_CU_TRACED(cuMemAllocAsync, mem_alloc_async(dptr, size, stream, 0), dptr, size,
                         stream);
}

SIM_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream)
{
    return SIM_CU_TRACED(cuMemAllocAsync_ptsz, mem_alloc_async(dptr, size, stream, 1), dptr, size,
                         stream);
}

SIM_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    return SIM_CU_TRACED(cuMemFreeAsync, mem_free_async(dptr, stream, 0), dptr, stream);
}

SIM_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
    return SIM_CU_TRACED(cuMemFreeAsync_ptsz, mem_free_async(dptr, stream, 1), dptr, stream);
}

/* ---- page-locked host memory, which copies use asynchronously
 * (../core/hostmem.c) ---- */

SIM_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_host_alloc(pp, bytesize, 0));
}

/* The driver's CU_MEMHOSTALLOC_* flags are the runtime's cudaHostAlloc*. */
SIM_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_host_alloc(pp, bytesize, flags));
}

SIM_API CUresult cuMemFreeHost(void *p)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_result(sim_drv_host_free(p));
}

/* The flags given to cuMemHostAlloc (cuMemAllocHost's are 0) or to
 * cuMemHostRegister, for any address in the memory. */
SIM_API CUresult cuMemHostGetFlags(unsigned int *flags, void *p)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    struct sim_range r;
    if (!flags || !p || !sim_registry_find((uintptr_t)p, &r) ||
        (r.kind != SIM_RANGE_PINNED && r.kind != SIM_RANGE_REGISTERED))
        return CUDA_ERROR_INVALID_VALUE;
    *flags = r.flags & ~SIM_RANGE_SYNC_MEMOPS;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags)
{
    CUresult res = sim_cu_ready();
    return res ? res : SIM_RT(sim_rt_cudaHostGetDevicePointer((void **)pdptr, p, flags));
}

SIM_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    return res ? res : SIM_RT(sim_rt_cudaHostRegister(p, bytesize, flags));
}
/* The CUDA 4.0 ABI, whose signature did not change. */
SIM_CU_ALIAS(cuMemHostRegister, cuMemHostRegister_v2);

SIM_API CUresult cuMemHostUnregister(void *p)
{
    CUresult res = sim_cu_ready();
    return res ? res : SIM_RT(sim_rt_cudaHostUnregister(p));
}
