/* args.c - the argument rules cuBLAS documents for its routines (valid
 * operations, fill modes, sides, diagonal types, leading dimensions), and the
 * end every checked call shares: an empty problem returns at once, anything
 * else is one launch on the handle's stream. Compiled into libcublas. */
#include "blas_internal.h"

int sim_blas_op_ok(cublasOperation_t op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

int sim_blas_fill_ok(cublasFillMode_t uplo)
{
    return uplo == CUBLAS_FILL_MODE_LOWER || uplo == CUBLAS_FILL_MODE_UPPER;
}

int sim_blas_side_ok(cublasSideMode_t side)
{
    return side == CUBLAS_SIDE_LEFT || side == CUBLAS_SIDE_RIGHT;
}

int sim_blas_diag_ok(cublasDiagType_t diag)
{
    return diag == CUBLAS_DIAG_NON_UNIT || diag == CUBLAS_DIAG_UNIT;
}

int sim_blas_ld_ok(int64_t ld, int64_t rows)
{
    return ld >= (rows > 1 ? rows : 1);
}

cublasStatus_t sim_blas_run(const struct cublasContext *h, int empty)
{
    if (empty) return CUBLAS_STATUS_SUCCESS;
    return sim_blas_launch(h->stream);
}
