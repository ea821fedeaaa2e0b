/* function_attributes.c - the runtime's cudaFuncGetAttributes,
 * cudaFuncSetAttribute, cudaKernelSetAttributeForDevice and occupancy
 * entry points, onto the kernels' attributes of sim/core/funcattr.c. */
#include <stdlib.h>

#include "sim.h"

SIM_API cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    sim_init();
    int device = sim_cur_device();
    if (!sim_dev(device)) return sim_record_error(cudaErrorNoDevice);
    return sim_record_error(sim_func_get_attributes(attr, func, device));
}

static cudaError_t set_attribute(const void *func, enum cudaFuncAttribute attr, int value,
                                 int device)
{
    sim_init();
    if (!sim_dev(device))
        return sim_record_error(sim_cfg.ndevices ? cudaErrorInvalidDevice : cudaErrorNoDevice);
    sim_modules_rdlock();
    struct sim_kernel *k = sim_kernel_find(func);
    cudaError_t err =
        k ? sim_kernel_set_attribute(k, device, attr, value) : cudaErrorInvalidDeviceFunction;
    sim_modules_unlock();
    return sim_record_error(err);
}

/* Applies to the current device, as the runtime applies it to the current
 * context. */
SIM_API cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    sim_init();
    return set_attribute(func, attr, value, sim_cur_device());
}
SIM_RT_ALIAS(cudaFuncSetAttribute);

SIM_API cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t kernel,
                                                    enum cudaFuncAttribute attr, int value,
                                                    int device)
{
    return set_attribute(kernel, attr, value, device);
}
SIM_RT_ALIAS(cudaKernelSetAttributeForDevice);

static cudaError_t occupancy(int *num_blocks, const void *func, int block_size, size_t dyn_smem,
                             unsigned flags)
{
    sim_init();
    if (!num_blocks || block_size <= 0 || (flags & ~cudaOccupancyDisableCachingOverride))
        return sim_record_error(cudaErrorInvalidValue);
    int device = sim_cur_device();
    if (!sim_dev(device)) return sim_record_error(cudaErrorNoDevice);
    sim_modules_rdlock();
    struct sim_kernel *k = sim_kernel_find(func);
    if (k) *num_blocks = sim_occupancy(k, device, block_size, dyn_smem);
    sim_modules_unlock();
    return k ? cudaSuccess : sim_record_error(cudaErrorInvalidDeviceFunction);
}

SIM_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *num_blocks, const void *func,
                                                                  int block_size, size_t dyn_smem)
{
    return occupancy(num_blocks, func, block_size, dyn_smem, cudaOccupancyDefault);
}

SIM_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int *num_blocks, const void *func, int block_size, size_t dyn_smem, unsigned int flags)
{
    return occupancy(num_blocks, func, block_size, dyn_smem, flags);
}
SIM_RT_ALIAS(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags);
