/* pool_allocator.c - an allocator for torch.cuda.memory.CUDAPluggableAllocator
 * that counts its calls, for adapter.py's MemPool with an allocator of its
 * own: PyTorch (natively) and the shim's adapter take that pool's segments
 * from it and give them back to it. Plain cudaMalloc/cudaFree: under the
 * shim they reach the program's runtime (the adapter calls this inside the
 * shim, whose reentrancy guard passes them on). */
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <sys/types.h>

static long allocs, frees;
static size_t last_size;

__attribute__((visibility("default"))) void *fs_test_pool_alloc(ssize_t size, int device,
                                                                cudaStream_t stream)
{
    void *p = NULL;
    (void)device;
    (void)stream;
    if (cudaMalloc(&p, (size_t)size) != cudaSuccess) return NULL;
    __atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
    last_size = (size_t)size;
    return p;
}

__attribute__((visibility("default"))) void fs_test_pool_free(void *ptr, ssize_t size, int device,
                                                              cudaStream_t stream)
{
    (void)size;
    (void)device;
    (void)stream;
    cudaFree(ptr);
    __atomic_add_fetch(&frees, 1, __ATOMIC_RELAXED);
}

__attribute__((visibility("default"))) long fs_test_pool_allocs(void)
{
    return __atomic_load_n(&allocs, __ATOMIC_RELAXED);
}

__attribute__((visibility("default"))) long fs_test_pool_frees(void)
{
    return __atomic_load_n(&frees, __ATOMIC_RELAXED);
}

__attribute__((visibility("default"))) size_t fs_test_pool_last_size(void)
{
    return last_size;
}
