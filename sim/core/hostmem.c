/* hostmem.c - page-locked ("pinned") host memory: what cudaMallocHost,
 * cudaHostAlloc and cudaFreeHost do (their entry points are in
 * sim/cudart/pinned_memory.c), and the driver's cuMemAllocHost,
 * cuMemHostAlloc and cuMemFreeHost on them (sim_drv_host_*).
 *
 * Nothing is actually locked; what matters is the registry entry, which
 * makes copies to and from this memory asynchronous, as with real pinned
 * memory, while copies from pageable memory block the caller. The entry
 * keeps the flags the memory was made with (cuMemHostGetFlags reads them;
 * the runtime's and the driver's flags have the same values). */
#include <stdlib.h>
#include <sys/mman.h>

#include "sim.h"

cudaError_t sim_host_alloc(void **out, size_t size, unsigned flags)
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

cudaError_t sim_host_free(void *ptr)
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

/* The simulated driver's cuMemAllocHost, cuMemHostAlloc and cuMemFreeHost
 * (sim/cuda/). */
SIM_SEAM cudaError_t sim_drv_host_alloc(void **ptr, size_t size, unsigned flags)
{
    return SIM_QUIETLY(sim_host_alloc(ptr, size, flags));
}

SIM_SEAM cudaError_t sim_drv_host_free(void *ptr)
{
    return SIM_QUIETLY(sim_host_free(ptr));
}
