/* mempool.c - the default memory pool: cudaMallocAsync / cudaFreeAsync in
 * stream order, the attributes PyTorch reads and writes (release threshold,
 * reuse flags, reserved/used current and high), and trimming; and pools
 * made by cudaMemPoolCreate. Sizes are checked with inequalities: a GPU's
 * pool reserves in larger chunks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "require_device.h"

static cudaMemPool_t pool;

static uint64_t attr64(enum cudaMemPoolAttr a)
{
    uint64_t v = 0;
    assert_int_equal(cudaMemPoolGetAttribute(pool, a, &v), cudaSuccess);
    return v;
}

static int setup(void **state)
{
    (void)state;
    return cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess ? 0 : -1;
}

static void test_defaults_and_current_pool(void **state)
{
    (void)state;
    cudaMemPool_t cur;
    int v;
    assert_int_equal(cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
    assert_ptr_equal(cur, pool);
    assert_int_equal(cudaDeviceSetMemPool(0, pool), cudaSuccess);
    assert_int_equal(attr64(cudaMemPoolAttrReleaseThreshold), 0);
    assert_int_equal(cudaMemPoolGetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &v),
                     cudaSuccess);
    assert_int_equal(v, 1);
    assert_int_equal(cudaDeviceGetAttribute(&v, cudaDevAttrMemoryPoolsSupported, 0), cudaSuccess);
    assert_int_equal(v, 1);
}

static void test_used_and_reserved(void **state)
{
    (void)state;
    cudaStream_t s;
    void *a, *b;
    uint64_t keep = UINT64_MAX, zero = 0;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                     cudaSuccess);
    uint64_t used0 = attr64(cudaMemPoolAttrUsedMemCurrent);
    assert_int_equal(cudaMallocAsync(&a, 3 << 20, s), cudaSuccess);
    assert_int_equal(cudaMallocAsync(&b, 5 << 20, s), cudaSuccess);
    uint64_t used = attr64(cudaMemPoolAttrUsedMemCurrent);
    assert_true(used >= used0 + (8 << 20));
    assert_true(attr64(cudaMemPoolAttrReservedMemCurrent) >= used);
    assert_true(attr64(cudaMemPoolAttrUsedMemHigh) >= used);

    assert_int_equal(cudaFreeAsync(b, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    uint64_t after = attr64(cudaMemPoolAttrUsedMemCurrent);
    assert_true(after < used);
    /* With the threshold at max, the freed block stays reserved. */
    assert_true(attr64(cudaMemPoolAttrReservedMemCurrent) >= used);

    /* Writing 0 resets a high-water mark to the current value. */
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), cudaSuccess);
    assert_int_equal(attr64(cudaMemPoolAttrUsedMemHigh), after);

    /* Trimming to 0 gives back what is not in use (a GPU's pool may keep a
     * chunk that `a` still occupies). */
    uint64_t reserved = attr64(cudaMemPoolAttrReservedMemCurrent);
    assert_int_equal(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    assert_true(attr64(cudaMemPoolAttrReservedMemCurrent) <= reserved);
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero),
                     cudaSuccess);
    assert_int_equal(attr64(cudaMemPoolAttrReservedMemHigh),
                     attr64(cudaMemPoolAttrReservedMemCurrent));

    /* With nothing in use, trimming to 0 empties the pool. */
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    assert_int_equal(attr64(cudaMemPoolAttrUsedMemCurrent), used0);
    if (used0 == 0) assert_int_equal(attr64(cudaMemPoolAttrReservedMemCurrent), 0);
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero),
                     cudaSuccess);
    cudaStreamDestroy(s);
}

static void test_sync_releases_down_to_threshold(void **state)
{
    (void)state;
    cudaStream_t s;
    void *a;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    uint64_t reserved0 = attr64(cudaMemPoolAttrReservedMemCurrent);
    assert_int_equal(cudaMallocAsync(&a, 32 << 20, s), cudaSuccess);
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    /* Threshold 0: synchronising releases the cached memory. */
    assert_true(attr64(cudaMemPoolAttrReservedMemCurrent) <= reserved0);
    cudaStreamDestroy(s);
}

static void test_same_stream_reuse_in_stream_order(void **state)
{
    (void)state;
    cudaStream_t s;
    void *a, *b;
    uint64_t keep = UINT64_MAX, zero = 0;
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                     cudaSuccess);
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaMallocAsync(&a, 1 << 20, s), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(a, 1, 1 << 20, s), cudaSuccess);
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaMallocAsync(&b, 1 << 20, s), cudaSuccess);
    assert_ptr_equal(a, b);
    assert_int_equal(cudaFreeAsync(b, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &zero),
                     cudaSuccess);
    assert_int_equal(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    cudaStreamDestroy(s);
}

