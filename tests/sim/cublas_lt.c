/* cublas_lt.c - the simulated cuBLASLt: descriptors and their attributes
 * (defaults, and the size checks of set and get), the heuristic (one algo
 * whose workspace fits the preference), algo init/check/configuration, and
 * cublasLtMatmul on a cuBLAS handle (as PyTorch calls it): device work on
 * its stream behind a gate and in the legacy default stream's ordering, shapes and workspace
 * checked, a destroyed stream refused with CUBLAS_STATUS_EXECUTION_FAILED. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "require_device.h"

static void test_desc_attributes(void **state)
{
    (void)state;
    cublasLtMatmulDesc_t desc;
    int32_t v = -1;
    size_t written = 0;
    assert_int_equal(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &v,
                                                    sizeof(v), &written),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(v, CUBLAS_COMPUTE_32F);
    assert_int_equal(written, 4);
    assert_int_equal(
        cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &v, sizeof(v), NULL),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(v, CUBLAS_OP_N);
    assert_int_equal(
        cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &v, sizeof(v), NULL),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(v, CUBLASLT_EPILOGUE_DEFAULT);

    int32_t t = CUBLAS_OP_T;
    int64_t wide = CUBLAS_OP_T;
    assert_int_equal(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof(wide)),
        CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, NULL, sizeof(t)),
        CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(
        cublasLtMatmulDescSetAttribute(desc, (cublasLtMatmulDescAttributes_t)16, &t, sizeof(t)),
        CUBLAS_STATUS_INVALID_VALUE); /* no attribute 16 */
    assert_int_equal(
        cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &v, sizeof(v), NULL),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(v, CUBLAS_OP_T);

    /* Size queries, and the other sizes: a pointer, an int64, an int8. */
    written = 0;
    assert_int_equal(
        cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, NULL, 0, &written),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(written, sizeof(void *));
    assert_int_equal(
        cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, NULL, 0, NULL),
        CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide,
                                                    sizeof(wide), NULL),
                     CUBLAS_STATUS_INVALID_VALUE);
    void *bias = &v;
    assert_int_equal(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                    sizeof(bias)),
                     CUBLAS_STATUS_SUCCESS);
    void *back = NULL;
    assert_int_equal(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &back,
                                                    sizeof(back), NULL),
                     CUBLAS_STATUS_SUCCESS);
    assert_ptr_equal(back, bias);
    int8_t fast = 1;
    assert_int_equal(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &t, sizeof(t)),
        CUBLAS_STATUS_INVALID_VALUE);
    int64_t stride = 4096;
    assert_int_equal(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
                                                    &stride, sizeof(stride)),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
}

static void test_layout_and_preference(void **state)
{
    (void)state;
    cublasLtMatrixLayout_t l;
    uint64_t rows = 0;
    int32_t batch = 0;
    assert_int_equal(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, 8, 4, 16), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof(rows), NULL),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(rows, 8);
    assert_int_equal(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                      sizeof(batch), NULL),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(batch, 1);
    batch = 3;
    assert_int_equal(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                      sizeof(batch)),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &batch, sizeof(batch)),
        CUBLAS_STATUS_INVALID_VALUE); /* rows are a uint64_t */
    assert_int_equal(cublasLtMatrixLayoutDestroy(l), CUBLAS_STATUS_SUCCESS);

    cublasLtMatmulPreference_t pref;
    uint64_t max = 1;
    uint32_t align = 0;
    assert_int_equal(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatmulPreferenceGetAttribute(
                         pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max, sizeof(max), NULL),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(max, 0);
    assert_int_equal(
        cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                             &align, sizeof(align), NULL),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(align, 256);
    assert_int_equal(cublasLtMatmulPreferenceSetAttribute(
                         pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &align, sizeof(align)),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
}

/* D (8 x 4) = A (8 x 2) B (2 x 4), float, column major. */
struct problem {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulPreference_t pref;
};

static void problem_init(struct problem *p, uint64_t max_workspace)
{
    assert_int_equal(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_32F, 8, 2, 8), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_32F, 2, 4, 2), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, 8, 4, 8), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatmulPreferenceCreate(&p->pref), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatmulPreferenceSetAttribute(p->pref,
                                                          CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &max_workspace, sizeof(max_workspace)),
                     CUBLAS_STATUS_SUCCESS);
}

static void problem_fini(struct problem *p)
{
    assert_int_equal(cublasLtMatmulDescDestroy(p->desc), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatrixLayoutDestroy(p->a), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatrixLayoutDestroy(p->b), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatrixLayoutDestroy(p->c), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatmulPreferenceDestroy(p->pref), CUBLAS_STATUS_SUCCESS);
}

