/* last_error.c - the runtime's last-error rules: a failing call records its
 * error, cudaGetLastError returns and resets it, cudaPeekAtLastError only
 * returns it, success leaves it alone, cudaErrorNotReady is never recorded,
 * and the state is per thread. Also error names and messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "require_device.h"

static void test_get_resets_peek_does_not(void **state)
{
    (void)state;
    (void)cudaGetLastError();
    assert_int_equal(cudaSetDevice(-1), cudaErrorInvalidDevice);
    assert_int_equal(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    assert_int_equal(cudaPeekAtLastError(), cudaErrorInvalidDevice);
    /* A successful call does not clear it. */
    int n;
    assert_int_equal(cudaGetDeviceCount(&n), cudaSuccess);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidDevice);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
}

static void test_latest_error_wins(void **state)
{
    (void)state;
    assert_int_equal(cudaSetDevice(-1), cudaErrorInvalidDevice);
    assert_int_equal(cudaMalloc(NULL, 1), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
}

static void test_not_ready_is_not_recorded(void **state)
{
    (void)state;
    struct fs_gate gate = FS_GATE_INIT;
    cudaStream_t s;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaStreamQuery(s), cudaErrorNotReady);
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    fs_gate_open(&gate);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    cudaStreamDestroy(s);
}

static void *fail_in_thread(void *p)
{
    (void)p;
    (void)cudaSetDevice(-1);
    return NULL;
}

static void test_last_error_is_per_thread(void **state)
{
    (void)state;
    (void)cudaGetLastError();
    pthread_t t;
    pthread_create(&t, NULL, fail_in_thread, NULL);
    pthread_join(t, NULL);
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
}

static void test_names_and_messages(void **state)
{
    (void)state;
    assert_string_equal(cudaGetErrorName(cudaSuccess), "cudaSuccess");
    assert_string_equal(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
    assert_string_equal(cudaGetErrorName(cudaErrorNotReady), "cudaErrorNotReady");
    assert_string_equal(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
    assert_string_equal(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
    assert_string_equal(cudaGetErrorString((cudaError_t)12345), "unrecognized error code");
    assert_true(strlen(cudaGetErrorString(cudaErrorInvalidResourceHandle)) > 0);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_resets_peek_does_not),
        cmocka_unit_test(test_latest_error_wins),
        cmocka_unit_test(test_not_ready_is_not_recorded),
        cmocka_unit_test(test_last_error_is_per_thread),
        cmocka_unit_test(test_names_and_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
