/* cudnn_handle.c - the simulated cuDNN's handle, streams, versions, status
 * strings and last error message, and its legacy descriptors: each setter
 * checks its arguments as cuDNN documents (CUDNN_STATUS_BAD_PARAM for
 * non-positive dimensions, invalid enumerants, ...; NOT_SUPPORTED for ranks
 * outside [3, 8]) and each getter answers what was set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <cudnn.h>

#include "require_device.h"

static void test_versions(void **state)
{
    (void)state;
    /* PyTorch 2.15.0 is built against cuDNN 9.26.0 and refuses an older minor */
    assert_int_equal(cudnnGetVersion(), 92600);
    int v = -1;
    assert_int_equal(cudnnGetProperty(MAJOR_VERSION, &v), CUDNN_STATUS_SUCCESS);
    assert_int_equal(v, 9);
    assert_int_equal(cudnnGetProperty(MINOR_VERSION, &v), CUDNN_STATUS_SUCCESS);
    assert_int_equal(v, 26);
    assert_int_equal(cudnnGetProperty(PATCH_LEVEL, &v), CUDNN_STATUS_SUCCESS);
    assert_int_equal(v, 0);
    assert_int_equal(cudnnGetProperty(MAJOR_VERSION, NULL), CUDNN_STATUS_BAD_PARAM);
    int rt = 0;
    assert_int_equal(cudaRuntimeGetVersion(&rt), cudaSuccess);
    assert_int_equal(cudnnGetCudartVersion(), (size_t)rt);
}

static void test_errors(void **state)
{
    (void)state;
    assert_string_equal(cudnnGetErrorString(CUDNN_STATUS_SUCCESS), "CUDNN_STATUS_SUCCESS");
    assert_string_equal(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM");
    assert_string_equal(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED_SHAPE),
                        "CUDNN_STATUS_NOT_SUPPORTED_SHAPE");
    assert_string_equal(cudnnGetErrorString((cudnnStatus_t)12345), "CUDNN_UNKNOWN_STATUS_FOUND");
    /* a failing call leaves its message, read once */
    char msg[256] = "";
    cudnnGetLastErrorString(msg, sizeof(msg));
    assert_int_equal(cudnnDestroy(NULL), CUDNN_STATUS_BAD_PARAM);
    cudnnGetLastErrorString(msg, sizeof(msg));
    assert_non_null(strstr(msg, "cudnnDestroy"));
    assert_non_null(strstr(msg, "CUDNN_STATUS_BAD_PARAM"));
    cudnnGetLastErrorString(msg, sizeof(msg));
    assert_string_equal(msg, "");
}

