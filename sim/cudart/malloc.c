/* malloc.c - cudaMalloc, cudaFree (also of managed memory, managed.c) and
 * cudaMemGetInfo: the runtime's entry points onto device memory
 * (sim/core/devmem.c), each reported to CUPTI's subscriber. */
#include <stdlib.h>

#include "traced.h"

static cudaError_t device_malloc(void **ptr, size_t size)
{
    sim_init();
    if (!ptr) return sim_record_error(cudaErrorInvalidValue);
    cudaError_t err = sim_capture_check_unsafe();
    if (err) return sim_record_error(err);
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return sim_record_error(cudaErrorNoDevice);
    return sim_record_error(
        sim_capacity_refused(dev, size, sim_devmem_alloc(dev, size, SIM_RANGE_MALLOC, ptr)));
}

SIM_API cudaError_t cudaMalloc(void **ptr, size_t size)
{
    return SIM_RT_TRACED(cudaMalloc, v3020, device_malloc(ptr, size), ptr, size);
}

static cudaError_t device_free(void *ptr)
{
    sim_init();
    if (!ptr) {
        sim_cur_dev(); /* cudaFree(0): the idiom that initialises the current device's context */
        return cudaSuccess;
    }
    cudaError_t err = sim_capture_check_unsafe();
    return sim_record_error(err ? err : sim_devmem_free(ptr));
}

SIM_API cudaError_t cudaFree(void *ptr)
{
    return SIM_RT_TRACED(cudaFree, v3020, device_free(ptr), ptr);
}

SIM_API cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    size_t f, t;
    sim_init();
    /* A null out-pointer is not an error: on a GPU (driver 580, CUDA 13.0)
     * cudaMemGetInfo(NULL, &total) returns cudaSuccess and fills the other. */
    cudaError_t e = sim_devmem_info(&f, &t);
    if (e == cudaSuccess) {
        if (free_bytes) *free_bytes = f;
        if (total) *total = t;
    }
    return sim_record_error(e);
}
