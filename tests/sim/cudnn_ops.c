/* cudnn_ops.c - a cuDNN operation is device work on the handle's stream:
 * a convolution returns at once and runs in stream order between copies
 * (an event recorded after it completes only when the stream gets there);
 * on a destroyed stream it fails with CUDNN_STATUS_EXECUTION_FAILED_CUDART.
 * Shapes are checked as cuDNN does: y must be the convolution's output
 * shape, input channels the filter's times the groups; algorithm queries
 * rank every algorithm, Find runs them; batch norm and pooling check their
 * tensors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <cudnn.h>

#include "require_device.h"

static const float one = 1.0f, zero = 0.0f;

/* x 2x3x16x16, w 8x3x3x3, pad 1, stride 1: y 2x8x16x16 (float, NCHW) */
struct conv {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
};

static void set_tensor(cudnnTensorDescriptor_t t, int n, int c, int h, int w)
{
    int dims[4] = {n, c, h, w}, strides[4] = {c * h * w, h * w, w, 1};
    assert_int_equal(cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, 4, dims, strides),
                     CUDNN_STATUS_SUCCESS);
}

static void conv_make(struct conv *cv, int y_h)
{
    assert_int_equal(cudnnCreateTensorDescriptor(&cv->x), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnCreateTensorDescriptor(&cv->y), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnCreateFilterDescriptor(&cv->w), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnCreateConvolutionDescriptor(&cv->c), CUDNN_STATUS_SUCCESS);
    set_tensor(cv->x, 2, 3, 16, 16);
    set_tensor(cv->y, 2, 8, y_h, 16);
    int wd[4] = {8, 3, 3, 3}, pad[2] = {1, 1}, stride[2] = {1, 1}, dil[2] = {1, 1};
    assert_int_equal(cudnnSetFilterNdDescriptor(cv->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, wd),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetConvolutionNdDescriptor(cv->c, 2, pad, stride, dil,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                     CUDNN_STATUS_SUCCESS);
}

static void conv_free(struct conv *cv)
{
    assert_int_equal(cudnnDestroyTensorDescriptor(cv->x), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnDestroyTensorDescriptor(cv->y), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnDestroyFilterDescriptor(cv->w), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnDestroyConvolutionDescriptor(cv->c), CUDNN_STATUS_SUCCESS);
}

#define BYTES (2 * 8 * 16 * 16 * sizeof(float))

static void test_conv_ordered_between_copies(void **state)
{
    (void)state;
    cudnnHandle_t h;
    cudaStream_t s, other;
    cudaEvent_t after_conv, after_copy;
    float *host, *a, *b, *dev;
    struct fs_gate gate = FS_GATE_INIT;
    struct conv cv;
    conv_make(&cv, 16);
    assert_int_equal(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaEventCreate(&after_conv), cudaSuccess);
    assert_int_equal(cudaEventCreate(&after_copy), cudaSuccess);
    assert_int_equal(cudaMallocHost((void **)&host, BYTES), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&a, BYTES), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&b, BYTES), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&dev, BYTES), cudaSuccess);
    for (size_t i = 0; i < BYTES / sizeof(float); i++)
        host[i] = (float)i;

    /* The stream is held by a gate: everything below only queues. */
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(a, host, BYTES, cudaMemcpyHostToDevice, s), cudaSuccess);
    assert_int_equal(cudnnSetStream(h, s), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnConvolutionForward(h, &one, cv.x, a, cv.w, dev, cv.c,
                                             CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0,
                                             &zero, cv.y, dev),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudaEventRecord(after_conv, s), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(b, a, BYTES, cudaMemcpyDeviceToDevice, s), cudaSuccess);
    assert_int_equal(cudaEventRecord(after_copy, s), cudaSuccess);

    /* The convolution waits its turn on s... */
    assert_int_equal(fs_event_poll(after_conv, 100), cudaErrorNotReady);
    /* ...while one on another stream runs now. */
    assert_int_equal(cudnnSetStream(h, other), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnConvolutionBackwardData(h, &one, cv.w, dev, cv.y, dev, cv.c,
                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, NULL, 0, &zero,
                                                  cv.x, dev),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnConvolutionBackwardFilter(h, &one, cv.x, dev, cv.y, dev, cv.c,
                                                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, NULL, 0,
                                                    &zero, cv.w, dev),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudaStreamSynchronize(other), cudaSuccess);
    assert_int_equal(cudaEventQuery(after_conv), cudaErrorNotReady);

    fs_gate_open(&gate);
    assert_int_equal(cudaEventSynchronize(after_copy), cudaSuccess);
    assert_int_equal(cudaEventQuery(after_conv), cudaSuccess);
    assert_false(gate.timed_out);
    /* The copies around the convolution moved their data. */
    memset(host, 0, BYTES);
    assert_int_equal(cudaMemcpy(host, b, BYTES, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < BYTES / sizeof(float); i++)
        assert_true(host[i] == (float)i);

    /* On a stream destroyed under the handle the work cannot be queued. */
    cudaStream_t dead;
    assert_int_equal(cudaStreamCreate(&dead), cudaSuccess);
    assert_int_equal(cudnnSetStream(h, dead), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudaStreamDestroy(dead), cudaSuccess);
    assert_int_equal(cudnnConvolutionForward(h, &one, cv.x, a, cv.w, dev, cv.c,
                                             CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, NULL, 0,
                                             &zero, cv.y, dev),
                     CUDNN_STATUS_EXECUTION_FAILED_CUDART);
    /* The runtime's last error is left alone. */
    assert_int_equal(cudaGetLastError(), cudaSuccess);

    assert_int_equal(cudnnDestroy(h), CUDNN_STATUS_SUCCESS);
    conv_free(&cv);
    assert_int_equal(cudaFree(a), cudaSuccess);
    assert_int_equal(cudaFree(b), cudaSuccess);
    assert_int_equal(cudaFree(dev), cudaSuccess);
    assert_int_equal(cudaFreeHost(host), cudaSuccess);
    assert_int_equal(cudaEventDestroy(after_conv), cudaSuccess);
    assert_int_equal(cudaEventDestroy(after_copy), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(other), cudaSuccess);
}

