/* error_handling.c - the runtime's error entry points: the thread's last
 * error (cudaGetLastError, cudaPeekAtLastError) and each code's name and
 * message (cudaGetErrorName, cudaGetErrorString), from sim/core/errors.c. */
#include <stddef.h>

#include "sim.h"

SIM_API cudaError_t cudaGetLastError(void)
{
    cudaError_t err = sim_err_hold();
    sim_err_put(cudaSuccess);
    return err;
}

SIM_API cudaError_t cudaPeekAtLastError(void)
{
    return sim_err_hold();
}

SIM_API const char *cudaGetErrorName(cudaError_t err)
{
    const char *name = sim_error_name(err);
    return name ? name : "unrecognized error code";
}

SIM_API const char *cudaGetErrorString(cudaError_t err)
{
    const char *text = sim_error_text(err);
    return text ? text : "unrecognized error code";
}
