/* graphmem.c - the graph memory attributes: all four amounts read 0 on a
 * device whose graphs hold no memory, only the high watermarks can be set and
 * only to 0, and a bad device, attribute or pointer is refused with the
 * runtime's errors. */
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
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
