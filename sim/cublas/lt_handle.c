/* lt_handle.c - cuBLASLt handles and what the library says about itself.
 * A cuBLASLt handle is the same object as a cuBLAS one (blas_internal.h):
 * PyTorch hands cublasLtMatmul the handle it got from cublasCreate. */
#include "blas_internal.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    if (!lightHandle) return CUBLAS_STATUS_INVALID_VALUE;
    struct cublasContext *h;
    cublasStatus_t st = sim_blas_handle_new(&h);
    if (st == CUBLAS_STATUS_SUCCESS) *lightHandle = (cublasLtHandle_t)h;
    return st;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    struct cublasContext *h = (struct cublasContext *)lightHandle;
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    sim_blas_handle_free(h);
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusName(cublasStatus_t status)
{
    return sim_blas_status_name(status);
}

const char *cublasLtGetStatusString(cublasStatus_t status)
{
    return sim_blas_status_string(status);
}

size_t cublasLtGetVersion(void)
{
    return SIM_BLAS_VERSION;
}

size_t cublasLtGetCudartVersion(void)
{
    /* The runtime this library runs on: the sim's. */
    int version = 0;
    if (cudaRuntimeGetVersion(&version) != cudaSuccess) return 0;
    return (size_t)version;
}

cublasStatus_t cublasLtGetProperty(libraryPropertyType type, int *value)
{
    return sim_blas_property(type, value);
}
