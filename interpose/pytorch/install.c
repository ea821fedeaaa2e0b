/* install.c - PyTorch's allocator becomes the adapter, when the route chose
 * it (FSDPSHIM_TORCH_ADAPTER names the adapter's library: route/
 * torch_route.c, from `fsdpshim run` or the preloaded library's
 * constructor).
 *
 * When. PyTorch sets its allocator pointer while libc10_cuda.so is loaded
 * (a static initialiser) and initialises the allocator at its first CUDA
 * use, right after asking the runtime how many devices there are. So the
 * runtime's cudaGetDeviceCount and cudaSetDevice, which the shim serves,
 * look for a loaded libc10_cuda.so first: the first such call after
 * `import torch` loads the adapter and swaps it in (install.cpp), before
 * PyTorch goes on to initialise whichever allocator the pointer holds.
 * Before libc10_cuda.so is there nothing happens; after the first attempt,
 * whatever its outcome, nothing happens again.
 *
 * Which. The adapter is compiled for one PyTorch build; the key of the
 * loaded one ("<version>@<git hash>", read from the torch/version.py beside
 * that libc10_cuda.so) goes to the adapter, which refuses any other. */
#include "torch_api.h"

#include "../../route/torch_route.h"
#include "../../trace/stack.h"
#include "../core/shim.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const fs_torch_api fs_torch_api_table; /* torch_api.c */

static int done; /* set once the attempt was made (or there is none to make) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The torch package directory of the loaded libc10_cuda.so (its lib/'s
 * parent), or false when none is loaded. */
static bool loaded_torch_dir(char *dir, size_t len)
{
    void *h = dlopen("libc10_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
    struct link_map *map = NULL;
    char *slash;

    if (!h) return false;
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) {
        dlclose(h);
        return false;
    }
    snprintf(dir, len, "%s", map->l_name);
    dlclose(h);
    for (int up = 0; up < 2; up++)
        if ((slash = strrchr(dir, '/'))) *slash = '\0';
    return true;
}

static void install(const char *path, const char *torch_dir)
{
    char key[320], why[512];
    fs_torch_install_fn fn;
    void *h;
    int rc;

    if (!fs_route_torch_key(torch_dir, key, sizeof key)) {
        fs_log(FS_LOG_WARN,
               "PyTorch's allocator stays PyTorch's: no version in %s/version.py to check the "
               "adapter against",
               torch_dir);
        return;
    }
    if (!(h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
        fs_log(FS_LOG_WARN, "PyTorch's allocator stays PyTorch's: cannot load the adapter: %s",
               dlerror());
        return;
    }
    if (!(fn = (fs_torch_install_fn)dlsym(h, FS_TORCH_INSTALL_SYMBOL))) {
        fs_log(FS_LOG_WARN, "PyTorch's allocator stays PyTorch's: %s has no %s", path,
               FS_TORCH_INSTALL_SYMBOL);
        dlclose(h);
        return;
    }
    why[0] = '\0';
    /* a traced allocation's stack starts at PyTorch's call, not in the
     * adapter (the trace has them in the shim's own frames' place) */
    fs_stack_skip_object((const void *)fn);
    rc = fn(&fs_torch_api_table, key, why, sizeof why);
    if (rc == 1)
        fs_log(FS_LOG_INFO, "PyTorch's allocator: %s", why);
    else
        fs_log(FS_LOG_WARN, "PyTorch's allocator stays PyTorch's: %s", why);
    if (rc != 1) dlclose(h);
}

void fs_torch_adapter_check(void)
{
    char torch_dir[PATH_MAX];
    const char *path;

    if (__atomic_load_n(&done, __ATOMIC_ACQUIRE)) return;
    path = getenv(FS_ROUTE_ADAPTER_VAR);
    if (!path || !*path) {
        __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
        return;
    }
    if (!loaded_torch_dir(torch_dir, sizeof torch_dir)) return; /* not imported yet */
    pthread_mutex_lock(&lock);
    if (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
        install(path, torch_dir);
        __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
}
