/* small_device.c - sim-only: on a device of 48 MiB (FSDPSHIM_SIM_MEM=48M in
 * this test's environment), not a whole number of 32 MiB pool chunks, a
 * block whose whole chunks would exceed the device gets a chunk of its own
 * size in pages instead (docs/sim.md, "Memory pools"), from a pool and from
 * graph memory alike, so that what fits the device can be allocated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "require_device.h"

#define MiB ((size_t)1 << 20)

static size_t device_free(void)
{
    size_t free_b = 0, total = 0;
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    assert_int_equal(total, 48 * MiB);
    return free_b;
}

static uint64_t graph_mem(enum cudaGraphMemAttributeType attr)
{
    uint64_t v = 12345;
    assert_int_equal(cudaDeviceGetGraphMemAttribute(0, attr, &v), cudaSuccess);
    return v;
}

/* 40 MiB would take two whole chunks, 64 MiB: more than the device has. */
static void test_pool_block_beyond_whole_chunks(void **state)
{
    (void)state;
    cudaMemPool_t pool;
    cudaStream_t s;
    void *a;
    uint64_t reserved = 0;
    assert_int_equal(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaMallocAsync(&a, 40 * MiB, s), cudaSuccess);
    assert_int_equal(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved),
                     cudaSuccess);
    assert_int_equal(reserved, 40 * MiB);
    assert_int_equal(device_free(), 8 * MiB);
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(device_free(), 48 * MiB);
    /* A small block still takes a whole chunk, which fits. */
    assert_int_equal(cudaMallocAsync(&a, 4096, s), cudaSuccess);
    assert_int_equal(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved),
                     cudaSuccess);
    assert_int_equal(reserved, 32 * MiB);
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(device_free(), 48 * MiB);
    cudaStreamDestroy(s);
}

/* The same block captured: graph memory is charged at the launch, in a
 * chunk of the block's own size. */
static void test_graph_block_beyond_whole_chunks(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t exec;
    void *p;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    assert_int_equal(cudaMallocAsync(&p, 40 * MiB, s), cudaSuccess);
    assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    assert_int_equal(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(graph_mem(cudaGraphMemAttrReservedMemCurrent), 40 * MiB);
    assert_int_equal(graph_mem(cudaGraphMemAttrUsedMemCurrent), 40 * MiB);
    assert_int_equal(device_free(), 8 * MiB);
    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    assert_int_equal(cudaDeviceGraphMemTrim(0), cudaSuccess);
    assert_int_equal(graph_mem(cudaGraphMemAttrReservedMemCurrent), 0);
    assert_int_equal(device_free(), 48 * MiB);
    cudaStreamDestroy(s);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_block_beyond_whole_chunks),
        cmocka_unit_test(test_graph_block_beyond_whole_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
