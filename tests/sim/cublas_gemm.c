/* cublas_gemm.c - a cuBLAS call is device work on the handle's stream:
 * it returns at once, runs in stream order between copies (an event
 * recorded after it completes only when the stream gets there) and not on
 * another stream; on a destroyed stream it fails with
 * CUBLAS_STATUS_EXECUTION_FAILED, unless the problem is empty (cuBLAS then
 * launches nothing). Arguments are checked as cuBLAS documents
 * (CUBLAS_STATUS_INVALID_VALUE for negative sizes, a bad operation, short
 * leading dimensions, ...); host-mode results wait for the stream;
 * cublasSet/GetMatrixAsync move real data on their stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <cublas_v2.h>

#include "require_device.h"

#define N 64

static const float one = 1.0f, zero = 0.0f;

static void test_gemm_ordered_between_copies(void **state)
{
    (void)state;
    cublasHandle_t h;
    cudaStream_t s, other;
    cudaEvent_t after_gemm, after_copy;
    float *host, *a, *b, *c;
    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaEventCreate(&after_gemm), cudaSuccess);
    assert_int_equal(cudaEventCreate(&after_copy), cudaSuccess);
    assert_int_equal(cudaMallocHost((void **)&host, N * N * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&a, N * N * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&b, N * N * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&c, N * N * sizeof(float)), cudaSuccess);
    for (int i = 0; i < N * N; i++)
        host[i] = (float)i;

    /* The stream is held by a gate: everything below only queues. */
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(a, host, N * N * sizeof(float), cudaMemcpyHostToDevice, s),
                     cudaSuccess);
    assert_int_equal(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, a, N, a, N, &zero, c, N),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaEventRecord(after_gemm, s), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(b, a, N * N * sizeof(float), cudaMemcpyDeviceToDevice, s),
                     cudaSuccess);
    assert_int_equal(cudaEventRecord(after_copy, s), cudaSuccess);

    /* The GEMM waits its turn on s... */
    assert_int_equal(fs_event_poll(after_gemm, 100), cudaErrorNotReady);
    assert_int_equal(cudaStreamQuery(s), cudaErrorNotReady);
    /* ...while one on another stream runs now. */
    assert_int_equal(cublasSetStream(h, other), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, N, N, &one, b, N, b, N, &zero, c, N),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaStreamSynchronize(other), cudaSuccess);
    assert_int_equal(cudaEventQuery(after_gemm), cudaErrorNotReady);

    fs_gate_open(&gate);
    assert_int_equal(cudaEventSynchronize(after_copy), cudaSuccess);
    assert_int_equal(cudaEventQuery(after_gemm), cudaSuccess);
    assert_false(gate.timed_out);
    float ms = -1;
    assert_int_equal(cudaEventElapsedTime(&ms, after_gemm, after_copy), cudaSuccess);
    assert_true(ms >= 0);
    /* The copies around the GEMM moved their data. */
    memset(host, 0, N * N * sizeof(float));
    assert_int_equal(cudaMemcpy(host, b, N * N * sizeof(float), cudaMemcpyDeviceToHost),
                     cudaSuccess);
    for (int i = 0; i < N * N; i++)
        assert_true(host[i] == (float)i);

    assert_int_equal(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaFree(a), cudaSuccess);
    assert_int_equal(cudaFree(b), cudaSuccess);
    assert_int_equal(cudaFree(c), cudaSuccess);
    assert_int_equal(cudaFreeHost(host), cudaSuccess);
    assert_int_equal(cudaEventDestroy(after_gemm), cudaSuccess);
    assert_int_equal(cudaEventDestroy(after_copy), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(other), cudaSuccess);
}

/* Work that computes nothing is still seen by its place in the stream: on
 * the legacy default stream a GEMM waits for earlier work of a blocking
 * stream, and later work of another blocking stream waits for the GEMM. With
 * no GEMM in between the second stream would not wait at all. */
