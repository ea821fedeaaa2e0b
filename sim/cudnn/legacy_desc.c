/* legacy_desc.c - the simulated cuDNN's legacy descriptors: tensor, filter,
 * convolution, activation, pooling, dropout, RNN, RNN data, CTC loss and
 * spatial transformer. Each setter checks its arguments as cuDNN's API
 * reference documents and records them; the getters answer what was set. */
#include "dnn_internal.h"

#include <stdlib.h>
#include <string.h>

/* cudnnCreate<Kind>Descriptor / cudnnDestroy<Kind>Descriptor: every kind
 * is created unset and destroyed whether set or not. */
#define SIM_DNN_LIFECYCLE(Kind, Struct)                                                            \
    cudnnStatus_t cudnnCreate##Kind##Descriptor(struct Struct **desc)                              \
    {                                                                                              \
        if (!desc) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, __func__, "descriptor is NULL");    \
        *desc = calloc(1, sizeof(**desc));                                                         \
        if (!*desc)                                                                                \
            return sim_dnn_fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, __func__,      \
                                "out of host memory");                                             \
        return CUDNN_STATUS_SUCCESS;                                                               \
    }                                                                                              \
    cudnnStatus_t cudnnDestroy##Kind##Descriptor(struct Struct *desc)                              \
    {                                                                                              \
        free(desc);                                                                                \
        return CUDNN_STATUS_SUCCESS;                                                               \
    }

SIM_DNN_LIFECYCLE(Tensor, cudnnTensorStruct)
SIM_DNN_LIFECYCLE(Filter, cudnnFilterStruct)
SIM_DNN_LIFECYCLE(Convolution, cudnnConvolutionStruct)
SIM_DNN_LIFECYCLE(Activation, cudnnActivationStruct)
SIM_DNN_LIFECYCLE(Pooling, cudnnPoolingStruct)
SIM_DNN_LIFECYCLE(Dropout, cudnnDropoutStruct)
SIM_DNN_LIFECYCLE(RNN, cudnnRNNStruct)
SIM_DNN_LIFECYCLE(RNNData, cudnnRNNDataStruct)
SIM_DNN_LIFECYCLE(CTCLoss, cudnnCTCLossStruct)
SIM_DNN_LIFECYCLE(SpatialTransformer, cudnnSpatialTransformerStruct)

#define BAD(why)         sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, __func__, why)
#define UNSUPPORTED(why) sim_dnn_fail(CUDNN_STATUS_NOT_SUPPORTED, __func__, why)

cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                         cudnnDataType_t dataType, int nbDims, const int dimA[],
                                         const int strideA[])
{
    if (!tensorDesc || !dimA || !strideA) return BAD("NULL descriptor or array");
    if (!sim_dnn_type_ok(dataType)) return BAD("invalid dataType");
    if (nbDims < 3 || nbDims > CUDNN_DIM_MAX) return UNSUPPORTED("nbDims outside [3, 8]");
    int64_t elements = 1;
    for (int i = 0; i < nbDims; i++) {
        if (dimA[i] <= 0) return BAD("a dimension is not positive");
        if (strideA[i] <= 0) return BAD("a stride is not positive");
        elements *= dimA[i];
    }
    if (elements > INT32_MAX) return UNSUPPORTED("more than 2 Giga-elements");
    tensorDesc->type = dataType;
    tensorDesc->nb_dims = nbDims;
    memcpy(tensorDesc->dims, dimA, sizeof(int) * (size_t)nbDims);
    memcpy(tensorDesc->strides, strideA, sizeof(int) * (size_t)nbDims);
    tensorDesc->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetTensorNdDescriptor(const cudnnTensorDescriptor_t tensorDesc,
                                         int nbDimsRequested, cudnnDataType_t *dataType,
                                         int *nbDims, int dimA[], int strideA[])
{
    if (!tensorDesc || !tensorDesc->set) return BAD("descriptor not set");
    if (nbDimsRequested < 0) return BAD("negative nbDimsRequested");
    if (!dataType || !nbDims || (nbDimsRequested > 0 && (!dimA || !strideA)))
        return BAD("NULL output");
    *dataType = tensorDesc->type;
    *nbDims = tensorDesc->nb_dims;
    for (int i = 0; i < nbDimsRequested && i < tensorDesc->nb_dims; i++) {
        dimA[i] = tensorDesc->dims[i];
        strideA[i] = tensorDesc->strides[i];
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t filterDesc,
                                         cudnnDataType_t dataType, cudnnTensorFormat_t format,
                                         int nbDims, const int filterDimA[])
{
    if (!filterDesc || !filterDimA) return BAD("NULL descriptor or array");
    if (!sim_dnn_type_ok(dataType)) return BAD("invalid dataType");
    if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC &&
        format != CUDNN_TENSOR_NCHW_VECT_C)
        return BAD("invalid format");
    if (nbDims < 3 || nbDims > CUDNN_DIM_MAX) return UNSUPPORTED("nbDims outside [3, 8]");
    for (int i = 0; i < nbDims; i++)
        if (filterDimA[i] <= 0) return BAD("a dimension is not positive");
    filterDesc->type = dataType;
    filterDesc->format = format;
    filterDesc->nb_dims = nbDims;
    memcpy(filterDesc->dims, filterDimA, sizeof(int) * (size_t)nbDims);
    filterDesc->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetFilterNdDescriptor(const cudnnFilterDescriptor_t filterDesc,
                                         int nbDimsRequested, cudnnDataType_t *dataType,
                                         cudnnTensorFormat_t *format, int *nbDims, int filterDimA[])
{
    if (!filterDesc || !filterDesc->set) return BAD("descriptor not set");
    if (nbDimsRequested < 0) return BAD("negative nbDimsRequested");
    if (!dataType || !format || !nbDims || (nbDimsRequested > 0 && !filterDimA))
        return BAD("NULL output");
    *dataType = filterDesc->type;
    *format = filterDesc->format;
    *nbDims = filterDesc->nb_dims;
    for (int i = 0; i < nbDimsRequested && i < filterDesc->nb_dims; i++)
        filterDimA[i] = filterDesc->dims[i];
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t convDesc,
                                              int arrayLength, const int padA[],
                                              const int filterStrideA[], const int dilationA[],
                                              cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType)
{
    if (!convDesc) return BAD("descriptor is NULL");
    if (arrayLength < 0) return BAD("negative arrayLength");
    if (arrayLength > CUDNN_DIM_MAX - 2) return UNSUPPORTED("arrayLength above CUDNN_DIM_MAX-2");
    if (arrayLength > 0 && (!padA || !filterStrideA || !dilationA)) return BAD("NULL array");
    if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) return BAD("invalid mode");
    if (!sim_dnn_type_ok(computeType)) return BAD("invalid computeType");
    for (int i = 0; i < arrayLength; i++) {
        if (padA[i] < 0) return BAD("a padding is negative");
        if (filterStrideA[i] <= 0) return BAD("a stride is not positive");
        if (dilationA[i] <= 0) return BAD("a dilation is not positive");
        convDesc->pad[i] = padA[i];
        convDesc->stride[i] = filterStrideA[i];
        convDesc->dilation[i] = dilationA[i];
    }
    convDesc->spatial = arrayLength;
    convDesc->mode = mode;
    convDesc->compute = computeType;
    if (convDesc->groups == 0) convDesc->groups = 1;
    convDesc->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int groupCount)
{
    if (!convDesc) return BAD("descriptor is NULL");
    if (groupCount < 1) return BAD("groupCount below 1");
    convDesc->groups = groupCount;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                          cudnnMathType_t mathType)
{
    if (!convDesc) return BAD("descriptor is NULL");
    if (mathType != CUDNN_DEFAULT_MATH && mathType != CUDNN_TENSOR_OP_MATH &&
        mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && mathType != CUDNN_FMA_MATH)
        return BAD("invalid mathType");
    convDesc->math = mathType;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t sim_dnn_conv_output(const struct cudnnTensorStruct *x,
                                  const struct cudnnFilterStruct *w,
                                  const struct cudnnConvolutionStruct *conv, int *out)
{
    if (!x || !x->set || !w || !w->set || !conv || !conv->set)
        return CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED;
    /* cudnnGetConvolutionNdForwardOutputDim's rules: matching ranks, input
     * channels = filter channels * groups, output channels divisible by
     * the groups, and every dilated filter fits the padded input */
    if (x->nb_dims != w->nb_dims || conv->spatial != x->nb_dims - 2)
        return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
    if (x->dims[1] != w->dims[1] * conv->groups || w->dims[0] % conv->groups != 0)
        return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
    out[0] = x->dims[0];
    out[1] = w->dims[0];
    for (int i = 0; i < conv->spatial; i++) {
        int span = (w->dims[i + 2] - 1) * conv->dilation[i] + 1;
        int padded = x->dims[i + 2] + 2 * conv->pad[i];
        if (padded < span) return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
        out[i + 2] = 1 + (padded - span) / conv->stride[i];
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t activationDesc,
                                           cudnnActivationMode_t mode,
                                           cudnnNanPropagation_t reluNanOpt, double coef)
{
    if (!activationDesc) return BAD("descriptor is NULL");
    if (mode < CUDNN_ACTIVATION_SIGMOID || mode > CUDNN_ACTIVATION_SWISH)
        return BAD("invalid mode");
    if (reluNanOpt != CUDNN_NOT_PROPAGATE_NAN && reluNanOpt != CUDNN_PROPAGATE_NAN)
        return BAD("invalid reluNanOpt");
    activationDesc->mode = mode;
    activationDesc->nan = reluNanOpt;
    activationDesc->coef = coef;
    activationDesc->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t poolingDesc,
                                          cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t maxpoolingNanOpt, int windowHeight,
                                          int windowWidth, int verticalPadding,
                                          int horizontalPadding, int verticalStride,
                                          int horizontalStride)
{
    if (!poolingDesc) return BAD("descriptor is NULL");
    if (mode < CUDNN_POOLING_MAX || mode > CUDNN_POOLING_MAX_DETERMINISTIC)
        return BAD("invalid mode");
    if (maxpoolingNanOpt != CUDNN_NOT_PROPAGATE_NAN && maxpoolingNanOpt != CUDNN_PROPAGATE_NAN)
        return BAD("invalid maxpoolingNanOpt");
    if (windowHeight <= 0 || windowWidth <= 0 || verticalStride <= 0 || horizontalStride <= 0)
        return BAD("a window or stride is not positive");
    if (verticalPadding < 0 || horizontalPadding < 0) return BAD("a padding is negative");
    poolingDesc->mode = mode;
    poolingDesc->nan = maxpoolingNanOpt;
    poolingDesc->window[0] = windowHeight;
    poolingDesc->window[1] = windowWidth;
    poolingDesc->pad[0] = verticalPadding;
    poolingDesc->pad[1] = horizontalPadding;
    poolingDesc->stride[0] = verticalStride;
    poolingDesc->stride[1] = horizontalStride;
    poolingDesc->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

/* The random state's size: one generator state (48 bytes, curand's
 * XORWOW) per thread of the dropout kernel's grid. */
#define SIM_DNN_DROPOUT_STATES ((size_t)48 * 1024 * 128)

cudnnStatus_t cudnnDropoutGetStatesSize(cudnnHandle_t handle, size_t *sizeInBytes)
{
    if (!sim_dnn_handle_ok(handle) || !sizeInBytes) return BAD("bad handle or NULL size");
    *sizeInBytes = SIM_DNN_DROPOUT_STATES;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t sim_dnn_dropout(const char *func, cudnnDropoutDescriptor_t d,
                                     cudnnHandle_t handle, float dropout, void *states, size_t size,
                                     unsigned long long seed, int initialise)
{
    if (!d || !sim_dnn_handle_ok(handle))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "bad descriptor or handle");
    if (!(dropout >= 0.0f && dropout <= 1.0f))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "dropout outside [0, 1]");
    if (states && size < SIM_DNN_DROPOUT_STATES)
        /* CUDNN_STATUS_INVALID_VALUE, deprecated for BAD_PARAM */
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func,
                            "stateSizeInBytes below cudnnDropoutGetStatesSize");
    /* cudnnSetDropoutDescriptor seeds the states with a kernel on the
     * handle's stream; cudnnRestoreDropoutDescriptor reuses them as they are */
    if (initialise && states) {
        cudnnStatus_t st = sim_dnn_launch(handle);
        if (st != CUDNN_STATUS_SUCCESS) return sim_dnn_fail(st, func, "launch failed");
    }
    d->dropout = dropout;
    d->states = states;
    d->state_size = size;
    d->seed = seed;
    d->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetDropoutDescriptor(cudnnDropoutDescriptor_t dropoutDesc, cudnnHandle_t handle,
                                        float dropout, void *states, size_t stateSizeInBytes,
                                        unsigned long long seed)
{
    return sim_dnn_dropout(__func__, dropoutDesc, handle, dropout, states, stateSizeInBytes, seed,
                           1);
}

cudnnStatus_t cudnnRestoreDropoutDescriptor(cudnnDropoutDescriptor_t dropoutDesc,
                                            cudnnHandle_t handle, float dropout, void *states,
                                            size_t stateSizeInBytes, unsigned long long seed)
{
    return sim_dnn_dropout(__func__, dropoutDesc, handle, dropout, states, stateSizeInBytes, seed,
                           0);
}

cudnnStatus_t cudnnSetRNNDescriptor_v8(cudnnRNNDescriptor_t rnnDesc, cudnnRNNAlgo_t algo,
                                       cudnnRNNMode_t cellMode, cudnnRNNBiasMode_t biasMode,
                                       cudnnDirectionMode_t dirMode, cudnnRNNInputMode_t inputMode,
                                       cudnnDataType_t dataType, cudnnDataType_t mathPrec,
                                       cudnnMathType_t mathType, int32_t inputSize,
                                       int32_t hiddenSize, int32_t projSize, int32_t numLayers,
                                       cudnnDropoutDescriptor_t dropoutDesc, uint32_t auxFlags)
{
    if (!rnnDesc) return BAD("descriptor is NULL");
    if (algo < CUDNN_RNN_ALGO_STANDARD || algo >= CUDNN_RNN_ALGO_COUNT) return BAD("invalid algo");
    if (cellMode < CUDNN_RNN_RELU || cellMode > CUDNN_GRU) return BAD("invalid cellMode");
    if (biasMode < CUDNN_RNN_NO_BIAS || biasMode > CUDNN_RNN_DOUBLE_BIAS)
        return BAD("invalid biasMode");
    if (dirMode != CUDNN_UNIDIRECTIONAL && dirMode != CUDNN_BIDIRECTIONAL)
        return BAD("invalid dirMode");
    if (inputMode != CUDNN_LINEAR_INPUT && inputMode != CUDNN_SKIP_INPUT)
        return BAD("invalid inputMode");
    if (!sim_dnn_type_ok(dataType) || !sim_dnn_type_ok(mathPrec)) return BAD("invalid data type");
    if (inputSize <= 0 || hiddenSize <= 0 || numLayers <= 0) return BAD("a size is not positive");
    /* a projection only shrinks an LSTM's recurrent output; 0 is none */
    if (projSize == 0) projSize = hiddenSize;
    if (projSize < 0 || projSize > hiddenSize || (projSize < hiddenSize && cellMode != CUDNN_LSTM))
        return BAD("invalid projSize");
    if (inputMode == CUDNN_SKIP_INPUT && inputSize != hiddenSize)
        return BAD("CUDNN_SKIP_INPUT needs inputSize == hiddenSize");
    (void)dropoutDesc; /* NULL or set: dropout between layers is the states' business */
    rnnDesc->algo = algo;
    rnnDesc->cell = cellMode;
    rnnDesc->bias = biasMode;
    rnnDesc->dir = dirMode;
    rnnDesc->input_mode = inputMode;
    rnnDesc->type = dataType;
    rnnDesc->math_prec = mathPrec;
    rnnDesc->math = mathType;
    rnnDesc->input_size = inputSize;
    rnnDesc->hidden_size = hiddenSize;
    rnnDesc->proj_size = projSize;
    rnnDesc->layers = numLayers;
    rnnDesc->aux_flags = auxFlags;
    rnnDesc->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetRNNDataDescriptor(cudnnRNNDataDescriptor_t rnnDataDesc,
                                        cudnnDataType_t dataType, cudnnRNNDataLayout_t layout,
                                        int maxSeqLength, int batchSize, int vectorSize,
                                        const int seqLengthArray[], void *paddingFill)
{
    (void)paddingFill;
    if (!rnnDataDesc || !seqLengthArray) return BAD("NULL descriptor or seqLengthArray");
    if (!sim_dnn_type_ok(dataType)) return BAD("invalid dataType");
    if (layout < CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED ||
        layout > CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED)
        return BAD("invalid layout");
    if (maxSeqLength <= 0 || batchSize <= 0 || vectorSize <= 0)
        return BAD("a size is not positive");
    for (int i = 0; i < batchSize; i++) {
        if (seqLengthArray[i] < 0 || seqLengthArray[i] > maxSeqLength)
            return BAD("a sequence length outside [0, maxSeqLength]");
        /* the packed layout takes the sequences longest first */
        if (layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED && i > 0 &&
            seqLengthArray[i] > seqLengthArray[i - 1])
            return BAD("packed sequences not in decreasing length");
    }
    rnnDataDesc->type = dataType;
    rnnDataDesc->layout = layout;
    rnnDataDesc->max_seq = maxSeqLength;
    rnnDataDesc->batch = batchSize;
    rnnDataDesc->vector = vectorSize;
    rnnDataDesc->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t sim_dnn_ctc(const char *func, cudnnCTCLossDescriptor_t d, cudnnDataType_t comp,
                                 cudnnLossNormalizationMode_t norm, cudnnCTCGradMode_t grad,
                                 int max_label)
{
    if (!d) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "descriptor is NULL");
    if (comp != CUDNN_DATA_FLOAT && comp != CUDNN_DATA_DOUBLE)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "compType not float or double");
    if (norm != CUDNN_LOSS_NORMALIZATION_NONE && norm != CUDNN_LOSS_NORMALIZATION_SOFTMAX)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "invalid normMode");
    if (grad != CUDNN_CTC_ZERO_OOB_GRADIENTS && grad != CUDNN_CTC_SKIP_OOB_GRADIENTS)
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "invalid gradMode");
    if (max_label <= 0) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, func, "maxLabelLength");
    d->comp = comp;
    d->norm = norm;
    d->grad = grad;
    d->max_label = max_label;
    d->set = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetCTCLossDescriptorEx(cudnnCTCLossDescriptor_t ctcLossDesc,
                                          cudnnDataType_t compType,
                                          cudnnLossNormalizationMode_t normMode,
                                          cudnnNanPropagation_t gradMode)
{
    /* the Ex form has no label bound: cuDNN's default is 256 */
    return sim_dnn_ctc(__func__, ctcLossDesc, compType, normMode,
                       gradMode == CUDNN_PROPAGATE_NAN ? CUDNN_CTC_SKIP_OOB_GRADIENTS
                                                       : CUDNN_CTC_ZERO_OOB_GRADIENTS,
                       256);
}

cudnnStatus_t cudnnSetCTCLossDescriptor_v9(cudnnCTCLossDescriptor_t ctcLossDesc,
                                           cudnnDataType_t compType,
                                           cudnnLossNormalizationMode_t normMode,
                                           cudnnCTCGradMode_t ctcGradMode, int maxLabelLength)
{
    return sim_dnn_ctc(__func__, ctcLossDesc, compType, normMode, ctcGradMode, maxLabelLength);
}

cudnnStatus_t cudnnSetSpatialTransformerNdDescriptor(cudnnSpatialTransformerDescriptor_t stDesc,
                                                     cudnnSamplerType_t samplerType,
                                                     cudnnDataType_t dataType, const int nbDims,
                                                     const int dimA[])
{
    if (!stDesc || !dimA) return BAD("NULL descriptor or dimA");
    if (samplerType != CUDNN_SAMPLER_BILINEAR) return BAD("invalid samplerType");
    if (!sim_dnn_type_ok(dataType)) return BAD("invalid dataType");
    /* only 2-D transformations (4-D tensors) exist */
    if (nbDims != 4) return UNSUPPORTED("nbDims is not 4");
    for (int i = 0; i < nbDims; i++)
        if (dimA[i] <= 0) return BAD("a dimension is not positive");
    stDesc->sampler = samplerType;
    stDesc->type = dataType;
    stDesc->nb_dims = nbDims;
    memcpy(stDesc->dims, dimA, sizeof(int) * (size_t)nbDims);
    stDesc->set = 1;
    return CUDNN_STATUS_SUCCESS;
}
