/* level3.c - the level-3 routines PyTorch calls (gemm in every flavour,
 * symm/hemm, syrk/herk, syr2k/her2k, trmm, trsm): each checks its arguments
 * as cuBLAS documents, then is one piece of device work on the handle's
 * stream that computes nothing (blas_internal.h).
 *
 * The typed variants differ only in their element type, so each family is
 * one checker and a table of its S/D/C/Z entry points; the toolkit's
 * cublas_api.h declares every one of them, so a wrong signature does not
 * compile. */
#include "blas_internal.h"

/* C = alpha op(A) op(B) + beta C, batch times: cuBLAS wants m, n, k >= 0,
 * valid operations, lda >= max(1, rows of A as stored), likewise ldb, and
 * ldc >= max(1, m), and alpha and beta given. */
static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const void *alpha, int lda, int ldb, const void *beta,
                           int ldc, int batch)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || !sim_blas_op_ok(ta) || !sim_blas_op_ok(tb) ||
        !sim_blas_ld_ok(lda, ta == CUBLAS_OP_N ? m : k) ||
        !sim_blas_ld_ok(ldb, tb == CUBLAS_OP_N ? k : n) || !sim_blas_ld_ok(ldc, m) || !alpha ||
        !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    return sim_blas_run(h, m == 0 || n == 0 || batch == 0);
}

/* The compute types of cublasComputeType_t (the Ex routines). */
static int compute_ok(cublasComputeType_t c)
{
    switch (c) {
    case CUBLAS_COMPUTE_16F:
    case CUBLAS_COMPUTE_16F_PEDANTIC:
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
    case CUBLAS_COMPUTE_64F:
    case CUBLAS_COMPUTE_64F_PEDANTIC:
    case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
    case CUBLAS_COMPUTE_32I:
    case CUBLAS_COMPUTE_32I_PEDANTIC:
        return 1;
    }
    return 0;
}

#define SIM_GEMM(name, T)                                                                          \
    cublasStatus_t name(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, \
                        int m, int n, int k, const T *alpha, const T *A, int lda, const T *B,      \
                        int ldb, const T *beta, T *C, int ldc)                                     \
    {                                                                                              \
        (void)A, (void)B, (void)C;                                                                 \
        return gemm(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, 1);               \
    }
SIM_GEMM(cublasSgemm_v2, float)
SIM_GEMM(cublasDgemm_v2, double)
SIM_GEMM(cublasCgemm_v2, cuComplex)
SIM_GEMM(cublasZgemm_v2, cuDoubleComplex)

#define SIM_GEMM_BATCHED(name, T)                                                                  \
    cublasStatus_t name(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, \
                        int m, int n, int k, const T *alpha, const T *const Aarray[], int lda,     \
                        const T *const Barray[], int ldb, const T *beta, T *const Carray[],        \
                        int ldc, int batchCount)                                                   \
    {                                                                                              \
        (void)Aarray, (void)Barray, (void)Carray;                                                  \
        return gemm(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, batchCount);      \
    }
SIM_GEMM_BATCHED(cublasSgemmBatched, float)
SIM_GEMM_BATCHED(cublasDgemmBatched, double)
SIM_GEMM_BATCHED(cublasCgemmBatched, cuComplex)
SIM_GEMM_BATCHED(cublasZgemmBatched, cuDoubleComplex)

#define SIM_GEMM_STRIDED(name, T)                                                                  \
    cublasStatus_t name(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, \
                        int m, int n, int k, const T *alpha, const T *A, int lda,                  \
                        long long int strideA, const T *B, int ldb, long long int strideB,         \
                        const T *beta, T *C, int ldc, long long int strideC, int batchCount)       \
    {                                                                                              \
        (void)A, (void)B, (void)C, (void)strideA, (void)strideB, (void)strideC;                    \
        return gemm(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, batchCount);      \
    }
SIM_GEMM_STRIDED(cublasSgemmStridedBatched, float)
SIM_GEMM_STRIDED(cublasDgemmStridedBatched, double)
SIM_GEMM_STRIDED(cublasCgemmStridedBatched, cuComplex)
SIM_GEMM_STRIDED(cublasZgemmStridedBatched, cuDoubleComplex)

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo)
{
    (void)A, (void)B, (void)C, (void)Atype, (void)Btype, (void)Ctype, (void)algo;
    if (sim_blas_handle_ok(handle) && !compute_ok(computeType)) return CUBLAS_STATUS_INVALID_VALUE;
    return gemm(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, 1);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long int strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    (void)A, (void)B, (void)C, (void)Atype, (void)Btype, (void)Ctype, (void)algo;
    (void)strideA, (void)strideB, (void)strideC;
    if (sim_blas_handle_ok(handle) && !compute_ok(computeType)) return CUBLAS_STATUS_INVALID_VALUE;
    return gemm(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, batchCount);
}

