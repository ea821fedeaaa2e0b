/* peer.c - peer access: cudaDeviceCanAccessPeer says yes between distinct
 * devices; enabling twice is cudaErrorPeerAccessAlreadyEnabled, disabling
 * what is not enabled is cudaErrorPeerAccessNotEnabled; the mapping belongs
 * to the current device (enabling 0->1 does not enable 1->0) and is gone
 * after cudaDeviceReset of either device; a bad peer, the device itself or
 * nonzero flags are refused. Skips with fewer than two devices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "require_device.h"

static int device_count(void)
{
    int n = 0;
    assert_int_equal(cudaGetDeviceCount(&n), cudaSuccess);
    return n;
}

static void test_enable_disable(void **state)
{
    (void)state;
    int can = -1;
    assert_int_equal(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
    assert_int_equal(can, 1);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    assert_int_equal(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
    assert_int_equal(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    assert_int_equal(cudaGetLastError(), cudaErrorPeerAccessAlreadyEnabled);
    assert_int_equal(cudaDeviceDisablePeerAccess(1), cudaSuccess);
    assert_int_equal(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    assert_int_equal(cudaGetLastError(), cudaErrorPeerAccessNotEnabled);
}

static void test_direction_is_per_device(void **state)
{
    (void)state;
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
    assert_int_equal(cudaSetDevice(1), cudaSuccess);
    assert_int_equal(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);
    assert_int_equal(cudaDeviceEnablePeerAccess(0, 0), cudaSuccess);
    assert_int_equal(cudaDeviceDisablePeerAccess(0), cudaSuccess);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaDeviceDisablePeerAccess(1), cudaSuccess);
    (void)cudaGetLastError();
}

static void test_reset_of_either_device_unmaps(void **state)
{
    (void)state;
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
    assert_int_equal(cudaDeviceReset(), cudaSuccess);
    assert_int_equal(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    assert_int_equal(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
    assert_int_equal(cudaSetDevice(1), cudaSuccess);
    assert_int_equal(cudaDeviceReset(), cudaSuccess);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
    assert_int_equal(cudaDeviceDisablePeerAccess(1), cudaSuccess);
    (void)cudaGetLastError();
}

static void test_bad_arguments(void **state)
{
    (void)state;
    int n = device_count();
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaDeviceEnablePeerAccess(n, 0), cudaErrorInvalidDevice);
    assert_int_equal(cudaDeviceEnablePeerAccess(-1, 0), cudaErrorInvalidDevice);
    assert_int_equal(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice);
    assert_int_equal(cudaDeviceDisablePeerAccess(n), cudaErrorInvalidDevice);
    assert_int_equal(cudaDeviceDisablePeerAccess(0), cudaErrorInvalidDevice);
    assert_int_equal(cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    /* The refused enable left nothing behind. */
    assert_int_equal(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    (void)cudaGetLastError();
}

int main(void)
{
    fs_test_require_device();
    if (device_count() < 2) {
        fprintf(stderr, "skipped: peer access needs two devices\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enable_disable),
        cmocka_unit_test(test_direction_is_per_device),
        cmocka_unit_test(test_reset_of_either_device_unmaps),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
