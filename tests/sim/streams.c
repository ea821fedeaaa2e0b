/* streams.c - stream semantics: submission order, cross-stream waits through
 * events, the legacy default stream's implicit synchronisation with blocking
 * (and not with non-blocking) streams, and the per-thread default stream.
 *
 * Streams are held back with a host function waiting on a gate; what must
 * or must not be held back with it is watched through events recorded after
 * device work (copies), which host-function serialisation does not touch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "require_device.h"

static void *dev_a, *dev_b;

static int setup(void **state)
{
    (void)state;
    if (cudaMalloc(&dev_a, 4096) || cudaMalloc(&dev_b, 4096)) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cudaFree(dev_a);
    cudaFree(dev_b);
    return 0;
}

/* Device work on s, then an event after it. */
static cudaEvent_t work_then_event(cudaStream_t s)
{
    cudaEvent_t ev;
    assert_int_equal(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(dev_b, dev_a, 4096, cudaMemcpyDeviceToDevice, s), cudaSuccess);
    assert_int_equal(cudaEventRecord(ev, s), cudaSuccess);
    return ev;
}

struct order_log {
    int seen[64];
    int n;
};
struct order_item {
    struct order_log *log;
    int value;
};

static void CUDART_CB log_item(void *p)
{
    struct order_item *it = p;
    it->log->seen[it->log->n++] = it->value;
}

static void test_submission_order(void **state)
{
    (void)state;
    cudaStream_t s;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    struct order_log log = {{0}, 0};
    struct order_item items[64];
    for (int i = 0; i < 64; i++) {
        items[i] = (struct order_item){&log, i};
        assert_int_equal(cudaLaunchHostFunc(s, log_item, &items[i]), cudaSuccess);
        if (i % 8 == 0) assert_int_equal(cudaMemsetAsync(dev_a, i, 4096, s), cudaSuccess);
    }
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(log.n, 64);
    for (int i = 0; i < 64; i++)
        assert_int_equal(log.seen[i], i);
    assert_int_equal(cudaStreamQuery(s), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

static void test_query_not_ready_is_not_an_error(void **state)
{
    (void)state;
    cudaStream_t s;
    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaStreamQuery(s), cudaErrorNotReady);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    fs_gate_open(&gate);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaStreamQuery(s), cudaSuccess);
    assert_false(gate.timed_out);
    cudaStreamDestroy(s);
}

static int shared_value;
static int observed_value;
static void CUDART_CB write_value(void *p)
{
    (void)p;
    shared_value = 42;
}
static void CUDART_CB read_value(void *p)
{
    (void)p;
    observed_value = shared_value;
}

static void test_event_wait_orders_streams(void **state)
{
    (void)state;
    cudaStream_t s1, s2;
    cudaEvent_t ev;
    struct fs_gate gate = FS_GATE_INIT;
    shared_value = observed_value = 0;
    assert_int_equal(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaEventCreate(&ev), cudaSuccess);

    assert_int_equal(cudaLaunchHostFunc(s1, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s1, write_value, NULL), cudaSuccess);
    assert_int_equal(cudaEventRecord(ev, s1), cudaSuccess);
    assert_int_equal(cudaStreamWaitEvent(s2, ev, 0), cudaSuccess);
    cudaEvent_t after = work_then_event(s2);
    assert_int_equal(cudaLaunchHostFunc(s2, read_value, NULL), cudaSuccess);

    /* s2 is held by s1's gate through the event. */
    assert_int_equal(fs_event_poll(after, 100), cudaErrorNotReady);
    assert_int_equal(cudaStreamQuery(s2), cudaErrorNotReady);
    fs_gate_open(&gate);
    assert_int_equal(cudaStreamSynchronize(s2), cudaSuccess);
    assert_int_equal(observed_value, 42);
    assert_int_equal(cudaEventQuery(ev), cudaSuccess);
    cudaEventDestroy(after);
    cudaEventDestroy(ev);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
}

/* Holds `held` with a gate and reports whether legacy work issued after it
 * completes while the gate is closed. Waiting long only where completion is
 * expected keeps the test fast and still tolerant of a loaded machine. */
static int legacy_overtakes(cudaStream_t held, int expected)
{
    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cudaLaunchHostFunc(held, fs_gate_wait, &gate), cudaSuccess);
    cudaEvent_t ev = work_then_event(cudaStreamLegacy);
    int overtook = fs_event_poll(ev, expected ? 5000 : 300) == cudaSuccess;
    fs_gate_open(&gate);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_int_equal(cudaEventQuery(ev), cudaSuccess);
    assert_false(gate.timed_out);
    cudaEventDestroy(ev);
    return overtook;
}

static void test_legacy_waits_for_blocking_streams(void **state)
{
    (void)state;
    cudaStream_t s;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_false(legacy_overtakes(s, 0));
    cudaStreamDestroy(s);
}

static void test_legacy_ignores_non_blocking_streams(void **state)
{
    (void)state;
    cudaStream_t s;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_true(legacy_overtakes(s, 1));
    cudaStreamDestroy(s);
}

