/* managed.c - cudaMallocManaged: memory both the host and the device can
 * use.
 *
 * On the sim all device memory is host memory, so managed memory is a
 * device allocation (charged to the current device, in pages of its own so
 * that the host may touch them, freed by cudaFree) that the registry knows
 * as managed, which
 * cudaPointerGetAttributes reports as cudaMemoryTypeManaged. It stays
 * readable and writable by the host even in a dry run (FSDPSHIM_SIM_DATA=0),
 * as the host may touch it directly; copies still move no bytes there. */
#include <sys/mman.h>

#include "sim.h"

SIM_API cudaError_t cudaMallocManaged(void **ptr, size_t size, unsigned int flags)
{
    sim_init();
    if (!ptr || size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
        return sim_record_error(cudaErrorInvalidValue);
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return sim_record_error(cudaErrorNoDevice);
    void *p;
    cudaError_t err = sim_devmem_alloc(dev, size, SIM_RANGE_MANAGED, &p);
    if (err) return sim_record_error(err);
    struct sim_range r;
    if (!sim_cfg.moves_data && sim_registry_find((uintptr_t)p, &r) &&
        mprotect(p, r.size, PROT_READ | PROT_WRITE)) {
        sim_devmem_release(&r);
        return sim_record_error(cudaErrorMemoryAllocation);
    }
    *ptr = p;
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaMallocManaged);
