/* launch.c - the driver's functions and launches: cuFuncGetAttribute,
 * cuFuncSetAttribute, cuFuncSetCacheConfig, cuKernelGetAttribute,
 * cuKernelSetAttribute, the occupancy calculator, cuLaunchKernel,
 * cuLaunchKernelEx and cuLaunchCooperativeKernel.
 *
 * A CUfunction or CUkernel is a kernel of the runtime's registry
 * (../core/modules.c): one the module loader found in an image (module.c), or
 * one nvcc's generated code registered (cudaGetFuncBySymbol and
 * cudaGetKernel hand those out). Its attributes are the runtime's
 * (../core/funcattr.c), and a launch is the runtime's cudaLaunchKernelExC
 * (../cudart/kernel_launch.c): checked as a GPU checks it (grid and block against the
 * device's limits, dynamic shared memory against the function's, clusters,
 * cooperative grids that must fit at once), the module loaded on the
 * stream's device on first use, then one op on the stream that computes
 * nothing, ordered with copies, events and other work exactly as a kernel
 * is on a GPU. The kernel's parameters are never read. */
#include "driver_internal.h"

_Static_assert(sizeof(CUlaunchAttribute) == sizeof(cudaLaunchAttribute), "launch attributes");
_Static_assert((int)CU_LAUNCH_ATTRIBUTE_COOPERATIVE == (int)cudaLaunchAttributeCooperative,
               "launch attribute ids");
_Static_assert((int)CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ==
                   (int)cudaFuncAttributeMaxDynamicSharedMemorySize,
               "the settable function attributes");

/* One attribute of a function on a device. */
static CUresult attribute(int *value, CUfunction_attribute attr, const void *func, int device)
{
    if (!value || (unsigned)attr >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    struct cudaFuncAttributes a;
    CUresult res = sim_cu_result(sim_drv_func_attributes(&a, func, device));
    if (res) return res;
    switch (attr) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *value = a.maxThreadsPerBlock;
        break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
        *value = (int)a.sharedSizeBytes;
        break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
        *value = (int)a.constSizeBytes;
        break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
        *value = (int)a.localSizeBytes;
        break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
        *value = a.numRegs;
        break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
        *value = a.ptxVersion;
        break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
        *value = a.binaryVersion;
        break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
        *value = a.cacheModeCA;
        break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *value = a.maxDynamicSharedSizeBytes;
        break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        *value = a.preferredShmemCarveout;
        break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
        *value = a.clusterDimMustBeSet;
        break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
        *value = a.requiredClusterWidth;
        break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
        *value = a.requiredClusterHeight;
        break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
        *value = a.requiredClusterDepth;
        break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
        *value = a.nonPortableClusterSizeAllowed;
        break;
    default: /* CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE */
        *value = a.clusterSchedulingPolicyPreference;
    }
    return CUDA_SUCCESS;
}

/* A function's attributes in the current context. */
SIM_API CUresult cuFuncGetAttribute(int *value, CUfunction_attribute attr, CUfunction func)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    return res ? res : attribute(value, attr, func, dev->ordinal);
}

SIM_API CUresult cuKernelGetAttribute(int *value, CUfunction_attribute attr, CUkernel kernel,
                                      CUdevice dev)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!sim_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    return attribute(value, attr, kernel, dev);
}

/* The settable attributes have the runtime's numbers (cudaFuncAttribute);
 * the others are read-only, CUDA_ERROR_INVALID_VALUE. */
SIM_API CUresult cuFuncSetAttribute(CUfunction func, CUfunction_attribute attr, int value)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    return SIM_RT(sim_rt_cudaFuncSetAttribute(func, (enum cudaFuncAttribute)attr, value));
}

SIM_API CUresult cuKernelSetAttribute(CUfunction_attribute attr, int value, CUkernel kernel,
                                      CUdevice dev)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    return SIM_RT(sim_rt_cudaKernelSetAttributeForDevice((cudaKernel_t)kernel,
                                                         (enum cudaFuncAttribute)attr, value, dev));
}

/* A preference for a function the sim knows; it has no L1 to split. */
SIM_API CUresult cuFuncSetCacheConfig(CUfunction func, CUfunc_cache config)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL) return CUDA_ERROR_INVALID_VALUE;
    struct cudaFuncAttributes a;
    return sim_cu_result(sim_drv_func_attributes(&a, func, dev->ordinal));
}

