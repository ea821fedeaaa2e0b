/* transfer.c - cublasSet/GetMatrixAsync and cublasSet/GetVectorAsync: real
 * copies between host and device memory on the given stream (the sim's
 * copies move data), as strided cudaMemcpy2DAsync copies. Arguments are
 * checked as cuBLAS documents; a copy the runtime refuses is
 * CUBLAS_STATUS_MAPPING_ERROR ("an access to GPU memory space failed"). */
#include "blas_internal.h"

#include <cuda_runtime_api.h>

static cublasStatus_t copy2d(void *dst, int64_t dpitch, const void *src, int64_t spitch,
                             int64_t width, int64_t height, enum cudaMemcpyKind kind,
                             cudaStream_t stream)
{
    if (width == 0 || height == 0) return CUBLAS_STATUS_SUCCESS;
    if (cudaMemcpy2DAsync(dst, (size_t)dpitch, src, (size_t)spitch, (size_t)width, (size_t)height,
                          kind, stream) != cudaSuccess) {
        cudaGetLastError();
        return CUBLAS_STATUS_MAPPING_ERROR;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* rows x cols elements, column-major with leading dimensions lda and ldb. */
static cublasStatus_t matrix(int rows, int cols, int elem, const void *A, int lda, void *B, int ldb,
                             enum cudaMemcpyKind kind, cudaStream_t stream)
{
    if (rows < 0 || cols < 0 || elem <= 0 || !sim_blas_ld_ok(lda, rows) ||
        !sim_blas_ld_ok(ldb, rows))
        return CUBLAS_STATUS_INVALID_VALUE;
    return copy2d(B, (int64_t)ldb * elem, A, (int64_t)lda * elem, (int64_t)rows * elem, cols, kind,
                  stream);
}

/* n elements, every incx-th of x to every incy-th of y. */
static cublasStatus_t vector(int n, int elem, const void *x, int incx, void *y, int incy,
                             enum cudaMemcpyKind kind, cudaStream_t stream)
{
    if (n < 0 || elem <= 0 || incx <= 0 || incy <= 0) return CUBLAS_STATUS_INVALID_VALUE;
    return copy2d(y, (int64_t)incy * elem, x, (int64_t)incx * elem, elem, n, kind, stream);
}

cublasStatus_t cublasSetMatrixAsync(int rows, int cols, int elemSize, const void *A, int lda,
                                    void *B, int ldb, cudaStream_t stream)
{
    return matrix(rows, cols, elemSize, A, lda, B, ldb, cudaMemcpyHostToDevice, stream);
}

cublasStatus_t cublasGetMatrixAsync(int rows, int cols, int elemSize, const void *A, int lda,
                                    void *B, int ldb, cudaStream_t stream)
{
    return matrix(rows, cols, elemSize, A, lda, B, ldb, cudaMemcpyDeviceToHost, stream);
}

cublasStatus_t cublasSetVectorAsync(int n, int elemSize, const void *hostPtr, int incx,
                                    void *devicePtr, int incy, cudaStream_t stream)
{
    return vector(n, elemSize, hostPtr, incx, devicePtr, incy, cudaMemcpyHostToDevice, stream);
}

cublasStatus_t cublasGetVectorAsync(int n, int elemSize, const void *devicePtr, int incx,
                                    void *hostPtr, int incy, cudaStream_t stream)
{
    return vector(n, elemSize, devicePtr, incx, hostPtr, incy, cudaMemcpyDeviceToHost, stream);
}
