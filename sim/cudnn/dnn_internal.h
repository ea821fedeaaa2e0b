/* dnn_internal.h - what the files of the simulated libcudnn.so.9 share: the
 * handle, the legacy descriptors' layouts, the one way an operation becomes
 * device work, and the thread's last error message.
 *
 * Compiled against cuDNN's own headers (the nvidia-cudnn wheel's, found at
 * configure time, sim/cudnn/CMakeLists.txt), so every entry point is checked
 * against NVIDIA's declaration. An operation (a convolution, a batch norm,
 * cudnnBackendExecute of a plan, ...) is device work on the handle's stream,
 * ordered like a copy, that computes nothing (docs/sim.md, "cuDNN"). */
#ifndef SIM_DNN_INTERNAL_H
#define SIM_DNN_INTERNAL_H

#include <cudnn.h>
#include <stddef.h>
#include <stdint.h>

/* The cuDNN release this library answers for (cudnnGetVersion,
 * cudnnGetProperty): the one PyTorch 2.15.0 is built against and its wheel
 * ships (nvidia-cudnn 9.26.0); PyTorch refuses a runtime whose minor
 * version is older than its build's. The headers may be a later 9.x. */
#define SIM_DNN_VER_MAJOR 9
#define SIM_DNN_VER_MINOR 26
#define SIM_DNN_VER_PATCH 0
/* CUDNN_VERSION's formula: major * 10000 + minor * 100 + patch. */
#define SIM_DNN_VERSION (SIM_DNN_VER_MAJOR * 10000 + SIM_DNN_VER_MINOR * 100 + SIM_DNN_VER_PATCH)

#define SIM_DNN_MAGIC 0x73696d646e6e2121ull /* "simdnn!!" */

struct cudnnContext {
    uint64_t magic;
    int device; /* current device at creation */
    cudaStream_t stream;
};

/* Legacy descriptors: each records what its setter validated. set is 0
 * until the setter succeeds (an operation given an unset one fails). */
struct cudnnTensorStruct {
    int set;
    cudnnDataType_t type;
    int nb_dims;
    int dims[CUDNN_DIM_MAX];
    int strides[CUDNN_DIM_MAX];
};

struct cudnnFilterStruct {
    int set;
    cudnnDataType_t type;
    cudnnTensorFormat_t format;
    int nb_dims;
    int dims[CUDNN_DIM_MAX];
};

struct cudnnConvolutionStruct {
    int set;
    int spatial; /* arrayLength */
    int pad[CUDNN_DIM_MAX];
    int stride[CUDNN_DIM_MAX];
    int dilation[CUDNN_DIM_MAX];
    cudnnConvolutionMode_t mode;
    cudnnDataType_t compute;
    int groups;
    cudnnMathType_t math;
};

struct cudnnActivationStruct {
    int set;
    cudnnActivationMode_t mode;
    cudnnNanPropagation_t nan;
    double coef;
};

struct cudnnPoolingStruct {
    int set;
    cudnnPoolingMode_t mode;
    cudnnNanPropagation_t nan;
    int window[2], pad[2], stride[2];
};

struct cudnnDropoutStruct {
    int set;
    float dropout;
    void *states;
    size_t state_size;
    unsigned long long seed;
};

struct cudnnRNNStruct {
    int set;
    cudnnRNNAlgo_t algo;
    cudnnRNNMode_t cell;
    cudnnRNNBiasMode_t bias;
    cudnnDirectionMode_t dir;
    cudnnRNNInputMode_t input_mode;
    cudnnDataType_t type, math_prec;
    cudnnMathType_t math;
    int32_t input_size, hidden_size, proj_size, layers;
    uint32_t aux_flags;
};

struct cudnnRNNDataStruct {
    int set;
    cudnnDataType_t type;
    cudnnRNNDataLayout_t layout;
    int max_seq, batch, vector;
};

struct cudnnCTCLossStruct {
    int set;
    cudnnDataType_t comp;
    cudnnLossNormalizationMode_t norm;
    cudnnCTCGradMode_t grad;
    int max_label;
};

struct cudnnSpatialTransformerStruct {
    int set;
    cudnnSamplerType_t sampler;
    cudnnDataType_t type;
    int nb_dims;
    int dims[CUDNN_DIM_MAX];
};

/* "dnn_handle.c" */

/* 1 for a handle cudnnCreate made and cudnnDestroy has not freed. */
int sim_dnn_handle_ok(cudnnHandle_t h);

/* Enqueues one piece of device work that computes nothing on the handle's
 * stream: SUCCESS, or EXECUTION_FAILED_CUDART when the stream is gone. */
cudnnStatus_t sim_dnn_launch(cudnnHandle_t h);

/* Records `status` with a message for cudnnGetLastErrorString (per thread,
 * as cuDNN keeps it) and returns it: every failing entry point ends here. */
cudnnStatus_t sim_dnn_fail(cudnnStatus_t status, const char *func, const char *why);

/* 1 for a data type the legacy API accepts. */
int sim_dnn_type_ok(cudnnDataType_t type);
/* Bytes of one element of `type`, 0 for a packed sub-byte or unknown one. */
size_t sim_dnn_type_size(cudnnDataType_t type);

/* "legacy_desc.c" */

/* The output shape of a convolution: y's dims for x and w under conv, or
 * BAD_PARAM. out must hold x->nb_dims ints. */
cudnnStatus_t sim_dnn_conv_output(const struct cudnnTensorStruct *x,
                                  const struct cudnnFilterStruct *w,
                                  const struct cudnnConvolutionStruct *conv, int *out);

#endif /* SIM_DNN_INTERNAL_H */
