/* legacy_ops.c - the simulated cuDNN's legacy operations: convolutions and
 * their algorithm queries, batch normalization, pooling, RNNs, CTC loss
 * and spatial transformers, with their workspace-size queries. Each checks
 * its handle, descriptors and shapes as cuDNN does, then becomes one piece
 * of device work on the handle's stream that computes nothing. */
#include "dnn_internal.h"

#include <cuda_runtime_api.h>
#include <string.h>

#define FAIL(st, why) sim_dnn_fail(st, __func__, why)
#define BAD(why)      FAIL(CUDNN_STATUS_BAD_PARAM, why)

static int tensor_ok(const struct cudnnTensorStruct *t)
{
    return t && t->set;
}

static int same_shape(const struct cudnnTensorStruct *a, const struct cudnnTensorStruct *b)
{
    return a->nb_dims == b->nb_dims && !memcmp(a->dims, b->dims, sizeof(int) * (size_t)a->nb_dims);
}

static int64_t elements(const struct cudnnTensorStruct *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->nb_dims; i++)
        n *= t->dims[i];
    return n;
}

static cudnnStatus_t run(const char *func, cudnnHandle_t h)
{
    cudnnStatus_t st = sim_dnn_launch(h);
    return st == CUDNN_STATUS_SUCCESS ? st : sim_dnn_fail(st, func, "the stream refused the work");
}

/* The shared check of every convolution entry point: x (or dx), w (or dw)
 * and y (or dy) agree with conv's output shape and with each other's type. */
static cudnnStatus_t conv_check(const char *func, cudnnHandle_t h, cudnnTensorDescriptor_t x,
                                cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                                cudnnTensorDescriptor_t y)
{
    if (!sim_dnn_handle_ok(h)) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "bad handle");
    if (!tensor_ok(y)) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "output not set");
    int out[CUDNN_DIM_MAX];
    cudnnStatus_t st = sim_dnn_conv_output(x, w, conv, out);
    if (st != CUDNN_STATUS_SUCCESS)
        return sim_dnn_fail(st, func, "descriptors unset or shapes of x, w and conv disagree");
    if (y->nb_dims != x->nb_dims || memcmp(y->dims, out, sizeof(int) * (size_t)y->nb_dims))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, func,
                            "y's shape is not the convolution's output shape");
    if (x->type != w->type || x->type != y->type)
        return sim_dnn_fail(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, func, "mixed data types");
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t conv_run(const char *func, cudnnHandle_t h, cudnnTensorDescriptor_t x,
                              cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                              cudnnTensorDescriptor_t y, int algo, int algo_count,
                              const void *alpha, const void *beta, const void *a, const void *b,
                              void *out)
{
    cudnnStatus_t st = conv_check(func, h, x, w, conv, y);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (algo < 0 || algo >= algo_count)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "invalid algorithm");
    if (!alpha || !beta || !a || !b || !out)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, func, "NULL data or scale");
    return run(func, h);
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void *x,
                                      const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                      size_t workSpaceSizeInBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y)
{
    (void)workSpace, (void)workSpaceSizeInBytes; /* every algorithm needs none here */
    return conv_run(__func__, handle, xDesc, wDesc, convDesc, yDesc, algo,
                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, alpha, beta, x, w, y);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void *w,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                           size_t workSpaceSizeInBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx)
{
    (void)workSpace, (void)workSpaceSizeInBytes;
    return conv_run(__func__, handle, dxDesc, wDesc, convDesc, dyDesc, algo,
                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, alpha, beta, w, dy, dx);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                             size_t workSpaceSizeInBytes, const void *beta,
                                             const cudnnFilterDescriptor_t dwDesc, void *dw)
{
    (void)workSpace, (void)workSpaceSizeInBytes;
    return conv_run(__func__, handle, xDesc, dwDesc, convDesc, dyDesc, algo,
                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, alpha, beta, x, dy, dw);
}

cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void *alpha1, const cudnnTensorDescriptor_t xDesc, const void *x,
    const cudnnFilterDescriptor_t wDesc, const void *w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void *workSpace, size_t workSpaceSizeInBytes,
    const void *alpha2, const cudnnTensorDescriptor_t zDesc, const void *z,
    const cudnnTensorDescriptor_t biasDesc, const void *bias,
    const cudnnActivationDescriptor_t activationDesc, const cudnnTensorDescriptor_t yDesc, void *y)
{
    (void)workSpace, (void)workSpaceSizeInBytes;
    cudnnStatus_t st = conv_check(__func__, handle, xDesc, wDesc, convDesc, yDesc);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!tensor_ok(zDesc) || !same_shape(zDesc, yDesc)) return BAD("z's shape is not y's");
    if (!tensor_ok(biasDesc) || biasDesc->dims[1] != yDesc->dims[1] ||
        elements(biasDesc) != biasDesc->dims[1])
        return BAD("bias is not 1xKx1x1");
    if (!activationDesc || !activationDesc->set) return BAD("activation not set");
    /* only RELU and IDENTITY fuse (IDENTITY with the IMPLICIT_PRECOMP_GEMM algorithm) */
    if (activationDesc->mode != CUDNN_ACTIVATION_RELU &&
        activationDesc->mode != CUDNN_ACTIVATION_IDENTITY)
        return BAD("activation is neither RELU nor IDENTITY");
    if (algo < 0 || algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT) return BAD("invalid algorithm");
    if (!alpha1 || !alpha2 || !x || !w || !z || !bias || !y)
        return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data or scale");
    return run(__func__, handle);
}

