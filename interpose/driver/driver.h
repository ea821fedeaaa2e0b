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
#include <cuda_runtime_api.h>
#include <stdbool.h>

struct link_map;

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
#endif /* FS_DRIVER_H */