static void test_blocking_stream_waits_for_legacy(void **state)
{
    (void)state;
    cudaStream_t blocking, non_blocking;
    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cudaStreamCreate(&blocking), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&non_blocking, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(cudaStreamLegacy, fs_gate_wait, &gate), cudaSuccess);
    cudaEvent_t held = work_then_event(blocking);
    cudaEvent_t free_running = work_then_event(non_blocking);
    assert_int_equal(fs_event_poll(free_running, 5000), cudaSuccess);
    assert_int_equal(fs_event_poll(held, 200), cudaErrorNotReady);
    fs_gate_open(&gate);
    assert_int_equal(cudaEventSynchronize(held), cudaSuccess);
    cudaEventDestroy(held);
    cudaEventDestroy(free_running);
    cudaStreamDestroy(blocking);
    cudaStreamDestroy(non_blocking);
}

static void test_per_thread_stream_is_blocking(void **state)
{
    (void)state;
    /* Legacy work waits for the per-thread stream, which is blocking. */
    assert_false(legacy_overtakes(cudaStreamPerThread, 0));
}

struct thread_arg {
    struct fs_gate *gate;
    unsigned long long id;
};

static void *hold_own_per_thread_stream(void *p)
{
    struct thread_arg *a = p;
    cudaLaunchHostFunc(cudaStreamPerThread, fs_gate_wait, a->gate);
    cudaStreamGetId(cudaStreamPerThread, &a->id);
    return NULL;
}

static void test_per_thread_streams_are_independent(void **state)
{
    (void)state;
    struct fs_gate gate = FS_GATE_INIT;
    struct thread_arg arg = {&gate, 0};
    pthread_t t;
    pthread_create(&t, NULL, hold_own_per_thread_stream, &arg);
    pthread_join(t, NULL);
    /* The other thread's per-thread stream is held; ours is not. */
    cudaEvent_t ev = work_then_event(cudaStreamPerThread);
    assert_int_equal(fs_event_poll(ev, 5000), cudaSuccess);
    unsigned long long mine;
    assert_int_equal(cudaStreamGetId(cudaStreamPerThread, &mine), cudaSuccess);
    assert_true(mine != arg.id);
    fs_gate_open(&gate);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    cudaEventDestroy(ev);
}

static void test_stream_properties(void **state)
{
    (void)state;
    int least, greatest;
    assert_int_equal(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
    assert_true(greatest < least);
    cudaStream_t s;
    assert_int_equal(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest),
                     cudaSuccess);
    unsigned flags;
    int prio, dev;
    assert_int_equal(cudaStreamGetFlags(s, &flags), cudaSuccess);
    assert_int_equal(flags, cudaStreamNonBlocking);
    assert_int_equal(cudaStreamGetPriority(s, &prio), cudaSuccess);
    assert_int_equal(prio, greatest);
    assert_int_equal(cudaStreamGetDevice(s, &dev), cudaSuccess);
    assert_int_equal(dev, 0);
    /* Priorities beyond the range are clamped. */
    cudaStream_t t;
    assert_int_equal(cudaStreamCreateWithPriority(&t, 0, greatest - 100), cudaSuccess);
    assert_int_equal(cudaStreamGetPriority(t, &prio), cudaSuccess);
    assert_int_equal(prio, greatest);
    unsigned long long id1, id2;
    assert_int_equal(cudaStreamGetId(s, &id1), cudaSuccess);
    assert_int_equal(cudaStreamGetId(t, &id2), cudaSuccess);
    assert_true(id1 != id2);
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusActive;
    assert_int_equal(cudaStreamIsCapturing(s, &cs), cudaSuccess);
    assert_int_equal(cs, cudaStreamCaptureStatusNone);
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    assert_int_equal(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
    assert_int_equal(mode, cudaStreamCaptureModeGlobal);
    assert_int_equal(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
    assert_int_equal(mode, cudaStreamCaptureModeRelaxed);
    cudaStreamDestroy(s);
    cudaStreamDestroy(t);
}

static int callback_status = -1;
static void CUDART_CB callback(cudaStream_t s, cudaError_t status, void *user)
{
    (void)s;
    (void)user;
    callback_status = status;
}

static void test_destroy_returns_at_once_and_work_drains(void **state)
{
    (void)state;
    cudaStream_t s;
    struct fs_gate gate = FS_GATE_INIT;
    cudaEvent_t ev;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    callback_status = -1;
    assert_int_equal(cudaStreamAddCallback(s, callback, NULL, 0), cudaSuccess);
    ev = work_then_event(s);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess); /* does not wait for the gate */
    assert_int_equal(cudaEventQuery(ev), cudaErrorNotReady);
    fs_gate_open(&gate);
    assert_int_equal(cudaEventSynchronize(ev), cudaSuccess);
    assert_int_equal(callback_status, cudaSuccess);
    cudaEventDestroy(ev);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_submission_order),
        cmocka_unit_test(test_query_not_ready_is_not_an_error),
        cmocka_unit_test(test_event_wait_orders_streams),
        cmocka_unit_test(test_legacy_waits_for_blocking_streams),
        cmocka_unit_test(test_legacy_ignores_non_blocking_streams),
        cmocka_unit_test(test_blocking_stream_waits_for_legacy),
        cmocka_unit_test(test_per_thread_stream_is_blocking),
        cmocka_unit_test(test_per_thread_streams_are_independent),
        cmocka_unit_test(test_stream_properties),
        cmocka_unit_test(test_destroy_returns_at_once_and_work_drains),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