/* Workspace queries: every simulated algorithm works in place. */
static cudnnStatus_t conv_workspace(const char *func, cudnnHandle_t h, cudnnTensorDescriptor_t x,
                                    cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                                    cudnnTensorDescriptor_t y, int algo, int algo_count,
                                    size_t *size)
{
    cudnnStatus_t st = conv_check(func, h, x, w, conv, y);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!size) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "sizeInBytes is NULL");
    if (algo < 0 || algo >= algo_count)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "invalid algorithm");
    *size = 0;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc,
    cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes)
{
    return conv_workspace(__func__, handle, xDesc, wDesc, convDesc, yDesc, algo,
                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc,
    cudnnConvolutionBwdDataAlgo_t algo, size_t *sizeInBytes)
{
    return conv_workspace(__func__, handle, dxDesc, wDesc, convDesc, dyDesc, algo,
                          CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t dyDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc,
    cudnnConvolutionBwdFilterAlgo_t algo, size_t *sizeInBytes)
{
    return conv_workspace(__func__, handle, xDesc, gradDesc, convDesc, dyDesc, algo,
                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, sizeInBytes);
}

/* Find*Ex runs every algorithm it ranks on the handle's stream and returns
 * once they are done. */
static cudnnStatus_t find_run(const char *func, cudnnHandle_t h, int data_ok, int n)
{
    if (!data_ok) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, func, "NULL data");
    for (int i = 0; i < n; i++) {
        cudnnStatus_t st = run(func, h);
        if (st != CUDNN_STATUS_SUCCESS) return st;
    }
    if (cudaStreamSynchronize(h->stream) != cudaSuccess) {
        cudaGetLastError();
        return sim_dnn_fail(CUDNN_STATUS_EXECUTION_FAILED_CUDART, func, "stream failed");
    }
    return CUDNN_STATUS_SUCCESS;
}

/* A direction's algorithms: how many, and the bit set of those cuDNN
 * documents as non-deterministic. */
struct ranking {
    int algo_count;
    unsigned nondet;
};

static const struct ranking FWD = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT, 0u};
static const struct ranking BWD_DATA = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                        1u << CUDNN_CONVOLUTION_BWD_DATA_ALGO_0};
static const struct ranking BWD_FILTER = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                          (1u << CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0) |
                                              (1u << CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3)};

/* The three directions' result rows are one layout under three names; the
 * rows are built as the forward one and copied out. */
_Static_assert(sizeof(cudnnConvolutionFwdAlgoPerf_t) == sizeof(cudnnConvolutionBwdDataAlgoPerf_t) &&
                   sizeof(cudnnConvolutionFwdAlgoPerf_t) ==
                       sizeof(cudnnConvolutionBwdFilterAlgoPerf_t),
               "the algorithm rankings' rows share one layout");

/* The algorithm rankings (Get*_v7, and Find*Ex when measured): every
 * algorithm succeeds, needs no workspace and uses the descriptor's math
 * type; the measured ones are run (data_ok says their data pointers are
 * set) and timed in order, as cuDNN sorts them fastest first. shapes is
 * conv_check's verdict on the descriptors. */
