/* device_management.c - the runtime's device management and version
 * entry points (cudaSetDevice, cudaGetDeviceCount, cudaDeviceSynchronize,
 * cudaDeviceReset, ...) onto the devices of sim/core/devices.c. */
#include <stdio.h>
#include <stdlib.h>

#include "sim.h"

SIM_API cudaError_t cudaGetDeviceCount(int *count)
{
    sim_init();
    if (!count) return sim_record_error(cudaErrorInvalidValue);
    if (sim_cfg.ndevices == 0) return sim_record_error(cudaErrorNoDevice);
    *count = sim_cfg.ndevices;
    return cudaSuccess;
}

SIM_API cudaError_t cudaSetDevice(int device)
{
    if (!sim_dev(device)) return sim_record_error(cudaErrorInvalidDevice);
    sim_ctx_set_current(device);
    return cudaSuccess;
}

SIM_API cudaError_t cudaGetDevice(int *device)
{
    if (!device) return sim_record_error(cudaErrorInvalidValue);
    *device = sim_cur_device();
    return cudaSuccess;
}

/* Initialises the device's primary context (since CUDA 12.0, as
 * cudaSetDevice does) without making it current. */
SIM_API cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags)
{
    (void)deviceFlags;
    struct sim_device *dev = sim_dev(device);
    if (!dev) return sim_record_error(cudaErrorInvalidDevice);
    if (flags & ~(unsigned)cudaInitDeviceFlagsAreValid)
        return sim_record_error(cudaErrorInvalidValue);
    sim_ctx_activate(dev);
    return cudaSuccess;
}

SIM_API cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
    /* cudaDeviceMapHost is implied (always on); the schedule flags are one
     * of spin/yield/blocking-sync/auto. */
    unsigned known = cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax |
                     cudaDeviceSyncMemops;
    if (flags & ~known) return sim_record_error(cudaErrorInvalidValue);
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return sim_record_error(cudaErrorNoDevice);
    pthread_mutex_lock(&dev->mu);
    dev->flags = flags | cudaDeviceMapHost;
    pthread_mutex_unlock(&dev->mu);
    return cudaSuccess;
}

SIM_API cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
    if (!flags) return sim_record_error(cudaErrorInvalidValue);
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return sim_record_error(cudaErrorNoDevice);
    pthread_mutex_lock(&dev->mu);
    *flags = dev->flags | cudaDeviceMapHost;
    pthread_mutex_unlock(&dev->mu);
    return cudaSuccess;
}

SIM_API cudaError_t cudaDeviceSynchronize(void)
{
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return sim_record_error(cudaErrorNoDevice);
    sim_device_sync(dev);
    return cudaSuccess;
}

/* Frees the device's cudaMalloc memory and invalidates its streams and
 * events. Memory pools and their memory (cudaMallocAsync,
 * cudaMallocFromPoolAsync) stay, as the runtime documents ("need to be
 * destroyed explicitly"). */
SIM_API cudaError_t cudaDeviceReset(void)
{
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return sim_record_error(cudaErrorNoDevice);
    sim_device_reset(dev);
    return cudaSuccess;
}

SIM_API cudaError_t cudaDriverGetVersion(int *version)
{
    if (!version) return sim_record_error(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return cudaSuccess;
}

SIM_API cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (!version) return sim_record_error(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return cudaSuccess;
}

SIM_API cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaDeviceGetStreamPriorityRange);

SIM_API cudaError_t cudaDeviceGetPCIBusId(char *bus_id, int len, int device)
{
    if (!bus_id || len <= 0) return sim_record_error(cudaErrorInvalidValue);
    if (!sim_dev(device)) return sim_record_error(cudaErrorInvalidDevice);
    /* Bus numbers 0x18, 0x2a, ... like the GPUs of one node. */
    snprintf(bus_id, (size_t)len, "00000000:%02X:00.0", 0x18 + 0x12 * device);
    return cudaSuccess;
}

SIM_API cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
    if (!can) return sim_record_error(cudaErrorInvalidValue);
    if (!sim_dev(device) || !sim_dev(peer)) return sim_record_error(cudaErrorInvalidDevice);
    *can = device != peer;
    return cudaSuccess;
}