static void test_handle_and_stream(void **state)
{
    (void)state;
    cudnnHandle_t h;
    cudaStream_t s, got = (cudaStream_t)1;
    assert_int_equal(cudnnCreate(NULL), CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnGetStream(h, &got), CUDNN_STATUS_SUCCESS);
    assert_null(got); /* the legacy default stream until one is set */
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudnnSetStream(h, s), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnGetStream(h, &got), CUDNN_STATUS_SUCCESS);
    assert_ptr_equal(got, s);
    assert_int_equal(cudnnGetStream(h, NULL), CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnSetStream(NULL, s), CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnSetStream(h, cudaStreamPerThread), CUDNN_STATUS_SUCCESS);
    /* a stream the runtime does not know (destroyed) does not map to the
     * handle's device: CUDNN_STATUS_MAPPING_ERROR, now named TEXTURE_CREATION */
    cudaStream_t dead;
    assert_int_equal(cudaStreamCreate(&dead), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(dead), cudaSuccess);
    assert_int_equal(cudnnSetStream(h, dead), CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED);
    assert_int_equal(cudnnDestroy(h), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

static void test_tensor_descriptor(void **state)
{
    (void)state;
    cudnnTensorDescriptor_t t;
    assert_int_equal(cudnnCreateTensorDescriptor(&t), CUDNN_STATUS_SUCCESS);
    int dims[4] = {2, 3, 8, 8}, strides[4] = {192, 64, 8, 1};
    assert_int_equal(cudnnSetTensorNdDescriptor(t, CUDNN_DATA_HALF, 4, dims, strides),
                     CUDNN_STATUS_SUCCESS);
    cudnnDataType_t type;
    int nb = 0, d[4] = {0}, s[4] = {0};
    assert_int_equal(cudnnGetTensorNdDescriptor(t, 4, &type, &nb, d, s), CUDNN_STATUS_SUCCESS);
    assert_int_equal(type, CUDNN_DATA_HALF);
    assert_int_equal(nb, 4);
    assert_memory_equal(d, dims, sizeof(dims));
    assert_memory_equal(s, strides, sizeof(strides));
    /* fewer requested: the rank is still reported, only 2 entries written */
    int d2[4] = {-1, -1, -1, -1}, s2[4] = {-1, -1, -1, -1};
    assert_int_equal(cudnnGetTensorNdDescriptor(t, 2, &type, &nb, d2, s2), CUDNN_STATUS_SUCCESS);
    assert_int_equal(nb, 4);
    assert_int_equal(d2[1], 3);
    assert_int_equal(d2[2], -1);

    int zero[4] = {2, 0, 8, 8};
    assert_int_equal(cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, 4, zero, strides),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnSetTensorNdDescriptor(t, (cudnnDataType_t)99, 4, dims, strides),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, 2, dims, strides),
                     CUDNN_STATUS_NOT_SUPPORTED);
    assert_int_equal(cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, 9, dims, strides),
                     CUDNN_STATUS_NOT_SUPPORTED);
    /* a failed setter leaves the descriptor as it was */
    assert_int_equal(cudnnGetTensorNdDescriptor(t, 4, &type, &nb, d, s), CUDNN_STATUS_SUCCESS);
    assert_int_equal(type, CUDNN_DATA_HALF);
    assert_int_equal(cudnnDestroyTensorDescriptor(t), CUDNN_STATUS_SUCCESS);

    /* an unset descriptor answers nothing */
    assert_int_equal(cudnnCreateTensorDescriptor(&t), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnGetTensorNdDescriptor(t, 4, &type, &nb, d, s), CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnDestroyTensorDescriptor(t), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnCreateTensorDescriptor(NULL), CUDNN_STATUS_BAD_PARAM);
}

