/* blas_handle.c - cuBLAS handles: create and destroy, and what each handle holds
 * (stream, pointer mode, math mode, atomics mode, SM count target, the
 * workspace from cublasSetWorkspace), the version queries and the status
 * strings. Every entry point answers CUBLAS_STATUS_NOT_INITIALIZED for a
 * handle that cublasCreate did not make, as cuBLAS does for NULL. */
#include "blas_internal.h"

#include <cuda_runtime_api.h>

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
    return sim_blas_handle_new(handle);
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    sim_blas_handle_free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetVersion_v2(cublasHandle_t handle, int *version)
{
    (void)handle; /* the version is the library's, any handle will do */
    /* Documented: "the provided storage for library version number is not
     * initialized (NULL)". */
    if (!version) return CUBLAS_STATUS_NOT_INITIALIZED;
    *version = SIM_BLAS_VERSION;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    return sim_blas_property(type, value);
}

size_t cublasGetCudartVersion(void)
{
    /* The runtime this library runs on: the sim's. */
    int version = 0;
    if (cudaRuntimeGetVersion(&version) != cudaSuccess) return 0;
    return (size_t)version;
}

const char *cublasGetStatusName(cublasStatus_t status)
{
    return sim_blas_status_name(status);
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    return sim_blas_status_string(status);
}

/* Setting the stream also drops a workspace set by cublasSetWorkspace, as
 * documented ("unconditionally resets the cuBLAS library workspace back to
 * the default workspace pool"). The stream is not checked here: cuBLAS
 * finds a bad one when it launches (CUBLAS_STATUS_EXECUTION_FAILED). */
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = streamId;
    handle->workspace = NULL;
    handle->workspace_size = 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *streamId)
{
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!streamId) return CUBLAS_STATUS_INVALID_VALUE;
    *streamId = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

/* The workspace must be aligned to 256 bytes; a NULL workspace or a size of
 * 0 means "use no workspace" (cuBLAS documents both). */
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
                                     size_t workspaceSizeInBytes)
{
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((uintptr_t)workspace % 256 != 0) return CUBLAS_STATUS_INVALID_VALUE;
    handle->workspace = workspaceSizeInBytes ? workspace : NULL;
    handle->workspace_size = workspace ? workspaceSizeInBytes : 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode)
{
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t *mode)
{
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->pointer_mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode)
{
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_ATOMICS_NOT_ALLOWED && mode != CUBLAS_ATOMICS_ALLOWED)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->atomics_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t *mode)
{
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->atomics_mode;
    return CUBLAS_STATUS_SUCCESS;
}

/* One of the modes of cublasMath_t, optionally with the flag
 * CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION. */
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    switch ((int)mode & ~(int)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) {
    case CUBLAS_DEFAULT_MATH:
    case CUBLAS_TENSOR_OP_MATH:
    case CUBLAS_PEDANTIC_MATH:
    case CUBLAS_TF32_TENSOR_OP_MATH:
    case CUBLAS_FP32_EMULATED_BF16X9_MATH:
    case CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH:
        handle->math_mode = mode;
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode) return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->math_mode;
    return CUBLAS_STATUS_SUCCESS;
}

/* 0 means "as many SMs as the device has"; beyond the device's count is
 * out of range. */
cublasStatus_t cublasSetSmCountTarget(cublasHandle_t handle, int smCountTarget)
{
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    int sms;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, handle->device) !=
        cudaSuccess) {
        cudaGetLastError();
        return CUBLAS_STATUS_INTERNAL_ERROR;
    }
    if (smCountTarget < 0 || smCountTarget > sms) return CUBLAS_STATUS_INVALID_VALUE;
    handle->sm_count_target = smCountTarget;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetSmCountTarget(cublasHandle_t handle, int *smCountTarget)
{
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!smCountTarget) return CUBLAS_STATUS_INVALID_VALUE;
    *smCountTarget = handle->sm_count_target;
    return CUBLAS_STATUS_SUCCESS;
}
