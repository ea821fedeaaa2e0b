/* real.c - finding the program's own CUDA runtime and NCCL.
 *
 * The shim never links or loads libcudart/libnccl (SPEC section 1): loading
 * a second runtime would give the process two CUDA contexts' worth of state.
 * It looks the real entry points up among what is already loaded:
 *   1. dlsym(RTLD_NEXT): the runtime the program was linked with, or one a
 *      dlopen(RTLD_GLOBAL) put in the global scope;
 *   2. otherwise every loaded object, through dl_iterate_phdr: a runtime
 *      that Python (or any plugin loader) dlopen'ed with RTLD_LOCAL is
 *      invisible to RTLD_NEXT, so the shim takes its own reference to it with
 *      dlopen(RTLD_NOLOAD), which never loads anything.
 * NCCL's entry points are never the shim's own, and fall back on their
 * pnccl aliases. This is the one resolver of real symbols: lookups are slow,
 * and callers cache what they get, per call site (FS_REAL and FS_NCCL_REAL in
 * real.h) or per entry point of the hook table (hooks.c). */
#include "shim.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

static const char *const lib_prefix[] = {
    [FS_LIB_CUDART] = "libcudart.so",
    [FS_LIB_NCCL] = "libnccl.so",
};

/* Our own handles on libraries found by the phdr walk; once set they stay
 * (a handle keeps its library loaded). */
static void *lib_handle[2];

struct find_ctx {
    const char *prefix;
    char path[PATH_MAX];
};

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct find_ctx *ctx = arg;
    const char *base;

    (void)size;
    if (!info->dlpi_name || !*info->dlpi_name) return 0;
    base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    if (strncmp(base, ctx->prefix, strlen(ctx->prefix)) != 0) return 0;
    strncpy(ctx->path, info->dlpi_name, sizeof ctx->path - 1);
    ctx->path[sizeof ctx->path - 1] = '\0';
    return 1;
}

/* A handle on the loaded copy of `lib`, or NULL while none is loaded. The
 * dlopen happens outside dl_iterate_phdr, which holds the loader's lock.
 * No lock of ours is held around the dlopen: it waits for the loader's
 * lock, whose holder may be a library constructor calling into the shim,
 * which would then wait for ours (docs/interpose.md, "Ground rules").
 * Threads that race each take a reference; all but the first drop theirs. */
static void *loaded_handle(enum fs_lib lib)
{
    void *h = __atomic_load_n(&lib_handle[lib], __ATOMIC_ACQUIRE), *first = NULL;
    struct find_ctx ctx;

    if (h) return h;
    ctx.prefix = lib_prefix[lib];
    ctx.path[0] = '\0';
    if (!dl_iterate_phdr(find_object, &ctx)) return NULL;
    h = dlopen(ctx.path, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) return NULL;
    if (!__atomic_compare_exchange_n(&lib_handle[lib], &first, h, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        dlclose(h);
        return first;
    }
    fs_log(FS_LOG_DEBUG, "found %s among loaded objects", ctx.path);
    return h;
}

/* A program's CUDA call reached the shim, and there is no runtime to pass
 * it to. The usual cause: the program linked -lfsdpshim under --as-needed,
 * the shim's definitions satisfied its references, and the linker dropped
 * libcudart. The call fails as the runtime's own would without a driver;
 * this says once why. */
static void report_no_runtime(const char *name)
{
    static int reported;

    if (__atomic_exchange_n(&reported, 1, __ATOMIC_RELAXED)) return;
    fs_log(FS_LOG_ERROR,
           "%s reached libfsdpshim.so but no CUDA runtime (libcudart.so) is loaded in this "
           "process, so every CUDA call fails with cudaErrorInitializationError. Most likely "
           "the program was linked with -lfsdpshim under --as-needed, which dropped libcudart; "
           "do not link libfsdpshim, preload it (LD_PRELOAD or fsdpshim run), or link "
           "libcudart with -Wl,--no-as-needed (docs/api.md)",
           name);
}

/* True when `fn` lies in libfsdpshim.so itself. */
static bool in_shim(void *fn)
{
    Dl_info self, other;
    if (!dladdr((void *)in_shim, &self) || !dladdr(fn, &other)) return false;
    return self.dli_fbase == other.dli_fbase;
}

static void *lookup(enum fs_lib lib, const char *name)
{
    void *h, *sym = dlsym(RTLD_NEXT, name);

    if (sym) return sym;
    h = loaded_handle(lib);
    return h ? dlsym(h, name) : NULL;
}

/* NCCL's: never one of the shim's own definitions, which would recurse (an
 * NCCL found only through the loaded objects' scan may resolve to them),
 * and the pnccl alias that every NCCL exports when ncclX itself is not
 * reachable (a profiler that wraps ncclX may leave only pncclX). */
static void *lookup_nccl(const char *name)
{
    char alias[128];
    void *fn = lookup(FS_LIB_NCCL, name);

    if (fn && !in_shim(fn)) return fn;
    snprintf(alias, sizeof alias, "p%s", name);
    fn = lookup(FS_LIB_NCCL, alias);
    return fn && !in_shim(fn) ? fn : NULL;
}

void *fs_real_symbol(enum fs_lib lib, const char *name)
{
    void *sym = lib == FS_LIB_NCCL ? lookup_nccl(name) : lookup(lib, name);

    /* the shim's own lookups (inside it) find no runtime while none is loaded
     * yet, as in Python before torch loads it: that is no error */
    if (!sym && lib == FS_LIB_CUDART && !fs_shim_inside()) report_no_runtime(name);
    return sym;
}

bool fs_runtime_loaded(void)
{
    bool inside = fs_shim_enter(); /* none loaded is no error here */
    bool loaded = fs_real_symbol(FS_LIB_CUDART, "cudaGetDeviceCount") != NULL;

    if (inside) fs_shim_leave();
    return loaded;
}
