/* profiler.c - cudaProfilerStart/Stop with no profiler attached: accepted
 * in any order and any number of times, and nothing is recorded as an
 * error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cuda_profiler_api.h>

#include "require_device.h"

static void test_start_stop_any_order(void **state)
{
    (void)state;
    assert_int_equal(cudaProfilerStop(), cudaSuccess);
    assert_int_equal(cudaProfilerStart(), cudaSuccess);
    assert_int_equal(cudaProfilerStart(), cudaSuccess);
    assert_int_equal(cudaProfilerStop(), cudaSuccess);
    assert_int_equal(cudaProfilerStop(), cudaSuccess);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_stop_any_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
