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

#include "internal.h"

FS_API cudaError_t cudaMallocManaged(void **ptr, size_t size, unsigned int flags)
{
    fs_init();
    if (!ptr || size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
        return fs_ret(cudaErrorInvalidValue);
    struct fs_device *dev = fs_cur_dev();
    if (!dev) return fs_ret(cudaErrorNoDevice);
    void *p;
    cudaError_t err = fs_devmem_alloc(dev, size, FS_RANGE_MANAGED, &p);
    if (err) return fs_ret(err);
    struct fs_range r;
    if (!fs_cfg.moves_data && fs_registry_find((uintptr_t)p, &r) &&
        mprotect(p, r.size, PROT_READ | PROT_WRITE)) {
        fs_devmem_release(&r);
        return fs_ret(cudaErrorMemoryAllocation);
    }
    *ptr = p;
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaMallocManaged);
