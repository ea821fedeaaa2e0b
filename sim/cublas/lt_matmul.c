/* lt_matmul.c - cublasLtMatmul and its algorithms: the heuristic, algo
 * init, check and configuration attributes. A matmul checks its descriptors
 * as cuBLASLt does (op(A) m x k, op(B) k x n, C and D m x n, leading
 * dimensions, batch counts, the algo's workspace against the one given),
 * then is device work on the given stream, ordered like a copy, that
 * computes nothing (blas_internal.h).
 *
 * The sim has one algorithm. Its algo descriptor (cublasLtMatmulAlgo_t, 64
 * bytes the caller owns) holds a mark that it was initialised, its
 * configuration attributes and the workspace it needs: the heuristic asks
 * for SIM_LT_WORKSPACE bytes, or the preference's maximum if smaller, so
 * the workspace a caller passes to cublasLtMatmul is checked as on a GPU. */
#include "blas_internal.h"
#include "lt_internal.h"

#include <string.h>

#define SIM_LT_ALGO_MAGIC 0x616c676fu /* "algo" */
#define SIM_LT_WORKSPACE  (1u << 20)
#define SIM_LT_CONFIGS    (CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID + 1)

struct sim_lt_algo {
    uint32_t magic;
    uint32_t config[SIM_LT_CONFIGS]; /* each attribute's bytes, at the slot's start */
    uint64_t workspace;
};
_Static_assert(sizeof(struct sim_lt_algo) <= sizeof(cublasLtMatmulAlgo_t),
               "the algo must fit in the caller's descriptor");

static const uint8_t config_sizes[SIM_LT_CONFIGS] = {
    [CUBLASLT_ALGO_CONFIG_ID] = 4,
    [CUBLASLT_ALGO_CONFIG_TILE_ID] = 4,
    [CUBLASLT_ALGO_CONFIG_SPLITK_NUM] = 4,
    [CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME] = 4,
    [CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING] = 4,
    [CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION] = 4,
    [CUBLASLT_ALGO_CONFIG_STAGES_ID] = 4,
    [CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID] = 2,
    [CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID] = 2,
};

static struct cublasContext *handle_of(cublasLtHandle_t h)
{
    return (struct cublasContext *)h;
}

static void algo_init(cublasLtMatmulAlgo_t *algo, int id, uint64_t workspace)
{
    struct sim_lt_algo a = {.magic = SIM_LT_ALGO_MAGIC, .workspace = workspace};
    int32_t one = 1;
    memcpy(&a.config[CUBLASLT_ALGO_CONFIG_ID], &id, sizeof(id));
    memcpy(&a.config[CUBLASLT_ALGO_CONFIG_SPLITK_NUM], &one, sizeof(one));
    memset(algo, 0, sizeof(*algo));
    memcpy(algo, &a, sizeof(a));
}

/* 1 and *out for an algo that cublasLtMatmulAlgoInit or the heuristic
 * filled in. */
static int algo_read(const cublasLtMatmulAlgo_t *algo, struct sim_lt_algo *out)
{
    if (!algo) return 0;
    memcpy(out, algo, sizeof(*out));
    return out->magic == SIM_LT_ALGO_MAGIC;
}

static int ld_ok(cublasLtMatrixLayout_t l)
{
    int64_t rows = sim_lt_layout_int(l, CUBLASLT_MATRIX_LAYOUT_ROWS);
    int64_t cols = sim_lt_layout_int(l, CUBLASLT_MATRIX_LAYOUT_COLS);
    int64_t ld = sim_lt_layout_int(l, CUBLASLT_MATRIX_LAYOUT_LD);
    switch (sim_lt_layout_int(l, CUBLASLT_MATRIX_LAYOUT_ORDER)) {
    case CUBLASLT_ORDER_COL:
        return ld >= (rows > 1 ? rows : 1);
    case CUBLASLT_ORDER_ROW:
        return ld >= (cols > 1 ? cols : 1);
    default: /* the tiled orders define their own leading dimension */
        return ld >= 0;
    }
}

/* D = alpha op(A) op(B) + beta C: the shapes must agree. *empty when there
 * is nothing to compute. */
