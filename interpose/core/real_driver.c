/* real_driver.c - the CUDA driver's real functions (real.h): the driver's
 * part of the one resolver.
 *
 * A program may reach the driver without any symbol the loader binds
 * (dlopen and dlsym, cuGetProcAddress, cudaGetDriverEntryPoint:
 * driver/cuda_driver.c), so the driver is adopted once, from the first of
 * its functions a lookup answers with (or, for `fsdpshim attach` and a
 * process without the runtime, from among the loaded objects): the real
 * functions of every driver entry of the hook table are then read from
 * that library's symbol table, without a lock (threads that race find the
 * same ones), so that no lookup ever waits for another thread, which may
 * hold the loader's lock in a constructor. */
#include "hooks.h"
#include "real.h"
#include "../../common/path.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <string.h>

static int adopted; /* 1 once the table's driver entries have the driver's */
/* The adopted driver's link map, set before `adopted`: the driver device
 * table (driver_device.c) reads its other functions from it
 * (fs_driver_function). */
static const struct link_map *adopted_object;

static bool is_driver(const char *path)
{
    return strncmp(fs_base_name(path), "libcuda.so", 10) == 0;
}

/* Adopts the driver library `path`, whose link map is `object`: its real
 * functions of the table's driver entries. A reference of the shim's own
 * keeps it: the hooks call into the library for good, even after the
 * program dlcloses it. */
static bool adopt(const char *path, const struct link_map *object)
{
    if (!dlopen(path, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD)) return false;
    for (int i = 0; i < FS_HOOK_DRIVER_END; i++) {
        void *none = NULL;
        __atomic_compare_exchange_n(&fs_hooks[i].real, &none,
                                    fs_object_function(object, fs_hooks[i].name), false,
                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&adopted_object, object, __ATOMIC_RELEASE);
    __atomic_store_n(&adopted, 1, __ATOMIC_RELEASE);
    fs_log(FS_LOG_DEBUG, "driver entry points hooked in %s", path);
    return true;
}

/* libcuda.so.1, or the versioned file it links to */
bool fs_driver_adopt(void *fn)
{
    struct link_map *object;
    Dl_info info;

    if (fs_likely(__atomic_load_n(&adopted, __ATOMIC_ACQUIRE))) return true;
    if (!dladdr1(fn, &info, (void **)&object, RTLD_DL_LINKMAP) || !info.dli_fname ||
        !is_driver(info.dli_fname))
        return false;
    return adopt(info.dli_fname, object);
}

static int find_driver(struct dl_phdr_info *info, size_t size, void *arg)
{
    char *path = arg;

    (void)size;
    if (!info->dlpi_name || !is_driver(info->dlpi_name)) return 0;
    strncpy(path, info->dlpi_name, PATH_MAX - 1);
    path[PATH_MAX - 1] = '\0';
    return 1;
}

/* Not on a lookup path: dl_iterate_phdr and dlinfo take the loader's lock,
 * and the dlopen happens outside dl_iterate_phdr, which holds it. */
void fs_driver_adopt_loaded(void)
{
    char path[PATH_MAX];
    struct link_map *object;
    void *handle;

    if (__atomic_load_n(&adopted, __ATOMIC_ACQUIRE) || !dl_iterate_phdr(find_driver, path)) return;
    handle = dlopen(path, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (handle && dlinfo(handle, RTLD_DI_LINKMAP, &object) == 0) adopt(path, object);
    if (handle) dlclose(handle);
}

void *fs_driver_function(const char *name)
{
    const struct link_map *object = __atomic_load_n(&adopted_object, __ATOMIC_ACQUIRE);

    return object ? fs_object_function(object, name) : NULL;
}