static void test_filter_and_convolution(void **state)
{
    (void)state;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
    assert_int_equal(cudnnCreateFilterDescriptor(&w), CUDNN_STATUS_SUCCESS);
    int wd[4] = {16, 3, 3, 3};
    assert_int_equal(cudnnSetFilterNdDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, wd),
                     CUDNN_STATUS_SUCCESS);
    cudnnDataType_t type;
    cudnnTensorFormat_t format;
    int nb, got[4];
    assert_int_equal(cudnnGetFilterNdDescriptor(w, 4, &type, &format, &nb, got),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(format, CUDNN_TENSOR_NCHW);
    assert_int_equal(nb, 4);
    assert_memory_equal(got, wd, sizeof(wd));
    assert_int_equal(cudnnSetFilterNdDescriptor(w, CUDNN_DATA_FLOAT, (cudnnTensorFormat_t)7, 4, wd),
                     CUDNN_STATUS_BAD_PARAM);

    assert_int_equal(cudnnCreateConvolutionDescriptor(&c), CUDNN_STATUS_SUCCESS);
    int pad[2] = {1, 1}, stride[2] = {1, 1}, dil[2] = {1, 1}, bad[2] = {1, 0}, neg[2] = {-1, 0};
    assert_int_equal(cudnnSetConvolutionNdDescriptor(c, 2, pad, stride, dil,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetConvolutionNdDescriptor(c, 2, pad, bad, dil, CUDNN_CROSS_CORRELATION,
                                                     CUDNN_DATA_FLOAT),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnSetConvolutionNdDescriptor(c, 2, neg, stride, dil,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnSetConvolutionNdDescriptor(c, 2, pad, stride, dil,
                                                     (cudnnConvolutionMode_t)5, CUDNN_DATA_FLOAT),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnSetConvolutionGroupCount(c, 0), CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnSetConvolutionGroupCount(c, 1), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetConvolutionMathType(c, CUDNN_TENSOR_OP_MATH), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetConvolutionMathType(c, (cudnnMathType_t)42), CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnDestroyConvolutionDescriptor(c), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnDestroyFilterDescriptor(w), CUDNN_STATUS_SUCCESS);
}

static void test_other_descriptors(void **state)
{
    (void)state;
    cudnnHandle_t h;
    assert_int_equal(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);

    cudnnActivationDescriptor_t a;
    assert_int_equal(cudnnCreateActivationDescriptor(&a), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetActivationDescriptor(a, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(
        cudnnSetActivationDescriptor(a, CUDNN_ACTIVATION_RELU, (cudnnNanPropagation_t)3, 0),
        CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnDestroyActivationDescriptor(a), CUDNN_STATUS_SUCCESS);

    cudnnPoolingDescriptor_t p;
    assert_int_equal(cudnnCreatePoolingDescriptor(&p), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetPooling2dDescriptor(p, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 2,
                                                 2, 0, 0, 2, 2),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetPooling2dDescriptor(p, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 0,
                                                 2, 0, 0, 2, 2),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnDestroyPoolingDescriptor(p), CUDNN_STATUS_SUCCESS);

    /* dropout: the states must be at least cudnnDropoutGetStatesSize */
    cudnnDropoutDescriptor_t d;
    size_t size = 0;
    void *states;
    assert_int_equal(cudnnDropoutGetStatesSize(h, &size), CUDNN_STATUS_SUCCESS);
    assert_true(size > 0);
    assert_int_equal(cudaMalloc(&states, size), cudaSuccess);
    assert_int_equal(cudnnCreateDropoutDescriptor(&d), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetDropoutDescriptor(d, h, 0.5f, states, size - 1, 1),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnSetDropoutDescriptor(d, h, 1.5f, states, size, 1),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnSetDropoutDescriptor(d, h, 0.5f, states, size, 1), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnRestoreDropoutDescriptor(d, h, 0.5f, states, size, 1),
                     CUDNN_STATUS_SUCCESS);

    /* RNN: an LSTM, 2 layers, input 10, hidden 20, bidirectional, float */
    cudnnRNNDescriptor_t r;
    assert_int_equal(cudnnCreateRNNDescriptor(&r), CUDNN_STATUS_SUCCESS);
    assert_int_equal(
        cudnnSetRNNDescriptor_v8(r, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
                                 CUDNN_BIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
                                 CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, 10, 20, 20, 2, d, 0),
        CUDNN_STATUS_SUCCESS);
    /* a projection is an LSTM's only, and no larger than the hidden size */
    assert_int_equal(
        cudnnSetRNNDescriptor_v8(r, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
                                 CUDNN_BIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
                                 CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, 10, 20, 21, 2, d, 0),
        CUDNN_STATUS_BAD_PARAM);
    /* projSize 0 is no projection (PyTorch's LSTM without one, its GRU);
     * every algorithm below CUDNN_RNN_ALGO_COUNT is one */
    assert_int_equal(cudnnSetRNNDescriptor_v8(
                         r, CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H, CUDNN_GRU, CUDNN_RNN_DOUBLE_BIAS,
                         CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
                         CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, 10, 20, 0, 1, d, 0),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(
        cudnnSetRNNDescriptor_v8(r, CUDNN_RNN_ALGO_COUNT, CUDNN_GRU, CUDNN_RNN_DOUBLE_BIAS,
                                 CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
                                 CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, 10, 20, 0, 1, d, 0),
        CUDNN_STATUS_BAD_PARAM);
    size_t wsize = 0;
    assert_int_equal(cudnnGetRNNWeightSpaceSize(h, r, &wsize), CUDNN_STATUS_SUCCESS);
    /* one layer, 3 gates x (20 x 10 + 20 x 20) + 2 x 3 x 20 biases */
    assert_int_equal(wsize, (3 * (20 * 10 + 20 * 20) + 120) * sizeof(float));
    assert_int_equal(
        cudnnSetRNNDescriptor_v8(r, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
                                 CUDNN_BIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
                                 CUDNN_DATA_FLOAT, CUDNN_DEFAULT_MATH, 10, 20, 20, 2, d, 0),
        CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnGetRNNWeightSpaceSize(h, r, &wsize), CUDNN_STATUS_SUCCESS);
    /* per layer and direction: 4 gates x (20 x in + 20 x 20) + 2 x 4 x 20 biases;
     * in is 10 for layer 0, 40 (both directions' outputs) for layer 1 */
    size_t expect = 2 * (4 * (20 * 10 + 20 * 20) + 160) + 2 * (4 * (20 * 40 + 20 * 20) + 160);
    assert_int_equal(wsize, expect * sizeof(float));
    cudnnTensorDescriptor_t m, b;
    void *maddr = NULL, *baddr = NULL;
    assert_int_equal(cudnnCreateTensorDescriptor(&m), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnCreateTensorDescriptor(&b), CUDNN_STATUS_SUCCESS);
    char *ws = (char *)0x10000;
    /* pseudo-layer 1 (layer 0, backward), the first recurrent matrix */
    assert_int_equal(cudnnGetRNNWeightParams(h, r, 1, wsize, ws, 4, m, &maddr, b, &baddr),
                     CUDNN_STATUS_SUCCESS);
    cudnnDataType_t type;
    int nb, dims[3], strides[3];
    assert_int_equal(cudnnGetTensorNdDescriptor(m, 3, &type, &nb, dims, strides),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(dims[1], 20);
    assert_int_equal(dims[2], 20);
    size_t layer0 = 4 * (20 * 10 + 20 * 20) + 160;
    assert_ptr_equal(maddr, ws + (layer0 + 4 * 20 * 10) * sizeof(float));
    assert_ptr_equal(baddr, ws + (layer0 + 4 * (20 * 10 + 20 * 20) + 80) * sizeof(float));
    assert_int_equal(cudnnGetRNNWeightParams(h, r, 4, wsize, ws, 0, m, &maddr, b, &baddr),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnGetRNNWeightParams(h, r, 0, wsize, ws, 9, m, &maddr, b, &baddr),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnDestroyTensorDescriptor(m), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnDestroyTensorDescriptor(b), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnDestroyRNNDescriptor(r), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnDestroyDropoutDescriptor(d), CUDNN_STATUS_SUCCESS);

    cudnnRNNDataDescriptor_t rd;
    int lengths[3] = {5, 3, 4};
    assert_int_equal(cudnnCreateRNNDataDescriptor(&rd), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetRNNDataDescriptor(rd, CUDNN_DATA_FLOAT,
                                               CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, 5, 3, 10,
                                               lengths, NULL),
                     CUDNN_STATUS_SUCCESS);
    /* packed sequences come longest first */
    assert_int_equal(cudnnSetRNNDataDescriptor(rd, CUDNN_DATA_FLOAT,
                                               CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, 5, 3, 10,
                                               lengths, NULL),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnDestroyRNNDataDescriptor(rd), CUDNN_STATUS_SUCCESS);

    cudnnCTCLossDescriptor_t ctc;
    assert_int_equal(cudnnCreateCTCLossDescriptor(&ctc), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetCTCLossDescriptor_v9(ctc, CUDNN_DATA_FLOAT,
                                                  CUDNN_LOSS_NORMALIZATION_SOFTMAX,
                                                  CUDNN_CTC_ZERO_OOB_GRADIENTS, 32),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetCTCLossDescriptorEx(ctc, CUDNN_DATA_HALF,
                                                 CUDNN_LOSS_NORMALIZATION_SOFTMAX,
                                                 CUDNN_NOT_PROPAGATE_NAN),
                     CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnDestroyCTCLossDescriptor(ctc), CUDNN_STATUS_SUCCESS);

    cudnnSpatialTransformerDescriptor_t st;
    int stdims[4] = {2, 3, 8, 8};
    assert_int_equal(cudnnCreateSpatialTransformerDescriptor(&st), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetSpatialTransformerNdDescriptor(st, CUDNN_SAMPLER_BILINEAR,
                                                            CUDNN_DATA_FLOAT, 4, stdims),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnSetSpatialTransformerNdDescriptor(st, CUDNN_SAMPLER_BILINEAR,
                                                            CUDNN_DATA_FLOAT, 5, stdims),
                     CUDNN_STATUS_NOT_SUPPORTED);
    assert_int_equal(cudnnDestroySpatialTransformerDescriptor(st), CUDNN_STATUS_SUCCESS);

    assert_int_equal(cudaFree(states), cudaSuccess);
    assert_int_equal(cudnnDestroy(h), CUDNN_STATUS_SUCCESS);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_handle_and_stream),
        cmocka_unit_test(test_tensor_descriptor),
        cmocka_unit_test(test_filter_and_convolution),
        cmocka_unit_test(test_other_descriptors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
