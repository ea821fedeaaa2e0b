/* vmm.h - expandable segments' memory through the driver's virtual-memory
 * API (vmm.c), shared by the device table over the runtime
 * (runtime/cuda_device.c) and the one over the driver (driver_device.c).
 * Each table finds the functions its own way and brackets every call with
 * its own way of making the device current. */
#ifndef FS_VMM_H
#define FS_VMM_H

#include "../../allocator/device.h"

#include <cuda.h>

typedef struct fs_vmm {
    __typeof__(&cuMemGetAllocationGranularity) granularity;
    __typeof__(&cuMemAddressReserve) reserve;
    __typeof__(&cuMemAddressFree) release;
    __typeof__(&cuMemCreate) create;
    __typeof__(&cuMemMap) map;
    __typeof__(&cuMemSetAccess) set_access;
    __typeof__(&cuMemRelease) handle_release;
    __typeof__(&cuMemUnmap) unmap;
} fs_vmm;

/* The allocator's vm_* (allocator/device.h), with `device` current. */
size_t fs_vmm_granularity(const fs_vmm *v, int device);
fs_dev_status fs_vmm_reserve(const fs_vmm *v, size_t size, void **out);
fs_dev_status fs_vmm_release(const fs_vmm *v, void *base, size_t size);
fs_dev_status fs_vmm_map(const fs_vmm *v, int device, void *addr, size_t size);
fs_dev_status fs_vmm_unmap(const fs_vmm *v, void *addr, size_t size);
/* The status of a driver result. */
fs_dev_status fs_vmm_status(CUresult r);

#endif /* FS_VMM_H */