static cublasStatus_t problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t A,
                              cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C,
                              cublasLtMatrixLayout_t D, int *empty)
{
    if (!desc || !A || !B || !C || !D) return CUBLAS_STATUS_INVALID_VALUE;
    int64_t ta = sim_lt_desc_int(desc, CUBLASLT_MATMUL_DESC_TRANSA);
    int64_t tb = sim_lt_desc_int(desc, CUBLASLT_MATMUL_DESC_TRANSB);
    if (!sim_lt_op_ok(ta) || !sim_lt_op_ok(tb)) return CUBLAS_STATUS_INVALID_VALUE;
    int64_t a_rows = sim_lt_layout_int(A, CUBLASLT_MATRIX_LAYOUT_ROWS);
    int64_t a_cols = sim_lt_layout_int(A, CUBLASLT_MATRIX_LAYOUT_COLS);
    int64_t b_rows = sim_lt_layout_int(B, CUBLASLT_MATRIX_LAYOUT_ROWS);
    int64_t b_cols = sim_lt_layout_int(B, CUBLASLT_MATRIX_LAYOUT_COLS);
    int64_t m = ta == CUBLAS_OP_N ? a_rows : a_cols, k = ta == CUBLAS_OP_N ? a_cols : a_rows;
    int64_t kb = tb == CUBLAS_OP_N ? b_rows : b_cols, n = tb == CUBLAS_OP_N ? b_cols : b_rows;
    cublasLtMatrixLayout_t outs[2] = {C, D};
    for (int i = 0; i < 2; i++)
        if (sim_lt_layout_int(outs[i], CUBLASLT_MATRIX_LAYOUT_ROWS) != m ||
            sim_lt_layout_int(outs[i], CUBLASLT_MATRIX_LAYOUT_COLS) != n)
            return CUBLAS_STATUS_INVALID_VALUE;
    if (k != kb || m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatrixLayout_t all[4] = {A, B, C, D};
    int64_t batch = sim_lt_layout_int(D, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
    for (int i = 0; i < 4; i++)
        if (!ld_ok(all[i]) ||
            sim_lt_layout_int(all[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) != batch)
            return CUBLAS_STATUS_INVALID_VALUE;
    if (batch < 1) return CUBLAS_STATUS_INVALID_VALUE;
    *empty = m == 0 || n == 0;
    return CUBLAS_STATUS_SUCCESS;
}

static void result_fill(cublasLtMatmulHeuristicResult_t *r, const cublasLtMatmulAlgo_t *algo,
                        uint64_t workspace)
{
    memset(r, 0, sizeof(*r));
    if (algo != &r->algo) r->algo = *algo;
    r->workspaceSize = workspace;
    r->state = CUBLAS_STATUS_SUCCESS;
    r->wavesCount = 1.0f;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount)
{
    if (!sim_blas_handle_ok(handle_of(lightHandle))) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount || !preference)
        return CUBLAS_STATUS_INVALID_VALUE;
    int empty;
    cublasStatus_t st = problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &empty);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    uint64_t max = sim_lt_pref_max_workspace(preference);
    uint64_t workspace = max < SIM_LT_WORKSPACE ? max : SIM_LT_WORKSPACE;
    cublasLtMatmulAlgo_t algo;
    algo_init(&algo, 0, workspace);
    result_fill(&heuristicResultsArray[0], &algo, workspace);
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

/* Algo ids the sim recognises: its one algorithm, 0, by any id cuBLASLt
 * could return from cublasLtMatmulAlgoGetIds (which it does not call). */
cublasStatus_t cublasLtMatmulAlgoInit(cublasLtHandle_t lightHandle, cublasComputeType_t computeType,
                                      cudaDataType_t scaleType, cudaDataType_t Atype,
                                      cudaDataType_t Btype, cudaDataType_t Ctype,
                                      cudaDataType_t Dtype, int algoId, cublasLtMatmulAlgo_t *algo)
{
    (void)computeType, (void)scaleType, (void)Atype, (void)Btype, (void)Ctype, (void)Dtype;
    if (!sim_blas_handle_ok(handle_of(lightHandle))) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!algo || algoId < 0) return CUBLAS_STATUS_INVALID_VALUE;
    algo_init(algo, algoId, SIM_LT_WORKSPACE);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t lightHandle,
                                       cublasLtMatmulDesc_t operationDesc,
                                       cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                       cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                       const cublasLtMatmulAlgo_t *algo,
                                       cublasLtMatmulHeuristicResult_t *result)
{
    if (!sim_blas_handle_ok(handle_of(lightHandle))) return CUBLAS_STATUS_NOT_INITIALIZED;
    struct sim_lt_algo a;
    if (!result || !algo_read(algo, &a)) return CUBLAS_STATUS_INVALID_VALUE;
    int empty;
    cublasStatus_t st = problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &empty);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    result_fill(result, algo, a.workspace);
    return CUBLAS_STATUS_SUCCESS;
}

static size_t config_size(int attr)
{
    return attr >= 0 && attr < SIM_LT_CONFIGS ? config_sizes[attr] : 0;
}

cublasStatus_t cublasLtMatmulAlgoConfigSetAttribute(cublasLtMatmulAlgo_t *algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes)
{
    struct sim_lt_algo a;
    size_t size = config_size(attr);
    if (!algo_read(algo, &a) || !size || !buf || sizeInBytes != size)
        return CUBLAS_STATUS_INVALID_VALUE;
    a.config[attr] = 0;
    memcpy(&a.config[attr], buf, size);
    memcpy(algo, &a, sizeof(a));
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t *algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    void *buf, size_t sizeInBytes,
                                                    size_t *sizeWritten)
{
    struct sim_lt_algo a;
    size_t size = config_size(attr);
    if (!algo_read(algo, &a) || !size) return CUBLAS_STATUS_INVALID_VALUE;
    if (sizeInBytes == 0) {
        if (!sizeWritten) return CUBLAS_STATUS_INVALID_VALUE;
        *sizeWritten = size;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || sizeInBytes != size) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(buf, &a.config[attr], size);
    if (sizeWritten) *sizeWritten = size;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)
{
    (void)A, (void)B, (void)C, (void)D;
    if (!sim_blas_handle_ok(handle_of(lightHandle))) return CUBLAS_STATUS_NOT_INITIALIZED;
    int empty;
    cublasStatus_t st = problem(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &empty);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!alpha || !beta || (workspaceSizeInBytes && !workspace)) return CUBLAS_STATUS_INVALID_VALUE;
    /* Without an algo cuBLASLt picks one that fits the workspace given. */
    struct sim_lt_algo a;
    if (algo && (!algo_read(algo, &a) || a.workspace > workspaceSizeInBytes))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (empty) return CUBLAS_STATUS_SUCCESS;
    return sim_blas_launch(stream);
}
