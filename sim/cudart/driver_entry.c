/* driver_entry.c - cudaGetDriverEntryPoint[ByVersion], the runtime's way to
 * the driver API, as PyTorch and the shim use it, and the loading of the
 * driver that the runtime's first call makes (sim_driver_start).
 *
 * The driver API itself is the simulated libcuda.so.1 (sim/cuda/), which
 * links to this library and works on its device model through the seam
 * (docs/sim.md, "Layout", says why this way round); linking the runtime to
 * the driver would make a cycle. So, like the real runtime, this one loads
 * the driver at run time and asks its cuGetProcAddress: a pointer from here
 * is the same function that dlsym(libcuda.so.1) finds. The driver loaded is
 * the sim's own, from this library's directory, never whatever libcuda.so.1
 * the loader's search finds (on a GPU machine, the real one). Without it,
 * every lookup fails with cudaErrorInsufficientDriver, as the runtime does
 * without a driver.
 *
 * The names looked up are the driver's base names ("cuMemAlloc" finds the
 * cuMemAlloc_v2 ABI), as cuGetProcAddress documents. An unknown name is not
 * an error: the call succeeds with *funcPtr = NULL and
 * cudaDriverEntryPointSymbolNotFound. */
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

typedef CUresult (*get_proc_address_fn)(const char *, void **, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult *);

static get_proc_address_fn get_proc_address;
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
    get_proc_address_fn gpa = (get_proc_address_fn)dlsym(driver, "cuGetProcAddress_v2");
    /* The runtime initialises the driver before it hands out entry points. */
    if (init && gpa && init(0) == CUDA_SUCCESS) get_proc_address = gpa;
}

/* per_thread: the _ptsz variants, where the default flag means the
 * per-thread default stream's entry points. */
static cudaError_t lookup(const char *symbol, void **fn, int version, unsigned long long flags,
                          int per_thread, enum cudaDriverEntryPointQueryResult *status)
{
    if (!symbol || !fn ||
        flags > (cudaEnableDefault | cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream))
        return sim_record_error(cudaErrorInvalidValue);
    pthread_once(&driver_once, load_driver);
    if (!get_proc_address) return sim_record_error(cudaErrorInsufficientDriver);
    /* The runtime's flags are the driver's CU_GET_PROC_ADDRESS_* values. */
    CUdriverProcAddressQueryResult found;
    if (per_thread && flags == cudaEnableDefault) flags = cudaEnablePerThreadDefaultStream;
    CUresult res = get_proc_address(symbol, fn, version, flags, &found);
    if (res != CUDA_SUCCESS) *fn = NULL;
    if (status)
        *status = found == CU_GET_PROC_ADDRESS_SUCCESS ? cudaDriverEntryPointSuccess
                  : found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                      ? cudaDriverEntryPointVersionNotSufficent
                      : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

SIM_API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                            enum cudaDriverEntryPointQueryResult *status)
{
    return lookup(symbol, fn, CUDART_VERSION, flags, 0, status);
}

SIM_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **fn,
                                                 unsigned long long flags,
                                                 enum cudaDriverEntryPointQueryResult *status)
{
    return lookup(symbol, fn, CUDART_VERSION, flags, 1, status);
}

SIM_API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn,
                                                     unsigned int version, unsigned long long flags,
                                                     enum cudaDriverEntryPointQueryResult *status)
{
    return lookup(symbol, fn, (int)version, flags, 0, status);
}

SIM_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **fn, unsigned int version, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *status)
{
    return lookup(symbol, fn, (int)version, flags, 1, status);
}

/* The runtime's initialisation, when CUDA_INJECTION64_PATH names a tool:
 * on a GPU the runtime initialises the driver (cuInit) before its first
 * call does anything, and the driver loads the injection library then
 * (sim/cuda/context.c). Without an injection the sim's runtime leaves its
 * driver unloaded until a lookup asks for it. */
void sim_driver_start(void)
{
    pthread_once(&driver_once, load_driver);
}
