/* plugin.c - a library linked with the CUDA runtime that a host program
 * loads with dlopen(RTLD_LOCAL) after start-up, as Python loads PyTorch: the
 * runtime is then in no global scope and only the loaded-object walk can
 * find it. */
#include <cuda_runtime_api.h>
#include <string.h>

__attribute__((visibility("default"))) int plugin_roundtrip(size_t size)
{
    unsigned char *d = NULL, *h = NULL;
    int bad = 0;

    if (cudaMalloc((void **)&d, size) != cudaSuccess || cudaMallocHost((void **)&h, size))
        return -1;
    if (cudaMemset(d, 0x5A, size) != cudaSuccess ||
        cudaMemcpy(h, d, size, cudaMemcpyDeviceToHost) != cudaSuccess)
        return -1;
    for (size_t i = 0; i < size; i++)
        bad |= h[i] != 0x5A;
    if (cudaFree(d) != cudaSuccess || cudaFreeHost(h) != cudaSuccess) return -1;
    return bad;
}
