/* pool_layout.c - sim-only: how a memory pool lays its blocks out in the
 * chunks it reserves (docs/sim.md, "Memory pools"): 32 MiB chunks, a larger
 * block's size in whole chunks; blocks 512 bytes apart, counted as used by
 * the bytes asked for; freed space
 * reusable at once by the stream that freed it and by other streams once
 * reached; a chunk given back only when empty, down to the release
 * threshold; the used count a cudaFree leaves behind; the current pool
 * (cudaDeviceSetMemPool) that cudaMallocAsync and cuMemAllocAsync take
 * from. Each test has a device of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cuda.h>

#include "require_device.h"

#define MiB   ((size_t)1 << 20)
#define CHUNK (32 * MiB)

static uint64_t attr(cudaMemPool_t pool, enum cudaMemPoolAttr a)
{
    uint64_t v = 0;
    assert_int_equal(cudaMemPoolGetAttribute(pool, a, &v), cudaSuccess);
    return v;
}

static uint64_t reserved(cudaMemPool_t pool)
{
    return attr(pool, cudaMemPoolAttrReservedMemCurrent);
}

static size_t device_used(void)
{
    size_t free_b = 0, total = 0;
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    return total - free_b;
}

static void set_threshold(cudaMemPool_t pool, uint64_t v)
{
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &v),
                     cudaSuccess);
}

/* The default pool of `device`, made current, with a stream of it. */
static cudaMemPool_t on_device(int device, cudaStream_t *s)
{
    cudaMemPool_t pool;
    assert_int_equal(cudaSetDevice(device), cudaSuccess);
    assert_int_equal(cudaDeviceGetDefaultMemPool(&pool, device), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), cudaSuccess);
    return pool;
}

