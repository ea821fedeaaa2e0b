/* served_lookup.c - dlsym and dlvsym of the runtime's and NCCL's entry points
 * on a library's own handle: the shim's definition, as the global scope
 * gives.
 *
 * A preloaded shim is first in the global scope, so the program's calls to
 * cudaMalloc, and lookups with RTLD_DEFAULT, reach it. A lookup on a
 * handle does not: `ctypes.CDLL("libcudart.so.13").cudaMalloc`, or a C
 * program's dlsym(dlopen("libcudart.so.13"), "cudaMalloc"), searches that
 * library and its dependencies only and gets the runtime's function, and
 * the allocation would bypass the cache, the trace and the statistics. So
 * when the real answer is a function of libcudart or libnccl that the shim
 * also defines, the shim's goes out instead, exactly as the loader binds a
 * linked call. Not replaced:
 * - lookups from inside the shim (real.c finds the real functions this
 *   way) and from the runtime itself;
 * - RTLD_NEXT and RTLD_DEFAULT, which dlsym.c passes straight through: the
 *   first is relative to the caller, the second finds the shim already;
 * - any lookup while the shim is not preloaded (linked, or `fsdpshim
 *   attach`, which traces through slots and serves nothing).
 * The path runs only for names that begin with "cuda" or "nccl" (dlsym.c),
 * never for a sanitizer's early lookups, so it may call dladdr. */
#include "../driver/driver.h"
#include "../core/real.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The loaded object that holds `addr`: its file's base name, and its
 * link map when `map` is not NULL. */
static const char *object_of(const void *addr, struct link_map **map)
{
    struct link_map *m = NULL;
    Dl_info info;
    const char *slash;

    if (!dladdr1(addr, &info, (void **)&m, RTLD_DL_LINKMAP) || !info.dli_fname) return NULL;
    if (map) *map = m;
    slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

/* The shim's own link map, found once. */
static struct link_map *shim_object(void)
{
    static struct link_map *self;
    struct link_map *m = __atomic_load_n(&self, __ATOMIC_ACQUIRE);

    if (!m && object_of((const void *)shim_object, &m))
        __atomic_store_n(&self, m, __ATOMIC_RELEASE);
    return m;
}

/* Whether the shim serves: preloaded, so first in the global scope. Known
 * once asked: preloading cannot change while the process runs. */
static bool serving(void)
{
    static int known; /* 1 yes, -1 no, 0 not yet */
    int k = __atomic_load_n(&known, __ATOMIC_ACQUIRE);

    if (!k) {
        k = fs_shim_preloaded() ? 1 : -1;
        __atomic_store_n(&known, k, __ATOMIC_RELEASE);
    }
    return k > 0;
}

void *fs_served_dlsym(void *handle, const char *name, const char *version, const void *caller)
{
    void *fn = version ? fs_real_dlvsym(handle, name, version) : fs_real_dlsym(handle, name);
    struct link_map *self, *from = NULL;
    const char *lib, *caller_lib;
    void *mine;

    if (!fn || !serving() || !(self = shim_object())) return fn;
    caller_lib = object_of(caller, &from);
    if (from == self || (caller_lib && has_prefix(caller_lib, "libcudart.so"))) return fn;
    lib = object_of(fn, NULL);
    if (!lib || !(has_prefix(lib, "libcudart.so") || has_prefix(lib, "libnccl.so"))) return fn;
    mine = fs_object_function(self, name);
    if (mine) fs_log(FS_LOG_DEBUG, "dlsym of %s in %s: the shim's", name, lib);
    return mine ? mine : fn;
}
