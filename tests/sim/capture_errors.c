/* capture_errors.c - what a capture prohibits, and what each prohibited
 * call does: its error, and the capture it invalidates (which then ends in
 * cudaErrorStreamCaptureInvalidated with no graph). The capture
 * interaction modes decide which threads' cudaMalloc a capture prohibits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "require_device.h"

static cudaStream_t new_stream(unsigned flags)
{
    cudaStream_t s;
    assert_int_equal(cudaStreamCreateWithFlags(&s, flags), cudaSuccess);
    return s;
}

static enum cudaStreamCaptureStatus status_of(cudaStream_t s)
{
    enum cudaStreamCaptureStatus st;
    assert_int_equal(cudaStreamIsCapturing(s, &st), cudaSuccess);
    return st;
}

/* Ends the capture on s expecting it invalidated; s captures no more. */
static void assert_ends_invalidated(cudaStream_t s)
{
    cudaGraph_t g = (cudaGraph_t)1;
    assert_int_equal(status_of(s), cudaStreamCaptureStatusInvalidated);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    assert_null(g);
    assert_int_equal(status_of(s), cudaStreamCaptureStatusNone);
}

static void test_begin_and_end_misuse(void **state)
{
    (void)state;
    cudaStream_t s = new_stream(cudaStreamNonBlocking);
    cudaGraph_t g;
    assert_int_equal(cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeGlobal),
                     cudaErrorStreamCaptureUnsupported);
    assert_int_equal(cudaStreamBeginCapture(s, (enum cudaStreamCaptureMode)3),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorIllegalState);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
    assert_int_equal(cudaStreamEndCapture(s, NULL), cudaErrorInvalidValue);
    cudaStream_t idle = new_stream(0);
    assert_int_equal(cudaStreamUpdateCaptureDependencies(idle, NULL, NULL, 0, 0),
                     cudaErrorIllegalState);
    cudaStreamDestroy(idle);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    size_t n = 1;
    assert_int_equal(cudaGraphGetNodes(g, NULL, &n), cudaSuccess);
    assert_int_equal(n, 0);
    cudaGraphExec_t exec;
    assert_int_equal(cudaGraphInstantiate(&exec, g, 1ull << 40), cudaErrorInvalidValue);
    assert_int_equal(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess); /* an empty graph runs */
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    cudaStreamDestroy(s);
}

