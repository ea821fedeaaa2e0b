/* stream_ordered_allocator.c - the runtime's stream-ordered allocator:
 * cudaMallocAsync, cudaMallocFromPoolAsync and cudaFreeAsync (each
 * bracketed for CUPTI's subscriber), the device's default and current pool,
 * cudaMemPoolCreate/Destroy, access, trimming and attributes, onto the
 * pools of sim/core/mempool.c. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "traced.h"

SIM_API cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t s)
{
    return SIM_RT_TRACED(cudaMallocAsync, v11020,
                         sim_record_error(sim_mempool_alloc(ptr, size, NULL, s, 0)), ptr, size, s);
}

SIM_API cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t s)
{
    return SIM_RT_TRACED(cudaMallocAsync_ptsz, v11020,
                         sim_record_error(sim_mempool_alloc(ptr, size, NULL, s, 1)), ptr, size, s);
}

SIM_API cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool,
                                            cudaStream_t s)
{
    return SIM_RT_TRACED(cudaMallocFromPoolAsync, v11020,
                         sim_mempool_alloc_from(ptr, size, pool, s, 0), ptr, size, pool, s);
}

SIM_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                                 cudaStream_t s)
{
    return SIM_RT_TRACED(cudaMallocFromPoolAsync_ptsz, v11020,
                         sim_mempool_alloc_from(ptr, size, pool, s, 1), ptr, size, pool, s);
}

SIM_API cudaError_t cudaFreeAsync(void *ptr, cudaStream_t s)
{
    return SIM_RT_TRACED(cudaFreeAsync, v11020, sim_record_error(sim_mempool_free(ptr, s, 0)), ptr,
                         s);
}

SIM_API cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t s)
{
    return SIM_RT_TRACED(cudaFreeAsync_ptsz, v11020, sim_record_error(sim_mempool_free(ptr, s, 1)),
                         ptr, s);
}

/* A device's default pool, or (current) the pool cudaDeviceSetMemPool last
 * made current, else the default pool. */
static cudaError_t device_pool(cudaMemPool_t *pool, int device, int current)
{
    if (!pool) return sim_record_error(cudaErrorInvalidValue);
    struct sim_device *dev = sim_dev(device);
    if (!dev) return sim_record_error(cudaErrorInvalidDevice);
    *pool = (cudaMemPool_t)(current ? sim_mempool_current(dev) : dev->mempool);
    return cudaSuccess;
}

SIM_API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    return device_pool(pool, device, 0);
}
SIM_RT_ALIAS(cudaDeviceGetDefaultMemPool);

SIM_API cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *pool, int device)
{
    return device_pool(pool, device, 1);
}
SIM_RT_ALIAS(cudaDeviceGetMemPool);

/* The pool must be one of the device's own ("local to the specified
 * device"): its default pool or one made on it. cudaMallocAsync and
 * cuMemAllocAsync then allocate from it. */
SIM_API cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t h)
{
    sim_init();
    struct sim_device *dev = sim_dev(device);
    if (!dev) return sim_record_error(cudaErrorInvalidDevice);
    struct sim_mempool *pool = sim_mempool_check(h);
    if (!pool || pool->dev != dev) return sim_record_error(cudaErrorInvalidValue);
    __atomic_store_n(&dev->current_mempool, pool, __ATOMIC_RELEASE);
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaDeviceSetMemPool);

/* Whether host NUMA node `id` exists (node 0 always does). */
static int host_numa_node(int id)
{
    char path[64];
    if (id == 0) return 1;
    if (id < 0) return 0;
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d", id);
    return access(path, F_OK) == 0;
}

/* Pinned memory of one device, or pinned host memory (of any host NUMA
 * node, or of one that exists; such a pool takes no IPC handle types, as
 * cuMemPoolCreate documents). */
SIM_API cudaError_t cudaMemPoolCreate(cudaMemPool_t *h, const struct cudaMemPoolProps *props)
{
    sim_init();
    if (!h || !props || props->allocType != cudaMemAllocationTypePinned)
        return sim_record_error(cudaErrorInvalidValue);
    struct sim_device *dev = NULL;
    switch (props->location.type) {
    case cudaMemLocationTypeDevice:
        if (!(dev = sim_dev(props->location.id))) return sim_record_error(cudaErrorInvalidValue);
        break;
    case cudaMemLocationTypeHostNuma:
        if (!host_numa_node(props->location.id)) return sim_record_error(cudaErrorInvalidValue);
        /* fall through */
    case cudaMemLocationTypeHost:
        if (props->handleTypes != cudaMemHandleTypeNone)
            return sim_record_error(cudaErrorInvalidValue);
        break;
    default:
        return sim_record_error(cudaErrorInvalidValue);
    }
    *h = (cudaMemPool_t)sim_mempool_create(dev);
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaMemPoolCreate);

SIM_API cudaError_t cudaMemPoolDestroy(cudaMemPool_t h)
{
    sim_init();
    cudaError_t err = sim_mempool_destroy(h);
    return err ? sim_record_error(err) : cudaSuccess;
}
SIM_RT_ALIAS(cudaMemPoolDestroy);

/* A device whose access a pool records. */
static int peer_location(const struct cudaMemLocation *loc)
{
    return loc->type == cudaMemLocationTypeDevice && sim_dev(loc->id) &&
           loc->id < SIM_MEMPOOL_PEERS;
}

