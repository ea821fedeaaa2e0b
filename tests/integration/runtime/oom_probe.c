/* oom_probe.c - what PyTorch's cudaMallocAsync backend does to size the
 * cuDNN workspace: allocate, halving the size on each out-of-memory error,
 * clearing the error each time, until an allocation succeeds; and it
 * asserts free + used <= total from cudaMemGetInfo. Each failure must
 * return cudaErrorMemoryAllocation and leave exactly that as the last error
 * (and nothing after it is cleared); the shim's OOM line must appear at
 * most once in all of it (run with a small simulated device). Under the
 * shim, cudaMemGetInfo's free is the runtime's plus what the cache holds
 * unused (reserved - used), which the program gets back without the device. */
#include "probe.h"

int main(void)
{
    size_t size, free_b, total_b, real_free[2];
    cudaError_t (*real_meminfo)(size_t *, size_t *);
    cudaMemPool_t pool;
    uint64_t used = 0, reserved = 0;
    cudaStream_t s;
    void *rt, *keep, *p = NULL;
    int failures = 0;

    watchdog(30);
    require_device();
    /* the runtime's own figure, bypassing any interposer (probe.h) */
    rt = dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY);
    EXPECT(rt != NULL);
    real_meminfo = (cudaError_t(*)(size_t *, size_t *))libc_dlsym()(rt, "cudaMemGetInfo");
    EXPECT(real_meminfo != NULL);
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMallocAsync(&keep, 64 << 20, s)); /* something in use */
    /* start at a power of two at least 8 times the device, so that at least
     * four sizes fail whatever the device (an H200 has 141 GiB) */
    CHECK(real_meminfo(&free_b, &total_b));
    for (size = 1; size < total_b; size <<= 1)
        ;
    size <<= 3;
    for (;;) {
        cudaError_t e = cudaMallocAsync(&p, size, s);
        if (e == cudaSuccess) break;
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
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
    CHECK(real_meminfo(&real_free[0], &total_b));
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    CHECK(real_meminfo(&real_free[1], &total_b));
    EXPECT(used >= 64 << 20);
    EXPECT(free_b + used <= total_b);
    if (shim_stat("allocation.all.allocated", -1) >= 0) {
        /* the freed probe block stays cached: counted free (on a GPU other
         * processes may move the runtime's figure between the calls) */
        size_t cached = (size_t)(reserved - used);
        size_t lo = real_free[0] < real_free[1] ? real_free[0] : real_free[1];
        size_t hi = real_free[0] < real_free[1] ? real_free[1] : real_free[0];
        EXPECT(cached >= size);
        EXPECT(free_b >= lo + cached && free_b <= hi + cached);
    }

    CHECK(cudaFreeAsync(keep, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    EXPECT(used == 0);
    EXPECT(cudaGetLastError() == cudaSuccess);
    printf("oom_probe: %d failures, then %zu bytes\n", failures, size);
    return 0;
}
