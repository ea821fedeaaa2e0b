/* vmm.h - expandable segments' memory through the driver's virtual-memory
 * API (vmm.c), shared by the device table over the runtime
 * (core/cuda_device.c) and the one over the driver (driver_device.c).
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
    /* optional, for sharing pages with other processes (NULL: not shared) */
    __typeof__(&cuMemRetainAllocationHandle) retain;
    __typeof__(&cuMemExportToShareableHandle) export_handle;
} fs_vmm;

/* The allocator's vm_* (allocator/device.h), with `device` current. */
size_t fs_vmm_granularity(const fs_vmm *v, int device);
fs_dev_status fs_vmm_reserve(const fs_vmm *v, size_t size, void **out);
fs_dev_status fs_vmm_release(const fs_vmm *v, void *base, size_t size);
fs_dev_status fs_vmm_map(const fs_vmm *v, int device, void *addr, size_t size);
fs_dev_status fs_vmm_unmap(const fs_vmm *v, void *addr, size_t size);
/* A file descriptor for the memory of the page fs_vmm_map mapped at
 * `page`, which another process can take (pidfd_getfd) and import, as
 * PyTorch shares its expandable segments: exported at the first call and
 * kept open, as PyTorch keeps its own, until fs_vmm_unmap takes the page
 * back. FS_DEV_ERROR when the driver cannot export it (pages are made
 * shareable unless TORCH_CUDA_EXPANDABLE_SEGMENTS_IPC=0, PyTorch's own
 * switch, or the driver refused). */
fs_dev_status fs_vmm_export(const fs_vmm *v, void *page, int *fd);
/* The status of a driver result. */
fs_dev_status fs_vmm_status(CUresult r);

#endif /* FS_VMM_H */