/* A device (the sim's peers can always reach each other's memory, so the
 * access is recorded only); a device pool's own device keeps read-write
 * access. */
static int access_valid(const struct sim_mempool *pool, const struct cudaMemAccessDesc *d)
{
    if (!peer_location(&d->location)) return 0;
    if (d->flags != cudaMemAccessFlagsProtNone && d->flags != cudaMemAccessFlagsProtRead &&
        d->flags != cudaMemAccessFlagsProtReadWrite)
        return 0;
    return !pool->dev || d->location.id != pool->dev->ordinal ||
           d->flags == cudaMemAccessFlagsProtReadWrite;
}

SIM_API cudaError_t cudaMemPoolSetAccess(cudaMemPool_t h, const struct cudaMemAccessDesc *descs,
                                         size_t count)
{
    sim_init();
    struct sim_mempool *pool = sim_mempool_check(h);
    if (!pool || (count && !descs)) return sim_record_error(cudaErrorInvalidValue);
    for (size_t i = 0; i < count; i++)
        if (!access_valid(pool, &descs[i])) return sim_record_error(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool->mu);
    for (size_t i = 0; i < count; i++)
        pool->access[descs[i].location.id] = descs[i].flags;
    pthread_mutex_unlock(&pool->mu);
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaMemPoolSetAccess);

SIM_API cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags *flags, cudaMemPool_t h,
                                         struct cudaMemLocation *location)
{
    sim_init();
    struct sim_mempool *pool = sim_mempool_check(h);
    if (!pool || !flags || !location || !peer_location(location))
        return sim_record_error(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool->mu);
    *flags = pool->access[location->id];
    pthread_mutex_unlock(&pool->mu);
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaMemPoolGetAccess);

SIM_API cudaError_t cudaMemPoolTrimTo(cudaMemPool_t h, size_t keep)
{
    sim_init();
    struct sim_mempool *pool = sim_mempool_check(h);
    if (!pool) return sim_record_error(cudaErrorInvalidValue);
    sim_mempool_trim(pool, keep);
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaMemPoolTrimTo);

/* The pool's flag for one of the three reuse attributes, else NULL. */
static int *reuse_flag(struct sim_mempool *pool, enum cudaMemPoolAttr attr)
{
    switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
        return &pool->reuse_follow;
    case cudaMemPoolReuseAllowOpportunistic:
        return &pool->reuse_opportunistic;
    case cudaMemPoolReuseAllowInternalDependencies:
        return &pool->reuse_internal;
    default:
        return NULL;
    }
}

/* The pool's figures other than the reuse flags: the release threshold is
 * set freely, the high-water marks only reset (by writing 0). */
static cudaError_t set_figure(struct sim_mempool *pool, enum cudaMemPoolAttr attr,
                              const void *value)
{
    switch (attr) {
    case cudaMemPoolAttrReleaseThreshold:
        pool->threshold = *(const uint64_t *)value;
        return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh:
        if (*(const uint64_t *)value) return cudaErrorInvalidValue;
        pool->reserved_high = pool->mem.reserved;
        return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh:
        if (*(const uint64_t *)value) return cudaErrorInvalidValue;
        pool->used_high = sim_mempool_used_now(pool);
        return cudaSuccess;
    default:
        return cudaErrorInvalidValue;
    }
}

static cudaError_t get_figure(struct sim_mempool *pool, enum cudaMemPoolAttr attr, void *value)
{
    uint64_t *out = value;
    switch (attr) {
    case cudaMemPoolAttrReleaseThreshold:
        *out = pool->threshold;
        return cudaSuccess;
    case cudaMemPoolAttrReservedMemCurrent:
        *out = pool->mem.reserved;
        return cudaSuccess;
    case cudaMemPoolAttrReservedMemHigh:
        *out = pool->reserved_high;
        return cudaSuccess;
    case cudaMemPoolAttrUsedMemCurrent:
        *out = sim_mempool_used_now(pool);
        return cudaSuccess;
    case cudaMemPoolAttrUsedMemHigh:
        *out = pool->used_high;
        return cudaSuccess;
    default:
        return cudaErrorInvalidValue;
    }
}

/* cudaMemPoolSetAttribute (set) and cudaMemPoolGetAttribute: one attribute
 * of a pool, under its lock. */
static cudaError_t pool_attribute(cudaMemPool_t h, enum cudaMemPoolAttr attr, void *value, int set)
{
    sim_init();
    struct sim_mempool *pool = sim_mempool_check(h);
    if (!pool || !value) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&pool->mu);
    int *flag = reuse_flag(pool, attr);
    if (flag && set)
        *flag = *(int *)value != 0;
    else if (flag)
        *(int *)value = *flag;
    else
        err = set ? set_figure(pool, attr, value) : get_figure(pool, attr, value);
    pthread_mutex_unlock(&pool->mu);
    return sim_record_error(err);
}

SIM_API cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t h, enum cudaMemPoolAttr attr, void *value)
{
    return pool_attribute(h, attr, value, 1);
}
SIM_RT_ALIAS(cudaMemPoolSetAttribute);

SIM_API cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t h, enum cudaMemPoolAttr attr, void *value)
{
    return pool_attribute(h, attr, value, 0);
}
SIM_RT_ALIAS(cudaMemPoolGetAttribute);