static void test_synchronising_a_capturing_stream_invalidates(void **state)
{
    (void)state;
    cudaStream_t s = new_stream(cudaStreamNonBlocking);
    char *d;
    assert_int_equal(cudaMalloc((void **)&d, 64), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(d, 1, 64, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    /* Work after the invalidation is refused too. */
    assert_int_equal(cudaMemsetAsync(d, 2, 64, s), cudaErrorStreamCaptureInvalidated);
    assert_ends_invalidated(s);

    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaStreamQuery(s), cudaErrorStreamCaptureUnsupported);
    assert_ends_invalidated(s);

    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaStreamAddCallback(s, (cudaStreamCallback_t)1, NULL, 0),
                     cudaErrorStreamCaptureUnsupported);
    assert_ends_invalidated(s);

    /* Afterwards the stream runs its work again. */
    char h[64] = {0};
    assert_int_equal(cudaMemsetAsync(d, 9, 64, s), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(h, d, 64, cudaMemcpyDeviceToHost, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(h[63], 9);
    cudaFree(d);
    cudaStreamDestroy(s);
}

static void test_legacy_stream_would_join_implicitly(void **state)
{
    (void)state;
    cudaStream_t blocking = new_stream(cudaStreamDefault);
    char *d;
    assert_int_equal(cudaMalloc((void **)&d, 64), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(d, 1, 64, cudaStreamLegacy), cudaErrorStreamCaptureImplicit);
    assert_ends_invalidated(blocking);

    /* A non-blocking stream does not synchronise with the legacy one. */
    cudaStream_t nb = new_stream(cudaStreamNonBlocking);
    assert_int_equal(cudaStreamBeginCapture(nb, cudaStreamCaptureModeRelaxed), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(d, 1, 64, cudaStreamLegacy), cudaSuccess);
    assert_int_equal(status_of(nb), cudaStreamCaptureStatusActive);
    cudaGraph_t g;
    assert_int_equal(cudaStreamEndCapture(nb, &g), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    cudaFree(d);
    cudaStreamDestroy(blocking);
    cudaStreamDestroy(nb);
}

struct other {
    enum cudaStreamCaptureMode mode;
    cudaError_t err;
    cudaStream_t end;
    cudaGraph_t g;
};

static void *malloc_elsewhere(void *p)
{
    struct other *o = p;
    enum cudaStreamCaptureMode mode = o->mode;
    if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) abort();
    void *d = NULL;
    o->err = cudaMalloc(&d, 64);
    if (o->err == cudaSuccess) cudaFree(d);
    return NULL;
}

static cudaError_t malloc_on_thread(enum cudaStreamCaptureMode mode)
{
    struct other o = {mode, cudaErrorUnknown, NULL, NULL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, malloc_elsewhere, &o), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    return o.err;
}

static void test_unsafe_calls_by_capture_mode(void **state)
{
    (void)state;
    cudaStream_t s = new_stream(cudaStreamNonBlocking);
    void *d;
    cudaGraph_t g;

    /* Global: prohibited on this thread and on other global-mode threads. */
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(malloc_on_thread(cudaStreamCaptureModeRelaxed), cudaSuccess);
    assert_int_equal(malloc_on_thread(cudaStreamCaptureModeThreadLocal), cudaSuccess);
    assert_int_equal(status_of(s), cudaStreamCaptureStatusActive);
    assert_int_equal(malloc_on_thread(cudaStreamCaptureModeGlobal),
                     cudaErrorStreamCaptureUnsupported);
    assert_ends_invalidated(s);

    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaMalloc(&d, 64), cudaErrorStreamCaptureUnsupported);
    assert_int_equal(cudaGetLastError(), cudaErrorStreamCaptureUnsupported);
    assert_ends_invalidated(s);

    /* This thread in relaxed mode may. */
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    assert_int_equal(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
    assert_int_equal(mode, cudaStreamCaptureModeGlobal);
    assert_int_equal(cudaMalloc(&d, 64), cudaSuccess);
    assert_int_equal(cudaFree(d), cudaSuccess);
    assert_int_equal(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
    assert_int_equal(mode, cudaStreamCaptureModeRelaxed);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);

    /* Thread-local: only this thread is prohibited. */
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    assert_int_equal(malloc_on_thread(cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(status_of(s), cudaStreamCaptureStatusActive);
    assert_int_equal(cudaMalloc(&d, 64), cudaErrorStreamCaptureUnsupported);
    assert_ends_invalidated(s);

    /* Relaxed: nobody is. */
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
    assert_int_equal(cudaMalloc(&d, 64), cudaSuccess);
    assert_int_equal(cudaFree(d), cudaSuccess);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    cudaStreamDestroy(s);
}

static void *end_elsewhere(void *p)
{
    struct other *o = p;
    o->err = cudaStreamEndCapture(o->end, &o->g);
    return NULL;
}

static void test_end_on_another_thread(void **state)
{
    (void)state;
    cudaStream_t s = new_stream(cudaStreamNonBlocking);
    struct other o = {cudaStreamCaptureModeGlobal, cudaErrorUnknown, s, NULL};
    pthread_t t;
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(pthread_create(&t, NULL, end_elsewhere, &o), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(o.err, cudaErrorStreamCaptureWrongThread);
    cudaGraph_t g;
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);

    /* A relaxed capture may end anywhere. */
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
    assert_int_equal(pthread_create(&t, NULL, end_elsewhere, &o), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(o.err, cudaSuccess);
    assert_int_equal(cudaGraphDestroy(o.g), cudaSuccess);
    cudaStreamDestroy(s);
}

static void test_events_and_joins(void **state)
{
    (void)state;
    cudaStream_t s1 = new_stream(cudaStreamNonBlocking), s2 = new_stream(cudaStreamNonBlocking),
                 s3 = new_stream(cudaStreamNonBlocking);
    cudaEvent_t ev, outside;
    char *d;
    cudaGraph_t g;
    assert_int_equal(cudaMalloc((void **)&d, 64), cudaSuccess);
    assert_int_equal(cudaEventCreate(&ev), cudaSuccess);
    assert_int_equal(cudaEventCreate(&outside), cudaSuccess);
    assert_int_equal(cudaEventRecord(outside, s3), cudaSuccess);

    /* A forked stream that never joins back. */
    assert_int_equal(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaEventRecord(ev, s1), cudaSuccess);
    assert_int_equal(cudaEventQuery(ev), cudaErrorCapturedEvent);
    assert_int_equal(cudaEventSynchronize(ev), cudaErrorCapturedEvent);
    assert_int_equal(cudaStreamWaitEvent(s2, ev, 0), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(d, 1, 64, s2), cudaSuccess);
    /* Ending on the joined stream spoils the capture. */
    assert_int_equal(cudaStreamEndCapture(s2, &g), cudaErrorStreamCaptureUnmatched);
    assert_int_equal(status_of(s1), cudaStreamCaptureStatusInvalidated);
    assert_int_equal(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureInvalidated);
    assert_int_equal(status_of(s2), cudaStreamCaptureStatusNone);

    assert_int_equal(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaEventRecord(ev, s1), cudaSuccess);
    assert_int_equal(cudaStreamWaitEvent(s2, ev, 0), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(d, 1, 64, s2), cudaSuccess);
    g = (cudaGraph_t)1;
    assert_int_equal(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureUnjoined);
    assert_null(g);
    assert_int_equal(status_of(s2), cudaStreamCaptureStatusNone);
    /* The event still stands for a record in a capture that has ended. */
    assert_int_equal(cudaStreamWaitEvent(s3, ev, 0), cudaErrorCapturedEvent);
    assert_int_equal(cudaEventRecord(ev, s3), cudaSuccess);
    assert_int_equal(cudaEventSynchronize(ev), cudaSuccess);

    /* A capture may not wait on work outside it. */
    assert_int_equal(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaStreamWaitEvent(s1, outside, 0), cudaErrorStreamCaptureIsolation);
    assert_ends_invalidated(s1);

    /* Two captures may not merge. */
    assert_int_equal(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaEventRecord(ev, s1), cudaSuccess);
    assert_int_equal(cudaStreamWaitEvent(s2, ev, 0), cudaErrorStreamCaptureMerge);
    assert_ends_invalidated(s1);
    assert_ends_invalidated(s2);

    /* A graph cannot be launched into a capture (no child graphs). */
    cudaGraphExec_t exec;
    assert_int_equal(cudaGraphCreate(&g, 0), cudaSuccess);
    assert_int_equal(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaGraphLaunch(exec, s1), cudaErrorStreamCaptureUnsupported);
    assert_ends_invalidated(s1);
    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);

    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    cudaEventDestroy(ev);
    cudaEventDestroy(outside);
    cudaFree(d);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
    cudaStreamDestroy(s3);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_begin_and_end_misuse),
        cmocka_unit_test(test_synchronising_a_capturing_stream_invalidates),
        cmocka_unit_test(test_legacy_stream_would_join_implicitly),
        cmocka_unit_test(test_unsafe_calls_by_capture_mode),
        cmocka_unit_test(test_end_on_another_thread),
        cmocka_unit_test(test_events_and_joins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
