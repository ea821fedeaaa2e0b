/* cuda_memory.c - the runtime's memory calls, served by the allocator.
 *
 * cudaMalloc/cudaFree, the stream-ordered cudaMallocAsync/cudaFreeAsync and
 * the default-pool calls PyTorch's backend:cudaMallocAsync makes, plus the
 * calls whose answers depend on what the cache holds (cudaMemGetInfo, the
 * pool attributes, cudaMemPoolTrimTo) and cudaDeviceReset, which makes the
 * cache of a device meaningless.
 *
 * Whatever the shim does not own goes to the real runtime unchanged: bad
 * arguments (null out-pointers, size 0: the runtime's own error codes and
 * last-error state are then exactly the runtime's), pointers allocated
 * before the shim took over, allocations on a stream under graph capture.
 * When the allocator is out of memory the real call is made as well: it
 * fails exactly as the runtime would (code and last error), or succeeds if
 * memory came free meanwhile, and then the pointer passes through on free.
 *
 * The allocator's side of each call (fs_mem_*, core/serve.c) is shared with
 * the driver's cuMemAlloc, cuMemFree, cuMemAllocAsync, cuMemFreeAsync and
 * cuMemGetInfo (driver/cuda_driver.c), which the shim serves the same way. */
#include "../core/devices.h"
#include "../core/real.h"
#include "runtime.h"
#include "../core/trace_glue.h"

#define MAX_DEVICES 64

/* Each device's default memory pool, as the runtime names it. */
static cudaMemPool_t default_pool[MAX_DEVICES];

static cudaMemPool_t default_pool_of(int device)
{
    cudaMemPool_t p = __atomic_load_n(&default_pool[device], __ATOMIC_ACQUIRE);
    fs_internal_call c;

    if (p) return p;
    fs_internal_begin(&c, -1);
    if (FS_REAL(cudaDeviceGetDefaultMemPool)(&p, device) != cudaSuccess) p = NULL;
    fs_internal_end(&c);
    if (p) __atomic_store_n(&default_pool[device], p, __ATOMIC_RELEASE);
    return p;
}

/* The device whose default pool `pool` is, or -1. */
static int default_pool_device(cudaMemPool_t pool)
{
    int n = fs_shim_device_count();

    for (int d = 0; d < n && d < MAX_DEVICES; d++)
        if (pool && default_pool_of(d) == pool) return d;
    return -1;
}

static cudaError_t error_of(fs_status st)
{
    switch (st) {
    case FS_OK:
        return cudaSuccess;
    case FS_ERR_OOM:
        return cudaErrorMemoryAllocation;
    case FS_ERR_INVALID:
    case FS_ERR_NOT_OWNED:
        return cudaErrorInvalidValue;
    case FS_ERR_DEVICE:
        break;
    }
    return cudaErrorUnknown;
}

/* ---- allocation ---- */

FS_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    __typeof__(&cudaMalloc) real = FS_REAL(cudaMalloc);
    fs_allocator *a;
    fs_status st;

    if (!real) return cudaErrorInitializationError;
    if (fs_unlikely(!devPtr || !size) || !fs_shim_enter()) return real(devPtr, size);
    a = fs_shim_allocator();
    /* like the runtime, on the current device */
    st = a ? fs_mem_alloc(a, fs_shim_current_device(), size, devPtr) : FS_ERR_NOT_OWNED;
    fs_shim_leave();
    if (fs_likely(st == FS_OK)) return cudaSuccess;
    return real(devPtr, size);
}

/* A stream the program destroyed that waits in a stream pool is alive to
 * the runtime: the shim fails calls on it as on a destroyed stream, after
 * the checks the runtime makes before it looks at the stream (written out
 * at each call; docs/interpose.md, "Error codes"). Any other bad handle the
 * runtime judges. */
static bool stream_rejected(cudaStream_t s, cudaError_t *err)
{
    if (fs_likely(!fs_stream_is_destroyed(s))) return false;
    *err = fs_shim_return_error(cudaErrorInvalidResourceHandle);
    return true;
}

