/* dnn_handle.c - the simulated cuDNN's handle and streams, its version queries,
 * status strings and per-thread last error message, and the launch that
 * turns a validated operation into device work (dnn_internal.h). */
#include "dnn_internal.h"

#include "sim.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char sim_dnn_last_error[256];

cudnnStatus_t sim_dnn_fail(cudnnStatus_t status, const char *func, const char *why)
{
    snprintf(sim_dnn_last_error, sizeof(sim_dnn_last_error), "%s: %s: %s", func,
             cudnnGetErrorString(status), why);
    return status;
}

void cudnnGetLastErrorString(char *message, size_t max_size)
{
    /* cuDNN hands the message out once: reading it clears it */
    if (message && max_size > 0) snprintf(message, max_size, "%s", sim_dnn_last_error);
    sim_dnn_last_error[0] = '\0';
}

size_t cudnnGetVersion(void)
{
    return SIM_DNN_VERSION;
}

size_t cudnnGetCudartVersion(void)
{
    /* the runtime cuDNN works with is the sim's own */
    int version = 0;
    if (cudaRuntimeGetVersion(&version) != cudaSuccess) return 0;
    return (size_t)version;
}

cudnnStatus_t cudnnGetProperty(libraryPropertyType type, int *value)
{
    if (!value) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, __func__, "value is NULL");
    switch (type) {
    case MAJOR_VERSION:
        *value = SIM_DNN_VER_MAJOR;
        return CUDNN_STATUS_SUCCESS;
    case MINOR_VERSION:
        *value = SIM_DNN_VER_MINOR;
        return CUDNN_STATUS_SUCCESS;
    case PATCH_LEVEL:
        *value = SIM_DNN_VER_PATCH;
        return CUDNN_STATUS_SUCCESS;
    }
    return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, __func__, "unknown libraryPropertyType");
}

const char *cudnnGetErrorString(cudnnStatus_t status)
{
    /* cuDNN's strings are the enumerators' names */
    switch (status) {
#define S(x)                                                                                       \
    case x:                                                                                        \
        return #x;
        S(CUDNN_STATUS_SUCCESS)
        S(CUDNN_STATUS_NOT_INITIALIZED)
        S(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
        S(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
        S(CUDNN_STATUS_DEPRECATED)
        S(CUDNN_STATUS_LICENSE_ERROR)
        S(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
        S(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
        S(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
        S(CUDNN_STATUS_BAD_PARAM)
        S(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
        S(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
        S(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
        S(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
        S(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
        S(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
        S(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
        S(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
        S(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
        S(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
        S(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)
        S(CUDNN_STATUS_NOT_SUPPORTED)
        S(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
        S(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
        S(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
        S(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
        S(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
        S(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
        S(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
        S(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
        S(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
        S(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
        S(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
        S(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
        S(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
        S(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE)
        S(CUDNN_STATUS_INTERNAL_ERROR)
        S(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
        S(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
        S(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
        S(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        S(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
        S(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
        S(CUDNN_STATUS_EXECUTION_FAILED)
        S(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
        S(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
        S(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
        S(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
#undef S
    /* deprecated aliases name the values above, but for this one */
    case CUDNN_STATUS_INVALID_VALUE:
        return "CUDNN_STATUS_INVALID_VALUE";
    }
    return "CUDNN_UNKNOWN_STATUS_FOUND";
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    if (!handle) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, __func__, "handle is NULL");
    int device;
    /* cuDNN binds the handle to the current device and initialises it;
     * without a usable device it reports NOT_INITIALIZED */
    if (cudaGetDevice(&device) != cudaSuccess || cudaFree(NULL) != cudaSuccess) {
        cudaGetLastError();
        return sim_dnn_fail(CUDNN_STATUS_NOT_INITIALIZED, __func__, "no CUDA device");
    }
    struct cudnnContext *h = calloc(1, sizeof(*h));
    if (!h)
        return sim_dnn_fail(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, __func__,
                            "out of host memory");
    h->magic = SIM_DNN_MAGIC;
    h->device = device;
    *handle = h;
    return CUDNN_STATUS_SUCCESS;
}

int sim_dnn_handle_ok(cudnnHandle_t h)
{
    return h && h->magic == SIM_DNN_MAGIC;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    if (!sim_dnn_handle_ok(handle))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, __func__, "not a cuDNN handle");
    /* the handle's work finishes first: its device is synchronised */
    int current;
    if (cudaGetDevice(&current) == cudaSuccess && cudaSetDevice(handle->device) == cudaSuccess) {
        if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
        if (cudaSetDevice(current) != cudaSuccess) cudaGetLastError();
    }
    handle->magic = 0;
    free(handle);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId)
{
    if (!sim_dnn_handle_ok(handle))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, __func__, "not a cuDNN handle");
    /* a stream of another device, or none the runtime knows, does not map
     * to the handle's context */
    if (streamId && streamId != cudaStreamLegacy && streamId != cudaStreamPerThread &&
        sim_stream_device(streamId) != handle->device)
        /* CUDNN_STATUS_MAPPING_ERROR, the deprecated name of this value */
        return sim_dnn_fail(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED, __func__,
                            "the stream is not one of the handle's device");
    handle->stream = streamId;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *streamId)
{
    if (!sim_dnn_handle_ok(handle))
        return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, __func__, "not a cuDNN handle");
    if (!streamId) return sim_dnn_fail(CUDNN_STATUS_BAD_PARAM, __func__, "streamId is NULL");
    *streamId = handle->stream;
    return CUDNN_STATUS_SUCCESS;
}

static void sim_dnn_nothing(void *arg)
{
    (void)arg; /* the sim has no device code: the work is its place in the stream */
}

cudnnStatus_t sim_dnn_launch(cudnnHandle_t h)
{
    /* replayable (it holds nothing), so a capturing stream records it as a
     * kernel node, as a CUDA graph records cuDNN's kernels */
    if (sim_stream_enqueue_work(h->stream, 0, cudaGraphNodeTypeKernel, sim_dnn_nothing, NULL,
                                NULL) != cudaSuccess) {
        cudaGetLastError();
        return CUDNN_STATUS_EXECUTION_FAILED_CUDART;
    }
    return CUDNN_STATUS_SUCCESS;
}

int sim_dnn_type_ok(cudnnDataType_t type)
{
    return type >= CUDNN_DATA_FLOAT && type <= CUDNN_DATA_FP8_E5M3;
}

size_t sim_dnn_type_size(cudnnDataType_t type)
{
    switch (type) {
    case CUDNN_DATA_DOUBLE:
    case CUDNN_DATA_INT64:
    case CUDNN_DATA_COMPLEX_FP32:
        return 8;
    case CUDNN_DATA_COMPLEX_FP64:
        return 16;
    case CUDNN_DATA_FLOAT:
    case CUDNN_DATA_INT32:
    case CUDNN_DATA_UINT32:
        return 4;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16:
        return 2;
    case CUDNN_DATA_INT8:
    case CUDNN_DATA_UINT8:
    case CUDNN_DATA_BYTE_BOOLEAN:
    case CUDNN_DATA_FP8_E4M3:
    case CUDNN_DATA_FP8_E5M2:
    case CUDNN_DATA_FP8_E8M0:
    case CUDNN_DATA_FP8_E5M3:
        return 1;
    default:
        return 0;
    }
}