cublasStatus_t cublasSgemmEx(cublasHandle_t handle, cublasOperation_t transa,
                             cublasOperation_t transb, int m, int n, int k, const float *alpha,
                             const void *A, cudaDataType Atype, int lda, const void *B,
                             cudaDataType Btype, int ldb, const float *beta, void *C,
                             cudaDataType Ctype, int ldc)
{
    (void)A, (void)B, (void)C, (void)Atype, (void)Btype, (void)Ctype;
    return gemm(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, 1);
}

/* symm/hemm: A is m x m on the left, n x n on the right; B and C are m x n. */
static cublasStatus_t symm(cublasHandle_t h, cublasSideMode_t side, cublasFillMode_t uplo, int m,
                           int n, int lda, int ldb, int ldc)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || !sim_blas_side_ok(side) || !sim_blas_fill_ok(uplo) ||
        !sim_blas_ld_ok(lda, side == CUBLAS_SIDE_LEFT ? m : n) || !sim_blas_ld_ok(ldb, m) ||
        !sim_blas_ld_ok(ldc, m))
        return CUBLAS_STATUS_INVALID_VALUE;
    return sim_blas_run(h, m == 0 || n == 0);
}

#define SIM_SYMM(name, T)                                                                          \
    cublasStatus_t name(cublasHandle_t handle, cublasSideMode_t side, cublasFillMode_t uplo,       \
                        int m, int n, const T *alpha, const T *A, int lda, const T *B, int ldb,    \
                        const T *beta, T *C, int ldc)                                              \
    {                                                                                              \
        (void)alpha, (void)A, (void)B, (void)beta, (void)C;                                        \
        return symm(handle, side, uplo, m, n, lda, ldb, ldc);                                      \
    }
SIM_SYMM(cublasSsymm_v2, float)
SIM_SYMM(cublasDsymm_v2, double)
SIM_SYMM(cublasCsymm_v2, cuComplex)
SIM_SYMM(cublasZsymm_v2, cuDoubleComplex)
SIM_SYMM(cublasChemm_v2, cuComplex)
SIM_SYMM(cublasZhemm_v2, cuDoubleComplex)

/* syrk/herk (no B) and syr2k/her2k (with B): C is n x n, op(A) and op(B)
 * n x k. */
static cublasStatus_t syrk(cublasHandle_t h, cublasFillMode_t uplo, cublasOperation_t trans, int n,
                           int k, int lda, int has_b, int ldb, int ldc)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    int64_t rows = trans == CUBLAS_OP_N ? n : k;
    if (n < 0 || k < 0 || !sim_blas_fill_ok(uplo) || !sim_blas_op_ok(trans) ||
        !sim_blas_ld_ok(lda, rows) || (has_b && !sim_blas_ld_ok(ldb, rows)) ||
        !sim_blas_ld_ok(ldc, n))
        return CUBLAS_STATUS_INVALID_VALUE;
    return sim_blas_run(h, n == 0);
}

#define SIM_SYRK(name, T, S)                                                                       \
    cublasStatus_t name(cublasHandle_t handle, cublasFillMode_t uplo, cublasOperation_t trans,     \
                        int n, int k, const S *alpha, const T *A, int lda, const S *beta, T *C,    \
                        int ldc)                                                                   \
    {                                                                                              \
        (void)alpha, (void)A, (void)beta, (void)C;                                                 \
        return syrk(handle, uplo, trans, n, k, lda, 0, 0, ldc);                                    \
    }
SIM_SYRK(cublasSsyrk_v2, float, float)
SIM_SYRK(cublasDsyrk_v2, double, double)
SIM_SYRK(cublasCsyrk_v2, cuComplex, cuComplex)
SIM_SYRK(cublasZsyrk_v2, cuDoubleComplex, cuDoubleComplex)
SIM_SYRK(cublasCherk_v2, cuComplex, float)
SIM_SYRK(cublasZherk_v2, cuDoubleComplex, double)

