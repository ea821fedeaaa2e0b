/* real.h - cached pointers to the program's real CUDA runtime and NCCL entry
 * points, over the one resolver (fs_real_symbol, real.c).
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

#endif /* FS_REAL_H */
