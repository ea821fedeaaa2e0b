/* torch_route.c - the preloaded library routes PyTorch by itself: in a
 * Python process that nothing has routed yet (LD_PRELOAD=libfsdpshim.so
 * python train.py, or torchrun launched that way), the constructor sets the
 * environment exactly as `fsdpshim run` would (route/torch_route.c, shared
 * with the launcher), before the interpreter starts and so before PyTorch
 * reads its configuration. The route marks the environment, so torchrun's
 * workers and a program under `fsdpshim run` inherit it silently: the line
 * saying what changed comes once per job, not once per worker. */
#include "shim.h"
#include "../common/path.h"
#include "torch_route.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The interpreter as this process was started (argv[0], found on PATH as
 * the shell found it): a venv's bin/python is a link to the base
 * interpreter, so /proc/self/exe alone would miss the venv's packages. */
static void started_as(const char *exe, char *out, size_t len)
{
    char arg0[PATH_MAX] = "";
    FILE *f = fopen("/proc/self/cmdline", "r");
    size_t n = 0;

    snprintf(out, len, "%s", exe);
    if (!f) return;
    n = fread(arg0, 1, sizeof arg0 - 1, f);
    fclose(f);
    arg0[n] = '\0';
    if (!*arg0 || !fs_route_python_name(fs_base_name(arg0))) return;
    if (strchr(arg0, '/')) {
        snprintf(out, len, "%s", arg0);
        return;
    }
    bool executable = false;
    char found[PATH_MAX];
    if (fs_path_search(arg0, found, sizeof found, &executable) && executable)
        snprintf(out, len, "%s", found);
}

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

/* Priority 101: before the library's other constructors, so that nothing
 * of the shim reads FSDPSHIM_CONF before the route has set it. */
__attribute__((constructor(101))) static void route_torch(void)
{
    char exe[PATH_MAX], python[PATH_MAX], lib_dir[PATH_MAX], note[4096], *conf = NULL;
    ssize_t n;

    if (getenv(FS_ROUTE_MARK)) return;
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = '\0';
    if (!fs_route_python_name(fs_base_name(exe))) return;
    /* loaded by the driver or by `fsdpshim attach`: the process is left as it is */
    if (!fs_shim_preloaded()) return;
    started_as(exe, python, sizeof python);
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