#define SIM_SYR2K(name, T, S)                                                                      \
    cublasStatus_t name(cublasHandle_t handle, cublasFillMode_t uplo, cublasOperation_t trans,     \
                        int n, int k, const T *alpha, const T *A, int lda, const T *B, int ldb,    \
                        const S *beta, T *C, int ldc)                                              \
    {                                                                                              \
        (void)alpha, (void)A, (void)B, (void)beta, (void)C;                                        \
        return syrk(handle, uplo, trans, n, k, lda, 1, ldb, ldc);                                  \
    }
SIM_SYR2K(cublasSsyr2k_v2, float, float)
SIM_SYR2K(cublasDsyr2k_v2, double, double)
SIM_SYR2K(cublasCsyr2k_v2, cuComplex, cuComplex)
SIM_SYR2K(cublasZsyr2k_v2, cuDoubleComplex, cuDoubleComplex)
SIM_SYR2K(cublasCher2k_v2, cuComplex, float)
SIM_SYR2K(cublasZher2k_v2, cuDoubleComplex, double)

/* trmm/trsm: A is m x m on the left, n x n on the right, triangular; B (and
 * trmm's C) m x n. */
static cublasStatus_t trsm(cublasHandle_t h, cublasSideMode_t side, cublasFillMode_t uplo,
                           cublasOperation_t trans, cublasDiagType_t diag, int m, int n,
                           const void *alpha, int lda, int ldb, int ldc, int batch)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || batch < 0 || !sim_blas_side_ok(side) || !sim_blas_fill_ok(uplo) ||
        !sim_blas_op_ok(trans) || !sim_blas_diag_ok(diag) ||
        !sim_blas_ld_ok(lda, side == CUBLAS_SIDE_LEFT ? m : n) || !sim_blas_ld_ok(ldb, m) ||
        !sim_blas_ld_ok(ldc, m) || !alpha)
        return CUBLAS_STATUS_INVALID_VALUE;
    return sim_blas_run(h, m == 0 || n == 0 || batch == 0);
}

#define SIM_TRMM(name, T)                                                                          \
    cublasStatus_t name(cublasHandle_t handle, cublasSideMode_t side, cublasFillMode_t uplo,       \
                        cublasOperation_t trans, cublasDiagType_t diag, int m, int n,              \
                        const T *alpha, const T *A, int lda, const T *B, int ldb, T *C, int ldc)   \
    {                                                                                              \
        (void)A, (void)B, (void)C;                                                                 \
        return trsm(handle, side, uplo, trans, diag, m, n, alpha, lda, ldb, ldc, 1);               \
    }
SIM_TRMM(cublasStrmm_v2, float)
SIM_TRMM(cublasDtrmm_v2, double)
SIM_TRMM(cublasCtrmm_v2, cuComplex)
SIM_TRMM(cublasZtrmm_v2, cuDoubleComplex)

/* trsm solves in place: B is also the result, so ldc is ldb. */
#define SIM_TRSM(name, T)                                                                          \
    cublasStatus_t name(cublasHandle_t handle, cublasSideMode_t side, cublasFillMode_t uplo,       \
                        cublasOperation_t trans, cublasDiagType_t diag, int m, int n,              \
                        const T *alpha, const T *A, int lda, T *B, int ldb)                        \
    {                                                                                              \
        (void)A, (void)B;                                                                          \
        return trsm(handle, side, uplo, trans, diag, m, n, alpha, lda, ldb, ldb, 1);               \
    }
SIM_TRSM(cublasStrsm_v2, float)
SIM_TRSM(cublasDtrsm_v2, double)
SIM_TRSM(cublasCtrsm_v2, cuComplex)
SIM_TRSM(cublasZtrsm_v2, cuDoubleComplex)

#define SIM_TRSM_BATCHED(name, T)                                                                  \
    cublasStatus_t name(cublasHandle_t handle, cublasSideMode_t side, cublasFillMode_t uplo,       \
                        cublasOperation_t trans, cublasDiagType_t diag, int m, int n,              \
                        const T *alpha, const T *const A[], int lda, T *const B[], int ldb,        \
                        int batchCount)                                                            \
    {                                                                                              \
        (void)A, (void)B;                                                                          \
        return trsm(handle, side, uplo, trans, diag, m, n, alpha, lda, ldb, ldb, batchCount);      \
    }
SIM_TRSM_BATCHED(cublasStrsmBatched, float)
SIM_TRSM_BATCHED(cublasDtrsmBatched, double)
SIM_TRSM_BATCHED(cublasCtrsmBatched, cuComplex)
SIM_TRSM_BATCHED(cublasZtrsmBatched, cuDoubleComplex)
