/* managed.c - sim-only: cudaMallocManaged. The host and the device both use
 * the memory (host writes seen by copies and the other way round), it is
 * charged to the current device in whole 2 MiB pages of its own, reported as managed
 * by cudaPointerGetAttributes, freed by cudaFree; bad arguments get the
 * runtime's errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "require_device.h"

static void test_host_and_device_use(void **state)
{
    (void)state;
    int *m, *dev, got[256];
    size_t free0, free1, total;
    assert_int_equal(cudaMemGetInfo(&free0, &total), cudaSuccess);
    assert_int_equal(cudaMallocManaged((void **)&m, 1000, cudaMemAttachGlobal), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free1, &total), cudaSuccess);
    assert_int_equal(free0 - free1, 2 << 20); /* a page of its own */
    for (int i = 0; i < 250; i++)
        m[i] = i * 3;
    assert_int_equal(cudaMalloc((void **)&dev, 1000), cudaSuccess);
    assert_int_equal(cudaMemcpy(dev, m, 1000, cudaMemcpyDefault), cudaSuccess);
    assert_int_equal(cudaMemcpy(got, dev, 1000, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_memory_equal(got, m, 1000);
    assert_int_equal(cudaMemset(m, 0, 1000), cudaSuccess);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_int_equal(m[249], 0);

    struct cudaPointerAttributes attr;
    assert_int_equal(cudaPointerGetAttributes(&attr, m + 10), cudaSuccess);
    assert_int_equal(attr.type, cudaMemoryTypeManaged);
    assert_int_equal(attr.device, 0);
    assert_ptr_equal(attr.devicePointer, m + 10);
    assert_ptr_equal(attr.hostPointer, m + 10);

    assert_int_equal(cudaFree(m + 1), cudaErrorInvalidValue);
    assert_int_equal(cudaFree(m), cudaSuccess);
    assert_int_equal(cudaFree(m), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    assert_int_equal(cudaFree(dev), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free1, &total), cudaSuccess);
    assert_int_equal(free1, free0);
}

static void test_current_device_and_flags(void **state)
{
    (void)state;
    void *m;
    struct cudaPointerAttributes attr;
    assert_int_equal(cudaSetDevice(3), cudaSuccess);
    assert_int_equal(cudaMallocManaged(&m, 64, cudaMemAttachHost), cudaSuccess);
    assert_int_equal(cudaPointerGetAttributes(&attr, m), cudaSuccess);
    assert_int_equal(attr.device, 3);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaFree(m), cudaSuccess);

    assert_int_equal(cudaMallocManaged(&m, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);
    assert_int_equal(cudaMallocManaged(&m, 64, 0), cudaErrorInvalidValue);
    assert_int_equal(cudaMallocManaged(&m, 64, cudaMemAttachSingle), cudaErrorInvalidValue);
    assert_int_equal(cudaMallocManaged(NULL, 64, cudaMemAttachGlobal), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    assert_int_equal(cudaMallocManaged(&m, SIZE_MAX, cudaMemAttachGlobal),
                     cudaErrorMemoryAllocation);
    assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_and_device_use),
        cmocka_unit_test(test_current_device_and_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
