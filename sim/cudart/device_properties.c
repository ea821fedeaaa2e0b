/* device_properties.c - cudaGetDeviceProperties and cudaDeviceGetAttribute:
 * what sim/core/props.c says a simulated device is, as the runtime reports
 * it. */
#include <string.h>

#include "sim.h"

SIM_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!prop) return sim_record_error(cudaErrorInvalidValue);
    if (!sim_dev(device)) return sim_record_error(cudaErrorInvalidDevice);
    sim_device_props(prop, device);
    return cudaSuccess;
}

SIM_API cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (!value) return sim_record_error(cudaErrorInvalidValue);
    if (!sim_dev(device)) return sim_record_error(cudaErrorInvalidDevice);
    if (sim_device_attribute((int)attr, device, value))
        return sim_record_error(cudaErrorInvalidValue);
    return cudaSuccess;
}
