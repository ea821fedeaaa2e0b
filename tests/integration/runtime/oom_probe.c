/* oom_probe.c - what PyTorch's cudaMallocAsync backend does to size the
 * cuDNN workspace: allocate, halving the size on each out-of-memory error,
 * clearing the error each time, until an allocation succeeds; and it
 * asserts free + used <= total from cudaMemGetInfo. Each failure must
 * return cudaErrorMemoryAllocation and leave exactly that as the last error
 * (and nothing after it is cleared); the shim's OOM line must appear at
 * most once in all of it (run with a small simulated device). */
#include "probe.h"

int main(void)
{
    size_t size = (size_t)1 << 40, free_b, total_b;
    cudaMemPool_t pool;
    uint64_t used = 0;
    cudaStream_t s;
    void *keep, *p = NULL;
    int failures = 0;

    watchdog(30);
    require_device();
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMallocAsync(&keep, 64 << 20, s)); /* something in use */
    for (;;) {
        cudaError_t e = cudaMallocAsync(&p, size, s);
        if (e == cudaSuccess)
            break;
        EXPECT(e == cudaErrorMemoryAllocation);
        EXPECT(cudaGetLastError() == cudaErrorMemoryAllocation);
        EXPECT(cudaGetLastError() == cudaSuccess);
        failures++;
        size /= 2;
        EXPECT(size > 0);
    }
    EXPECT(failures > 3);
    CHECK(cudaFreeAsync(p, s));
    CHECK(cudaStreamSynchronize(s));

    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    EXPECT(used >= 64 << 20);
    EXPECT(free_b + used <= total_b);

    CHECK(cudaFreeAsync(keep, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    EXPECT(used == 0);
    EXPECT(cudaGetLastError() == cudaSuccess);
    printf("oom_probe: %d failures, then %zu bytes\n", failures, size);
    return 0;
}
