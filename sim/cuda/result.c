/* result.c - the driver's code for a status the device model answered
 * with (sim_cu_result): every file of the driver that runs the model's work
 * reports through it, so it stands apart from them, below context.c and
 * memory.c alike. */
#include "driver_internal.h"

/* Since CUDA 10.1 most runtime codes have the driver's numbers
 * (cudaErrorInvalidResourceHandle is CUDA_ERROR_INVALID_HANDLE, 400;
 * cudaErrorStreamCaptureUnsupported is CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
 * 900); those are passed on. The runtime's own codes below 100, which the
 * driver has not, become what the driver answers for the same mistake. */
CUresult sim_cu_result(cudaError_t err)
{
    const char *known;
    switch (err) {
    case cudaSuccess:
        return CUDA_SUCCESS;
    case cudaErrorMemoryAllocation:
        return CUDA_ERROR_OUT_OF_MEMORY;
    case cudaErrorInitializationError:
        return CUDA_ERROR_NOT_INITIALIZED;
    case cudaErrorInvalidDeviceFunction: /* a function the driver does not know */
        return CUDA_ERROR_INVALID_HANDLE;
    case cudaErrorInvalidSymbol: /* a global a module does not have */
        return CUDA_ERROR_NOT_FOUND;
    default:
        if (err >= 100 && sim_cu_get_error_name((CUresult)err, &known) == CUDA_SUCCESS)
            return (CUresult)err;
        return CUDA_ERROR_INVALID_VALUE; /* configuration, pitch, direction, value */
    }
}
