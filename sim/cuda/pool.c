/* pool.c - the driver's memory pools: cuMemPool*, cuMemAllocFromPoolAsync,
 * and the current and default pools of a device (cuDevice*MemPool) or of a
 * location (cuMem*MemPool, CUDA 13).
 *
 * A CUmemoryPool is the runtime's cudaMemPool_t and every call is the
 * runtime call's own work (../core/mempool.c, through SIM_RT), so both APIs see
 * one set of pools: the driver's types, enums and attribute values are the
 * runtime's, as the static assertions below check. The sim keeps a default
 * and a current pool for each device's pinned memory only: asking for the
 * default or current pool of host memory or of managed memory is
 * CUDA_ERROR_NOT_SUPPORTED, one of the codes cuda.h lists. Pool IPC
 * (cuMemPoolExport*, cuMemPoolImport*) is not offered: the runtime's pools
 * have no shareable backing. */
#include "driver_internal.h"

_Static_assert(sizeof(CUmemPoolProps) == sizeof(struct cudaMemPoolProps), "pool props");
_Static_assert(sizeof(CUmemAccessDesc) == sizeof(struct cudaMemAccessDesc), "access desc");
_Static_assert(sizeof(CUmemLocation) == sizeof(struct cudaMemLocation), "location");
_Static_assert((int)CU_MEMPOOL_ATTR_USED_MEM_HIGH == (int)cudaMemPoolAttrUsedMemHigh, "attrs");
_Static_assert((int)CU_MEM_LOCATION_TYPE_HOST_NUMA == (int)cudaMemLocationTypeHostNuma, "loc");
_Static_assert((int)CU_MEM_ACCESS_FLAGS_PROT_READWRITE == (int)cudaMemAccessFlagsProtReadWrite,
               "access flags");

#define POOL(p) ((cudaMemPool_t)(p))

SIM_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    return SIM_RT(
        sim_rt_cudaMemPoolCreate((cudaMemPool_t *)pool, (const struct cudaMemPoolProps *)props));
}

SIM_API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    CUresult res = sim_cu_ready();
    return res ? res : SIM_RT(sim_rt_cudaMemPoolDestroy(POOL(pool)));
}

SIM_API CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    return SIM_RT(
        sim_rt_cudaMemPoolSetAccess(POOL(pool), (const struct cudaMemAccessDesc *)map, count));
}

SIM_API CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool pool,
                                    CUmemLocation *location)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    return SIM_RT(sim_rt_cudaMemPoolGetAccess((enum cudaMemAccessFlags *)flags, POOL(pool),
                                              (struct cudaMemLocation *)location));
}

SIM_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    CUresult res = sim_cu_ready();
    return res ? res : SIM_RT(sim_rt_cudaMemPoolTrimTo(POOL(pool), keep));
}

SIM_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    return SIM_RT(sim_rt_cudaMemPoolSetAttribute(POOL(pool), (enum cudaMemPoolAttr)attr, value));
}

SIM_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    return SIM_RT(sim_rt_cudaMemPoolGetAttribute(POOL(pool), (enum cudaMemPoolAttr)attr, value));
}

/* Stream-ordered allocation from a given pool, which may be another
 * device's than the stream's. */
static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s,
                                int pt)
{
    CUresult res = sim_cu_ready();
    if (res || (res = sim_cu_stream_context(s))) return res;
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    void *p;
    res = sim_cu_result(
        sim_mempool_malloc_from_pool_async(&p, size, POOL(pool), (cudaStream_t)s, pt));
    if (res == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)p;
    return res;
}

SIM_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
                                         CUstream s)
{
    return alloc_from_pool(dptr, size, pool, s, 0);
}

SIM_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
                                              CUstream s)
{
    return alloc_from_pool(dptr, size, pool, s, 1);
}

/* ---- a device's pools ---- */

SIM_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CUresult res = sim_cu_ready();
    return res ? res : SIM_RT(sim_rt_cudaDeviceGetDefaultMemPool((cudaMemPool_t *)pool, dev));
}

SIM_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CUresult res = sim_cu_ready();
    return res ? res : SIM_RT(sim_rt_cudaDeviceGetMemPool((cudaMemPool_t *)pool, dev));
}

SIM_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    CUresult res = sim_cu_ready();
    return res ? res : SIM_RT(sim_rt_cudaDeviceSetMemPool(dev, POOL(pool)));
}

/* ---- a location's pools (CUDA 13) ---- */

/* The device whose pinned pool a location and type name (*device), or the
 * code for a combination cuda.h refuses (CUDA_ERROR_INVALID_VALUE) or the
 * sim has no pool for (CUDA_ERROR_NOT_SUPPORTED). */
static CUresult location_device(const CUmemLocation *loc, CUmemAllocationType type, int *device)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!loc || (type != CU_MEM_ALLOCATION_TYPE_PINNED && type != CU_MEM_ALLOCATION_TYPE_MANAGED))
        return CUDA_ERROR_INVALID_VALUE;
    switch (loc->type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        if (!sim_dev(loc->id)) return CUDA_ERROR_INVALID_DEVICE;
        *device = loc->id;
        return type == CU_MEM_ALLOCATION_TYPE_PINNED ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        return CUDA_ERROR_NOT_SUPPORTED;
    case CU_MEM_LOCATION_TYPE_NONE: /* managed memory with no preferred location */
        return type == CU_MEM_ALLOCATION_TYPE_MANAGED ? CUDA_ERROR_NOT_SUPPORTED
                                                      : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

SIM_API CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool, CUmemLocation *location,
                                        CUmemAllocationType type)
{
    int device;
    CUresult res = location_device(location, type, &device);
    return res ? res : cuDeviceGetDefaultMemPool(pool, device);
}

SIM_API CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location,
                                 CUmemAllocationType type)
{
    int device;
    CUresult res = location_device(location, type, &device);
    return res ? res : cuDeviceGetMemPool(pool, device);
}

SIM_API CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type,
                                 CUmemoryPool pool)
{
    int device;
    CUresult res = location_device(location, type, &device);
    return res ? res : cuDeviceSetMemPool(device, pool);
}
