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
    struct sim_range r;
    return sim_registry_find((uintptr_t)p, &r) &&
           (r.kind == SIM_RANGE_PINNED || r.kind == SIM_RANGE_REGISTERED) &&
           (uintptr_t)p + n <= r.base + r.size;
}

static cudaError_t host_alloc(void **out, size_t size, unsigned flags)
{
    sim_init();
    unsigned known = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
    if (!out || (flags & ~known)) return sim_record_error(cudaErrorInvalidValue);
    if (size == 0) {
        *out = NULL;
        return cudaSuccess;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return sim_record_error(cudaErrorMemoryAllocation);
    struct sim_range r = {(uintptr_t)p, size, SIM_RANGE_PINNED, sim_cur_device(), 1, NULL, 0,
                          flags};
    sim_registry_add(&r);
    *out = p;
    return cudaSuccess;
}

SIM_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return host_alloc(ptr, size, cudaHostAllocDefault);
}

SIM_API cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    return host_alloc(ptr, size, flags);
}

static cudaError_t free_host(void *ptr)
{
    sim_init();
    if (!ptr) return cudaSuccess;
    struct sim_range r;
    if (!sim_registry_find((uintptr_t)ptr, &r) || r.base != (uintptr_t)ptr ||
        r.kind != SIM_RANGE_PINNED)
        return sim_record_error(cudaErrorInvalidValue);
    /* Like cudaFree, freeing pinned memory waits for the device's work. */
    struct sim_device *dev = sim_dev(r.device);
    if (dev) sim_device_sync(dev);
    sim_registry_remove(r.base);
    munmap(ptr, r.size);
    return cudaSuccess;
}

SIM_API cudaError_t cudaFreeHost(void *ptr)
{
    return free_host(ptr);
}

/* The simulated driver's cuMemAllocHost, cuMemHostAlloc and cuMemFreeHost
 * (sim/cuda/). */
SIM_SEAM cudaError_t sim_drv_host_alloc(void **ptr, size_t size, unsigned flags)
{
    return SIM_QUIETLY(host_alloc(ptr, size, flags));
}

SIM_SEAM cudaError_t sim_drv_host_free(void *ptr)
{
    return SIM_QUIETLY(free_host(ptr));
}

SIM_API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    sim_init();
    unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory |
                     cudaHostRegisterReadOnly;
    if (!ptr || size == 0 || (flags & ~known)) return sim_record_error(cudaErrorInvalidValue);
    struct sim_range r = {(uintptr_t)ptr, size, SIM_RANGE_REGISTERED, sim_cur_device(), 1, NULL, 0,
                          flags};
    if (sim_registry_add(&r)) return sim_record_error(cudaErrorHostMemoryAlreadyRegistered);
    return cudaSuccess;
}

SIM_API cudaError_t cudaHostUnregister(void *ptr)
{
    sim_init();
    struct sim_range r;
    if (!ptr) return sim_record_error(cudaErrorInvalidValue);
    if (!sim_registry_find((uintptr_t)ptr, &r) || r.base != (uintptr_t)ptr ||
        r.kind != SIM_RANGE_REGISTERED)
        return sim_record_error(cudaErrorHostMemoryNotRegistered);
    sim_registry_remove(r.base);
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaHostRegister);
SIM_RT_ALIAS(cudaHostUnregister);

SIM_API cudaError_t cudaHostGetDevicePointer(void **dev_ptr, void *host, unsigned int flags)
{
    if (!dev_ptr || flags != 0 || !is_pinned(host, 1))
        return sim_record_error(cudaErrorInvalidValue);
    *dev_ptr = host; /* unified addressing: the same address */
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaHostGetDevicePointer);
