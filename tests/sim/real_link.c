/* real_link.c - built against the TOOLKIT'S libcudart.so.13 (references
 * bound to cudaMalloc@libcudart.so.13, as in PyTorch's libraries) and run
 * with LD_LIBRARY_PATH=build/lib/sim: it must get the sim, which proves the
 * sim carries the real version node. Exits 0 on success, 1 otherwise. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "real_link: failed: %s\n", #cond);                                     \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    struct cudaDeviceProp p;
    int n = 0, v = 0;
    void *d;
    cudaStream_t s;
    CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n > 0);
    CHECK(cudaGetDeviceProperties(&p, 0) == cudaSuccess);
    CHECK(strcmp(p.name, "fsdpshim simulated device") == 0);
    CHECK(cudaMalloc(&d, 4096) == cudaSuccess);
    CHECK(cudaStreamCreate(&s) == cudaSuccess);
    CHECK(cudaMemsetAsync(d, 1, 4096, s) == cudaSuccess);
    CHECK(cudaMemcpyAsync(&v, d, sizeof v, cudaMemcpyDeviceToHost, s) == cudaSuccess);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(v == 0x01010101);
    CHECK(cudaFree(d) == cudaSuccess);
    CHECK(cudaStreamDestroy(s) == cudaSuccess);
    printf("real_link: ran on the sim through the libcudart.so.13 version node\n");
    return 0;
}