static void test_from_pool_and_cross_free(void **state)
{
    (void)state;
    cudaStream_t s1, s2;
    void *a;
    unsigned char out = 0;
    assert_int_equal(cudaStreamCreate(&s1), cudaSuccess);
    assert_int_equal(cudaStreamCreate(&s2), cudaSuccess);
    assert_int_equal(cudaMallocFromPoolAsync(&a, 4096, pool, s1), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(a, 9, 4096, s1), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(&out, a, 1, cudaMemcpyDeviceToHost, s1), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s1), cudaSuccess);
    assert_int_equal(out, 9);
    /* A block may be freed on another stream than it was allocated on. */
    assert_int_equal(cudaFreeAsync(a, s2), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s2), cudaSuccess);
    /* cudaFree of stream-ordered memory is allowed too. */
    assert_int_equal(cudaMallocAsync(&a, 4096, s1), cudaSuccess);
    assert_int_equal(cudaFree(a), cudaSuccess);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

/* A created pool serves cudaMallocFromPoolAsync on its own; destroying it
 * with a block still out leaves that block valid and freeable. */
static void test_created_pool(void **state)
{
    (void)state;
    struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                     .location = {cudaMemLocationTypeDevice, 0}};
    cudaMemPool_t own;
    cudaStream_t s;
    uint64_t v = 0;
    unsigned char out = 0;
    size_t before, after, total;
    void *a;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&before, &total), cudaSuccess);
    assert_int_equal(cudaMemPoolCreate(&own, &props), cudaSuccess);
    assert_ptr_not_equal(own, pool);
    assert_int_equal(cudaMallocFromPoolAsync(&a, 1 << 20, own, s), cudaSuccess);
    assert_int_equal(cudaMemPoolGetAttribute(own, cudaMemPoolAttrUsedMemCurrent, &v), cudaSuccess);
    assert_true(v >= (1 << 20));
    assert_int_equal(cudaMemsetAsync(a, 7, 1 << 20, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaMemPoolDestroy(own), cudaSuccess);
    assert_int_equal(cudaMemcpy(&out, (char *)a + 4095, 1, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_int_equal(out, 7);
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    /* the destroyed pool gave the block's memory back */
    assert_int_equal(cudaMemGetInfo(&after, &total), cudaSuccess);
    assert_true(after >= before);
    /* a default pool cannot be destroyed */
    assert_int_equal(cudaMemPoolDestroy(pool), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    cudaStreamDestroy(s);
}

/* cudaDeviceSetMemPool makes a pool of the device current: cudaDeviceGetMemPool
 * answers it and cudaMallocAsync takes from it (an H100, driver 580, answered
 * the first; the runtime API reference documents the second). */
static void test_current_pool_is_settable(void **state)
{
    (void)state;
    struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                     .location = {cudaMemLocationTypeDevice, 0}};
    cudaMemPool_t own, cur;
    cudaStream_t s;
    void *a;
    uint64_t used = 0, default_used = attr64(cudaMemPoolAttrUsedMemCurrent);
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaMemPoolCreate(&own, &props), cudaSuccess);
    assert_int_equal(cudaDeviceSetMemPool(0, own), cudaSuccess);
    assert_int_equal(cudaDeviceGetMemPool(&cur, 0), cudaSuccess);
    assert_ptr_equal(cur, own);
    assert_int_equal(cudaMallocAsync(&a, 1 << 20, s), cudaSuccess);
    assert_int_equal(cudaMemPoolGetAttribute(own, cudaMemPoolAttrUsedMemCurrent, &used),
                     cudaSuccess);
    assert_true(used >= (1 << 20));
    assert_int_equal(attr64(cudaMemPoolAttrUsedMemCurrent), default_used);
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaDeviceSetMemPool(0, pool), cudaSuccess);
    assert_int_equal(cudaMemPoolDestroy(own), cudaSuccess);
    cudaStreamDestroy(s);
}

/* CUDA 13 makes pools of pinned host memory, which the host reads and writes
 * (an H100, driver 580, answered cudaSuccess for both locations). */
static void test_host_memory_pools(void **state)
{
    (void)state;
    static const enum cudaMemLocationType where[] = {cudaMemLocationTypeHost,
                                                     cudaMemLocationTypeHostNuma};
    cudaStream_t s;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    for (int i = 0; i < 2; i++) {
        struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                         .location = {where[i], 0}};
        cudaMemPool_t host;
        unsigned char *p;
        assert_int_equal(cudaMemPoolCreate(&host, &props), cudaSuccess);
        assert_int_equal(cudaMallocFromPoolAsync((void **)&p, 4096, host, s), cudaSuccess);
        assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
        for (int j = 0; j < 4096; j++)
            p[j] = (unsigned char)(j + i);
        for (int j = 0; j < 4096; j++)
            assert_int_equal(p[j], (unsigned char)(j + i));
        assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
        assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
        assert_int_equal(cudaMemPoolDestroy(host), cudaSuccess);
    }
    cudaStreamDestroy(s);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_current_pool),
        cmocka_unit_test(test_used_and_reserved),
        cmocka_unit_test(test_sync_releases_down_to_threshold),
        cmocka_unit_test(test_same_stream_reuse_in_stream_order),
        cmocka_unit_test(test_from_pool_and_cross_free),
        cmocka_unit_test(test_created_pool),
        cmocka_unit_test(test_current_pool_is_settable),
        cmocka_unit_test(test_host_memory_pools),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