static cudnnStatus_t rank(const char *func, cudnnHandle_t h, cudnnStatus_t shapes,
                          cudnnConvolutionDescriptor_t conv, const struct ranking *dir,
                          int measured, int data_ok, int requested, int *returned, void *results)
{
    if (shapes != CUDNN_STATUS_SUCCESS) return shapes;
    if (requested < 1 || !returned || !results)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "requestedAlgoCount or outputs");
    int n = requested < dir->algo_count ? requested : dir->algo_count;
    if (measured) {
        cudnnStatus_t st = find_run(func, h, data_ok, n);
        if (st != CUDNN_STATUS_SUCCESS) return st;
    }
    for (int i = 0; i < n; i++) {
        cudnnConvolutionFwdAlgoPerf_t row;
        memset(&row, 0, sizeof(row));
        row.algo = (cudnnConvolutionFwdAlgo_t)i;
        row.status = CUDNN_STATUS_SUCCESS;
        row.time = measured ? 0.01f * (float)(i + 1) : -1.0f;
        row.memory = 0;
        row.determinism = (dir->nondet >> i) & 1 ? CUDNN_NON_DETERMINISTIC : CUDNN_DETERMINISTIC;
        row.mathType = conv->math;
        memcpy((char *)results + (size_t)i * sizeof(row), &row, sizeof(row));
    }
    *returned = n;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnFilterDescriptor_t filterDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t destDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t *perfResults)
{
    return rank(__func__, handle,
                conv_check(__func__, handle, srcDesc, filterDesc, convDesc, destDesc), convDesc,
                &FWD, 0, 1, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t filterDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t gradDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t *perfResults)
{
    return rank(__func__, handle,
                conv_check(__func__, handle, gradDesc, filterDesc, convDesc, diffDesc), convDesc,
                &BWD_DATA, 0, 1, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
    const cudnnTensorDescriptor_t diffDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t *perfResults)
{
    return rank(__func__, handle,
                conv_check(__func__, handle, srcDesc, gradDesc, convDesc, diffDesc), convDesc,
                &BWD_FILTER, 0, 1, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void *x,
    const cudnnFilterDescriptor_t wDesc, const void *w, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t yDesc, void *y, const int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t *perfResults, void *workSpace,
    size_t workSpaceSizeInBytes)
{
    (void)workSpace, (void)workSpaceSizeInBytes;
    return rank(__func__, handle, conv_check(__func__, handle, xDesc, wDesc, convDesc, yDesc),
                convDesc, &FWD, 1, x && w && y, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc, const void *w,
    const cudnnTensorDescriptor_t dyDesc, const void *dy,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t dxDesc, void *dx,
    const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t *perfResults, void *workSpace, size_t workSpaceSizeInBytes)
{
    (void)workSpace, (void)workSpaceSizeInBytes;
    return rank(__func__, handle, conv_check(__func__, handle, dxDesc, wDesc, convDesc, dyDesc),
                convDesc, &BWD_DATA, 1, w && dy && dx, requestedAlgoCount, returnedAlgoCount,
                perfResults);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, const void *x,
    const cudnnTensorDescriptor_t dyDesc, const void *y,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t dwDesc, void *dw,
    const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t *perfResults, void *workSpace, size_t workSpaceSizeInBytes)
{
    (void)workSpace, (void)workSpaceSizeInBytes;
    return rank(__func__, handle, conv_check(__func__, handle, xDesc, dwDesc, convDesc, dyDesc),
                convDesc, &BWD_FILTER, 1, x && y && dw, requestedAlgoCount, returnedAlgoCount,
                perfResults);
}

/* Batch normalization: x and y (dx, dy) share a shape; the scale, bias,
 * mean and variance tensor is 1xCx1x1 (spatial modes) or 1xCxHxW (per
 * activation), as cudnnDeriveBNTensorDescriptor derives it. */
static cudnnStatus_t bn_check(const char *func, cudnnHandle_t h, cudnnBatchNormMode_t mode,
                              cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y,
                              cudnnTensorDescriptor_t param, double epsilon)
{
    if (!sim_dnn_handle_ok(h)) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "bad handle");
    if (mode < CUDNN_BATCHNORM_PER_ACTIVATION || mode > CUDNN_BATCHNORM_SPATIAL_PERSISTENT)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "invalid mode");
    if (!tensor_ok(x) || !tensor_ok(y) || !tensor_ok(param))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "a descriptor is not set");
    if (x->nb_dims < 4 || x->nb_dims > 5 || !same_shape(x, y))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "x and y differ or are not 4-D/5-D");
    if (param->nb_dims != x->nb_dims || param->dims[0] != 1 || param->dims[1] != x->dims[1])
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "scale/bias tensor is not 1xC...");
    for (int i = 2; i < x->nb_dims; i++)
        if (param->dims[i] != (mode == CUDNN_BATCHNORM_PER_ACTIVATION ? x->dims[i] : 1))
            return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "scale/bias tensor shape for mode");
    if (epsilon < CUDNN_BN_MIN_EPSILON)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "epsilon below CUDNN_BN_MIN_EPSILON");
    return CUDNN_STATUS_SUCCESS;
}

static int bn_ops_ok(cudnnBatchNormOps_t ops, cudnnActivationDescriptor_t act)
{
    if (ops == CUDNN_BATCHNORM_OPS_BN) return 1;
    if (ops != CUDNN_BATCHNORM_OPS_BN_ACTIVATION && ops != CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION)
        return 0;
    return act && act->set;
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, const void *alpha, const void *beta,
    const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnTensorDescriptor_t yDesc,
    void *y, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void *bnScale,
    const void *bnBias, const void *estimatedMean, const void *estimatedVariance, double epsilon)
{
    cudnnStatus_t st =
        bn_check(__func__, handle, mode, xDesc, yDesc, bnScaleBiasMeanVarDesc, epsilon);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!alpha || !beta || !x || !y || !bnScale || !bnBias || !estimatedMean || !estimatedVariance)
        return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data or scale");
    return run(__func__, handle);
}

cudnnStatus_t cudnnBatchNormalizationForwardTrainingEx(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps, const void *alpha,
    const void *beta, const cudnnTensorDescriptor_t xDesc, const void *xData,
    const cudnnTensorDescriptor_t zDesc, const void *zData, const cudnnTensorDescriptor_t yDesc,
    void *yData, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc, const void *bnScale,
    const void *bnBias, double exponentialAverageFactor, void *resultRunningMean,
    void *resultRunningVariance, double epsilon, void *resultSaveMean, void *resultSaveInvVariance,
    cudnnActivationDescriptor_t activationDesc, void *workspace, size_t workSpaceSizeInBytes,
    void *reserveSpace, size_t reserveSpaceSizeInBytes)
{
    (void)zData, (void)workspace, (void)workSpaceSizeInBytes, (void)reserveSpace;
    (void)reserveSpaceSizeInBytes;
    cudnnStatus_t st =
        bn_check(__func__, handle, mode, xDesc, yDesc, bnScaleBiasMeanVarDesc, epsilon);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!bn_ops_ok(bnOps, activationDesc)) return BAD("invalid bnOps or activation");
    if (bnOps == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION &&
        (!tensor_ok(zDesc) || !same_shape(zDesc, xDesc)))
        return BAD("z's shape is not x's");
    /* the running statistics and the saved ones come in pairs */
    if (!resultRunningMean != !resultRunningVariance || !resultSaveMean != !resultSaveInvVariance)
        return BAD("a running or saved statistic without its pair");
    if (!(exponentialAverageFactor >= 0.0 && exponentialAverageFactor <= 1.0))
        return BAD("exponentialAverageFactor outside [0, 1]");
    if (!alpha || !beta || !xData || !yData || !bnScale || !bnBias)
        return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data or scale");
    return run(__func__, handle);
}