SIM_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *blocks, CUfunction func,
                                                                      int block_size,
                                                                      size_t dynamic_smem,
                                                                      unsigned int flags)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    return SIM_RT(sim_rt_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
        blocks, func, block_size, dynamic_smem, flags));
}

SIM_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, CUfunction func,
                                                             int block_size, size_t dynamic_smem)
{
    return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, func, block_size,
                                                                dynamic_smem, 0);
}

/* ---- launches ---- */

/* The runtime's launch of config's kernel; cuda.h: the parameters come as
 * kernelParams or as extra, not both. */
static CUresult launch(const cudaLaunchConfig_t *config, CUfunction func, void **params,
                       void **extra, int pt)
{
    CUresult res = sim_cu_ready();
    if (res || (res = sim_cu_stream_context((CUstream)config->stream))) return res;
    if (params && extra) return CUDA_ERROR_INVALID_VALUE;
    return SIM_RT(pt ? sim_rt_cudaLaunchKernelExC_ptsz(config, func, params)
                     : sim_rt_cudaLaunchKernelExC(config, func, params));
}

static CUresult launch_grid(CUfunction func, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                            void **extra, int cooperative, int pt)
{
    cudaLaunchAttribute coop = {.id = cudaLaunchAttributeCooperative, .val.cooperative = 1};
    cudaLaunchConfig_t c = {
        {gx, gy, gz},       {bx, by, bz}, smem, (cudaStream_t)s, cooperative ? &coop : NULL,
        cooperative ? 1 : 0};
    return launch(&c, func, params, extra, pt);
}

SIM_API CUresult cuLaunchKernel(CUfunction func, unsigned int gx, unsigned int gy, unsigned int gz,
                                unsigned int bx, unsigned int by, unsigned int bz,
                                unsigned int smem, CUstream stream, void **params, void **extra)
{
    return launch_grid(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra, 0, 0);
}

SIM_API CUresult cuLaunchKernel_ptsz(CUfunction func, unsigned int gx, unsigned int gy,
                                     unsigned int gz, unsigned int bx, unsigned int by,
                                     unsigned int bz, unsigned int smem, CUstream stream,
                                     void **params, void **extra)
{
    return launch_grid(func, gx, gy, gz, bx, by, bz, smem, stream, params, extra, 0, 1);
}

SIM_API CUresult cuLaunchCooperativeKernel(CUfunction func, unsigned int gx, unsigned int gy,
                                           unsigned int gz, unsigned int bx, unsigned int by,
                                           unsigned int bz, unsigned int smem, CUstream stream,
                                           void **params)
{
    return launch_grid(func, gx, gy, gz, bx, by, bz, smem, stream, params, NULL, 1, 0);
}

SIM_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction func, unsigned int gx, unsigned int gy,
                                                unsigned int gz, unsigned int bx, unsigned int by,
                                                unsigned int bz, unsigned int smem, CUstream stream,
                                                void **params)
{
    return launch_grid(func, gx, gy, gz, bx, by, bz, smem, stream, params, NULL, 1, 1);
}

/* The driver's launch attributes are the runtime's, id for id and value for
 * value (checked above): the runtime reads them (../cudart/kernel_launch.c). */
static CUresult launch_ex(const CUlaunchConfig *config, CUfunction func, void **params,
                          void **extra, int pt)
{
    if (!config) return CUDA_ERROR_INVALID_VALUE;
    cudaLaunchConfig_t c = {{config->gridDimX, config->gridDimY, config->gridDimZ},
                            {config->blockDimX, config->blockDimY, config->blockDimZ},
                            config->sharedMemBytes,
                            (cudaStream_t)config->hStream,
                            (cudaLaunchAttribute *)config->attrs,
                            config->numAttrs};
    return launch(&c, func, params, extra, pt);
}

SIM_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction func, void **params,
                                  void **extra)
{
    return launch_ex(config, func, params, extra, 0);
}

SIM_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction func, void **params,
                                       void **extra)
{
    return launch_ex(config, func, params, extra, 1);
}
