/* blas_core.c - the handle and the launch that the simulated libcublas.so.13
 * and libcublasLt.so.13 share (blas_internal.h). Compiled into both
 * libraries. */
#include "blas_internal.h"

#include "sim.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>

cublasStatus_t sim_blas_handle_new(struct cublasContext **out)
{
    int device;
    /* cuBLAS binds the handle to the current device and initialises it;
     * without a usable device it reports NOT_INITIALIZED. */
    if (cudaGetDevice(&device) != cudaSuccess || cudaFree(NULL) != cudaSuccess) {
        cudaGetLastError();
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    struct cublasContext *h = calloc(1, sizeof(*h));
    if (!h) return CUBLAS_STATUS_ALLOC_FAILED;
    h->magic = SIM_BLAS_MAGIC;
    h->device = device;
    h->stream = NULL;
    h->pointer_mode = CUBLAS_POINTER_MODE_HOST;
    h->math_mode = CUBLAS_DEFAULT_MATH;
    h->atomics_mode = CUBLAS_ATOMICS_NOT_ALLOWED;
    *out = h;
    return CUBLAS_STATUS_SUCCESS;
}

void sim_blas_handle_free(struct cublasContext *h)
{
    int current;
    if (cudaGetDevice(&current) == cudaSuccess && cudaSetDevice(h->device) == cudaSuccess) {
        /* An error of earlier work is the program's to find, not ours. */
        if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
        if (cudaSetDevice(current) != cudaSuccess) cudaGetLastError();
    }
    h->magic = 0;
    free(h);
}

int sim_blas_handle_ok(const struct cublasContext *h)
{
    return h && h->magic == SIM_BLAS_MAGIC;
}

static void sim_blas_nothing(void *arg)
{
    (void)arg; /* the sim has no device code: the work is its place in the stream */
}

cublasStatus_t sim_blas_launch(cudaStream_t stream)
{
    /* replayable (it holds nothing), so a capturing stream records it as a
     * kernel node, as a CUDA graph records cuBLAS's kernels */
    if (sim_stream_enqueue_work(stream, 0, cudaGraphNodeTypeKernel, sim_blas_nothing, NULL, NULL) !=
        cudaSuccess)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t sim_blas_wait(cudaStream_t stream)
{
    if (cudaStreamSynchronize(stream) != cudaSuccess) {
        cudaGetLastError();
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}
