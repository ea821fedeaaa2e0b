/* route.c - the preloaded library routes PyTorch by itself: in a Python
 * process that nothing has routed yet (LD_PRELOAD=libfsdpshim.so python
 * train.py, or torchrun launched that way), the constructor sets the
 * environment exactly as `fsdpshim run` would (route/: which Python this
 * process is, then the route for its PyTorch, shared with the launcher),
 * before the interpreter starts and so before PyTorch reads its
 * configuration. The route marks the environment, so torchrun's
 * workers and a program under `fsdpshim run` inherit it silently: the line
 * saying what changed comes once per job, not once per worker. */
#include "../core/shim.h"
#include "../core/lifetime.h"
#include "python.h"
#include "torch_route.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The directory of this library (libfsdpshim.so), where the adapters built
 * with it are. */
static void own_dir(char *dir, size_t len)
{
    Dl_info info;
    char *slash;

    dir[0] = '\0';
    if (!dladdr((void *)own_dir, &info) || !info.dli_fname) return;
    snprintf(dir, len, "%s", info.dli_fname);
    if ((slash = strrchr(dir, '/'))) *slash = '\0';
}

/* The first of the library's init hooks (core/lifetime.h), so that nothing
 * of the shim reads FSDPSHIM_CONF before the route has set it. */
static void route_torch(void)
{
    char python[PATH_MAX], lib_dir[PATH_MAX], note[4096], *conf = NULL;

    if (getenv(FS_ROUTE_MARK)) return;
    if (!fs_route_process_python(python, sizeof python)) return;
    /* loaded by the driver or by `fsdpshim attach`: the process is left as it is */
    if (!fs_shim_preloaded()) return;
    own_dir(lib_dir, sizeof lib_dir);
    if (fs_route_torch(python, lib_dir, getenv("FSDPSHIM_CONF"), &conf, note, sizeof note)) {
        fs_log(FS_LOG_WARN, "cannot route PyTorch through the shim: %s", note);
        return;
    }
    if (conf && setenv("FSDPSHIM_CONF", conf, 1) != 0)
        fs_log(FS_LOG_WARN, "cannot set FSDPSHIM_CONF to '%s': the shim keeps its defaults", conf);
    free(conf);
    if (*note) fs_log(FS_LOG_WARN, "%s", note);
}

FS_LIFETIME(route) = {.order = FS_ORDER_ROUTE, .init = route_torch};
