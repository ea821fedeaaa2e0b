/* devices.h - the allocator's device tables (allocator/device.h's ops):
 * over the program's CUDA runtime (cuda_device.c, with the stream-ordered
 * segments' memory from ordered_segments.c) or, in a process whose CUDA
 * calls reach the shim only through the driver, over the driver
 * (driver_device.c). shim.c picks one when it makes the allocator; the
 * rest of the shim asks shim.h's questions (fs_shim_mem_info) instead. */
#ifndef FS_DEVICES_H
#define FS_DEVICES_H

#include "shim.h"

#include <cuda.h>

/* ---- over the runtime (cuda_device.c) ---- */
/* The allocator's device table over the program's runtime; expandable
 * segments only if asked and the driver's VMM entry points are reachable. */
const fs_device_ops *fs_cuda_device_ops(bool want_vm);
/* The device's free and total memory as the runtime reports them (the
 * program's last error kept); false when it cannot say. */
bool fs_cuda_mem_info(int device, size_t *free, size_t *total);
/* The driver's virtual-memory API, found through the runtime once; NULL
 * when it cannot be reached. */
const struct fs_vmm *fs_cuda_vmm(void);
/* fs_vmm_export on `device`: a descriptor for the expandable segment's
 * page at `page`, for another process. */
fs_dev_status fs_cuda_vm_export(int device, void *page, int *fd);

/* ---- stream-ordered segments (ordered_segments.c) ---- */
/* A stream-ordered segment's memory, and giving it back (inside
 * fs_internal_begin, the device current): a mapping of its own through the
 * driver's virtual-memory API, else a block of the shim's own pool. */
fs_dev_status fs_ordered_alloc(int device, size_t size, void **out);
fs_dev_status fs_ordered_free(int device, void *ptr);
/* The runtime state behind the table that a cudaDeviceReset of `device`
 * destroyed is forgotten; with -1 (fork child) all of it. */
void fs_cuda_device_reset(int device);
/* The program granted peers access to `device`'s default pool: the shim's
 * stream-ordered segments there, which hold its cudaMallocAsync blocks,
 * grant the same. */
void fs_cuda_ordered_access(int device, const struct cudaMemAccessDesc *descs, size_t count);
/* The most device memory the shim's fallback pool (behind its
 * stream-ordered segments where mappings cannot be made) held on `device`,
 * read after each segment; 0 when it gave none. */
uint64_t fs_cuda_ordered_reserved_peak(int device);

/* ---- over the driver (driver_device.c) ---- */
/* The allocator's device table over the adopted driver, for a process with
 * no CUDA runtime the shim can reach; expandable segments only if asked
 * and the driver's virtual-memory API is there. */
const fs_device_ops *fs_driver_device_ops(bool want_vm);
/* cuDeviceGetCount; -1 when it fails (before the program's cuInit, or with
 * no driver adopted). */
int fs_driver_device_count(void);
/* The device whose primary context is the calling thread's current context,
 * the only context whose allocations the shim serves; -1 with none current,
 * or another context (cuCtxCreate'd, green). */
int fs_driver_served_device(void);
/* The device and flags of a stream of a primary context; false for a bad
 * handle or a stream of another context. */
bool fs_driver_stream_probe(CUstream s, int *device, unsigned *flags);
/* The device's free and total memory (cuMemGetInfo_v2 in its primary
 * context); false when the driver cannot say. */
bool fs_driver_mem_info(int device, size_t *free, size_t *total);
/* Forgets the retained primary contexts (fork child). */
void fs_driver_device_reset(void);

#endif /* FS_DEVICES_H */
