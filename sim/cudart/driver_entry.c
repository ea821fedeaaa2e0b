/* driver_entry.c - cudaGetDriverEntryPoint[ByVersion], the runtime's way to
 * the driver API, as PyTorch and the shim use it.
 *
 * The driver API itself is the simulated libcuda.so.1 (sim/cuda/), which
 * the device model loads at run time and asks its cuGetProcAddress
 * (../core/driver_load.c): a pointer from here is the same function that
 * dlsym(libcuda.so.1) finds. Without it, every lookup fails with
 * cudaErrorInsufficientDriver, as the runtime does without a driver.
 *
 * The names looked up are the driver's base names ("cuMemAlloc" finds the
 * cuMemAlloc_v2 ABI), as cuGetProcAddress documents. An unknown name is not
 * an error: the call succeeds with *funcPtr = NULL and
 * cudaDriverEntryPointSymbolNotFound. */
#include "sim.h"

/* per_thread: the _ptsz variants, where the default flag means the
 * per-thread default stream's entry points. */
static cudaError_t lookup(const char *symbol, void **fn, int version, unsigned long long flags,
                          int per_thread, enum cudaDriverEntryPointQueryResult *status)
{
    if (!symbol || !fn ||
        flags > (cudaEnableDefault | cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream))
        return sim_record_error(cudaErrorInvalidValue);
    sim_get_proc_address_fn get_proc_address = sim_driver_proc_address();
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
