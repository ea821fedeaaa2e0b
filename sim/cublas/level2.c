/* level2.c - the level-2 routines PyTorch calls (gemv, ger, symv/hemv,
 * syr/her, syr2/her2, trmv, trsv): each checks its arguments as cuBLAS
 * documents (sizes >= 0, increments != 0, leading dimensions), then is one
 * piece of device work on the handle's stream that computes nothing. As in
 * level3.c, a family is one checker and a table of its typed entry points. */
#include "blas_internal.h"

/* y = alpha op(A) x + beta y; A is m x n. */
static cublasStatus_t gemv(cublasHandle_t h, cublasOperation_t trans, int m, int n, int lda,
                           int incx, int incy)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || !sim_blas_op_ok(trans) || !sim_blas_ld_ok(lda, m) || incx == 0 ||
        incy == 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    return sim_blas_run(h, m == 0 || n == 0);
}

#define SIM_GEMV(name, T)                                                                          \
    cublasStatus_t name(cublasHandle_t handle, cublasOperation_t trans, int m, int n,              \
                        const T *alpha, const T *A, int lda, const T *x, int incx, const T *beta,  \
                        T *y, int incy)                                                            \
    {                                                                                              \
        (void)alpha, (void)A, (void)x, (void)beta, (void)y;                                        \
        return gemv(handle, trans, m, n, lda, incx, incy);                                         \
    }
SIM_GEMV(cublasSgemv_v2, float)
SIM_GEMV(cublasDgemv_v2, double)
SIM_GEMV(cublasCgemv_v2, cuComplex)
SIM_GEMV(cublasZgemv_v2, cuDoubleComplex)

/* A += alpha x y^T (or y^H); A is m x n. */
static cublasStatus_t ger(cublasHandle_t h, int m, int n, int incx, int incy, int lda)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || incx == 0 || incy == 0 || !sim_blas_ld_ok(lda, m))
        return CUBLAS_STATUS_INVALID_VALUE;
    return sim_blas_run(h, m == 0 || n == 0);
}

#define SIM_GER(name, T)                                                                           \
    cublasStatus_t name(cublasHandle_t handle, int m, int n, const T *alpha, const T *x, int incx, \
                        const T *y, int incy, T *A, int lda)                                       \
    {                                                                                              \
        (void)alpha, (void)x, (void)y, (void)A;                                                    \
        return ger(handle, m, n, incx, incy, lda);                                                 \
    }
SIM_GER(cublasSger_v2, float)
SIM_GER(cublasDger_v2, double)
SIM_GER(cublasCgeru_v2, cuComplex)
SIM_GER(cublasCgerc_v2, cuComplex)
SIM_GER(cublasZgeru_v2, cuDoubleComplex)
SIM_GER(cublasZgerc_v2, cuDoubleComplex)

/* The symmetric, Hermitian and triangular ones: A is n x n, x and y are
 * vectors of n. */
static cublasStatus_t symv(cublasHandle_t h, cublasFillMode_t uplo, int n, int lda, int incx,
                           int incy)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (n < 0 || !sim_blas_fill_ok(uplo) || !sim_blas_ld_ok(lda, n) || incx == 0 || incy == 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    return sim_blas_run(h, n == 0);
}

#define SIM_SYMV(name, T)                                                                          \
    cublasStatus_t name(cublasHandle_t handle, cublasFillMode_t uplo, int n, const T *alpha,       \
                        const T *A, int lda, const T *x, int incx, const T *beta, T *y, int incy)  \
    {                                                                                              \
        (void)alpha, (void)A, (void)x, (void)beta, (void)y;                                        \
        return symv(handle, uplo, n, lda, incx, incy);                                             \
    }
SIM_SYMV(cublasSsymv_v2, float)
SIM_SYMV(cublasDsymv_v2, double)
SIM_SYMV(cublasCsymv_v2, cuComplex)
SIM_SYMV(cublasZsymv_v2, cuDoubleComplex)
SIM_SYMV(cublasChemv_v2, cuComplex)
SIM_SYMV(cublasZhemv_v2, cuDoubleComplex)

/* syr/her take one vector: its increment stands in for the absent y's. */
#define SIM_SYR(name, T, S)                                                                        \
    cublasStatus_t name(cublasHandle_t handle, cublasFillMode_t uplo, int n, const S *alpha,       \
                        const T *x, int incx, T *A, int lda)                                       \
    {                                                                                              \
        (void)alpha, (void)x, (void)A;                                                             \
        return symv(handle, uplo, n, lda, incx, incx);                                             \
    }
SIM_SYR(cublasSsyr_v2, float, float)
SIM_SYR(cublasDsyr_v2, double, double)
SIM_SYR(cublasCsyr_v2, cuComplex, cuComplex)
SIM_SYR(cublasZsyr_v2, cuDoubleComplex, cuDoubleComplex)
SIM_SYR(cublasCher_v2, cuComplex, float)
SIM_SYR(cublasZher_v2, cuDoubleComplex, double)

#define SIM_SYR2(name, T)                                                                          \
    cublasStatus_t name(cublasHandle_t handle, cublasFillMode_t uplo, int n, const T *alpha,       \
                        const T *x, int incx, const T *y, int incy, T *A, int lda)                 \
    {                                                                                              \
        (void)alpha, (void)x, (void)y, (void)A;                                                    \
        return symv(handle, uplo, n, lda, incx, incy);                                             \
    }
SIM_SYR2(cublasSsyr2_v2, float)
SIM_SYR2(cublasDsyr2_v2, double)
SIM_SYR2(cublasCsyr2_v2, cuComplex)
SIM_SYR2(cublasZsyr2_v2, cuDoubleComplex)
SIM_SYR2(cublasCher2_v2, cuComplex)
SIM_SYR2(cublasZher2_v2, cuDoubleComplex)

/* x = op(A) x, or the solve of op(A) y = x into x. */
static cublasStatus_t trmv(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t trans,
                           cublasDiagType_t diag, int n, int lda, int incx)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!sim_blas_op_ok(trans) || !sim_blas_diag_ok(diag)) return CUBLAS_STATUS_INVALID_VALUE;
    return symv(h, uplo, n, lda, incx, incx);
}

#define SIM_TRMV(name, T)                                                                          \
    cublasStatus_t name(cublasHandle_t handle, cublasFillMode_t uplo, cublasOperation_t trans,     \
                        cublasDiagType_t diag, int n, const T *A, int lda, T *x, int incx)         \
    {                                                                                              \
        (void)A, (void)x;                                                                          \
        return trmv(handle, uplo, trans, diag, n, lda, incx);                                      \
    }
SIM_TRMV(cublasStrmv_v2, float)
SIM_TRMV(cublasDtrmv_v2, double)
SIM_TRMV(cublasCtrmv_v2, cuComplex)
SIM_TRMV(cublasZtrmv_v2, cuDoubleComplex)
SIM_TRMV(cublasStrsv_v2, float)
SIM_TRMV(cublasDtrsv_v2, double)
SIM_TRMV(cublasCtrsv_v2, cuComplex)
SIM_TRMV(cublasZtrsv_v2, cuDoubleComplex)