static cudaError_t malloc_async(void **p, size_t size, cudaStream_t s, bool pt,
                                __typeof__(&cudaMallocAsync) real)
{
    fs_allocator *a;
    fs_status st;
    cudaError_t err;
    int dev;

    if (!real) return cudaErrorInitializationError;
    if (fs_unlikely(!p)) return real(p, size, s);
    if (stream_rejected(s, &err)) return err;
    if (fs_unlikely(!size) || !fs_shim_enter()) return real(p, size, s);
    a = fs_shim_allocator();
    if (!a || fs_shim_stream_capturing(s, pt)) {
        fs_shim_leave();
        return real(p, size, s);
    }
    st = fs_mem_alloc_async(a, s, pt, size, p, &dev);
    fs_shim_leave();
    if (fs_likely(st == FS_OK)) return cudaSuccess;
    if (dev < 0 && stream_rejected(s, &err)) return err;
    return real(p, size, s);
}

FS_EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async(devPtr, size, hStream, false, FS_REAL(cudaMallocAsync));
}

FS_EXPORT cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async(devPtr, size, hStream, true,
                        FS_REAL_AS(cudaMallocAsync, "cudaMallocAsync_ptsz"));
}

/* Whether the runtime takes `pool` for a memory pool (asked without leaving
 * a last error behind). */
static bool pool_valid(cudaMemPool_t pool)
{
    uint64_t threshold;
    fs_internal_call c;
    cudaError_t e;

    fs_internal_begin(&c, -1);
    e = FS_REAL(cudaMemPoolGetAttribute)(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
    fs_internal_end(&c);
    return e == cudaSuccess;
}

/* Only the default pool is the shim's; other pools are the program's own.
 * The runtime checks the pool, then the out-pointer, then the stream. */
static cudaError_t malloc_from_pool(void **p, size_t size, cudaMemPool_t pool, cudaStream_t s,
                                    bool pt, __typeof__(&cudaMallocFromPoolAsync) real,
                                    __typeof__(&cudaMallocAsync) as_async)
{
    int dev = -1;

    if (!real) return cudaErrorInitializationError;
    if (pool && fs_shim_enter()) {
        if (fs_shim_allocator()) dev = default_pool_device(pool);
        fs_shim_leave();
    }
    if (dev >= 0) return malloc_async(p, size, s, pt, as_async);
    if (pool && p && fs_unlikely(fs_stream_is_destroyed(s)) && pool_valid(pool))
        return fs_shim_return_error(cudaErrorInvalidResourceHandle);
    return real(p, size, pool, s);
}

FS_EXPORT cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                              cudaStream_t stream)
{
    return malloc_from_pool(ptr, size, memPool, stream, false, FS_REAL(cudaMallocFromPoolAsync),
                            FS_REAL(cudaMallocAsync));
}

FS_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                   cudaStream_t stream)
{
    return malloc_from_pool(ptr, size, memPool, stream, true,
                            FS_REAL_AS(cudaMallocFromPoolAsync, "cudaMallocFromPoolAsync_ptsz"),
                            FS_REAL_AS(cudaMallocAsync, "cudaMallocAsync_ptsz"));
}

/* ---- free ---- */

FS_EXPORT cudaError_t cudaFree(void *devPtr)
{
    __typeof__(&cudaFree) real = FS_REAL(cudaFree);
    fs_allocator *a;
    fs_status st;

    if (!real) return cudaErrorInitializationError;
    if (!devPtr || !fs_shim_enter()) return real(devPtr);
    a = fs_shim_allocator_peek();
    st = a ? fs_mem_free(a, devPtr, false, 0) : FS_ERR_NOT_OWNED;
    fs_shim_leave();
    if (fs_likely(st == FS_OK)) return cudaSuccess;
    if (st == FS_ERR_NOT_OWNED) return real(devPtr);
    return fs_shim_return_error(error_of(st));
}

/* The runtime checks the stream, then the pointer. */
static cudaError_t free_async(void *p, cudaStream_t s, bool pt, __typeof__(&cudaFreeAsync) real)
{
    fs_allocator *a;
    fs_stream_t key;
    fs_status st = FS_ERR_NOT_OWNED;
    cudaError_t err;
    int dev = 0;

    if (!real) return cudaErrorInitializationError;
    if (stream_rejected(s, &err)) return err;
    if (!p || !fs_shim_enter()) return real(p, s);
    a = fs_shim_allocator_peek();
    if (a) {
        key = fs_shim_stream_key(s, pt, &dev);
        if (dev >= 0) st = fs_mem_free(a, p, true, key);
    }
    fs_shim_leave();
    if (fs_likely(st == FS_OK)) return cudaSuccess;
    if (dev < 0 && stream_rejected(s, &err)) return err;
    if (st == FS_ERR_NOT_OWNED) return real(p, s);
    return fs_shim_return_error(error_of(st));
}

