/* real.h - the one resolver of real functions: the program's CUDA runtime
 * and NCCL (fs_real_symbol, real.c; cached per call site by FS_REAL), the C
 * library's loader (real_loader.c) and the CUDA driver (real_driver.c; the
 * driver entries' real functions are kept in the hook table, hooks.h).
 *
 * FS_REAL(fn) yields the real `fn` with its declared type, looked up once
 * (per call site) through fs_real_symbol and kept once found. NULL while the
 * runtime is not loaded. FS_REAL_AS(fn, "name") looks up another symbol of
 * the same type, e.g. the _ptsz variant of fn. */
#ifndef FS_REAL_H
#define FS_REAL_H

#include "shim.h"

static inline void *fs_real_cached(void **slot, enum fs_lib lib, const char *name)
{
    void *p = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (fs_likely(p != NULL)) return p;
    p = fs_real_symbol(lib, name);
    if (p) __atomic_store_n(slot, p, __ATOMIC_RELEASE);
    return p;
}

#define FS_REAL_LIB_AS(lib, fn, name)                                                              \
    ((__typeof__(&fn))__extension__({                                                              \
        static void *fs_real_slot_;                                                                \
        fs_real_cached(&fs_real_slot_, lib, name);                                                 \
    }))
#define FS_REAL_AS(fn, name) FS_REAL_LIB_AS(FS_LIB_CUDART, fn, name)
#define FS_REAL(fn)          FS_REAL_AS(fn, #fn)
/* The program's NCCL entry point behind one of ours (else its pnccl alias),
 * typed as it: __typeof__(&ncclAllReduce) real = FS_NCCL_REAL(ncclAllReduce); */
#define FS_NCCL_REAL(fn) FS_REAL_LIB_AS(FS_LIB_NCCL, fn, #fn)

/* ---- the loader (real_loader.c) ----------------------------------------
 * FS_LOOKUP_PATH: every function a lookup that is not a driver entry point
 * runs (driver/dlsym.c): not instrumented by a sanitizer, no lock, no
 * allocation, nothing called but the real function. */
#define FS_LOOKUP_PATH __attribute__((no_sanitize("address", "thread", "undefined")))

struct link_map;
typedef void *(*fs_dlsym_fn)(void *, const char *);
typedef void *(*fs_dlvsym_fn)(void *, const char *, const char *);
/* The C library's dlsym and dlvsym, never the shim's own definitions, so
 * never a hook; found at the library's start (lifetime.h) or at the first
 * lookup before it. RTLD_NEXT is the object after the shim when called
 * from the shim (fs_real_dlsym), the caller's when tail-called. */
fs_dlsym_fn fs_real_dlsym_fn(void);
fs_dlvsym_fn fs_real_dlvsym_fn(void);
void *fs_real_dlsym(void *handle, const char *name);
void *fs_real_dlvsym(void *handle, const char *name, const char *version);
/* The function `name` as the loaded object itself defines it (its default
 * version), or NULL: read from its symbol table, so a name it lacks leaves
 * no dlerror() behind and nothing is locked. */
void *fs_object_function(const struct link_map *object, const char *name);

/* ---- the driver (real_driver.c) -----------------------------------------
 * The driver (libcuda.so*) is adopted once, from the first of its functions
 * a lookup answers with or from among the loaded objects: the real
 * functions of the table's driver entries (hooks.h) are then read from its
 * symbol table, without a lock (threads that race find the same ones). */
/* Adopts the driver that `fn` belongs to, unless one is adopted already;
 * false when `fn` is not a driver's (and none is adopted). */
bool fs_driver_adopt(void *fn);
/* Adopts the loaded driver, if any and none is adopted yet. Takes the
 * loader's lock: not for a lookup path. */
void fs_driver_adopt_loaded(void);
/* The adopted driver's own function `name` (its default version), read
 * from its symbol table; NULL before a driver is adopted, or when it has
 * none. */
void *fs_driver_function(const char *name);

#endif /* FS_REAL_H */
