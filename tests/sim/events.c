/* events.c - event query before and after completion, elapsed time, and the
 * errors of timing calls on events that cannot be timed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "require_device.h"

static void test_never_recorded_event_is_complete(void **state)
{
    (void)state;
    cudaEvent_t ev;
    assert_int_equal(cudaEventCreate(&ev), cudaSuccess);
    assert_int_equal(cudaEventQuery(ev), cudaSuccess);
    assert_int_equal(cudaEventSynchronize(ev), cudaSuccess);
    cudaStream_t s;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaStreamWaitEvent(s, ev, 0), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    cudaStreamDestroy(s);
    cudaEventDestroy(ev);
}

static void test_query_before_and_after_completion(void **state)
{
    (void)state;
    struct fs_gate gate = FS_GATE_INIT;
    cudaStream_t s;
    cudaEvent_t ev;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaEventCreate(&ev), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaEventRecord(ev, s), cudaSuccess);
    assert_int_equal(cudaEventQuery(ev), cudaErrorNotReady);
    /* cudaErrorNotReady is never the last error. */
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    fs_gate_open(&gate);
    assert_int_equal(cudaEventSynchronize(ev), cudaSuccess);
    assert_int_equal(cudaEventQuery(ev), cudaSuccess);
    assert_false(gate.timed_out);
    cudaEventDestroy(ev);
    cudaStreamDestroy(s);
}

static void CUDART_CB sleep_50ms(void *p)
{
    (void)p;
    fs_test_sleep_ms(50);
}

static void test_elapsed_time(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaEvent_t a, b;
    float ms = -1;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaEventCreate(&a), cudaSuccess);
    assert_int_equal(cudaEventCreate(&b), cudaSuccess);
    assert_int_equal(cudaEventRecord(a, s), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s, sleep_50ms, NULL), cudaSuccess);
    assert_int_equal(cudaEventRecord(b, s), cudaSuccess);
    assert_int_equal(cudaEventSynchronize(b), cudaSuccess);
    assert_int_equal(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
    assert_true(ms >= 45.0f && ms < 2000.0f);
    assert_int_equal(cudaEventElapsedTime(&ms, b, a), cudaSuccess);
    assert_true(ms <= -45.0f);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaStreamDestroy(s);
}

static void test_elapsed_time_errors(void **state)
{
    (void)state;
    struct fs_gate gate = FS_GATE_INIT;
    cudaStream_t s;
    cudaEvent_t done, pending, untimed, unrecorded;
    float ms;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaEventCreate(&done), cudaSuccess);
    assert_int_equal(cudaEventCreate(&pending), cudaSuccess);
    assert_int_equal(cudaEventCreate(&unrecorded), cudaSuccess);
    assert_int_equal(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
    assert_int_equal(cudaEventRecord(done, s), cudaSuccess);
    assert_int_equal(cudaEventRecord(untimed, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaEventRecord(pending, s), cudaSuccess);

    assert_int_equal(cudaEventElapsedTime(&ms, done, pending), cudaErrorNotReady);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaEventElapsedTime(&ms, done, untimed), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaEventElapsedTime(&ms, done, unrecorded), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaEventElapsedTime(NULL, done, done), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);

    fs_gate_open(&gate);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaEventElapsedTime(&ms, done, pending), cudaSuccess);
    assert_true(ms >= 0.0f);
    cudaEventDestroy(done);
    cudaEventDestroy(pending);
    cudaEventDestroy(untimed);
    cudaEventDestroy(unrecorded);
    cudaStreamDestroy(s);
}

static void test_rerecord_moves_the_event(void **state)
{
    (void)state;
    struct fs_gate gate = FS_GATE_INIT;
    cudaStream_t s1, s2;
    cudaEvent_t ev;
    assert_int_equal(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaEventCreate(&ev), cudaSuccess);
    assert_int_equal(cudaEventRecord(ev, s1), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s1), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s2, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaEventRecord(ev, s2), cudaSuccess);
    assert_int_equal(cudaEventQuery(ev), cudaErrorNotReady);
    fs_gate_open(&gate);
    assert_int_equal(cudaEventSynchronize(ev), cudaSuccess);
    cudaEventDestroy(ev);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_never_recorded_event_is_complete),
        cmocka_unit_test(test_query_before_and_after_completion),
        cmocka_unit_test(test_elapsed_time),
        cmocka_unit_test(test_elapsed_time_errors),
        cmocka_unit_test(test_rerecord_moves_the_event),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