cudnnStatus_t cudnnBatchNormalizationBackwardEx(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps,
    const void *alphaDataDiff, const void *betaDataDiff, const void *alphaParamDiff,
    const void *betaParamDiff, const cudnnTensorDescriptor_t xDesc, const void *xData,
    const cudnnTensorDescriptor_t yDesc, const void *yData, const cudnnTensorDescriptor_t dyDesc,
    const void *dyData, const cudnnTensorDescriptor_t dzDesc, void *dzData,
    const cudnnTensorDescriptor_t dxDesc, void *dxData,
    const cudnnTensorDescriptor_t dBnScaleBiasDesc, const void *bnScaleData, const void *bnBiasData,
    void *dBnScaleData, void *dBnBiasData, double epsilon, const void *savedMean,
    const void *savedInvVariance, cudnnActivationDescriptor_t activationDesc, void *workSpace,
    size_t workSpaceSizeInBytes, void *reserveSpace, size_t reserveSpaceSizeInBytes)
{
    (void)yDesc, (void)yData, (void)dzDesc, (void)dzData, (void)bnBiasData, (void)workSpace;
    (void)workSpaceSizeInBytes, (void)reserveSpace, (void)reserveSpaceSizeInBytes;
    cudnnStatus_t st = bn_check(__func__, handle, mode, xDesc, dxDesc, dBnScaleBiasDesc, epsilon);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!tensor_ok(dyDesc) || !same_shape(dyDesc, xDesc)) return BAD("dy's shape is not x's");
    if (!bn_ops_ok(bnOps, activationDesc)) return BAD("invalid bnOps or activation");
    if (!savedMean != !savedInvVariance) return BAD("a saved statistic without its pair");
    if (!alphaDataDiff || !betaDataDiff || !alphaParamDiff || !betaParamDiff || !xData || !dyData ||
        !dxData || !bnScaleData || !dBnScaleData || !dBnBiasData)
        return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data or scale");
    return run(__func__, handle);
}

cudnnStatus_t cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps,
    const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t zDesc,
    const cudnnTensorDescriptor_t yDesc, const cudnnTensorDescriptor_t bnScaleBiasMeanVarDesc,
    const cudnnActivationDescriptor_t activationDesc, size_t *sizeInBytes)
{
    (void)zDesc;
    cudnnStatus_t st = bn_check(__func__, handle, mode, xDesc, yDesc, bnScaleBiasMeanVarDesc,
                                CUDNN_BN_MIN_EPSILON);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!bn_ops_ok(bnOps, activationDesc) || !sizeInBytes) return BAD("bnOps or sizeInBytes");
    *sizeInBytes = 0;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetBatchNormalizationBackwardExWorkspaceSize(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps,
    const cudnnTensorDescriptor_t xDesc, const cudnnTensorDescriptor_t yDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnTensorDescriptor_t dzDesc,
    const cudnnTensorDescriptor_t dxDesc, const cudnnTensorDescriptor_t dBnScaleBiasDesc,
    const cudnnActivationDescriptor_t activationDesc, size_t *sizeInBytes)
{
    (void)yDesc, (void)dyDesc, (void)dzDesc;
    cudnnStatus_t st =
        bn_check(__func__, handle, mode, xDesc, dxDesc, dBnScaleBiasDesc, CUDNN_BN_MIN_EPSILON);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!bn_ops_ok(bnOps, activationDesc) || !sizeInBytes) return BAD("bnOps or sizeInBytes");
    *sizeInBytes = 0;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
    cudnnHandle_t handle, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t bnOps,
    const cudnnActivationDescriptor_t activationDesc, const cudnnTensorDescriptor_t xDesc,
    size_t *sizeInBytes)
{
    if (!sim_dnn_handle_ok(handle) || !tensor_ok(xDesc) || !sizeInBytes)
        return BAD("bad handle, x or sizeInBytes");
    if (mode < CUDNN_BATCHNORM_PER_ACTIVATION || mode > CUDNN_BATCHNORM_SPATIAL_PERSISTENT)
        return BAD("invalid mode");
    if (!bn_ops_ok(bnOps, activationDesc)) return BAD("invalid bnOps or activation");
    /* the fused activation keeps one bit per element for its backward pass */
    *sizeInBytes = bnOps == CUDNN_BATCHNORM_OPS_BN ? 0 : (size_t)((elements(xDesc) + 31) / 32) * 4;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc,
                                  const void *alpha, const cudnnTensorDescriptor_t xDesc,
                                  const void *x, const void *beta,
                                  const cudnnTensorDescriptor_t yDesc, void *y)
{
    if (!sim_dnn_handle_ok(handle)) return BAD("bad handle");
    if (!poolingDesc || !poolingDesc->set || !tensor_ok(xDesc) || !tensor_ok(yDesc))
        return BAD("a descriptor is not set");
    if (xDesc->nb_dims != 4 || yDesc->nb_dims != 4) return BAD("2-D pooling of a non 4-D tensor");
    if (yDesc->dims[0] != xDesc->dims[0] || yDesc->dims[1] != xDesc->dims[1])
        return BAD("y's N or C is not x's");
    for (int i = 0; i < 2; i++) {
        int padded = xDesc->dims[i + 2] + 2 * poolingDesc->pad[i];
        if (padded < poolingDesc->window[i] ||
            yDesc->dims[i + 2] != 1 + (padded - poolingDesc->window[i]) / poolingDesc->stride[i])
            return BAD("y's H or W is not the pooling's output");
    }
    if (!alpha || !beta || !x || !y) return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data");
    return run(__func__, handle);
}

