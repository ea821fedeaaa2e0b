/* graphmem.c - the graph memory attributes of a device
 * (cudaDeviceGetGraphMemAttribute, cudaDeviceSetGraphMemAttribute): how much
 * memory graph allocation nodes hold and have held.
 *
 * The sim builds no graphs, so no graph allocation node ever holds memory:
 * all four amounts are 0, and resetting a high watermark (to 0, the only
 * value the runtime accepts) leaves it 0. Whoever adds graph memory nodes
 * must count them here. */
#include <stdint.h>

#include "internal.h"

FS_API cudaError_t cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr,
                                                  void *value)
{
    if (!fs_dev(device)) return fs_ret(cudaErrorInvalidDevice);
    if (!value) return fs_ret(cudaErrorInvalidValue);
    switch (attr) {
    case cudaGraphMemAttrUsedMemCurrent:
    case cudaGraphMemAttrUsedMemHigh:
    case cudaGraphMemAttrReservedMemCurrent:
    case cudaGraphMemAttrReservedMemHigh:
        *(uint64_t *)value = 0;
        return cudaSuccess;
    }
    return fs_ret(cudaErrorInvalidValue);
}

FS_API cudaError_t cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr,
                                                  void *value)
{
    if (!fs_dev(device)) return fs_ret(cudaErrorInvalidDevice);
    if (!value) return fs_ret(cudaErrorInvalidValue);
    if (attr != cudaGraphMemAttrUsedMemHigh && attr != cudaGraphMemAttrReservedMemHigh)
        return fs_ret(cudaErrorInvalidValue);
    if (*(const uint64_t *)value != 0) return fs_ret(cudaErrorInvalidValue);
    return cudaSuccess;
}
