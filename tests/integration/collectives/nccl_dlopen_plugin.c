/* nccl_dlopen_plugin.c - a library that uses CUDA and NCCL, loaded by
 * nccl_dlopen_main.c with dlopen(RTLD_LOCAL) the way Python loads
 * PyTorch's extension modules: its libcudart and libnccl are nowhere in the
 * global scope, so the shim must find them among the loaded objects.
 *
 * Its one test is the record-stream check of nccl_record_stream.c for
 * ncclAllGather: it passes only if the shim both took the calls (its
 * allocator served the memory, its NCCL entry point recorded the use) and
 * reached the real NCCL behind them. */
#include "coll_test.h"

#define N (1u << 20)

__attribute__((visibility("default"))) int coll_plugin_run(void)
{
    int dev = 0;
    ncclComm_t comm;
    cudaStream_t a_stream, b_stream;
    CUDA_CHECK(cudaSetDevice(dev));
    NCCL_CHECK(ncclCommInitAll(&comm, 1, &dev));
    CUDA_CHECK(cudaStreamCreateWithFlags(&a_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&b_stream, cudaStreamNonBlocking));
    void *src, *buf, *again;
    CUDA_CHECK(cudaMalloc(&src, N));
    CUDA_CHECK(cudaMemset(src, 0x22, N));
    CUDA_CHECK(cudaMallocAsync(&buf, N, a_stream));
    CUDA_CHECK(cudaDeviceSynchronize());

    coll_gate gate;
    coll_gate_hold(&gate, b_stream);
    NCCL_CHECK(ncclAllGather(src, buf, N, ncclUint8, comm, b_stream));
    CUDA_CHECK(cudaFreeAsync(buf, a_stream));
    CUDA_CHECK(cudaMallocAsync(&again, N, a_stream));
    CUDA_CHECK(cudaMemsetAsync(again, 0x5A, N, a_stream));
    CUDA_CHECK(cudaStreamSynchronize(a_stream));
    coll_gate_open(&gate);
    CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT(coll_all_bytes(again, N, 0x5A),
           "memory freed while an all-gather on another stream still used it was handed out "
           "again (%p, was %p) and overwritten",
           again, buf);

    CUDA_CHECK(cudaFreeAsync(again, a_stream));
    CUDA_CHECK(cudaFree(src));
    CUDA_CHECK(cudaDeviceSynchronize());
    NCCL_CHECK(ncclCommDestroy(comm));
    return coll_failures;
}
