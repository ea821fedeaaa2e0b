/* stats.c - a fixed allocation pattern whose FSDPSHIM_SIM_STATS=1 line the
 * test matches: 3 allocations reach device 0 (cudaMalloc, the pool's chunk
 * for cudaMallocAsync, cuMemAlloc), 3 frees, and a peak of 34 MiB: the two
 * 1 MiB cudaMalloc/cuMemAlloc share a 2 MiB page, the pool reserves 32 MiB. */
#include <cuda.h>
#include <cuda_runtime_api.h>

int main(void)
{
    void *a, *b;
    CUdeviceptr c;
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    if (cudaGetDriverEntryPointByVersion("cuMemAlloc", (void **)&mem_alloc, 12000,
                                         cudaEnableDefault, NULL) ||
        cudaGetDriverEntryPointByVersion("cuMemFree", (void **)&mem_free, 12000, cudaEnableDefault,
                                         NULL))
        return 1;
    if (cudaMalloc(&a, 1 << 20) || cudaMallocAsync(&b, 1 << 20, 0) || mem_alloc(&c, 1 << 20))
        return 1;
    if (cudaFree(a) || cudaFreeAsync(b, 0) || cudaStreamSynchronize(0) || mem_free(c)) return 1;
    return 0;
}
