/* status.c - what the simulated cuBLAS says about itself: its status names
 * and strings, worded as NVIDIA's libcublasLt.so.13 words them (read from the
 * library's strings), and its version (the wheel's cuBLAS, 13.4.1). Compiled
 * into both libraries; cublasGetStatusString and cublasLtGetStatusString
 * answer alike. */
#include "blas_internal.h"

const char *sim_blas_status_name(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS:
        return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
        return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
        return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
        return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "unrecognized status";
}

const char *sim_blas_status_string(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS:
        return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "the function requires an architectural feature absent from the device";
    case CUBLAS_STATUS_MAPPING_ERROR:
        return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "the function failed to launch on the GPU";
    case CUBLAS_STATUS_INTERNAL_ERROR:
        return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "the requested functionality is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR:
        return "the license check failed";
    }
    return "unrecognized status";
}

cublasStatus_t sim_blas_property(libraryPropertyType type, int *value)
{
    if (!value) return CUBLAS_STATUS_INVALID_VALUE;
    switch (type) {
    case MAJOR_VERSION:
        *value = SIM_BLAS_VER_MAJOR;
        return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION:
        *value = SIM_BLAS_VER_MINOR;
        return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL:
        *value = SIM_BLAS_VER_PATCH;
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}