static void test_gemm_on_legacy_stream(void **state)
{
    (void)state;
    cublasHandle_t h;
    cudaStream_t held, later;
    cudaEvent_t ev;
    float *c;
    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaStreamCreate(&held), cudaSuccess);
    assert_int_equal(cudaStreamCreate(&later), cudaSuccess);
    assert_int_equal(cudaEventCreate(&ev), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&c, N * N * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);

    assert_int_equal(cudaLaunchHostFunc(held, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, c, N, c, N, &zero, c, N),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaEventRecord(ev, later), cudaSuccess);
    assert_int_equal(fs_event_poll(ev, 100), cudaErrorNotReady);
    fs_gate_open(&gate);
    assert_int_equal(cudaEventSynchronize(ev), cudaSuccess);
    assert_false(gate.timed_out);

    assert_int_equal(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaFree(c), cudaSuccess);
    assert_int_equal(cudaEventDestroy(ev), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(held), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(later), cudaSuccess);
}

static void test_destroyed_stream(void **state)
{
    (void)state;
    cublasHandle_t h;
    cudaStream_t dead;
    float *c;
    assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaMalloc((void **)&c, N * N * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaStreamCreate(&dead), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(dead), cudaSuccess);
    assert_int_equal(cublasSetStream(h, dead), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, c, N, c, N, &zero, c, N),
        CUBLAS_STATUS_EXECUTION_FAILED);
    assert_int_equal(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, c, CUDA_R_32F, N, c,
                                  CUDA_R_32F, N, &zero, c, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT),
                     CUBLAS_STATUS_EXECUTION_FAILED);
    /* An empty problem launches nothing, so it cannot fail to launch. */
    assert_int_equal(
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 0, N, N, &one, c, N, c, N, &zero, c, N),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSaxpy(h, 0, &one, c, 1, c, 1), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSaxpy(h, N, &one, c, 1, c, 1), CUBLAS_STATUS_EXECUTION_FAILED);
    /* The runtime's last error is left alone. */
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    /* The default streams by their names are streams too. */
    const cudaStream_t named[] = {0, cudaStreamLegacy, cudaStreamPerThread};
    for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
        assert_int_equal(cublasSetStream(h, named[i]), CUBLAS_STATUS_SUCCESS);
        assert_int_equal(
            cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, c, N, c, N, &zero, c, N),
            CUBLAS_STATUS_SUCCESS);
        assert_int_equal(cudaStreamSynchronize(named[i]), cudaSuccess);
    }
    assert_int_equal(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaFree(c), cudaSuccess);
}