/* RNN weights: per pseudo-layer (layer, direction), the gates' input
 * matrices (hidden x input width), their recurrent matrices (hidden x
 * projection), an LSTM's projection (projection x hidden), then the input
 * and the recurrent biases the bias mode keeps, each gate's in turn. */
static int rnn_gates(cudnnRNNMode_t cell)
{
    return cell == CUDNN_LSTM ? 4 : cell == CUDNN_GRU ? 3 : 1;
}

/* Elements of matrix or bias `id` of pseudo-layer `pseudo`: id < 2*gates
 * a gate matrix, id == 8 (LSTM only) the projection; bias: 1 for a bias. */
static int64_t rnn_part(const struct cudnnRNNStruct *r, int pseudo, int id, int bias, int *rows,
                        int *cols)
{
    int g = rnn_gates(r->cell), dirs = r->dir == CUDNN_BIDIRECTIONAL ? 2 : 1;
    int layer = pseudo / dirs;
    int in = layer == 0 ? r->input_size : r->proj_size * dirs;
    *rows = 0, *cols = 0;
    if (id == 8 && r->cell == CUDNN_LSTM && !bias) {
        if (r->proj_size == r->hidden_size) return 0;
        *rows = r->proj_size, *cols = r->hidden_size;
        return (int64_t)*rows * *cols;
    }
    if (id < 0 || id >= 2 * g) return -1;
    int recurrent = id >= g;
    if (bias) {
        int keep = r->bias == CUDNN_RNN_DOUBLE_BIAS ||
                   (r->bias == CUDNN_RNN_SINGLE_INP_BIAS && !recurrent) ||
                   (r->bias == CUDNN_RNN_SINGLE_REC_BIAS && recurrent);
        if (!keep) return 0;
        *rows = r->hidden_size, *cols = 1;
        return r->hidden_size;
    }
    if (!recurrent && layer == 0 && r->input_mode == CUDNN_SKIP_INPUT) return 0;
    *rows = r->hidden_size, *cols = recurrent ? r->proj_size : in;
    return (int64_t)*rows * *cols;
}

/* The element offset of a part in the weight space (parts laid out in the
 * order above); with pseudo == pseudo-layers, the total. */
static int64_t rnn_offset(const struct cudnnRNNStruct *r, int pseudo, int id, int bias)
{
    int g = rnn_gates(r->cell), dirs = r->dir == CUDNN_BIDIRECTIONAL ? 2 : 1;
    int64_t off = 0;
    int rows, cols;
    for (int p = 0; p <= pseudo && p < r->layers * dirs; p++) {
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 2 * g + (b ? 0 : 1); i++) {
                int part = i == 2 * g ? 8 : i;
                if (p == pseudo && b == bias && part == id) return off;
                int64_t n = rnn_part(r, p, part, b, &rows, &cols);
                off += n > 0 ? n : 0; /* -1: no such part (a GRU's projection) */
            }
    }
    return off;
}

static cudnnStatus_t rnn_check(const char *func, cudnnHandle_t h, cudnnRNNDescriptor_t r)
{
    if (!sim_dnn_handle_ok(h)) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "bad handle");
    if (!r || !r->set) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "RNN descriptor not set");
    return CUDNN_STATUS_SUCCESS;
}

static size_t rnn_weight_bytes(const struct cudnnRNNStruct *r)
{
    int dirs = r->dir == CUDNN_BIDIRECTIONAL ? 2 : 1;
    return (size_t)rnn_offset(r, r->layers * dirs, -1, 0) * sim_dnn_type_size(r->type);
}

cudnnStatus_t cudnnGetRNNWeightSpaceSize(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc,
                                         size_t *weightSpaceSize)
{
    cudnnStatus_t st = rnn_check(__func__, handle, rnnDesc);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!weightSpaceSize) return BAD("weightSpaceSize is NULL");
    *weightSpaceSize = rnn_weight_bytes(rnnDesc);
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t rnn_param_desc(cudnnTensorDescriptor_t d, cudnnDataType_t type, int rows,
                                    int cols)
{
    int dims[3] = {1, rows, cols}, strides[3] = {rows * cols, cols, 1};
    return cudnnSetTensorNdDescriptor(d, type, 3, dims, strides);
}