FS_EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    return free_async(devPtr, hStream, false, FS_REAL(cudaFreeAsync));
}

FS_EXPORT cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    return free_async(devPtr, hStream, true, FS_REAL_AS(cudaFreeAsync, "cudaFreeAsync_ptsz"));
}

/* ---- the default pool, as PyTorch's cudaMallocAsync backend reads it ---- */

FS_EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    __typeof__(&cudaDeviceGetDefaultMemPool) real = FS_REAL(cudaDeviceGetDefaultMemPool);
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    e = real(memPool, device);
    if (e == cudaSuccess && device >= 0 && device < MAX_DEVICES)
        __atomic_store_n(&default_pool[device], *memPool, __ATOMIC_RELEASE);
    return e;
}

/* Used and reserved memory of a default pool include the shim's figures:
 * what the program allocated through the shim is, to it, pool memory. */
FS_EXPORT cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                              void *value)
{
    __typeof__(&cudaMemPoolGetAttribute) real = FS_REAL(cudaMemPoolGetAttribute);
    fs_alloc_stats st;
    fs_allocator *a;
    cudaError_t e;
    int dev = -1;

    if (!real) return cudaErrorInitializationError;
    e = real(memPool, attr, value);
    if (e != cudaSuccess || !value || !fs_shim_enter()) return e;
    a = fs_shim_allocator_peek();
    if (a && (attr == cudaMemPoolAttrUsedMemCurrent || attr == cudaMemPoolAttrUsedMemHigh ||
              attr == cudaMemPoolAttrReservedMemCurrent || attr == cudaMemPoolAttrReservedMemHigh))
        dev = default_pool_device(memPool);
    if (dev >= 0) {
        fs_alloc_get_stats(a, dev, &st);
        switch (attr) {
        case cudaMemPoolAttrUsedMemCurrent:
            *(uint64_t *)value += (uint64_t)st.allocated_bytes[FS_SIZE_ALL].current;
            break;
        case cudaMemPoolAttrUsedMemHigh:
            *(uint64_t *)value += (uint64_t)st.allocated_bytes[FS_SIZE_ALL].peak;
            break;
        case cudaMemPoolAttrReservedMemCurrent:
            *(uint64_t *)value += (uint64_t)st.reserved_bytes[FS_SIZE_ALL].current;
            break;
        default:
            *(uint64_t *)value += (uint64_t)st.reserved_bytes[FS_SIZE_ALL].peak;
            break;
        }
    }
    fs_shim_leave();
    return e;
}

/* Writing 0 to a high-water mark (torch.cuda.reset_peak_memory_stats) also
 * resets the shim's peaks. */
FS_EXPORT cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                              void *value)
{
    __typeof__(&cudaMemPoolSetAttribute) real = FS_REAL(cudaMemPoolSetAttribute);
    fs_allocator *a;
    cudaError_t e;
    int dev;

    if (!real) return cudaErrorInitializationError;
    e = real(memPool, attr, value);
    if (e != cudaSuccess || !fs_shim_enter()) return e;
    a = fs_shim_allocator_peek();
    if (a && (attr == cudaMemPoolAttrUsedMemHigh || attr == cudaMemPoolAttrReservedMemHigh) &&
        (dev = default_pool_device(memPool)) >= 0)
        fs_alloc_reset_peak(a, dev);
    fs_shim_leave();
    return e;
}

/* Peers granted access to a default pool (PyTorch's enablePeerAccess on
 * this route) must reach the program's cudaMallocAsync blocks, which the
 * shim keeps in a pool of its own: that pool is granted the same. */
FS_EXPORT cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool,
                                           const struct cudaMemAccessDesc *descList, size_t count)
{
    __typeof__(&cudaMemPoolSetAccess) real = FS_REAL(cudaMemPoolSetAccess);
    cudaError_t e;
    int dev;

    if (!real) return cudaErrorInitializationError;
    e = real(memPool, descList, count);
    if (e != cudaSuccess || !fs_shim_enter()) return e;
    /* recorded even before the allocator exists: its pool is made later */
    if ((dev = default_pool_device(memPool)) >= 0) fs_cuda_ordered_access(dev, descList, count);
    fs_shim_leave();
    return e;
}

