/* capacity.c - sim-only: the configured capacity (FSDPSHIM_SIM_MEM=64M,
 * FSDPSHIM_SIM_DEVICES=2 in this test's environment) is what the device
 * reports, allocations fail with a real out-of-memory error at it, and
 * memory comes back after frees, pool trims and device resets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>

#include "require_device.h"

#define MiB ((size_t)1 << 20)

static void test_configuration(void **state)
{
    (void)state;
    int n;
    size_t free_b, total;
    struct cudaDeviceProp p;
    assert_int_equal(cudaGetDeviceCount(&n), cudaSuccess);
    assert_int_equal(n, 2);
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    assert_int_equal(total, 64 * MiB);
    assert_int_equal(free_b, 64 * MiB);
    assert_int_equal(cudaGetDeviceProperties(&p, 1), cudaSuccess);
    assert_int_equal(p.totalGlobalMem, 64 * MiB);
    assert_string_equal(p.name, "fsdpshim simulated device");
    assert_int_equal(p.major * 10 + p.minor, 90);
    assert_int_equal(p.multiProcessorCount, 132);
    assert_int_equal(cudaSetDevice(2), cudaErrorInvalidDevice);
    (void)cudaGetLastError();
}

static void test_oom_and_recovery(void **state)
{
    (void)state;
    void *a, *b, *c;
    assert_int_equal(cudaMalloc(&a, 40 * MiB), cudaSuccess);
    assert_int_equal(cudaMalloc(&b, 30 * MiB), cudaErrorMemoryAllocation);
    assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
    /* Another device has its own capacity. */
    assert_int_equal(cudaSetDevice(1), cudaSuccess);
    assert_int_equal(cudaMalloc(&c, 40 * MiB), cudaSuccess);
    assert_int_equal(cudaFree(c), cudaSuccess);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    /* Exactly the rest fits. */
    assert_int_equal(cudaMalloc(&b, 24 * MiB), cudaSuccess);
    assert_int_equal(cudaMalloc(&c, 256), cudaErrorMemoryAllocation);
    (void)cudaGetLastError();
    assert_int_equal(cudaFree(a), cudaSuccess);
    assert_int_equal(cudaMalloc(&a, 30 * MiB), cudaSuccess);
    assert_int_equal(cudaFree(a), cudaSuccess);
    assert_int_equal(cudaFree(b), cudaSuccess);
}

static void test_pool_cache_counts_and_is_released_on_oom(void **state)
{
    (void)state;
    cudaMemPool_t pool;
    cudaStream_t s;
    void *a, *b;
    uint64_t keep = UINT64_MAX, zero = 0;
    assert_int_equal(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                     cudaSuccess);
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaMallocAsync(&a, 20 * MiB, s), cudaSuccess);
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    /* The pool still holds its 32 MiB chunk: cudaMalloc cannot have it. */
    assert_int_equal(cudaMalloc(&b, 40 * MiB), cudaErrorMemoryAllocation);
    (void)cudaGetLastError();
    /* A pool allocation that fits neither the cached chunk nor the rest of
     * the device (its two chunks) releases the cache and retries. */
    assert_int_equal(cudaMallocAsync(&b, 50 * MiB, s), cudaSuccess);
    assert_int_equal(cudaFreeAsync(b, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    assert_int_equal(cudaMalloc(&b, 60 * MiB), cudaSuccess);
    assert_int_equal(cudaFree(b), cudaSuccess);
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero),
                     cudaSuccess);
    cudaStreamDestroy(s);
}

/* A pool's chunk is 32 MiB, a larger block's size in whole chunks; where
 * those no longer fit, a chunk of the block's own size in pages is tried
 * before the allocation fails (an assumption: docs/sim.md, "Memory
 * pools"). */
static void test_pool_chunk_smaller_when_the_device_is_full(void **state)
{
    (void)state;
    cudaMemPool_t pool;
    cudaStream_t s;
    void *big, *a;
    uint64_t reserved = 0;
    size_t free_b, total;
    assert_int_equal(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaMalloc(&big, 40 * MiB), cudaSuccess);
    assert_int_equal(cudaMallocAsync(&a, 4096, s), cudaSuccess);
    assert_int_equal(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved),
                     cudaSuccess);
    assert_int_equal(reserved, 2 * MiB);
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    assert_int_equal(free_b, 22 * MiB);
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    /* Nothing fits at all: the refusal is the caller's. */
    assert_int_equal(cudaMallocAsync(&a, 30 * MiB, s), cudaErrorMemoryAllocation);
    (void)cudaGetLastError();
    assert_int_equal(cudaFree(big), cudaSuccess);
    /* A block larger than a chunk: two whole chunks (64 MiB) no longer fit
     * beside 16 MiB, its own 40 MiB do. */
    assert_int_equal(cudaMalloc(&big, 16 * MiB), cudaSuccess);
    assert_int_equal(cudaMallocAsync(&a, 40 * MiB, s), cudaSuccess);
    assert_int_equal(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved),
                     cudaSuccess);
    assert_int_equal(reserved, 40 * MiB);
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaFree(big), cudaSuccess);
    /* With the device empty, whole chunks again. */
    assert_int_equal(cudaMallocAsync(&a, 40 * MiB, s), cudaSuccess);
    assert_int_equal(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved),
                     cudaSuccess);
    assert_int_equal(reserved, 64 * MiB);
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    cudaStreamDestroy(s);
}

static void test_vmm_counts_against_capacity(void **state)
{
    (void)state;
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    assert_int_equal(cudaGetDriverEntryPointByVersion("cuMemCreate", (void **)&create, 12000,
                                                      cudaEnableDefault, NULL),
                     cudaSuccess);
    assert_int_equal(cudaGetDriverEntryPointByVersion("cuMemRelease", (void **)&release, 12000,
                                                      cudaEnableDefault, NULL),
                     cudaSuccess);
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h1, h2;
    size_t free_b, total;
    assert_int_equal(create(&h1, 48 * MiB, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    assert_int_equal(free_b, 16 * MiB);
    assert_int_equal(create(&h2, 32 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(release(h1), CUDA_SUCCESS);
    assert_int_equal(create(&h2, 32 * MiB, &prop, 0), CUDA_SUCCESS);
    assert_int_equal(release(h2), CUDA_SUCCESS);
}

static void test_device_reset_frees_and_invalidates(void **state)
{
    (void)state;
    void *a;
    cudaStream_t s;
    cudaEvent_t ev;
    size_t free_b, total;
    assert_int_equal(cudaMalloc(&a, 60 * MiB), cudaSuccess);
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaEventCreate(&ev), cudaSuccess);
    assert_int_equal(cudaDeviceReset(), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    assert_int_equal(free_b, total);
    assert_int_equal(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaEventQuery(ev), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaFree(a), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    /* The default streams still work. */
    assert_int_equal(cudaMalloc(&a, MiB), cudaSuccess);
    assert_int_equal(cudaMemset(a, 0, MiB), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(0), cudaSuccess);
    assert_int_equal(cudaFree(a), cudaSuccess);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_configuration),
        cmocka_unit_test(test_oom_and_recovery),
        cmocka_unit_test(test_pool_cache_counts_and_is_released_on_oom),
        cmocka_unit_test(test_pool_chunk_smaller_when_the_device_is_full),
        cmocka_unit_test(test_vmm_counts_against_capacity),
        cmocka_unit_test(test_device_reset_frees_and_invalidates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