cudnnStatus_t cudnnGetRNNWeightParams(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc,
                                      int32_t pseudoLayer, size_t weightSpaceSize,
                                      const void *weightSpace, int32_t linLayerID,
                                      cudnnTensorDescriptor_t mDesc, void **mAddr,
                                      cudnnTensorDescriptor_t bDesc, void **bAddr)
{
    cudnnStatus_t st = rnn_check(__func__, handle, rnnDesc);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    int dirs = rnnDesc->dir == CUDNN_BIDIRECTIONAL ? 2 : 1, rows, cols;
    if (pseudoLayer < 0 || pseudoLayer >= rnnDesc->layers * dirs) return BAD("pseudoLayer");
    if (rnn_part(rnnDesc, pseudoLayer, linLayerID, 0, &rows, &cols) < 0 &&
        !(linLayerID == 8 && rnnDesc->cell == CUDNN_LSTM))
        return BAD("linLayerID");
    if (weightSpaceSize < rnn_weight_bytes(rnnDesc)) return BAD("weightSpaceSize too small");
    size_t esize = sim_dnn_type_size(rnnDesc->type);
    for (int bias = 0; bias < 2; bias++) {
        cudnnTensorDescriptor_t d = bias ? bDesc : mDesc;
        void **addr = bias ? bAddr : mAddr;
        if (!addr) continue;
        /* a part the configuration lacks comes back as a NULL address */
        if (rnn_part(rnnDesc, pseudoLayer, linLayerID, bias, &rows, &cols) <= 0) {
            *addr = NULL;
            continue;
        }
        if (d && (st = rnn_param_desc(d, rnnDesc->type, rows, cols)) != CUDNN_STATUS_SUCCESS)
            return st;
        *addr = (char *)weightSpace +
                (size_t)rnn_offset(rnnDesc, pseudoLayer, linLayerID, bias) * esize;
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetRNNTempSpaceSizes(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc,
                                        cudnnForwardMode_t fwdMode, cudnnRNNDataDescriptor_t xDesc,
                                        size_t *workSpaceSize, size_t *reserveSpaceSize)
{
    cudnnStatus_t st = rnn_check(__func__, handle, rnnDesc);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!xDesc || !xDesc->set) return BAD("x not set");
    if (fwdMode != CUDNN_FWD_MODE_INFERENCE && fwdMode != CUDNN_FWD_MODE_TRAINING)
        return BAD("invalid fwdMode");
    int dirs = rnnDesc->dir == CUDNN_BIDIRECTIONAL ? 2 : 1;
    /* one gate pre-activation per step, batch entry, gate and direction;
     * training keeps every layer's for the backward pass */
    size_t step = (size_t)xDesc->max_seq * xDesc->batch * rnnDesc->hidden_size *
                  rnn_gates(rnnDesc->cell) * dirs * sim_dnn_type_size(rnnDesc->type);
    if (workSpaceSize) *workSpaceSize = step;
    if (reserveSpaceSize)
        *reserveSpaceSize = fwdMode == CUDNN_FWD_MODE_TRAINING ? step * rnnDesc->layers : 0;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t rnn_run(const char *func, cudnnHandle_t h, cudnnRNNDescriptor_t r,
                             cudnnRNNDataDescriptor_t x, cudnnRNNDataDescriptor_t y,
                             size_t weight_size)
{
    cudnnStatus_t st = rnn_check(func, h, r);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!x || !x->set || !y || !y->set)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "x or y not set");
    int dirs = r->dir == CUDNN_BIDIRECTIONAL ? 2 : 1;
    if (x->vector != r->input_size || y->vector != r->proj_size * dirs || x->batch != y->batch ||
        x->max_seq != y->max_seq)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "x or y shape disagrees with the RNN");
    if (weight_size < rnn_weight_bytes(r))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "weightSpaceSize too small");
    return run(func, h);
}

cudnnStatus_t cudnnRNNForward(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc,
                              cudnnForwardMode_t fwdMode, const int32_t devSeqLengths[],
                              cudnnRNNDataDescriptor_t xDesc, const void *x,
                              cudnnRNNDataDescriptor_t yDesc, void *y,
                              cudnnTensorDescriptor_t hDesc, const void *hx, void *hy,
                              cudnnTensorDescriptor_t cDesc, const void *cx, void *cy,
                              size_t weightSpaceSize, const void *weightSpace, size_t workSpaceSize,
                              void *workSpace, size_t reserveSpaceSize, void *reserveSpace)
{
    (void)devSeqLengths, (void)hDesc, (void)hx, (void)hy, (void)cDesc, (void)cx, (void)cy;
    (void)workSpaceSize, (void)workSpace, (void)reserveSpaceSize, (void)reserveSpace;
    if (fwdMode != CUDNN_FWD_MODE_INFERENCE && fwdMode != CUDNN_FWD_MODE_TRAINING)
        return BAD("invalid fwdMode");
    if (!x || !y || !weightSpace) return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data");
    return rnn_run(__func__, handle, rnnDesc, xDesc, yDesc, weightSpaceSize);
}

