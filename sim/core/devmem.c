/* devmem.c - device memory: capacity accounting per device, and the work
 * behind cudaMalloc / cudaFree (also of managed memory) and cudaMemGetInfo,
 * whose entry points are in sim/cudart/malloc.c.
 *
 * Device memory is host memory (arena.c: MAP_NORESERVE mappings of a
 * memfd per device, so capacity costs nothing until pages are touched). The
 * device is charged what the driver takes for an allocation, whole 2 MiB
 * pages (vram.c says where each allocation lies), while the address
 * registry holds the size asked for: copies and sets may reach no further,
 * and cuMemGetAddressRange answers it, as on a GPU. In a dry run
 * (FSDPSHIM_SIM_DATA=0) the mappings are anonymous and PROT_NONE: nothing
 * may touch them, so a touch faults instead of quietly committing host
 * memory, and a PROT_NONE private mapping is not even counted against the
 * host's commit limit. */
#include <stdlib.h>

#include "sim.h"

cudaError_t sim_capacity_take(struct sim_device *dev, size_t size)
{
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&dev->mu);
    if (size > sim_cfg.capacity - dev->used) {
        err = cudaErrorMemoryAllocation;
    } else {
        dev->used += size;
        if (dev->used > dev->peak) dev->peak = dev->used;
        dev->touched = 1;
    }
    pthread_mutex_unlock(&dev->mu);
    return err;
}

void sim_capacity_count(struct sim_device *dev, int freed)
{
    pthread_mutex_lock(&dev->mu);
    if (freed)
        dev->frees++;
    else
        dev->allocs++;
    dev->touched = 1;
    pthread_mutex_unlock(&dev->mu);
}

cudaError_t sim_capacity_refused(struct sim_device *dev, size_t size, cudaError_t err)
{
    if (err != cudaErrorMemoryAllocation || !dev) return err;
    pthread_mutex_lock(&dev->mu);
    dev->refused++;
    if (size > dev->largest_refused) dev->largest_refused = size;
    dev->touched = 1;
    pthread_mutex_unlock(&dev->mu);
    return err;
}

void sim_capacity_give(struct sim_device *dev, size_t size)
{
    pthread_mutex_lock(&dev->mu);
    dev->used -= size;
    pthread_mutex_unlock(&dev->mu);
}

cudaError_t sim_devmem_alloc(struct sim_device *dev, size_t size, enum sim_range_kind kind,
                             void **out)
{
    if (size > sim_cfg.capacity)
        return cudaErrorMemoryAllocation; /* also catches sizes near SIZE_MAX */
    void *p;
    cudaError_t err = sim_vram_alloc(dev, size, kind == SIM_RANGE_MANAGED, &p);
    if (err) return err;
    sim_capacity_count(dev, 0);
    struct sim_range r = {(uintptr_t)p, size, kind, dev->ordinal, 1, NULL, 0, 0};
    sim_registry_add(&r);
    *out = p;
    return cudaSuccess;
}

static void release(const struct sim_range *r, int unmap)
{
    sim_registry_remove(r->base);
    sim_vram_free((void *)r->base, unmap);
    sim_capacity_count(sim_dev(r->device), 1);
}

void sim_devmem_release(const struct sim_range *r)
{
    release(r, 1);
}

void sim_devmem_drop(const struct sim_range *r)
{
    release(r, 0);
}

void sim_devmem_forget_device(int device)
{
    static const enum sim_range_kind kinds[] = {SIM_RANGE_MALLOC, SIM_RANGE_MANAGED};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        struct sim_range *list;
        size_t n = sim_registry_collect(device, kinds[k], &list);
        for (size_t i = 0; i < n; i++)
            sim_devmem_release(&list[i]);
        free(list);
    }
}

/* The block `ptr` starts, claimed for freeing (so two racing frees cannot
 * both succeed); cudaErrorInvalidValue for anything else. */
cudaError_t sim_claim_device_block(const void *ptr, struct sim_range *r)
{
    if (!sim_registry_find((uintptr_t)ptr, r) || r->base != (uintptr_t)ptr ||
        (r->kind != SIM_RANGE_MALLOC && r->kind != SIM_RANGE_MEMPOOL &&
         r->kind != SIM_RANGE_HOST_MEMPOOL && r->kind != SIM_RANGE_MANAGED) ||
        !sim_registry_set_live(r->base, 1, 0))
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* The work behind cudaFree and the driver's cuMemFree: waits for the whole
 * device, as on a GPU, then releases the block. */
cudaError_t sim_devmem_free(void *ptr)
{
    struct sim_range r;
    cudaError_t err = sim_claim_device_block(ptr, &r);
    if (err) return err;
    struct sim_device *dev = sim_dev(r.device);
    if (dev) sim_device_sync(dev);
    if (r.kind == SIM_RANGE_MEMPOOL || r.kind == SIM_RANGE_HOST_MEMPOOL)
        sim_mempool_cuda_free(r.mempool, r.base);
    else
        sim_devmem_release(&r);
    return cudaSuccess;
}

/* The current device's free and total capacity (cudaMemGetInfo, cuMemGetInfo). */
cudaError_t sim_devmem_info(size_t *free_bytes, size_t *total)
{
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return cudaErrorNoDevice;
    pthread_mutex_lock(&dev->mu);
    *free_bytes = sim_cfg.capacity - dev->used;
    *total = sim_cfg.capacity;
    pthread_mutex_unlock(&dev->mu);
    return cudaSuccess;
}