/* One bad argument per row; everything else valid (m = 8, n = 4, k = 2). */
static void test_gemm_arguments(void **state)
{
    (void)state;
    cublasHandle_t h;
    float *d;
    assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaMalloc((void **)&d, 1024 * sizeof(float)), cudaSuccess);
    const cublasOperation_t n = CUBLAS_OP_N, t = CUBLAS_OP_T;
    struct {
        cublasOperation_t ta, tb;
        int m, n, k, lda, ldb, ldc;
        const float *alpha;
        cublasStatus_t want;
    } rows[] = {
        {n, n, 8, 4, 2, 8, 2, 8, &one, CUBLAS_STATUS_SUCCESS},
        {t, t, 8, 4, 2, 2, 4, 8, &one, CUBLAS_STATUS_SUCCESS},
        {n, n, -1, 4, 2, 8, 2, 8, &one, CUBLAS_STATUS_INVALID_VALUE},
        {n, n, 8, -1, 2, 8, 2, 8, &one, CUBLAS_STATUS_INVALID_VALUE},
        {n, n, 8, 4, -1, 8, 2, 8, &one, CUBLAS_STATUS_INVALID_VALUE},
        {(cublasOperation_t)7, n, 8, 4, 2, 8, 2, 8, &one, CUBLAS_STATUS_INVALID_VALUE},
        {n, (cublasOperation_t)-1, 8, 4, 2, 8, 2, 8, &one, CUBLAS_STATUS_INVALID_VALUE},
        {n, n, 8, 4, 2, 7, 2, 8, &one, CUBLAS_STATUS_INVALID_VALUE}, /* lda < m */
        {t, n, 8, 4, 2, 1, 2, 8, &one, CUBLAS_STATUS_INVALID_VALUE}, /* lda < k */
        {n, n, 8, 4, 2, 8, 1, 8, &one, CUBLAS_STATUS_INVALID_VALUE}, /* ldb < k */
        {n, t, 8, 4, 2, 8, 3, 8, &one, CUBLAS_STATUS_INVALID_VALUE}, /* ldb < n */
        {n, n, 8, 4, 2, 8, 2, 7, &one, CUBLAS_STATUS_INVALID_VALUE}, /* ldc < m */
        {n, n, 8, 4, 2, 8, 2, 8, NULL, CUBLAS_STATUS_INVALID_VALUE}, /* alpha */
        {n, n, 0, 4, 2, 0, 2, 0, &one, CUBLAS_STATUS_INVALID_VALUE}, /* ld >= 1 even for m = 0 */
        {n, n, 0, 4, 2, 1, 2, 1, &one, CUBLAS_STATUS_SUCCESS},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        cublasStatus_t got =
            cublasSgemm(h, rows[i].ta, rows[i].tb, rows[i].m, rows[i].n, rows[i].k, rows[i].alpha,
                        d, rows[i].lda, d, rows[i].ldb, &zero, d, rows[i].ldc);
        if (got != rows[i].want) fail_msg("row %zu: status %d, want %d", i, got, rows[i].want);
        got = cublasSgemmStridedBatched(h, rows[i].ta, rows[i].tb, rows[i].m, rows[i].n, rows[i].k,
                                        rows[i].alpha, d, rows[i].lda, 0, d, rows[i].ldb, 0, &zero,
                                        d, rows[i].ldc, 0, 3);
        if (got != rows[i].want) fail_msg("strided row %zu: status %d", i, got);
    }
    assert_int_equal(cublasSgemm(h, n, n, 8, 4, 2, &one, d, 8, d, 2, NULL, d, 8),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(
        cublasSgemmStridedBatched(h, n, n, 8, 4, 2, &one, d, 8, 16, d, 2, 8, &zero, d, 8, 32, -1),
        CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasGemmEx(h, n, n, 8, 4, 2, &one, d, CUDA_R_16BF, 8, d, CUDA_R_16BF, 2,
                                  &zero, d, CUDA_R_16BF, 8, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT_TENSOR_OP),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasGemmEx(h, n, n, 8, 4, 2, &one, d, CUDA_R_16BF, 8, d, CUDA_R_16BF, 2,
                                  &zero, d, CUDA_R_16BF, 8, (cublasComputeType_t)1234,
                                  CUBLAS_GEMM_DEFAULT),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSgemm(NULL, n, n, 8, 4, 2, &one, d, 8, d, 2, &zero, d, 8),
                     CUBLAS_STATUS_NOT_INITIALIZED);
    assert_int_equal(cublasGemmEx(NULL, n, n, 8, 4, 2, &one, d, CUDA_R_32F, 8, d, CUDA_R_32F, 2,
                                  &zero, d, CUDA_R_32F, 8, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     CUBLAS_STATUS_NOT_INITIALIZED);

    /* The other families' documented rules, one each. */
    assert_int_equal(cublasSgemv(h, n, 8, 4, &one, d, 7, d, 1, &zero, d, 1),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSgemv(h, n, 8, 4, &one, d, 8, d, 0, &zero, d, 1),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSgemv(h, n, 8, 4, &one, d, 8, d, 1, &zero, d, 1), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasStrsm(h, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, n,
                                 CUBLAS_DIAG_NON_UNIT, 8, 4, &one, d, 3, d, 8),
                     CUBLAS_STATUS_INVALID_VALUE); /* lda < n on the right */
    assert_int_equal(cublasStrsm(h, CUBLAS_SIDE_RIGHT, (cublasFillMode_t)CUBLAS_FILL_MODE_FULL, n,
                                 CUBLAS_DIAG_NON_UNIT, 8, 4, &one, d, 4, d, 8),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasStrsm(h, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, n,
                                 CUBLAS_DIAG_NON_UNIT, 8, 4, &one, d, 4, d, 8),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSsyrk(h, CUBLAS_FILL_MODE_UPPER, t, 8, 2, &one, d, 1, &zero, d, 8),
                     CUBLAS_STATUS_INVALID_VALUE); /* lda < k when transposed */
    int info = 5;
    float *arr[1] = {d};
    assert_int_equal(
        cublasSgetrsBatched(h, n, 4, 1, (const float *const *)arr, 3, NULL, arr, 4, &info, 1),
        CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(info, -6);
    assert_int_equal(
        cublasSgetrsBatched(h, n, 4, 1, (const float *const *)arr, 4, NULL, arr, 4, &info, 1),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(info, 0);
    assert_int_equal(cublasSgelsBatched(h, n, 2, 4, 1, arr, 2, arr, 4, &info, NULL, 1),
                     CUBLAS_STATUS_NOT_SUPPORTED); /* m < n */
    assert_int_equal(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaFree(d), cudaSuccess);
}

static void *open_later(void *gate)
{
    fs_test_sleep_ms(150);
    fs_gate_open(gate);
    return NULL;
}

/* A host-mode result is there when the call returns, so the call waits for
 * the stream (and the sim stores 0: it computes nothing); a device-mode one
 * is written by the stream's work. */
static void test_host_result_waits(void **state)
{
    (void)state;
    cublasHandle_t h;
    cudaStream_t s;
    float *x, result = 42.0f;
    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&x, N * sizeof(float)), cudaSuccess);
    assert_int_equal(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    double start = fs_test_now();
    pthread_t opener;
    assert_int_equal(pthread_create(&opener, NULL, open_later, &gate), 0);
    assert_int_equal(cublasSnrm2(h, N, x, 1, &result), CUBLAS_STATUS_SUCCESS);
    assert_true(fs_test_now() - start >= 0.1);
    assert_true(result == 0.0f);
    assert_int_equal(pthread_join(opener, NULL), 0);
    assert_int_equal(cublasSnrm2(h, N, x, 1, NULL), CUBLAS_STATUS_INVALID_VALUE);

    assert_int_equal(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSdot(h, N, x, 1, x, 1, x), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaFree(x), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

/* Set/GetMatrixAsync copy a sub-matrix between leading dimensions. */
static void test_matrix_transfer(void **state)
{
    (void)state;
    double src[6 * 3], back[4 * 3] = {0};
    double *dev;
    cudaStream_t s;
    for (int i = 0; i < 6 * 3; i++)
        src[i] = i;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&dev, 5 * 3 * sizeof(double)), cudaSuccess);
    /* 4 x 3 out of a 6-row host matrix into a 5-row device one. */
    assert_int_equal(cublasSetMatrixAsync(4, 3, sizeof(double), src, 6, dev, 5, s),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasGetMatrixAsync(4, 3, sizeof(double), dev, 5, back, 4, s),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    for (int col = 0; col < 3; col++)
        for (int row = 0; row < 4; row++)
            assert_true(back[col * 4 + row] == src[col * 6 + row]);
    /* A strided vector: the first row, every 5th element of the device. */
    double v[3] = {0};
    assert_int_equal(cublasGetVectorAsync(3, sizeof(double), dev, 5, v, 1, s),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_true(v[0] == src[0] && v[1] == src[6] && v[2] == src[12]);
    assert_int_equal(cublasSetMatrixAsync(4, 3, sizeof(double), src, 3, dev, 5, s),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSetMatrixAsync(4, 3, 0, src, 6, dev, 5, s), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSetVectorAsync(4, sizeof(double), src, 0, dev, 1, s),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cudaFree(dev), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

/* A GEMM on a capturing stream is recorded as a kernel node, not run, and
 * the graph replays it; a copy captured after it follows it in the graph. */
static void test_gemm_captured(void **state)
{
    (void)state;
    cublasHandle_t h;
    cudaStream_t s;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t nodes[4];
    enum cudaGraphNodeType type;
    size_t n = 4;
    float *a, *c;
    assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&a, N * N * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&c, N * N * sizeof(float)), cudaSuccess);
    assert_int_equal(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, a, N, a, N, &zero, c, N),
        CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaMemcpyAsync(a, c, N * sizeof(float), cudaMemcpyDeviceToDevice, s),
                     cudaSuccess);
    assert_int_equal(cudaStreamEndCapture(s, &graph), cudaSuccess);
    assert_int_equal(cudaGraphGetNodes(graph, nodes, &n), cudaSuccess);
    assert_int_equal(n, 2);
    assert_int_equal(cudaGraphNodeGetType(nodes[0], &type), cudaSuccess);
    assert_int_equal(type, cudaGraphNodeTypeKernel);
    assert_int_equal(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(graph), cudaSuccess);
    assert_int_equal(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaFree(a), cudaSuccess);
    assert_int_equal(cudaFree(c), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_ordered_between_copies),
        cmocka_unit_test(test_gemm_on_legacy_stream),
        cmocka_unit_test(test_destroyed_stream),
        cmocka_unit_test(test_gemm_arguments),
        cmocka_unit_test(test_host_result_waits),
        cmocka_unit_test(test_matrix_transfer),
        cmocka_unit_test(test_gemm_captured),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