cudnnStatus_t cudnnRNNBackwardData_v8(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc,
                                      const int32_t devSeqLengths[], cudnnRNNDataDescriptor_t yDesc,
                                      const void *y, const void *dy, cudnnRNNDataDescriptor_t xDesc,
                                      void *dx, cudnnTensorDescriptor_t hDesc, const void *hx,
                                      const void *dhy, void *dhx, cudnnTensorDescriptor_t cDesc,
                                      const void *cx, const void *dcy, void *dcx,
                                      size_t weightSpaceSize, const void *weightSpace,
                                      size_t workSpaceSize, void *workSpace,
                                      size_t reserveSpaceSize, void *reserveSpace)
{
    (void)hDesc, (void)hx, (void)dhy, (void)dhx, (void)cDesc, (void)cx, (void)dcy, (void)dcx;
    (void)workSpaceSize, (void)workSpace, (void)reserveSpaceSize;
    /* the backward passes read what a training forward pass reserved; the
     * device copy of the lengths is optional (PyTorch passes none) */
    (void)devSeqLengths;
    if (!y || !dy || !dx || !weightSpace || !reserveSpace)
        return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data or reserve space");
    return rnn_run(__func__, handle, rnnDesc, xDesc, yDesc, weightSpaceSize);
}

cudnnStatus_t cudnnRNNBackwardWeights_v8(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc,
                                         cudnnWgradMode_t addGrad, const int32_t devSeqLengths[],
                                         cudnnRNNDataDescriptor_t xDesc, const void *x,
                                         cudnnTensorDescriptor_t hDesc, const void *hx,
                                         cudnnRNNDataDescriptor_t yDesc, const void *y,
                                         size_t weightSpaceSize, void *dweightSpace,
                                         size_t workSpaceSize, void *workSpace,
                                         size_t reserveSpaceSize, void *reserveSpace)
{
    (void)hDesc, (void)hx, (void)workSpaceSize, (void)workSpace, (void)reserveSpaceSize;
    if (addGrad != CUDNN_WGRAD_MODE_ADD) return BAD("addGrad is not CUDNN_WGRAD_MODE_ADD");
    (void)devSeqLengths;
    if (!x || !y || !dweightSpace || !reserveSpace)
        return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data or reserve space");
    return rnn_run(__func__, handle, rnnDesc, xDesc, yDesc, weightSpaceSize);
}

/* CTC loss: probabilities and gradients are T x N x A tensors. */
static cudnnStatus_t ctc_check(const char *func, cudnnHandle_t h, cudnnCTCLossAlgo_t algo,
                               cudnnCTCLossDescriptor_t d, cudnnTensorDescriptor_t probs,
                               cudnnTensorDescriptor_t grads)
{
    if (!sim_dnn_handle_ok(h)) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "bad handle");
    if (!d || !d->set || !tensor_ok(probs))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "descriptor not set");
    if (algo != CUDNN_CTC_LOSS_ALGO_DETERMINISTIC && algo != CUDNN_CTC_LOSS_ALGO_NON_DETERMINISTIC)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "invalid algo");
    if (probs->nb_dims != 3 || (grads && (!tensor_ok(grads) || !same_shape(probs, grads))))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "probs or gradients not T x N x A");
    return CUDNN_STATUS_SUCCESS;
}

static size_t ctc_workspace(cudnnTensorDescriptor_t probs)
{
    /* alpha and beta lattices: T x N x (2 * labels + 1), bounded by A */
    return (size_t)probs->dims[0] * probs->dims[1] * (2 * (size_t)probs->dims[2] + 1) *
           sizeof(double);
}

cudnnStatus_t cudnnGetCTCLossWorkspaceSize(cudnnHandle_t handle,
                                           const cudnnTensorDescriptor_t probsDesc,
                                           const cudnnTensorDescriptor_t gradientsDesc,
                                           const int *labels, const int *labelLengths,
                                           const int *inputLengths, cudnnCTCLossAlgo_t algo,
                                           cudnnCTCLossDescriptor_t ctcLossDesc,
                                           size_t *sizeInBytes)
{
    cudnnStatus_t st = ctc_check(__func__, handle, algo, ctcLossDesc, probsDesc, gradientsDesc);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!labels || !labelLengths || !inputLengths || !sizeInBytes) return BAD("NULL argument");
    *sizeInBytes = ctc_workspace(probsDesc);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetCTCLossWorkspaceSize_v8(cudnnHandle_t handle, cudnnCTCLossAlgo_t algo,
                                              cudnnCTCLossDescriptor_t ctcLossDesc,
                                              const cudnnTensorDescriptor_t probsDesc,
                                              const cudnnTensorDescriptor_t gradientsDesc,
                                              size_t *sizeInBytes)
{
    cudnnStatus_t st = ctc_check(__func__, handle, algo, ctcLossDesc, probsDesc, gradientsDesc);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!sizeInBytes) return BAD("sizeInBytes is NULL");
    *sizeInBytes = ctc_workspace(probsDesc);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCTCLoss(cudnnHandle_t handle, const cudnnTensorDescriptor_t probsDesc,
                           const void *probs, const int hostLabels[], const int hostLabelLengths[],
                           const int hostInputLengths[], void *costs,
                           const cudnnTensorDescriptor_t gradientsDesc, void *gradients,
                           cudnnCTCLossAlgo_t algo, cudnnCTCLossDescriptor_t ctcLossDesc,
                           void *workspace, size_t workSpaceSizeInBytes)
{
    cudnnStatus_t st = ctc_check(__func__, handle, algo, ctcLossDesc, probsDesc, gradientsDesc);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!probs || !hostLabels || !hostLabelLengths || !hostInputLengths || !costs ||
        (gradientsDesc && !gradients))
        return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data");
    /* host lengths: each input length within T, each label length within it */
    for (int i = 0; i < probsDesc->dims[1]; i++)
        if (hostInputLengths[i] < 0 || hostInputLengths[i] > probsDesc->dims[0] ||
            hostLabelLengths[i] < 0 || hostLabelLengths[i] > hostInputLengths[i] ||
            hostLabelLengths[i] > ctcLossDesc->max_label)
            return BAD("a label or input length out of range");
    if (!workspace || workSpaceSizeInBytes < ctc_workspace(probsDesc))
        return FAIL(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, "workspace too small");
    return run(__func__, handle);
}

