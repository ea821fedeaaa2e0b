/* pinned_memory.c - the runtime's page-locked host memory entry points:
 * cudaMallocHost, cudaHostAlloc, cudaFreeHost, cudaHostRegister,
 * cudaHostUnregister, cudaHostGetDevicePointer, cudaHostGetFlags, onto
 * sim/core/hostmem.c and the address registry. */
#include <stdlib.h>
#include <sys/mman.h>

#include "sim.h"

/* 1 when [p, p+n) lies in page-locked host memory. */
static int is_pinned(const void *p, size_t n)
{
    struct sim_range r;
    return sim_registry_find((uintptr_t)p, &r) &&
           (r.kind == SIM_RANGE_PINNED || r.kind == SIM_RANGE_REGISTERED) &&
           (uintptr_t)p + n <= r.base + r.size;
}

SIM_API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return sim_host_alloc(ptr, size, cudaHostAllocDefault);
}

SIM_API cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    return sim_host_alloc(ptr, size, flags);
}

SIM_API cudaError_t cudaFreeHost(void *ptr)
{
    return sim_host_free(ptr);
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
