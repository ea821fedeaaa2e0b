/* ctor_probe.c - a library whose constructor looks symbols up, as OpenMP
 * runtimes, MPI and sanitizers do, and reaches the driver through dlopen and
 * dlsym before the shim has initialised: linked into ctor_main, it is
 * initialised ahead of the preloaded shim; dlopen'ed by it (built a second
 * time), it runs under the loader's lock while other threads look driver
 * entry points up. FSDPSHIM_TEST_LIBCUDA names the driver. */
#include "ctor_probe.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct ctor_probe result;

__attribute__((visibility("default"))) const struct ctor_probe *fs_ctor_probe_result(void)
{
    return &result;
}

static bool in_shim(void *fn)
{
    Dl_info info;

    return fn && dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "libfsdpshim");
}

__attribute__((constructor)) static void probe(void)
{
    int (*stat)(const char *, int, int64_t *) =
        (int (*)(const char *, int, int64_t *))dlsym(RTLD_DEFAULT, "fsdpshim_stat");
    const char *path = getenv("FSDPSHIM_TEST_LIBCUDA");
    __typeof__(&cuGetProcAddress_v2) gpa;
    __typeof__(&cuMemAlloc_v2) alloc;
    __typeof__(&cuMemFree_v2) release;
    CUresult (*init)(unsigned);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    CUcontext ctx;
    CUdeviceptr p;
    int64_t served = -1;
    void *lib;

    result.ran = true;
    result.lookups = dlsym(RTLD_NEXT, "malloc") && dlsym(RTLD_DEFAULT, "free") &&
                     dlvsym(RTLD_NEXT, "fs_ctor_probe_no_such_name", "V1") == NULL;
    /* The shim's API before it served anything: inactive, or active and
     * empty if something else brought the runtime in already. */
    result.shim_before = !stat || stat("allocation.all.allocated", -1, &served) != 0 || served == 0;
    if (!path || !(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return;
    gpa = (__typeof__(gpa))dlsym(lib, "cuGetProcAddress_v2");
    alloc = (__typeof__(alloc))dlsym(lib, "cuMemAlloc_v2");
    release = (__typeof__(release))dlsym(lib, "cuMemFree_v2");
    if (!gpa || !alloc || !release) return;
    result.hooked = in_shim((void *)alloc);
    if (gpa("cuInit", (void **)&init, 12000, 0, NULL) || init(0) ||
        gpa("cuDevicePrimaryCtxRetain", (void **)&retain, 12000, 0, NULL) || retain(&ctx, 0) ||
        gpa("cuCtxSetCurrent", (void **)&set_current, 12000, 0, NULL) || set_current(ctx))
        return;
    result.allocated = alloc(&p, 4096) == CUDA_SUCCESS && release(p) == CUDA_SUCCESS;
}