static void test_matmul(void **state)
{
    (void)state;
    const float one = 1.0f, zero = 0.0f;
    const uint64_t max_ws = 4u << 20;
    cublasHandle_t blas;
    cudaStream_t s, dead;
    cudaEvent_t done;
    float *m;
    void *ws;
    struct problem p;
    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cublasCreate(&blas), CUBLAS_STATUS_SUCCESS);
    cublasLtHandle_t lt = (cublasLtHandle_t)blas; /* as PyTorch does */
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaEventCreate(&done), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&m, 1024 * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMalloc(&ws, max_ws), cudaSuccess);
    problem_init(&p, max_ws);

    cublasLtMatmulHeuristicResult_t r[4];
    int count = 0;
    assert_int_equal(
        cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.c, p.c, p.pref, 4, r, &count),
        CUBLAS_STATUS_SUCCESS);
    assert_true(count >= 1);
    assert_int_equal(r[0].state, CUBLAS_STATUS_SUCCESS);
    assert_true(r[0].workspaceSize <= max_ws);
    assert_int_equal(
        cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.c, p.c, p.pref, 0, r, &count),
        CUBLAS_STATUS_INVALID_VALUE);

    /* Ordered on its stream: held behind the gate until it opens. */
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cublasLtMatmul(lt, p.desc, &one, m, p.a, m, p.b, &zero, m, p.c, m, p.c,
                                    &r[0].algo, ws, max_ws, s),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaEventRecord(done, s), cudaSuccess);
    assert_int_equal(fs_event_poll(done, 100), cudaErrorNotReady);
    fs_gate_open(&gate);
    assert_int_equal(cudaEventSynchronize(done), cudaSuccess);
    assert_false(gate.timed_out);

    /* On the legacy default stream the matmul waits for a blocking stream's
     * earlier work, and another blocking stream's later work waits for it. */
    cudaStream_t held, later;
    struct fs_gate legacy_gate = FS_GATE_INIT;
    assert_int_equal(cudaStreamCreate(&held), cudaSuccess);
    assert_int_equal(cudaStreamCreate(&later), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(held, fs_gate_wait, &legacy_gate), cudaSuccess);
    assert_int_equal(cublasLtMatmul(lt, p.desc, &one, m, p.a, m, p.b, &zero, m, p.c, m, p.c,
                                    &r[0].algo, ws, max_ws, 0),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaEventRecord(done, later), cudaSuccess);
    assert_int_equal(fs_event_poll(done, 100), cudaErrorNotReady);
    fs_gate_open(&legacy_gate);
    assert_int_equal(cudaEventSynchronize(done), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(held), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(later), cudaSuccess);

    /* The algo's workspace must be given; without an algo any will do. */
    if (r[0].workspaceSize > 0)
        assert_int_equal(cublasLtMatmul(lt, p.desc, &one, m, p.a, m, p.b, &zero, m, p.c, m, p.c,
                                        &r[0].algo, ws, r[0].workspaceSize - 1, s),
                         CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(
        cublasLtMatmul(lt, p.desc, &one, m, p.a, m, p.b, &zero, m, p.c, m, p.c, NULL, NULL, 0, s),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasLtMatmul(lt, p.desc, &one, m, p.a, m, p.b, &zero, m, p.c, m, p.c, NULL, NULL, 64, s),
        CUBLAS_STATUS_INVALID_VALUE); /* a size without a workspace */
    assert_int_equal(
        cublasLtMatmul(lt, p.desc, NULL, m, p.a, m, p.b, &zero, m, p.c, m, p.c, NULL, NULL, 0, s),
        CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(
        cublasLtMatmul(NULL, p.desc, &one, m, p.a, m, p.b, &zero, m, p.c, m, p.c, NULL, NULL, 0, s),
        CUBLAS_STATUS_NOT_INITIALIZED);

    /* Shapes that do not agree: op(A) is now 2 x 8. */
    int32_t t = CUBLAS_OP_T;
    assert_int_equal(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasLtMatmul(lt, p.desc, &one, m, p.a, m, p.b, &zero, m, p.c, m, p.c, NULL, NULL, 0, s),
        CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(
        cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.c, p.c, p.pref, 1, r, &count),
        CUBLAS_STATUS_INVALID_VALUE);
    t = CUBLAS_OP_N;
    assert_int_equal(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)),
        CUBLAS_STATUS_SUCCESS);
    /* Batch counts must agree; a leading dimension below the rows is bad. */
    int32_t batch = 2;
    assert_int_equal(cublasLtMatrixLayoutSetAttribute(p.a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &batch, sizeof(batch)),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasLtMatmul(lt, p.desc, &one, m, p.a, m, p.b, &zero, m, p.c, m, p.c, NULL, NULL, 0, s),
        CUBLAS_STATUS_INVALID_VALUE);
    batch = 1;
    assert_int_equal(cublasLtMatrixLayoutSetAttribute(p.a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &batch, sizeof(batch)),
                     CUBLAS_STATUS_SUCCESS);
    int64_t ld = 7;
    assert_int_equal(
        cublasLtMatrixLayoutSetAttribute(p.c, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof(ld)),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasLtMatmul(lt, p.desc, &one, m, p.a, m, p.b, &zero, m, p.c, m, p.c, NULL, NULL, 0, s),
        CUBLAS_STATUS_INVALID_VALUE);
    ld = 8;
    assert_int_equal(
        cublasLtMatrixLayoutSetAttribute(p.c, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof(ld)),
        CUBLAS_STATUS_SUCCESS);

    /* A destroyed stream cannot take the work. */
    assert_int_equal(cudaStreamCreate(&dead), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(dead), cudaSuccess);
    assert_int_equal(cublasLtMatmul(lt, p.desc, &one, m, p.a, m, p.b, &zero, m, p.c, m, p.c, NULL,
                                    NULL, 0, dead),
                     CUBLAS_STATUS_EXECUTION_FAILED);

    /* A preference without workspace gets an algo that needs none. */
    uint64_t none = 0;
    assert_int_equal(cublasLtMatmulPreferenceSetAttribute(
                         p.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &none, sizeof(none)),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.c, p.c, p.pref, 1, r, &count),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(r[0].workspaceSize, 0);
    assert_int_equal(cublasLtMatmul(lt, p.desc, &one, m, p.a, m, p.b, &zero, m, p.c, m, p.c,
                                    &r[0].algo, NULL, 0, s),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);

    problem_fini(&p);
    assert_int_equal(cublasDestroy(blas), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaFree(m), cudaSuccess);
    assert_int_equal(cudaFree(ws), cudaSuccess);
    assert_int_equal(cudaEventDestroy(done), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

static void test_algo(void **state)
{
    (void)state;
    cublasLtHandle_t lt;
    cublasLtMatmulAlgo_t algo, blank;
    struct problem p;
    memset(&blank, 0, sizeof(blank));
    assert_int_equal(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
    problem_init(&p, 0);
    assert_int_equal(cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                            CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 3, &algo),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F,
                                            CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 3, NULL),
                     CUBLAS_STATUS_INVALID_VALUE);
    int32_t id = -1;
    assert_int_equal(
        cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), NULL),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(id, 3);
    uint32_t tile = CUBLASLT_MATMUL_TILE_64x64;
    uint16_t inner = CUBLASLT_MATMUL_INNER_SHAPE_MMA16816;
    assert_int_equal(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID,
                                                          &tile, sizeof(tile)),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatmulAlgoConfigSetAttribute(
                         &algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner, sizeof(inner)),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtMatmulAlgoConfigSetAttribute(
                         &algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &tile, sizeof(tile)),
                     CUBLAS_STATUS_INVALID_VALUE);
    tile = 0;
    size_t written = 0;
    assert_int_equal(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID,
                                                          &tile, sizeof(tile), &written),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(tile, CUBLASLT_MATMUL_TILE_64x64);
    assert_int_equal(written, 4);

    cublasLtMatmulHeuristicResult_t r;
    assert_int_equal(cublasLtMatmulAlgoCheck(lt, p.desc, p.a, p.b, p.c, p.c, &algo, &r),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(r.state, CUBLAS_STATUS_SUCCESS);
    assert_int_equal(memcmp(&r.algo, &algo, sizeof(algo)), 0);
    /* An algo nobody initialised is refused. */
    assert_int_equal(cublasLtMatmulAlgoCheck(lt, p.desc, p.a, p.b, p.c, p.c, &blank, &r),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasLtMatmulAlgoConfigGetAttribute(&blank, CUBLASLT_ALGO_CONFIG_ID, &id,
                                                          sizeof(id), NULL),
                     CUBLAS_STATUS_INVALID_VALUE);
    problem_fini(&p);
    assert_int_equal(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_desc_attributes),
        cmocka_unit_test(test_layout_and_preference),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_algo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
