/* host_pool.c - sim-only: pools of pinned host memory (cudaMemPoolCreate
 * with cudaMemLocationTypeHost or ...HostNuma, CUDA 13): which properties
 * make one, that its blocks are host memory the host reads and writes (in
 * a dry run too: sim_host_pool_dry), charged to no device, that copies and
 * stream order reach them, its chunks, access and trimming, and what it
 * cannot be (the current pool, IPC, graph memory). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "require_device.h"

#define MiB ((size_t)1 << 20)

static cudaError_t create(cudaMemPool_t *pool, enum cudaMemLocationType type, int id,
                          enum cudaMemAllocationHandleType handles)
{
    struct cudaMemPoolProps props = {
        .allocType = cudaMemAllocationTypePinned, .handleTypes = handles, .location = {type, id}};
    return cudaMemPoolCreate(pool, &props);
}

static uint64_t attr(cudaMemPool_t pool, enum cudaMemPoolAttr a)
{
    uint64_t v = 0;
    assert_int_equal(cudaMemPoolGetAttribute(pool, a, &v), cudaSuccess);
    return v;
}

static void test_which_properties_make_one(void **state)
{
    (void)state;
    cudaMemPool_t p;
    assert_int_equal(create(&p, cudaMemLocationTypeHost, 12345, cudaMemHandleTypeNone),
                     cudaSuccess); /* the id is ignored */
    assert_int_equal(cudaMemPoolDestroy(p), cudaSuccess);
    assert_int_equal(create(&p, cudaMemLocationTypeHostNuma, 0, cudaMemHandleTypeNone),
                     cudaSuccess);
    assert_int_equal(cudaMemPoolDestroy(p), cudaSuccess);
    assert_int_equal(create(&p, cudaMemLocationTypeHostNuma, 9999, cudaMemHandleTypeNone),
                     cudaErrorInvalidValue);
    assert_int_equal(create(&p, cudaMemLocationTypeHostNuma, -1, cudaMemHandleTypeNone),
                     cudaErrorInvalidValue);
    assert_int_equal(create(&p, cudaMemLocationTypeHostNumaCurrent, 0, cudaMemHandleTypeNone),
                     cudaErrorInvalidValue);
    /* Not IPC capable. */
    assert_int_equal(create(&p, cudaMemLocationTypeHost, 0, cudaMemHandleTypePosixFileDescriptor),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
}

static void test_blocks_are_host_memory(void **state)
{
    (void)state;
    cudaMemPool_t pool;
    cudaStream_t s;
    size_t free0, free1, total;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free0, &total), cudaSuccess);
    assert_int_equal(create(&pool, cudaMemLocationTypeHost, 0, cudaMemHandleTypeNone), cudaSuccess);
    unsigned char *a, *b;
    assert_int_equal(cudaMallocFromPoolAsync((void **)&a, 4096, pool, s), cudaSuccess);
    assert_int_equal(cudaMallocFromPoolAsync((void **)&b, 1000, pool, s), cudaSuccess);
    assert_ptr_equal(b, a + 4096);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    /* Reserved like a device pool, charged to no device. */
    assert_int_equal(attr(pool, cudaMemPoolAttrReservedMemCurrent), 32 * MiB);
    assert_int_equal(attr(pool, cudaMemPoolAttrUsedMemCurrent), 4096 + 1000); /* as asked */
    assert_int_equal(cudaMemGetInfo(&free1, &total), cudaSuccess);
    assert_int_equal(free1, free0);

    /* The host reads and writes it; so do copies, in stream order. */
    for (int i = 0; i < 4096; i++)
        a[i] = (unsigned char)i;
    struct cudaPointerAttributes pa;
    assert_int_equal(cudaPointerGetAttributes(&pa, a + 10), cudaSuccess);
    assert_int_equal(pa.type, cudaMemoryTypeHost);
    assert_ptr_equal(pa.hostPointer, a + 10);
    assert_ptr_equal(pa.devicePointer, a + 10);
    void *dev;
    assert_int_equal(cudaMalloc(&dev, 4096), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(dev, a, 4096, cudaMemcpyHostToDevice, s), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(a, 0, 4096, s), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(b, dev, 1000, cudaMemcpyDeviceToHost, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    /* In a dry run a copy from the device writes zeros: the host memory is
     * real, the device's holds nothing. */
    const char *data = getenv("FSDPSHIM_SIM_DATA");
    int dry = data && strcmp(data, "0") == 0;
    for (int i = 0; i < 1000; i++)
        assert_int_equal(b[i], dry ? 0 : (unsigned char)i);
    assert_int_equal(a[100], 0);
    /* Copies stop at the block's size. */
    assert_int_equal(cudaMemcpy(dev, b, 1001, cudaMemcpyDefault), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    assert_int_equal(cudaFree(dev), cudaSuccess);

    /* Not a device's: neither IPC nor a device's current pool. */
    cudaIpcMemHandle_t h;
    assert_int_equal(cudaIpcGetMemHandle(&h, a), cudaErrorInvalidValue);
    assert_int_equal(cudaDeviceSetMemPool(0, pool), cudaErrorInvalidValue);
    (void)cudaGetLastError();

    /* Device access is recorded, none until granted. */
    enum cudaMemAccessFlags flags = cudaMemAccessFlagsProtReadWrite;
    struct cudaMemLocation dev0 = {cudaMemLocationTypeDevice, 0};
    assert_int_equal(cudaMemPoolGetAccess(&flags, pool, &dev0), cudaSuccess);
    assert_int_equal(flags, cudaMemAccessFlagsProtNone);
    struct cudaMemAccessDesc grant = {dev0, cudaMemAccessFlagsProtReadWrite};
    assert_int_equal(cudaMemPoolSetAccess(pool, &grant, 1), cudaSuccess);
    assert_int_equal(cudaMemPoolGetAccess(&flags, pool, &dev0), cudaSuccess);
    assert_int_equal(flags, cudaMemAccessFlagsProtReadWrite);

    /* Freed and synchronised, the threshold 0 gives the chunk back. */
    assert_int_equal(cudaFreeAsync(a, s), cudaSuccess);
    assert_int_equal(cudaFreeAsync(b, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(attr(pool, cudaMemPoolAttrReservedMemCurrent), 0);
    assert_int_equal(attr(pool, cudaMemPoolAttrUsedMemCurrent), 0);
    assert_int_equal(cudaMemPoolDestroy(pool), cudaSuccess);
    cudaStreamDestroy(s);
}

/* A capture cannot take graph memory from a host pool (not simulated). */
static void test_not_in_a_capture(void **state)
{
    (void)state;
    cudaMemPool_t pool;
    cudaStream_t s;
    void *p;
    cudaGraph_t g;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(create(&pool, cudaMemLocationTypeHost, 0, cudaMemHandleTypeNone), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    assert_int_equal(cudaMallocFromPoolAsync(&p, 4096, pool, s), cudaErrorNotSupported);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    assert_int_equal(cudaMemPoolDestroy(pool), cudaSuccess);
    (void)cudaGetLastError();
    cudaStreamDestroy(s);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_which_properties_make_one),
        cmocka_unit_test(test_blocks_are_host_memory),
        cmocka_unit_test(test_not_in_a_capture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
