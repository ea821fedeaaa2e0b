/* profiler.c - cudaProfilerStart and cudaProfilerStop. No profiler is ever
 * attached to the simulated device, and with none attached the runtime
 * accepts both calls and does nothing, in any order and any number of times;
 * so does the sim. */
#include <cuda_profiler_api.h>

#include "sim.h"

SIM_API cudaError_t cudaProfilerStart(void)
{
    return cudaSuccess;
}

SIM_API cudaError_t cudaProfilerStop(void)
{
    return cudaSuccess;
}
