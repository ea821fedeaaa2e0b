/* graphmem.c - the graph memory attributes: all four amounts read 0 on a
 * device whose graphs hold no memory; a launch of a graph that allocates
 * charges a whole chunk, which stays reserved and used (mapped) after the
 * graph is gone until cudaDeviceGraphMemTrim, as an H200 answered; a trim
 * keeps a chunk a block the program has not freed is in; only the high
 * watermarks can be set and only to 0,
 * which resets each to the current amount; a bad device, attribute or
 * pointer is refused with the runtime's errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "require_device.h"

static void test_amounts_read_zero(void **state)
{
    (void)state;
    enum cudaGraphMemAttributeType attrs[] = {
        cudaGraphMemAttrUsedMemCurrent, cudaGraphMemAttrUsedMemHigh,
        cudaGraphMemAttrReservedMemCurrent, cudaGraphMemAttrReservedMemHigh};
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        uint64_t v = 12345;
        assert_int_equal(cudaDeviceGetGraphMemAttribute(0, attrs[i], &v), cudaSuccess);
        assert_int_equal(v, 0);
    }
}

static void test_only_watermarks_reset_to_zero(void **state)
{
    (void)state;
    uint64_t zero = 0, one = 1;
    assert_int_equal(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero),
                     cudaSuccess);
    assert_int_equal(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrReservedMemHigh, &zero),
                     cudaSuccess);
    assert_int_equal(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &one),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &zero),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &zero),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
}

static uint64_t amount(int device, enum cudaGraphMemAttributeType attr)
{
    uint64_t v = 12345;
    assert_int_equal(cudaDeviceGetGraphMemAttribute(device, attr, &v), cudaSuccess);
    return v;
}

/* On device 1: a graph that allocates 1 MiB and frees it. */
static void test_launch_charges_a_chunk_until_trimmed(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t exec;
    void *p;
    size_t free0, free1, total;
    const uint64_t chunk = 32 << 20;
    assert_int_equal(cudaSetDevice(1), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free0, &total), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    assert_int_equal(cudaMallocAsync(&p, 1 << 20, s), cudaSuccess);
    assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    assert_int_equal(amount(1, cudaGraphMemAttrReservedMemCurrent), 0);
    assert_int_equal(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess);
        assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
        assert_int_equal(amount(1, cudaGraphMemAttrReservedMemCurrent), chunk);
        assert_int_equal(amount(1, cudaGraphMemAttrUsedMemCurrent), chunk);
    }
    assert_int_equal(cudaMemGetInfo(&free1, &total), cudaSuccess);
    assert_int_equal(free0 - free1, chunk);
    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    /* The graph gone, its chunk stays mapped: used as well as reserved. */
    assert_int_equal(amount(1, cudaGraphMemAttrUsedMemCurrent), chunk);
    assert_int_equal(amount(1, cudaGraphMemAttrReservedMemCurrent), chunk);
    /* Resetting a high watermark sets it to the current amount. */
    uint64_t zero = 0;
    assert_int_equal(amount(1, cudaGraphMemAttrUsedMemHigh), chunk);
    assert_int_equal(cudaDeviceSetGraphMemAttribute(1, cudaGraphMemAttrUsedMemHigh, &zero),
                     cudaSuccess);
    assert_int_equal(amount(1, cudaGraphMemAttrUsedMemHigh), chunk);
    assert_int_equal(cudaDeviceSetGraphMemAttribute(1, cudaGraphMemAttrReservedMemHigh, &zero),
                     cudaSuccess);
    assert_int_equal(amount(1, cudaGraphMemAttrReservedMemHigh), chunk);
    assert_int_equal(cudaDeviceGraphMemTrim(1), cudaSuccess);
    assert_int_equal(amount(1, cudaGraphMemAttrReservedMemCurrent), 0);
    assert_int_equal(amount(1, cudaGraphMemAttrUsedMemCurrent), 0);
    assert_int_equal(cudaMemGetInfo(&free1, &total), cudaSuccess);
    assert_int_equal(free1, free0);
    /* Only the trim brought them down: resetting now takes both to 0. */
    assert_int_equal(cudaDeviceSetGraphMemAttribute(1, cudaGraphMemAttrUsedMemHigh, &zero),
                     cudaSuccess);
    assert_int_equal(amount(1, cudaGraphMemAttrUsedMemHigh), 0);
    assert_int_equal(cudaDeviceGraphMemTrim(99), cudaErrorInvalidDevice);
    (void)cudaGetLastError();
    cudaStreamDestroy(s);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
}

/* On device 2: a graph that allocates 1 MiB and leaves it to the program.
 * cudaDeviceGraphMemTrim gives back only memory not in use, and an
 * allocation not yet freed is in use (CUDA Programming Guide, "Physical
 * Memory Footprint"): its chunk stays reserved and used until it is freed. */
static void test_trim_keeps_an_unfreed_allocation(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t exec;
    void *p;
    const uint64_t chunk = 32 << 20;
    assert_int_equal(cudaSetDevice(2), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    assert_int_equal(cudaMallocAsync(&p, 1 << 20, s), cudaSuccess);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    assert_int_equal(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    assert_int_equal(cudaDeviceGraphMemTrim(2), cudaSuccess);
    assert_int_equal(amount(2, cudaGraphMemAttrReservedMemCurrent), chunk);
    assert_int_equal(amount(2, cudaGraphMemAttrUsedMemCurrent), chunk);
    /* Freed, it is memory no graph uses: still mapped until a trim. */
    assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(amount(2, cudaGraphMemAttrUsedMemCurrent), chunk);
    assert_int_equal(cudaDeviceGraphMemTrim(2), cudaSuccess);
    assert_int_equal(amount(2, cudaGraphMemAttrReservedMemCurrent), 0);
    assert_int_equal(amount(2, cudaGraphMemAttrUsedMemCurrent), 0);
    cudaStreamDestroy(s);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    uint64_t v;
    int n = 0;
    assert_int_equal(cudaGetDeviceCount(&n), cudaSuccess);
    assert_int_equal(cudaDeviceGetGraphMemAttribute(n, cudaGraphMemAttrUsedMemCurrent, &v),
                     cudaErrorInvalidDevice);
    assert_int_equal(cudaDeviceGetGraphMemAttribute(-1, cudaGraphMemAttrUsedMemCurrent, &v),
                     cudaErrorInvalidDevice);
    assert_int_equal(cudaDeviceSetGraphMemAttribute(n, cudaGraphMemAttrUsedMemHigh, &v),
                     cudaErrorInvalidDevice);
    assert_int_equal(cudaDeviceGetGraphMemAttribute(0, (enum cudaGraphMemAttributeType)99, &v),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, NULL),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_amounts_read_zero),
        cmocka_unit_test(test_only_watermarks_reset_to_zero),
        cmocka_unit_test(test_launch_charges_a_chunk_until_trimmed),
        cmocka_unit_test(test_trim_keeps_an_unfreed_allocation),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