static void test_chunks(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaMemPool_t pool = on_device(1, &s);
    size_t base = device_used();
    char *a, *b, *c, *d;
    assert_int_equal(cudaMallocAsync((void **)&a, 4096, s), cudaSuccess);
    assert_int_equal(reserved(pool), CHUNK);
    assert_int_equal(device_used() - base, CHUNK);
    assert_int_equal(attr(pool, cudaMemPoolAttrUsedMemCurrent), 4096);
    /* Blocks lie 512 bytes apart, each taking its size rounded to 512; used
     * counts the bytes asked for, as an H200 answered (1000 bytes: 1000). */
    assert_int_equal(cudaMallocAsync((void **)&b, 1, s), cudaSuccess);
    assert_int_equal(cudaMallocAsync((void **)&c, 1000, s), cudaSuccess);
    assert_ptr_equal(b, a + 4096);
    assert_ptr_equal(c, b + 512);
    assert_int_equal(attr(pool, cudaMemPoolAttrUsedMemCurrent), 4096 + 1 + 1000);
    /* What is left of the chunk is less than 32 MiB: a second chunk. */
    assert_int_equal(cudaMallocAsync((void **)&d, CHUNK, s), cudaSuccess);
    assert_int_equal(reserved(pool), 2 * CHUNK);
    assert_int_equal(cudaFreeAsync(d, s), cudaSuccess);
    /* A block larger than a chunk: its size in whole chunks, as an H200
     * answered (33 MiB: 64 MiB). What it leaves of that chunk is too little
     * for 32 MiB, which takes the freed 32 MiB, s's own. */
    assert_int_equal(cudaMallocAsync((void **)&d, 33 * MiB + 1, s), cudaSuccess);
    assert_int_equal(reserved(pool), 4 * CHUNK);
    void *e;
    assert_int_equal(cudaMallocAsync(&e, 32 * MiB, s), cudaSuccess);
    assert_int_equal(reserved(pool), 4 * CHUNK);
    assert_int_equal(attr(pool, cudaMemPoolAttrReservedMemHigh), 4 * CHUNK);
    assert_int_equal(device_used() - base, 4 * CHUNK);
    assert_int_equal(attr(pool, cudaMemPoolAttrUsedMemCurrent),
                     4096 + 1 + 1000 + 33 * MiB + 1 + 32 * MiB);
    /* A block just over two chunks takes three. */
    void *f;
    assert_int_equal(cudaMallocAsync(&f, 2 * CHUNK + 1, s), cudaSuccess);
    assert_int_equal(reserved(pool), 7 * CHUNK);
    assert_int_equal(device_used() - base, 7 * CHUNK);
    assert_int_equal(cudaFreeAsync(f, s), cudaSuccess);
    /* Synchronised with threshold 0, only empty chunks go. */
    assert_int_equal(cudaFreeAsync(e, s), cudaSuccess);
    assert_int_equal(cudaFreeAsync(d, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(reserved(pool), CHUNK);
    assert_int_equal(device_used() - base, CHUNK);
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaFreeAsync(b, s), cudaSuccess);
    assert_int_equal(reserved(pool), CHUNK); /* not yet reached */
    assert_int_equal(cudaFreeAsync(c, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(reserved(pool), 0);
    assert_int_equal(attr(pool, cudaMemPoolAttrUsedMemCurrent), 0);
    assert_int_equal(device_used(), base);
    cudaStreamDestroy(s);
}

/* 64 blocks of 1 MiB fill two chunks exactly; the release threshold keeps
 * whole chunks, and a trim gives back only chunks without blocks. */
static void test_threshold_and_trim_keep_whole_chunks(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaMemPool_t pool = on_device(2, &s);
    void *blocks[64];
    for (int i = 0; i < 64; i++)
        assert_int_equal(cudaMallocAsync(&blocks[i], MiB, s), cudaSuccess);
    assert_int_equal(reserved(pool), 2 * CHUNK);
    set_threshold(pool, CHUNK);
    /* The second chunk emptied, the first with a block left. */
    for (int i = 1; i < 64; i++)
        assert_int_equal(cudaFreeAsync(blocks[i], s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(reserved(pool), CHUNK);
    assert_int_equal(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    assert_int_equal(reserved(pool), CHUNK);
    assert_int_equal(cudaFreeAsync(blocks[0], s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(reserved(pool), CHUNK); /* the threshold keeps it */
    assert_int_equal(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    assert_int_equal(reserved(pool), 0);
    set_threshold(pool, 0);
    cudaStreamDestroy(s);
}

static int gate_open;

/* Holds its stream until gate_open is set. */
static void CUDART_CB hold(void *unused)
{
    (void)unused;
    while (!__atomic_load_n(&gate_open, __ATOMIC_ACQUIRE))
        fs_test_sleep_ms(1);
}

/* Freed space: the freeing stream takes it at once; another stream once the
 * free is reached, only if opportunistic reuse is allowed. */
static void test_stream_ordered_reuse(void **state)
{
    (void)state;
    cudaStream_t s, t;
    cudaMemPool_t pool = on_device(3, &s);
    assert_int_equal(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking), cudaSuccess);
    set_threshold(pool, UINT64_MAX);
    char *a, *b, *c;
    assert_int_equal(cudaMallocAsync((void **)&a, MiB, s), cudaSuccess);
    assert_int_equal(cudaMallocAsync((void **)&b, MiB, s), cudaSuccess);
    /* Hold s back so its free is not reached. */
    __atomic_store_n(&gate_open, 0, __ATOMIC_RELEASE);
    assert_int_equal(cudaLaunchHostFunc(s, hold, NULL), cudaSuccess);
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    /* t may not take a's space yet; s may. */
    assert_int_equal(cudaMallocAsync((void **)&c, MiB, t), cudaSuccess);
    assert_ptr_not_equal(c, a);
    assert_int_equal(cudaFreeAsync(c, t), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(t), cudaSuccess);
    assert_int_equal(cudaMallocAsync((void **)&c, MiB, s), cudaSuccess);
    assert_ptr_equal(c, a);
    assert_int_equal(cudaFreeAsync(c, s), cudaSuccess);
    __atomic_store_n(&gate_open, 1, __ATOMIC_RELEASE);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    /* Reached: any stream, while opportunistic reuse is allowed. */
    assert_int_equal(cudaMallocAsync((void **)&c, MiB, t), cudaSuccess);
    assert_ptr_equal(c, a);
    assert_int_equal(cudaFreeAsync(c, t), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(t), cudaSuccess);
    int off = 0, on = 1;
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &off),
                     cudaSuccess);
    assert_int_equal(cudaMallocAsync((void **)&c, MiB, s), cudaSuccess);
    assert_ptr_not_equal(c, a); /* a's space is t's */
    assert_int_equal(cudaMallocAsync((void **)&a, MiB, t), cudaSuccess);
    assert_int_equal(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &on),
                     cudaSuccess);
    assert_int_equal(cudaFreeAsync(a, t), cudaSuccess);
    assert_int_equal(cudaFreeAsync(b, s), cudaSuccess);
    assert_int_equal(cudaFreeAsync(c, s), cudaSuccess);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    set_threshold(pool, 0);
    assert_int_equal(cudaMemPoolTrimTo(pool, 0), cudaSuccess);
    assert_int_equal(reserved(pool), 0);
    cudaStreamDestroy(s);
    cudaStreamDestroy(t);
}

/* cudaFree of a pool block gives its memory back at once (to the threshold)
 * but UsedMemCurrent keeps counting it, as an H100 answered. */
static void test_cuda_free_of_a_pool_block(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaMemPool_t pool = on_device(4, &s);
    size_t base = device_used();
    void *p;
    assert_int_equal(cudaMallocAsync(&p, MiB, s), cudaSuccess);
    assert_int_equal(cudaFree(p), cudaSuccess);
    assert_int_equal(reserved(pool), 0);
    assert_int_equal(device_used(), base);
    assert_int_equal(attr(pool, cudaMemPoolAttrUsedMemCurrent), MiB);
    assert_int_equal(cudaFree(p), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(attr(pool, cudaMemPoolAttrUsedMemCurrent), MiB);
    /* A live block on top counts as usual. */
    assert_int_equal(cudaMallocAsync(&p, 2 * MiB, s), cudaSuccess);
    assert_int_equal(attr(pool, cudaMemPoolAttrUsedMemCurrent), 3 * MiB);
    assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
    assert_int_equal(attr(pool, cudaMemPoolAttrUsedMemCurrent), MiB);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(reserved(pool), 0);
    cudaStreamDestroy(s);
}

static cudaMemPool_t create_pool(int device)
{
    struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                     .location = {cudaMemLocationTypeDevice, device}};
    cudaMemPool_t pool;
    assert_int_equal(cudaMemPoolCreate(&pool, &props), cudaSuccess);
    return pool;
}

/* cudaMallocAsync and cuMemAllocAsync take from the current pool; only a
 * pool of the device itself can be made current; destroying the current
 * pool makes the default pool current again. */
static void test_current_pool(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaMemPool_t def = on_device(5, &s), mine = create_pool(5), other = create_pool(6), cur;
    CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
    CUresult (*free_async)(CUdeviceptr, CUstream);
    assert_int_equal(cudaGetDriverEntryPointByVersion("cuMemAllocAsync", (void **)&alloc_async,
                                                      12000, cudaEnableDefault, NULL),
                     cudaSuccess);
    assert_int_equal(cudaGetDriverEntryPointByVersion("cuMemFreeAsync", (void **)&free_async, 12000,
                                                      cudaEnableDefault, NULL),
                     cudaSuccess);
    assert_int_equal(cudaDeviceSetMemPool(5, other), cudaErrorInvalidValue);
    assert_int_equal(cudaDeviceSetMemPool(5, NULL), cudaErrorInvalidValue);
    assert_int_equal(cudaDeviceSetMemPool(99, mine), cudaErrorInvalidDevice);
    (void)cudaGetLastError();
    assert_int_equal(cudaDeviceSetMemPool(5, mine), cudaSuccess);
    assert_int_equal(cudaDeviceGetMemPool(&cur, 5), cudaSuccess);
    assert_ptr_equal(cur, mine);
    assert_int_equal(cudaDeviceGetMemPool(&cur, 6), cudaSuccess);
    assert_ptr_not_equal(cur, other);

    void *p;
    CUdeviceptr d;
    assert_int_equal(cudaMallocAsync(&p, MiB, s), cudaSuccess);
    assert_int_equal(alloc_async(&d, MiB, (CUstream)s), CUDA_SUCCESS);
    assert_int_equal(attr(mine, cudaMemPoolAttrUsedMemCurrent), 2 * MiB);
    assert_int_equal(attr(def, cudaMemPoolAttrUsedMemCurrent), 0);
    assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
    assert_int_equal(free_async(d, (CUstream)s), CUDA_SUCCESS);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);

    assert_int_equal(cudaMemPoolDestroy(mine), cudaSuccess);
    assert_int_equal(cudaDeviceGetMemPool(&cur, 5), cudaSuccess);
    assert_ptr_equal(cur, def);
    assert_int_equal(cudaMallocAsync(&p, MiB, s), cudaSuccess);
    assert_int_equal(attr(def, cudaMemPoolAttrUsedMemCurrent), MiB);
    assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaMemPoolDestroy(other), cudaSuccess);
    cudaStreamDestroy(s);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunks),
        cmocka_unit_test(test_threshold_and_trim_keep_whole_chunks),
        cmocka_unit_test(test_stream_ordered_reuse),
        cmocka_unit_test(test_cuda_free_of_a_pool_block),
        cmocka_unit_test(test_current_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
