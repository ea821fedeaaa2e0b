/* no_device.c - sim-only: with FSDPSHIM_SIM_DEVICES=0 (set by the test) the
 * runtime reports cudaErrorNoDevice from every call that needs a device,
 * as a machine without a GPU does, and the process carries on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cuda_runtime_api.h>

static void test_calls_fail_with_no_device(void **state)
{
    (void)state;
    int n = -1;
    void *p;
    cudaStream_t s;
    cudaEvent_t ev;
    size_t free_b, total;
    assert_int_equal(cudaGetDeviceCount(&n), cudaErrorNoDevice);
    assert_int_equal(cudaGetLastError(), cudaErrorNoDevice);
    assert_int_equal(cudaSetDevice(0), cudaErrorInvalidDevice);
    assert_int_equal(cudaMalloc(&p, 16), cudaErrorNoDevice);
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaErrorNoDevice);
    assert_int_equal(cudaStreamCreate(&s), cudaErrorNoDevice);
    assert_int_equal(cudaEventCreate(&ev), cudaErrorNoDevice);
    assert_int_equal(cudaStreamSynchronize(0), cudaErrorNoDevice);
    assert_int_equal(cudaDeviceSynchronize(), cudaErrorNoDevice);
    assert_int_equal(cudaGetLastError(), cudaErrorNoDevice);
    /* Host memory needs no device. */
    assert_int_equal(cudaMallocHost(&p, 64), cudaSuccess);
    assert_int_equal(cudaFreeHost(p), cudaSuccess);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls_fail_with_no_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