static void test_conv_shapes_and_algorithms(void **state)
{
    (void)state;
    cudnnHandle_t h;
    float *dev;
    struct conv bad, cv;
    assert_int_equal(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudaMalloc((void **)&dev, BYTES), cudaSuccess);
    /* y of height 15 is not the output of a padded 3x3 convolution of 16 */
    conv_make(&bad, 15);
    assert_int_equal(cudnnConvolutionForward(h, &one, bad.x, dev, bad.w, dev, bad.c,
                                             CUDNN_CONVOLUTION_FWD_ALGO_GEMM, NULL, 0, &zero, bad.y,
                                             dev),
                     CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH);
    size_t ws = 1;
    assert_int_equal(cudnnGetConvolutionForwardWorkspaceSize(h, bad.x, bad.w, bad.c, bad.y,
                                                             CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &ws),
                     CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH);
    conv_free(&bad);

    conv_make(&cv, 16);
    /* 2 groups need the input's 3 channels to be twice the filter's */
    assert_int_equal(cudnnSetConvolutionGroupCount(cv.c, 2), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnConvolutionForward(h, &one, cv.x, dev, cv.w, dev, cv.c,
                                             CUDNN_CONVOLUTION_FWD_ALGO_GEMM, NULL, 0, &zero, cv.y,
                                             dev),
                     CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH);
    assert_int_equal(cudnnSetConvolutionGroupCount(cv.c, 1), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnConvolutionForward(h, &one, cv.x, dev, cv.w, dev, cv.c,
                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, NULL, 0, &zero, cv.y,
                                             dev),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnConvolutionForward(NULL, &one, cv.x, dev, cv.w, dev, cv.c,
                                             CUDNN_CONVOLUTION_FWD_ALGO_GEMM, NULL, 0, &zero, cv.y,
                                             dev),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnGetConvolutionForwardWorkspaceSize(h, cv.x, cv.w, cv.c, cv.y,
                                                             CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &ws),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(ws, 0);

    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT + 2];
    int n = -1;
    assert_int_equal(cudnnGetConvolutionForwardAlgorithm_v7(h, cv.x, cv.w, cv.c, cv.y, 0, &n, perf),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnGetConvolutionForwardAlgorithm_v7(
                         h, cv.x, cv.w, cv.c, cv.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT + 2, &n, perf),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(n, CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
    for (int i = 0; i < n; i++)
        assert_int_equal(perf[i].status, CUDNN_STATUS_SUCCESS);
    cudnnConvolutionBwdFilterAlgoPerf_t fperf[3];
    assert_int_equal(cudnnFindConvolutionBackwardFilterAlgorithmEx(
                         h, cv.x, dev, cv.y, dev, cv.c, cv.w, dev, 3, &n, fperf, NULL, 0),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(n, 3);
    /* measured, fastest first; algorithm 0 is the non-deterministic one */
    assert_true(fperf[0].time >= 0 && fperf[0].time <= fperf[2].time);
    assert_int_equal(fperf[0].determinism, CUDNN_NON_DETERMINISTIC);
    assert_int_equal(fperf[1].determinism, CUDNN_DETERMINISTIC);
    conv_free(&cv);
    assert_int_equal(cudaFree(dev), cudaSuccess);
    assert_int_equal(cudnnDestroy(h), CUDNN_STATUS_SUCCESS);
}

static void test_batchnorm_and_pooling(void **state)
{
    (void)state;
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, param, wrong, y;
    cudnnPoolingDescriptor_t p;
    float *dev;
    assert_int_equal(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudaMalloc((void **)&dev, BYTES), cudaSuccess);
    assert_int_equal(cudnnCreateTensorDescriptor(&x), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnCreateTensorDescriptor(&param), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnCreateTensorDescriptor(&wrong), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnCreateTensorDescriptor(&y), CUDNN_STATUS_SUCCESS);
    set_tensor(x, 2, 8, 16, 16);
    set_tensor(param, 1, 8, 1, 1);
    set_tensor(wrong, 1, 4, 1, 1);
    assert_int_equal(cudnnBatchNormalizationForwardTrainingEx(
                         h, CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_OPS_BN, &one, &zero, x, dev,
                         NULL, NULL, x, dev, param, dev, dev, 0.1, dev, dev, 1e-5, dev, dev, NULL,
                         NULL, 0, NULL, 0),
                     CUDNN_STATUS_SUCCESS);
    /* the scale/bias tensor is 1xCx1x1 for the spatial mode */
    assert_int_equal(cudnnBatchNormalizationForwardTrainingEx(
                         h, CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_OPS_BN, &one, &zero, x, dev,
                         NULL, NULL, x, dev, wrong, dev, dev, 0.1, dev, dev, 1e-5, dev, dev, NULL,
                         NULL, 0, NULL, 0),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_PER_ACTIVATION,
                                                             &one, &zero, x, dev, x, dev, param,
                                                             dev, dev, dev, dev, 1e-5),
                     CUDNN_STATUS_BAD_PARAM);
    /* a fused activation needs its descriptor */
    size_t size = 1;
    assert_int_equal(
        cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
            h, CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_OPS_BN_ACTIVATION, NULL, x, &size),
        CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
                         h, CUDNN_BATCHNORM_SPATIAL, CUDNN_BATCHNORM_OPS_BN, NULL, x, &size),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(size, 0);

    assert_int_equal(cudnnCreatePoolingDescriptor(&p), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetPooling2dDescriptor(p, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 2,
                                                 2, 0, 0, 2, 2),
                     CUDNN_STATUS_SUCCESS);
    set_tensor(y, 2, 8, 8, 8);
    assert_int_equal(cudnnPoolingForward(h, p, &one, x, dev, &zero, y, dev), CUDNN_STATUS_SUCCESS);
    set_tensor(y, 2, 8, 8, 7);
    assert_int_equal(cudnnPoolingForward(h, p, &one, x, dev, &zero, y, dev),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);

    assert_int_equal(cudnnDestroyPoolingDescriptor(p), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnDestroyTensorDescriptor(x), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnDestroyTensorDescriptor(param), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnDestroyTensorDescriptor(wrong), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnDestroyTensorDescriptor(y), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudaFree(dev), cudaSuccess);
    assert_int_equal(cudnnDestroy(h), CUDNN_STATUS_SUCCESS);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_ordered_between_copies),
        cmocka_unit_test(test_conv_shapes_and_algorithms),
        cmocka_unit_test(test_batchnorm_and_pooling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
