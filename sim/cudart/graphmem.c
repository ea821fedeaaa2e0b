/* graphmem.c - the graph memory of a device: the attributes
 * (cudaDeviceGetGraphMemAttribute, cudaDeviceSetGraphMemAttribute) and
 * cudaDeviceGraphMemTrim.
 *
 * What a stream capture allocates comes from the device's graph memory
 * (sim/core/mempool.c), in whole chunks of 32 MiB like a pool's. A chunk is charged
 * to the device, and mapped for the graph, when a graph that needs it is
 * first launched, and stays so after the graph is gone until
 * cudaDeviceGraphMemTrim (or an allocation for a launch that would
 * otherwise fail) gives back the chunks no block is in. So the amounts are
 * whole chunks, and "used", the memory mapped by at least one graph (CUDA
 * Programming Guide, "Physical Memory Footprint"), is every chunk charged,
 * as "reserved" is: the graph's destruction unmaps nothing. An H100
 * (driver 580) answered reserved 32 MiB, used 32 MiB after a launch of a
 * graph that allocates and frees 1 MiB, and an H200 (driver 580, run 7)
 * the same after that graph was destroyed, 0 and 0 after
 * cudaDeviceGraphMemTrim (docs/sim.md, "Stream capture and graphs"). */
#include <stdint.h>

#include "sim.h"

SIM_API cudaError_t cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr,
                                                   void *value)
{
    struct sim_device *dev = sim_dev(device);
    if (!dev) return sim_record_error(cudaErrorInvalidDevice);
    if (!value) return sim_record_error(cudaErrorInvalidValue);
    uint64_t reserved, used, reserved_high, used_high;
    sim_graph_mempool_amounts(dev->graph_mempool, &reserved, &used, &reserved_high, &used_high);
    switch (attr) {
    case cudaGraphMemAttrUsedMemCurrent:
        *(uint64_t *)value = used;
        return cudaSuccess;
    case cudaGraphMemAttrUsedMemHigh:
        *(uint64_t *)value = used_high;
        return cudaSuccess;
    case cudaGraphMemAttrReservedMemCurrent:
        *(uint64_t *)value = reserved;
        return cudaSuccess;
    case cudaGraphMemAttrReservedMemHigh:
        *(uint64_t *)value = reserved_high;
        return cudaSuccess;
    }
    return sim_record_error(cudaErrorInvalidValue);
}

/* Only the high-water marks can be set, and only to 0, which resets each
 * to the current amount. */
SIM_API cudaError_t cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr,
                                                   void *value)
{
    struct sim_device *dev = sim_dev(device);
    if (!dev) return sim_record_error(cudaErrorInvalidDevice);
    if (!value) return sim_record_error(cudaErrorInvalidValue);
    if (attr != cudaGraphMemAttrUsedMemHigh && attr != cudaGraphMemAttrReservedMemHigh)
        return sim_record_error(cudaErrorInvalidValue);
    if (*(const uint64_t *)value != 0) return sim_record_error(cudaErrorInvalidValue);
    sim_graph_mempool_reset_high(dev->graph_mempool, attr == cudaGraphMemAttrReservedMemHigh);
    return cudaSuccess;
}

/* Gives back the chunks that hold no block of a live graph. */
SIM_API cudaError_t cudaDeviceGraphMemTrim(int device)
{
    struct sim_device *dev = sim_dev(device);
    if (!dev) return sim_record_error(cudaErrorInvalidDevice);
    sim_graph_mempool_trim(dev->graph_mempool);
    return cudaSuccess;
}
