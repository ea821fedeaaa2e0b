/* driver.h - what the shim's dlsym (dlsym.c), its driver glue
 * (cuda_driver.c) and its device table over the driver (driver_device.c)
 * share with each other and with the shim's state (shim.c, the stream
 * table): the real dlsym and dlvsym, the lookups of driver entry points
 * whose answers the shim replaces with its hooks, and the driver as the
 * allocator's device (docs/interpose.md, "The driver API"). */
#ifndef FS_DRIVER_H
#define FS_DRIVER_H

#include "../../allocator/device.h"

#include <cuda.h>
#include <stdbool.h>

struct link_map;

/* ---- dlsym.c ---- */
/* The real dlsym and dlvsym, called from the shim: RTLD_NEXT is the object
 * after the shim. Never the shim's own definitions, so never a hook. */
void *fs_real_dlsym(void *handle, const char *name);
void *fs_real_dlvsym(void *handle, const char *name, const char *version);
/* The function `name` as the loaded object itself defines it (its default
 * version), or NULL: read from its symbol table, so a name it lacks leaves
 * no dlerror() behind and nothing is locked. */
void *fs_object_function(const struct link_map *object, const char *name);

/* ---- runtime/served_lookup.c ---- */
/* The answer to the program's dlsym(handle, name) or dlvsym(handle, name,
 * version) for a name that may be a runtime or NCCL entry point: the real
 * answer, replaced by the shim's own definition of `name` when the real one
 * is libcudart's or libnccl's, the shim serves (is preloaded), and `caller`
 * is neither in the shim nor in the runtime. Never called with RTLD_NEXT or
 * RTLD_DEFAULT. */
void *fs_served_dlsym(void *handle, const char *name, const char *version, const void *caller);

/* ---- cuda_driver.c ---- */
/* The answer to the program's dlsym(handle, name) (version NULL) or
 * dlvsym(handle, name, version) for a name that may be a hooked driver
 * entry point: the real answer, replaced by the shim's hook when it is the
 * driver's own function for that entry point and `caller` (the return
 * address of the lookup) is not in the CUDA runtime. Never called with
 * RTLD_NEXT, whose answer depends on the caller's object. */
void *fs_driver_dlsym(void *handle, const char *name, const char *version, const void *caller);
/* The adopted driver's own function `name` (its default version), read
 * from its symbol table; NULL before a driver is adopted, or when it has
 * none. */
void *fs_driver_function(const char *name);

/* ---- driver_device.c ---- */
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

#endif /* FS_DRIVER_H */
