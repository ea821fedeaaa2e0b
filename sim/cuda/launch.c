/* launch.c - the driver's function and launch entry points that PyTorch
 * looks up (cuFuncGetAttribute, cuFuncSetAttribute, cuFuncSetCacheConfig,
 * cuKernelGetAttribute, cuLaunchKernel, cuLaunchCooperativeKernel,
 * cuOccupancyMaxActiveBlocksPerMultiprocessor).
 *
 * They take a CUfunction or CUkernel, which only the driver's module loader
 * (cuModuleGetFunction, cuLibraryGetKernel) or the runtime's
 * cudaGetFuncBySymbol hands out; the sim's driver has no module loader (no
 * device code), so no handle a caller holds can be valid here yet: each
 * call checks its other arguments as documented and then answers
 * CUDA_ERROR_INVALID_HANDLE, what the driver says for a function it does
 * not know. PyTorch reaches them only for kernels it compiled itself with
 * NVRTC (jiterator, torch.compile), which need that loader. Kept in one file
 * so that the runtime's function registry (sim/launch.c) can be wired in
 * here, making a launch ordered device work that computes nothing. */
#include "driver.h"

FS_API CUresult cuFuncGetAttribute(int *value, CUfunction_attribute attr, CUfunction func)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!value || (unsigned)attr >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    (void)func;
    return CUDA_ERROR_INVALID_HANDLE;
}

FS_API CUresult cuFuncSetAttribute(CUfunction func, CUfunction_attribute attr, int value)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if ((unsigned)attr >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    (void)func, (void)value;
    return CUDA_ERROR_INVALID_HANDLE;
}

FS_API CUresult cuFuncSetCacheConfig(CUfunction func, CUfunc_cache config)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL) return CUDA_ERROR_INVALID_VALUE;
    (void)func;
    return CUDA_ERROR_INVALID_HANDLE;
}

FS_API CUresult cuKernelGetAttribute(int *value, CUfunction_attribute attr, CUkernel kernel,
                                     CUdevice dev)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!value || (unsigned)attr >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    if (!fs_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    (void)kernel;
    return CUDA_ERROR_INVALID_HANDLE;
}

FS_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, CUfunction func,
                                                            int block_size, size_t dynamic_smem)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!blocks || block_size <= 0) return CUDA_ERROR_INVALID_VALUE;
    (void)func, (void)dynamic_smem;
    return CUDA_ERROR_INVALID_HANDLE;
}

/* The launch configuration's limits are those the device reports
 * (cudaDevAttrMaxBlockDim*, 1024 threads a block). */
static CUresult launch(CUfunction func, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz)
{
    struct fs_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    if (!gx || !gy || !gz || !bx || !by || !bz || gy > 65535 || gz > 65535 || bx > 1024 ||
        by > 1024 || bz > 64 || (unsigned long long)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    (void)func;
    return CUDA_ERROR_INVALID_HANDLE;
}

FS_API CUresult cuLaunchKernel(CUfunction func, unsigned int gx, unsigned int gy, unsigned int gz,
                               unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem,
                               CUstream stream, void **params, void **extra)
{
    (void)smem, (void)stream, (void)params, (void)extra;
    return launch(func, gx, gy, gz, bx, by, bz);
}

FS_API CUresult cuLaunchKernel_ptsz(CUfunction func, unsigned int gx, unsigned int gy,
                                    unsigned int gz, unsigned int bx, unsigned int by,
                                    unsigned int bz, unsigned int smem, CUstream stream,
                                    void **params, void **extra)
{
    (void)smem, (void)stream, (void)params, (void)extra;
    return launch(func, gx, gy, gz, bx, by, bz);
}

FS_API CUresult cuLaunchCooperativeKernel(CUfunction func, unsigned int gx, unsigned int gy,
                                          unsigned int gz, unsigned int bx, unsigned int by,
                                          unsigned int bz, unsigned int smem, CUstream stream,
                                          void **params)
{
    (void)smem, (void)stream, (void)params;
    return launch(func, gx, gy, gz, bx, by, bz);
}

FS_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction func, unsigned int gx, unsigned int gy,
                                               unsigned int gz, unsigned int bx, unsigned int by,
                                               unsigned int bz, unsigned int smem, CUstream stream,
                                               void **params)
{
    (void)smem, (void)stream, (void)params;
    return launch(func, gx, gy, gz, bx, by, bz);
}