cudnnStatus_t cudnnCTCLoss_v8(cudnnHandle_t handle, cudnnCTCLossAlgo_t algo,
                              cudnnCTCLossDescriptor_t ctcLossDesc,
                              const cudnnTensorDescriptor_t probsDesc, const void *probs,
                              const int labels[], const int labelLengths[],
                              const int inputLengths[], void *costs,
                              const cudnnTensorDescriptor_t gradientsDesc, void *gradients,
                              size_t workSpaceSizeInBytes, void *workspace)
{
    cudnnStatus_t st = ctc_check(__func__, handle, algo, ctcLossDesc, probsDesc, gradientsDesc);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!probs || !labels || !labelLengths || !inputLengths || !costs ||
        (gradientsDesc && !gradients))
        return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data");
    if (!workspace || workSpaceSizeInBytes < ctc_workspace(probsDesc))
        return FAIL(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT, "workspace too small");
    return run(__func__, handle);
}

/* Spatial transformers: theta is N x 2 x 3, the grid N x H x W x 2. */
static cudnnStatus_t st_check(const char *func, cudnnHandle_t h,
                              cudnnSpatialTransformerDescriptor_t d)
{
    if (!sim_dnn_handle_ok(h)) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "bad handle");
    if (!d || !d->set) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "descriptor not set");
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSpatialTfGridGeneratorForward(cudnnHandle_t handle,
                                                 const cudnnSpatialTransformerDescriptor_t stDesc,
                                                 const void *theta, void *grid)
{
    cudnnStatus_t st = st_check(__func__, handle, stDesc);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!theta || !grid) return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data");
    return run(__func__, handle);
}

cudnnStatus_t cudnnSpatialTfGridGeneratorBackward(cudnnHandle_t handle,
                                                  const cudnnSpatialTransformerDescriptor_t stDesc,
                                                  const void *dgrid, void *dtheta)
{
    cudnnStatus_t st = st_check(__func__, handle, stDesc);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!dgrid || !dtheta) return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data");
    return run(__func__, handle);
}

static cudnnStatus_t sampler_check(const char *func, cudnnSpatialTransformerDescriptor_t d,
                                   cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y)
{
    if (!tensor_ok(x) || !tensor_ok(y) || x->nb_dims != 4 || y->nb_dims != 4)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "x or y not a set 4-D tensor");
    /* y (dy) has the transformer's output shape; x shares its N and C */
    if (memcmp(y->dims, d->dims, sizeof(int) * 4) || x->dims[0] != y->dims[0] ||
        x->dims[1] != y->dims[1])
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "shapes disagree with the transformer");
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSpatialTfSamplerForward(cudnnHandle_t handle,
                                           cudnnSpatialTransformerDescriptor_t stDesc,
                                           const void *alpha, const cudnnTensorDescriptor_t xDesc,
                                           const void *x, const void *grid, const void *beta,
                                           cudnnTensorDescriptor_t yDesc, void *y)
{
    cudnnStatus_t st = st_check(__func__, handle, stDesc);
    if (st == CUDNN_STATUS_SUCCESS) st = sampler_check(__func__, stDesc, xDesc, yDesc);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!alpha || !beta || !x || !grid || !y)
        return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data");
    return run(__func__, handle);
}

cudnnStatus_t
cudnnSpatialTfSamplerBackward(cudnnHandle_t handle, cudnnSpatialTransformerDescriptor_t stDesc,
                              const void *alpha, const cudnnTensorDescriptor_t xDesc, const void *x,
                              const void *beta, const cudnnTensorDescriptor_t dxDesc, void *dx,
                              const void *alphaDgrid, const cudnnTensorDescriptor_t dyDesc,
                              const void *dy, const void *grid, const void *betaDgrid, void *dgrid)
{
    cudnnStatus_t st = st_check(__func__, handle, stDesc);
    if (st == CUDNN_STATUS_SUCCESS) st = sampler_check(__func__, stDesc, xDesc, dyDesc);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (!tensor_ok(dxDesc) || !same_shape(dxDesc, xDesc)) return BAD("dx's shape is not x's");
    if (!alpha || !beta || !x || !dx || !alphaDgrid || !dy || !grid || !betaDgrid || !dgrid)
        return FAIL(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "NULL data");
    return run(__func__, handle);
}
