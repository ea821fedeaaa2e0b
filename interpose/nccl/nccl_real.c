/* nccl_real.c - finding the program's own NCCL entry points.
 *
 * fs_real_symbol() searches the loaded objects (RTLD_NEXT, then each object,
 * including RTLD_LOCAL ones); this file adds what is particular to NCCL:
 * the pnccl* aliases that every NCCL exports (a profiler that wraps ncclX
 * may leave only pncclX reachable), and the guarantee that what we call
 * "real" is never one of our own definitions, which would recurse. */
#include "nccl_internal.h"

#include <dlfcn.h>
#include <stdio.h>

/* True when `fn` lies in libfsdpshim.so itself. */
static bool in_shim(void *fn)
{
    Dl_info self, other;
    if (!dladdr((void *)in_shim, &self) || !dladdr(fn, &other)) return false;
    return self.dli_fbase == other.dli_fbase;
}

static void *lookup(const char *name)
{
    void *fn = fs_real_symbol(FS_LIB_NCCL, name);
    return fn && !in_shim(fn) ? fn : NULL;
}

void *fs_nccl_resolve(_Atomic(void *) *slot, const char *name)
{
    void *fn = lookup(name);
    if (!fn) {
        char alias[128];
        snprintf(alias, sizeof(alias), "p%s", name);
        fn = lookup(alias);
    }
    if (fn) atomic_store_explicit(slot, fn, memory_order_release);
    return fn;
}

ncclResult_t fs_nccl_missing(const char *name)
{
    static atomic_flag logged = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&logged))
        fs_log(FS_LOG_ERROR, "%s: no NCCL is loaded in this process, nothing to pass the call to",
               name);
    return ncclInternalError;
}
