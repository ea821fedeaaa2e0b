/* pointer.c - cudaPointerGetAttributes: what the address registry
 * (sim/core/registry.c) knows of a pointer, as the runtime reports it. */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

SIM_API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr)
{
    if (!attr) return sim_record_error(cudaErrorInvalidValue);
    struct sim_range r;
    memset(attr, 0, sizeof *attr);
    if (!ptr || !sim_registry_find((uintptr_t)ptr, &r)) {
        /* Since CUDA 11 plain host memory is not an error. */
        attr->type = cudaMemoryTypeUnregistered;
        attr->device = cudaInvalidDeviceId;
        return cudaSuccess;
    }
    attr->device = r.device;
    if (r.kind == SIM_RANGE_MANAGED) {
        attr->type = cudaMemoryTypeManaged;
        attr->devicePointer = (void *)ptr;
        attr->hostPointer = (void *)ptr;
    } else if (sim_range_is_device(&r)) {
        attr->type = cudaMemoryTypeDevice;
        attr->devicePointer = (void *)ptr;
    } else {
        /* Pinned host memory is mapped into every device (UVA). */
        attr->type = cudaMemoryTypeHost;
        attr->devicePointer = (void *)ptr;
        attr->hostPointer = (void *)ptr;
    }
    return cudaSuccess;
}
