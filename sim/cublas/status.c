/* status.c - what the simulated cuBLAS says about itself: its status names
 * and strings, worded as NVIDIA's libcublasLt.so.13 words them (read from the
 * library's strings), and its version (the wheel's cuBLAS, 13.4.1). Compiled
 * into both libraries; cublasGetStatusString and cublasLtGetStatusString
 * answer alike. */
#include "blas_internal.h"

/* Every status the library answers with: its name, and its string. */
#define STATUS(s, text)                                                                            \
    {                                                                                              \
        s, #s, text                                                                                \
    }
static const struct {
    cublasStatus_t status;
    const char *name, *text;
} statuses[] = {
    STATUS(CUBLAS_STATUS_SUCCESS, "success"),
    STATUS(CUBLAS_STATUS_NOT_INITIALIZED, "the library was not initialized"),
    STATUS(CUBLAS_STATUS_ALLOC_FAILED, "the resource allocation failed"),
    STATUS(CUBLAS_STATUS_INVALID_VALUE,
           "an unsupported value or parameter was passed to the function"),
    STATUS(CUBLAS_STATUS_ARCH_MISMATCH,
           "the function requires an architectural feature absent from the device"),
    STATUS(CUBLAS_STATUS_MAPPING_ERROR, "an access to GPU memory space failed"),
    STATUS(CUBLAS_STATUS_EXECUTION_FAILED, "the function failed to launch on the GPU"),
    STATUS(CUBLAS_STATUS_INTERNAL_ERROR, "an internal operation failed"),
    STATUS(CUBLAS_STATUS_NOT_SUPPORTED, "the requested functionality is not supported"),
    STATUS(CUBLAS_STATUS_LICENSE_ERROR, "the license check failed"),
};
#undef STATUS

const char *sim_blas_status_name(cublasStatus_t status)
{
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        if (statuses[i].status == status) return statuses[i].name;
    return "unrecognized status";
}

const char *sim_blas_status_string(cublasStatus_t status)
{
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        if (statuses[i].status == status) return statuses[i].text;
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