/* torch.cuda.empty_cache() on this route: cudaDeviceSynchronize, then
 * cudaMemPoolTrimTo(pool, 0). */
FS_EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    __typeof__(&cudaMemPoolTrimTo) real = FS_REAL(cudaMemPoolTrimTo);
    fs_allocator *a;
    cudaError_t e;
    int dev;

    if (!real) return cudaErrorInitializationError;
    e = real(memPool, minBytesToKeep);
    if (e != cudaSuccess || !fs_shim_enter()) return e;
    a = fs_shim_allocator_peek();
    if (a && (dev = default_pool_device(memPool)) >= 0) fs_alloc_trim(a, dev, minBytesToKeep);
    fs_shim_leave();
    return e;
}

/* There is no _ptsz variant: the call names no stream. */
FS_EXPORT cudaError_t cudaMemGetInfo(size_t *free, size_t *total)
{
    __typeof__(&cudaMemGetInfo) real = FS_REAL(cudaMemGetInfo);
    fs_allocator *a;
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    e = real(free, total);
    if (e != cudaSuccess || !fs_shim_enter()) return e;
    a = fs_shim_allocator_peek();
    /* the runtime accepts a null `free` (it answers cudaSuccess on a GPU) */
    if (free && a) *free += fs_mem_cached_free(a, fs_shim_current_device());
    fs_shim_leave();
    return e;
}

/* ---- device lifetime ---- */

/* PyTorch asks how many devices there are just before it initialises its
 * allocator: the moment to put the adapter in place (pytorch/install.c). */
FS_EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    __typeof__(&cudaGetDeviceCount) real = FS_REAL(cudaGetDeviceCount);

    if (!real) return cudaErrorInitializationError;
    fs_torch_adapter_check();
    return real(count);
}

FS_EXPORT cudaError_t cudaSetDevice(int device)
{
    __typeof__(&cudaSetDevice) real = FS_REAL(cudaSetDevice);
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    fs_torch_adapter_check();
    e = real(device);
    if (e == cudaSuccess) fs_current_device_set(device);
    return e;
}

/* The reset destroys the device's cudaMalloc memory, streams and events,
 * not its stream-ordered memory: the allocator forgets what is gone (never
 * freeing it) and keeps the surviving blocks (docs/allocator.md, "Device
 * reset"). */
FS_EXPORT cudaError_t cudaDeviceReset(void)
{
    __typeof__(&cudaDeviceReset) real = FS_REAL(cudaDeviceReset);
    fs_allocator *a;
    cudaError_t e;
    int dev;

    if (!real) return cudaErrorInitializationError;
    dev = fs_shim_current_device();
    e = real();
    if (e != cudaSuccess || dev < 0 || !fs_shim_enter()) return e;
    a = fs_shim_allocator_peek();
    if (a && dev < fs_shim_device_count()) {
        fs_cuda_device_reset(dev);
        fs_alloc_device_reset(a, dev);
        fs_stream_pool_reset(dev);
        fs_streams_reset(dev);
        if (dev < MAX_DEVICES) __atomic_store_n(&default_pool[dev], NULL, __ATOMIC_RELEASE);
        fs_log(FS_LOG_INFO, "device %d reset: its plain memory, streams and events are forgotten",
               dev);
    }
    fs_shim_leave();
    return e;
}

/* An IPC handle names the whole allocation, which for a shim block is its
 * segment (the runtime itself answers so, as with PyTorch's allocator); a
 * receiver that maps the handle must add the block's offset. */
FS_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    __typeof__(&cudaIpcGetMemHandle) real = FS_REAL(cudaIpcGetMemHandle);
    fs_block_info info;
    fs_allocator *a;

    if (!real) return cudaErrorInitializationError;
    if (devPtr && fs_shim_enter()) {
        a = fs_shim_allocator_peek();
        if (a && fs_alloc_block_info(a, devPtr, &info) == FS_OK && info.segment != devPtr)
            fs_log(FS_LOG_WARN,
                   "cudaIpcGetMemHandle(%p): the handle describes the enclosing segment %p "
                   "(%zu bytes); the block is at offset %zu",
                   devPtr, info.segment, info.segment_size,
                   (size_t)((char *)devPtr - (char *)info.segment));
        fs_shim_leave();
    }
    return real(handle, devPtr);
}
