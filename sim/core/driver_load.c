/* driver_load.c - the device model's way to the simulated driver: loading
 * libcuda.so.1 and initialising it, once, as the runtime does on a GPU.
 *
 * The driver (sim/cuda/) links to this library and works on its device model
 * through the seam (docs/sim.md, "Layout", says why this way round); linking
 * the runtime to the driver would make a cycle. So, like the real runtime,
 * the model loads the driver at run time and keeps its cuGetProcAddress: a
 * pointer from there is the same function that dlsym(libcuda.so.1) finds.
 * The driver loaded is the sim's own, from this library's directory, never
 * whatever libcuda.so.1 the loader's search finds (on a GPU machine, the
 * real one). Two callers need it: the first call's initialisation when a
 * tool is injected (config.c) and cudaGetDriverEntryPoint
 * (../cudart/driver_entry.c); it lives in the core so that the model never
 * calls up into an entry point's file. */
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim.h"

static sim_get_proc_address_fn get_proc_address;
static char driver_path[4096]; /* the sim's libcuda.so.1, beside this library */

/* Resolved when the library is loaded: the name it was loaded by may be
 * relative to a working directory the program leaves later. */
__attribute__((constructor)) static void find_driver(void)
{
    Dl_info self;
    char dir[4096];
    if (!dladdr((void *)find_driver, &self) || !self.dli_fname || !realpath(self.dli_fname, dir))
        return;
    snprintf(driver_path, sizeof driver_path, "%s/libcuda.so.1", dirname(dir));
}

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static void load_driver(void)
{
    void *driver = driver_path[0] ? dlopen(driver_path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!driver) return;
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(driver, "cuInit");
    sim_get_proc_address_fn gpa = (sim_get_proc_address_fn)dlsym(driver, "cuGetProcAddress_v2");
    /* The runtime initialises the driver before it hands out entry points. */
    if (init && gpa && init(0) == CUDA_SUCCESS) get_proc_address = gpa;
}

/* On a GPU the runtime initialises the driver (cuInit) before its first call
 * does anything when CUDA_INJECTION64_PATH names a tool, and the driver
 * loads the injection library then (sim/cuda/context.c). Without an
 * injection the sim's runtime leaves its driver unloaded until a lookup asks
 * for it. */
void sim_driver_start(void)
{
    pthread_once(&driver_once, load_driver);
}

sim_get_proc_address_fn sim_driver_proc_address(void)
{
    sim_driver_start();
    return get_proc_address;
}
