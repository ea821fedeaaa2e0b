/* solver.c - the batched factorisations and solves PyTorch's linalg calls
 * through cuBLAS (getrf, getrs, geqrf, gels): each checks its arguments as
 * cuBLAS documents, then is device work on the handle's stream that computes
 * nothing. getrs, geqrf and gels report a bad argument in the host `info`
 * too, as -(its position); 0 when all are valid. */
#include "blas_internal.h"

/* Stores the host info of a routine whose first bad argument is at
 * `bad` (0: none). */
static cublasStatus_t host_info(int *info, int bad)
{
    if (!info) return CUBLAS_STATUS_INVALID_VALUE;
    *info = -bad;
    return bad ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS;
}

/* LU of n x n matrices; pivots and info are device arrays. */
static cublasStatus_t getrf(cublasHandle_t h, int n, int lda, int batch)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (n < 0 || !sim_blas_ld_ok(lda, n) || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
    return sim_blas_run(h, n == 0 || batch == 0);
}

#define SIM_GETRF(name, T)                                                                         \
    cublasStatus_t name(cublasHandle_t handle, int n, T *const A[], int lda, int *P, int *info,    \
                        int batchSize)                                                             \
    {                                                                                              \
        (void)A, (void)P, (void)info;                                                              \
        return getrf(handle, n, lda, batchSize);                                                   \
    }
SIM_GETRF(cublasSgetrfBatched, float)
SIM_GETRF(cublasDgetrfBatched, double)
SIM_GETRF(cublasCgetrfBatched, cuComplex)
SIM_GETRF(cublasZgetrfBatched, cuDoubleComplex)

/* Solves op(A) X = B with getrf's LU; argument positions as in cuBLAS's
 * prototype (handle is 1). */
static cublasStatus_t getrs(cublasHandle_t h, cublasOperation_t trans, int n, int nrhs, int lda,
                            int ldb, int *info, int batch)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    int bad = !sim_blas_op_ok(trans)    ? 2
              : n < 0                   ? 3
              : nrhs < 0                ? 4
              : !sim_blas_ld_ok(lda, n) ? 6
              : !sim_blas_ld_ok(ldb, n) ? 9
              : batch < 0               ? 11
                                        : 0;
    cublasStatus_t st = host_info(info, bad);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    return sim_blas_run(h, n == 0 || nrhs == 0 || batch == 0);
}

#define SIM_GETRS(name, T)                                                                         \
    cublasStatus_t name(cublasHandle_t handle, cublasOperation_t trans, int n, int nrhs,           \
                        const T *const Aarray[], int lda, const int *devIpiv, T *const Barray[],   \
                        int ldb, int *info, int batchSize)                                         \
    {                                                                                              \
        (void)Aarray, (void)devIpiv, (void)Barray;                                                 \
        return getrs(handle, trans, n, nrhs, lda, ldb, info, batchSize);                           \
    }
SIM_GETRS(cublasSgetrsBatched, float)
SIM_GETRS(cublasDgetrsBatched, double)
SIM_GETRS(cublasCgetrsBatched, cuComplex)
SIM_GETRS(cublasZgetrsBatched, cuDoubleComplex)

/* QR of m x n matrices. */
static cublasStatus_t geqrf(cublasHandle_t h, int m, int n, int lda, int *info, int batch)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    int bad = m < 0 ? 2 : n < 0 ? 3 : !sim_blas_ld_ok(lda, m) ? 5 : batch < 0 ? 8 : 0;
    cublasStatus_t st = host_info(info, bad);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    return sim_blas_run(h, m == 0 || n == 0 || batch == 0);
}

#define SIM_GEQRF(name, T)                                                                         \
    cublasStatus_t name(cublasHandle_t handle, int m, int n, T *const Aarray[], int lda,           \
                        T *const TauArray[], int *info, int batchSize)                             \
    {                                                                                              \
        (void)Aarray, (void)TauArray;                                                              \
        return geqrf(handle, m, n, lda, info, batchSize);                                          \
    }
SIM_GEQRF(cublasSgeqrfBatched, float)
SIM_GEQRF(cublasDgeqrfBatched, double)
SIM_GEQRF(cublasCgeqrfBatched, cuComplex)
SIM_GEQRF(cublasZgeqrfBatched, cuDoubleComplex)

/* Least squares of overdetermined systems: cuBLAS supports only
 * trans == N and m >= n (CUBLAS_STATUS_NOT_SUPPORTED otherwise). */
static cublasStatus_t gels(cublasHandle_t h, cublasOperation_t trans, int m, int n, int nrhs,
                           int lda, int ldc, int *info, int batch)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    int bad = !sim_blas_op_ok(trans)                ? 2
              : m < 0                               ? 3
              : n < 0                               ? 4
              : nrhs < 0                            ? 5
              : !sim_blas_ld_ok(lda, m)             ? 7
              : !sim_blas_ld_ok(ldc, m > n ? m : n) ? 9
              : batch < 0                           ? 12
                                                    : 0;
    cublasStatus_t st = host_info(info, bad);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (trans != CUBLAS_OP_N || m < n) return CUBLAS_STATUS_NOT_SUPPORTED;
    return sim_blas_run(h, m == 0 || n == 0 || nrhs == 0 || batch == 0);
}

#define SIM_GELS(name, T)                                                                          \
    cublasStatus_t name(cublasHandle_t handle, cublasOperation_t trans, int m, int n, int nrhs,    \
                        T *const Aarray[], int lda, T *const Carray[], int ldc, int *info,         \
                        int *devInfoArray, int batchSize)                                          \
    {                                                                                              \
        (void)Aarray, (void)Carray, (void)devInfoArray;                                            \
        return gels(handle, trans, m, n, nrhs, lda, ldc, info, batchSize);                         \
    }
SIM_GELS(cublasSgelsBatched, float)
SIM_GELS(cublasDgelsBatched, double)
SIM_GELS(cublasCgelsBatched, cuComplex)
SIM_GELS(cublasZgelsBatched, cuDoubleComplex)
