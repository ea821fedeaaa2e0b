/* hostmem.c - page-locked ("pinned") host memory: cudaMallocHost,
 * cudaHostAlloc, cudaFreeHost, cudaHostRegister, cudaHostUnregister, and
 * the driver's cuMemAllocHost, cuMemHostAlloc, cuMemFreeHost,
 * cuMemHostRegister and cuMemHostUnregister on them.
 *
 * Nothing is actually locked; what matters is the registry entry, which
 * makes copies to and from this memory asynchronous, as with real pinned
 * memory, while copies from pageable memory block the caller. The entry
 * keeps the flags the memory was made with (cuMemHostGetFlags reads them;
 * the runtime's and the driver's flags have the same values). */
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"

/* 1 when [p, p+n) lies in page-locked host memory. */
static int is_pinned(const void *p, size_t n)
{
    struct fs_range r;
    return fs_registry_find((uintptr_t)p, &r) &&
           (r.kind == FS_RANGE_PINNED || r.kind == FS_RANGE_REGISTERED) &&
           (uintptr_t)p + n <= r.base + r.size;
}

static cudaError_t host_alloc(void **out, size_t size, unsigned flags)
{
    fs_init();
    unsigned known = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
    if (!out || (flags & ~known)) return fs_ret(cudaErrorInvalidValue);
    if (size == 0) {
        *out = NULL;
        return cudaSuccess;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return fs_ret(cudaErrorMemoryAllocation);
    struct fs_range r = {(uintptr_t)p, size, FS_RANGE_PINNED, fs_cur_device(), 1, NULL, 0, flags};
    fs_registry_add(&r);
    *out = p;
    return cudaSuccess;
}

FS_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return host_alloc(ptr, size, cudaHostAllocDefault);
}

FS_API cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    return host_alloc(ptr, size, flags);
}

static cudaError_t free_host(void *ptr)
{
    fs_init();
    if (!ptr) return cudaSuccess;
    struct fs_range r;
    if (!fs_registry_find((uintptr_t)ptr, &r) || r.base != (uintptr_t)ptr ||
        r.kind != FS_RANGE_PINNED)
        return fs_ret(cudaErrorInvalidValue);
    /* Like cudaFree, freeing pinned memory waits for the device's work. */
    struct fs_device *dev = fs_dev(r.device);
    if (dev) fs_device_sync(dev);
    fs_registry_remove(r.base);
    munmap(ptr, r.size);
    return cudaSuccess;
}

FS_API cudaError_t cudaFreeHost(void *ptr)
{
    return free_host(ptr);
}

/* The simulated driver's cuMemAllocHost, cuMemHostAlloc and cuMemFreeHost
 * (sim/cuda/). */
FS_SEAM cudaError_t sim_drv_host_alloc(void **ptr, size_t size, unsigned flags)
{
    return SIM_QUIETLY(host_alloc(ptr, size, flags));
}

FS_SEAM cudaError_t sim_drv_host_free(void *ptr)
{
    return SIM_QUIETLY(free_host(ptr));
}

FS_API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    fs_init();
    unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory |
                     cudaHostRegisterReadOnly;
    if (!ptr || size == 0 || (flags & ~known)) return fs_ret(cudaErrorInvalidValue);
    struct fs_range r = {(uintptr_t)ptr, size, FS_RANGE_REGISTERED, fs_cur_device(), 1, NULL, 0,
                         flags};
    if (fs_registry_add(&r)) return fs_ret(cudaErrorHostMemoryAlreadyRegistered);
    return cudaSuccess;
}

FS_API cudaError_t cudaHostUnregister(void *ptr)
{
    fs_init();
    struct fs_range r;
    if (!ptr) return fs_ret(cudaErrorInvalidValue);
    if (!fs_registry_find((uintptr_t)ptr, &r) || r.base != (uintptr_t)ptr ||
        r.kind != FS_RANGE_REGISTERED)
        return fs_ret(cudaErrorHostMemoryNotRegistered);
    fs_registry_remove(r.base);
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaHostRegister);
SIM_RT_ALIAS(cudaHostUnregister);

FS_API cudaError_t cudaHostGetDevicePointer(void **dev_ptr, void *host, unsigned int flags)
{
    if (!dev_ptr || flags != 0 || !is_pinned(host, 1)) return fs_ret(cudaErrorInvalidValue);
    *dev_ptr = host; /* unified addressing: the same address */
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaHostGetDevicePointer);
