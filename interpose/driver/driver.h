/* driver.h - what the shim's dlsym (dlsym.c) and its driver glue
 * (cuda_driver.c) share: the real dlsym and dlvsym, and the lookups of
 * driver entry points whose answers the shim replaces with its hooks
 * (docs/interpose.md, "The driver API"). */
#ifndef FS_DRIVER_H
#define FS_DRIVER_H

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

/* ---- cuda_driver.c ---- */
/* The answer to the program's dlsym(handle, name) (version NULL) or
 * dlvsym(handle, name, version) for a name that may be a hooked driver
 * entry point: the real answer, replaced by the shim's hook when it is the
 * driver's own function for that entry point and `caller` (the return
 * address of the lookup) is not in the CUDA runtime. Never called with
 * RTLD_NEXT, whose answer depends on the caller's object. */
void *fs_driver_dlsym(void *handle, const char *name, const char *version, const void *caller);

#endif /* FS_DRIVER_H */
