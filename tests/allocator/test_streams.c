/* test_streams.c - SPEC section 5: blocks tagged with streams, the three
 * free semantics, batched device-ordered fences, cudaFreeAsync on another
 * stream, record-stream uses, cross_stream_reuse none / completed / wait,
 * captures, stream retirement, host synchronisation notes and empty_cache.
 * Large 19 MiB blocks fill a 20 MiB segment each, so any reuse shows in the
 * address: SEG(0) is the first segment, SEG(10) the next. */
#include "common.h"

#include <time.h>

#define BIG (19 * MiB)
#define CAP ((size_t)64 << 30)

/* The GPU catches up while the host polls. */
static void catch_up(void *ctx, fs_stream_t s)
{
    (void)s;
    fake_complete_all(ctx);
}

static void test_device_ordered_batches(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    void *a = must_alloc(&e, S1, BIG);
    void *b = must_alloc(&e, S1, BIG);
    void *c = must_alloc(&e, S1, BIG);
    assert_int_equal(U(a), SEG(0));
    fs_free(e.a, a, NULL);
    fs_free(e.a, b, NULL);
    fs_free(e.a, c, NULL);
    fs_alloc_stats st = stats(&e);
    /* a free of 2 MiB or more fences at once: the first batch has the
     * legacy stream and S1 (it had work), the next two the legacy stream */
    assert_int_equal(counts(&e).event_record, 2 + 1 + 1);
    assert_int_equal(st.pending_frees, 3);
    assert_int_equal(st.active[FS_SIZE_ALL].current, 3);
    assert_int_equal(st.allocation[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.pending_free_bytes, 60 * MiB);
    /* nothing is left for the miss to fence; since the frees would serve
     * it, it polls their fences on the host rather than grow */
    fake_on_query(e.fake, catch_up, e.fake);
    void *d = must_alloc(&e, S1, BIG);
    fake_on_query(e.fake, NULL, NULL);
    assert_int_equal(U(d), SEG(0));
    fake_counts n = counts(&e);
    assert_int_equal(n.event_record, 4);
    assert_int_equal(n.event_sync, 0); /* polled: never a blocking wait */
    assert_int_equal(n.segment_alloc, 3);
    st = stats(&e);
    /* one batch per free: the last is still pending until a retirement
     * looks at it again */
    assert_int_equal(st.pending_frees, 1);
    assert_int_equal(st.active[FS_SIZE_ALL].current, 2);
    void *x = must_alloc(&e, S1, BIG);
    assert_int_equal(U(x), SEG(10));
    assert_int_equal(counts(&e).event_record, 4);
    /* noted work on S2 adds S2's event to the next batch */
    fs_alloc_stream_note_work(e.a, 0, S2);
    fs_free(e.a, x, NULL);
    fs_free(e.a, d, NULL);
    n = counts(&e);
    assert_int_equal(n.event_record, 4 + 3 + 1); /* legacy, S1, S2; then legacy */
    /* a miss that the two frees could not serve (whole 20 MiB segments)
     * grows without waiting */
    void *y = must_alloc(&e, S1, 3 * BIG);
    assert_int_equal(U(y), SEG(30));
    assert_int_equal(counts(&e).event_record, 4 + 3 + 1);
    /* a fence that completed by itself is no wait either */
    fake_complete_all(e.fake);
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(20)); /* c's, free since the wait */
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(0));
    env_free(&e);
}

/* A miss never waits on the host for device work while the device can
 * grow (SPEC section 4). A stream-ordered one takes its pool's pending
 * block and its stream waits for the free on the GPU. A cudaMalloc has no
 * stream to order the reuse after: under malloc_reuse:wait (the default)
 * every stream waits for the free's batch on the GPU, streams made later
 * included; under malloc_reuse:grow it grows, as PyTorch's allocator does.
 * Only on a full device does a miss wait on the host (below). */
static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Whether stream `who` made a GPU-side wait among stream_wait calls
 * from..to (exclusive). */
static bool waited(env *e, long from, long to, fs_stream_t who)
{
    for (long n = from; n < to; n++) {
        fs_stream_t waiter, on;
        if (fake_wait_log(e->fake, n, &waiter, &on) && waiter == who) return true;
    }
    return false;
}

#define S3 ((fs_stream_t)0x1003)
#define S4 ((fs_stream_t)0x1004)

static void test_miss_no_host_wait(void **state)
{
    (void)state;
    static const char *confs[] = {NULL, "malloc_reuse:grow"};
    for (int c = 0; c < 2; c++) {
        env e = env_make(confs[c], CAP);
        fs_alloc_stream_register(e.a, 0, S2, FS_STREAM_NONBLOCKING);
        fs_alloc_stream_register(e.a, 0, S3, FS_STREAM_BLOCKING);
        void *a = must_alloc(&e, S1, BIG);
        fs_free(e.a, a, NULL);
        long w0 = counts(&e).stream_wait;
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        void *again = must_alloc(&e, S1, BIG);
        assert_true(ms_since(&t0) < 50.0);
        assert_int_equal(counts(&e).event_sync, 0);
        long w1 = counts(&e).stream_wait;
        if (c == 0) {
            /* taken back; the legacy stream (for the blocking streams, S3
             * among them) and every non-blocking stream wait on the GPU */
            assert_ptr_equal(again, a);
            assert_int_equal(stats(&e).pending_frees, 0);
            assert_true(waited(&e, w0, w1, LEG));
            assert_true(waited(&e, w0, w1, S1));
            assert_true(waited(&e, w0, w1, S2));
            assert_false(waited(&e, w0, w1, S3));
            /* a stream learnt of later waits too, before its first work */
            fs_alloc_stream_register(e.a, 0, S4, FS_STREAM_NONBLOCKING);
            assert_true(waited(&e, w1, counts(&e).stream_wait, S4));
            /* two blocks freed in one batch (small enough not to fence at
             * once): the first reuse makes every stream wait for the
             * batch, the second asks no stream again */
            const size_t mid = 1536 * 1024;
            void *x = must_alloc(&e, S1, mid), *y = must_alloc(&e, S1, mid);
            void *z = must_alloc(&e, S1, 17 * MiB); /* the rest of their 20 MiB segment */
            assert_int_equal(U(z), U(y) + mid);
            fs_free(e.a, x, NULL);
            fs_free(e.a, y, NULL);
            long w2 = counts(&e).stream_wait;
            void *r1 = must_alloc(&e, S1, mid);
            long w3 = counts(&e).stream_wait;
            void *r2 = must_alloc(&e, S1, mid);
            assert_true((r1 == x && r2 == y) || (r1 == y && r2 == x));
            assert_true(waited(&e, w2, w3, S2));
            assert_int_equal(counts(&e).stream_wait, w3);
            fs_free(e.a, r1, NULL);
            fs_free(e.a, r2, NULL);
            fs_free(e.a, z, NULL);
            fs_free(e.a, again, NULL);
            /* once the work is done, new streams have nothing to wait for */
            fake_complete_all(e.fake);
            long w4 = counts(&e).stream_wait;
            fs_alloc_stream_register(e.a, 0, (fs_stream_t)0x1005, FS_STREAM_NONBLOCKING);
            assert_int_equal(counts(&e).stream_wait, w4);
        } else {
            assert_int_equal(U(again), SEG(10)); /* grown */
            assert_int_equal(stats(&e).pending_frees, 1);
            assert_int_equal(w1, w0);
        }
        /* stream-ordered: freed device-ordered, taken back at once on its
         * own pool's stream, which waits for the free's events on the GPU */
        void *o = must_alloc_ordered(&e, S1, BIG);
        fs_free(e.a, o, NULL);
        long waits = counts(&e).stream_wait;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        assert_ptr_equal(must_alloc_ordered(&e, S1, BIG), o);
        assert_true(ms_since(&t0) < 50.0);
        assert_true(counts(&e).stream_wait > waits);
        assert_int_equal(counts(&e).event_sync, 0);
        /* a stream-ordered free on S1 of a block S2 used: S1 waits for S2 */
        assert_int_equal(fs_record_stream(e.a, o, S2), FS_OK);
        assert_int_equal(fs_free_async(e.a, o, S1, NULL), FS_OK);
        waits = counts(&e).stream_wait;
        assert_ptr_equal(must_alloc_ordered(&e, S1, BIG), o);
        assert_true(counts(&e).stream_wait > waits);
        env_free(&e);
    }
    /* with a recorded use, every stream waits for the use's events too */
    env e = env_make(NULL, CAP);
    fs_alloc_stream_register(e.a, 0, S2, FS_STREAM_NONBLOCKING);
    void *a = must_alloc(&e, S1, BIG);
    assert_int_equal(fs_record_stream(e.a, a, S2), FS_OK);
    fs_free(e.a, a, NULL);
    long w0 = counts(&e).stream_wait;
    assert_ptr_equal(must_alloc(&e, S1, BIG), a);
    long on_s2 = 0;
    for (long n = w0; n < counts(&e).stream_wait; n++) {
        fs_stream_t waiter, on;
        if (fake_wait_log(e.fake, n, &waiter, &on) && waiter == S1 && on == S2) on_s2++;
    }
    assert_true(on_s2 >= 1);
    env_free(&e);
}

/* PyTorch's semantics (FS_ALLOC_NO_GPU_WAIT, as its adapter asks): a block
 * freed on its stream with another stream recorded on it comes back only
 * once that stream's work has completed, never behind a GPU-side wait;
 * one freed with nothing else recorded comes back at once on its stream. */
static void test_no_gpu_wait(void **state)
{
    (void)state;
    const unsigned pytorch = FS_ALLOC_STREAM_ORDERED | FS_ALLOC_NO_GPU_WAIT;
    env e = env_make(NULL, CAP);
    void *o = NULL, *p = NULL, *q = NULL;
    assert_int_equal(fs_malloc(e.a, 0, S1, BIG, pytorch, &o), FS_OK);
    assert_int_equal(fs_free_async(e.a, o, S1, NULL), FS_OK);
    assert_int_equal(fs_malloc(e.a, 0, S1, BIG, pytorch, &p), FS_OK);
    assert_ptr_equal(p, o); /* its own stream, nothing recorded: at once */
    assert_int_equal(fs_record_stream(e.a, p, S2), FS_OK);
    assert_int_equal(fs_free_async(e.a, p, S1, NULL), FS_OK);
    long waits = counts(&e).stream_wait;
    assert_int_equal(fs_malloc(e.a, 0, S1, BIG, pytorch, &q), FS_OK);
    assert_ptr_not_equal(q, p); /* S2 not done: grown, no wait added */
    assert_int_equal(counts(&e).stream_wait, waits);
    assert_int_equal(fs_free_async(e.a, q, S1, NULL), FS_OK);
    fake_complete_all(e.fake);
    void *r = NULL, *t = NULL;
    assert_int_equal(fs_malloc(e.a, 0, S1, BIG, pytorch, &r), FS_OK);
    assert_int_equal(fs_malloc(e.a, 0, S1, BIG, pytorch, &t), FS_OK);
    assert_true((r == p && t == q) || (r == q && t == p)); /* both back once S2 is done */
    env_free(&e);
}

static void test_full_device_waits_bounded(void **state)
{
    (void)state;
    /* malloc_reuse:grow: no GPU-side reuse, so the full device is what
     * makes the miss wait */
    env e = env_make("malloc_reuse:grow", 40 * MiB); /* room for two segments, not three */
    void *a = must_alloc(&e, S1, BIG);
    void *keep = must_alloc(&e, S2, BIG);
    fs_free(e.a, a, NULL);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* the device is full: the pending free would serve, the miss polls it
     * for 100 ms, then synchronises every event, releases the cache and
     * grows again */
    void *b = must_alloc(&e, S1, BIG);
    double ms = ms_since(&t0);
    assert_true(ms >= 100.0 && ms < 5000.0);
    assert_true(counts(&e).event_query > 2);
    assert_int_equal(stats(&e).num_alloc_retries, 1);
    /* once the GPU catches up while it polls, the miss takes the block
     * without the release-and-retry */
    fs_free(e.a, b, NULL);
    fake_on_query(e.fake, catch_up, e.fake);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_ptr_equal(must_alloc(&e, S1, BIG), b);
    assert_true(ms_since(&t0) < 100.0);
    assert_int_equal(stats(&e).num_alloc_retries, 1);
    fake_on_query(e.fake, NULL, NULL);
    (void)keep;
    env_free(&e);
}

static void test_fence_out_and_limit(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    void *a = must_alloc(&e, S1, 4096);
    fs_fence *f = NULL;
    assert_int_equal(fs_free(e.a, a, &f), FS_OK);
    assert_non_null(f);
    assert_int_equal(fs_fence_query(e.a, f), FS_DEV_NOT_READY);
    fake_complete_stream(e.fake, S1);
    assert_int_equal(fs_fence_query(e.a, f), FS_DEV_NOT_READY); /* the legacy event too */
    fake_complete_all(e.fake);
    assert_int_equal(fs_fence_query(e.a, f), FS_DEV_OK);
    fs_fence_release(e.a, f);
    /* with a recorded use the fence also covers the use */
    void *b = must_alloc(&e, S1, 4096);
    assert_int_equal(fs_record_stream(e.a, b, S2), FS_OK);
    assert_int_equal(fs_free(e.a, b, &f), FS_OK);
    assert_non_null(f);
    fake_complete_stream(e.fake, S1);
    fake_complete_stream(e.fake, LEG);
    assert_int_equal(fs_fence_query(e.a, f), FS_DEV_NOT_READY);
    assert_int_equal(fs_fence_wait(e.a, f), FS_DEV_OK);
    assert_int_equal(counts(&e).device_sync, 0); /* events only */
    fs_fence_release(e.a, f);
    /* many unfenced frees fence themselves without a miss */
    long before = counts(&e).event_record;
    void *p[300];
    for (int i = 0; i < 300; i++)
        p[i] = must_alloc(&e, S1, 512);
    for (int i = 0; i < 300; i++)
        fs_free(e.a, p[i], NULL);
    assert_true(counts(&e).event_record > before);
    env_free(&e);
}

/* A stream-ordered free whose fence the caller keeps, retired in the same
 * call (every 64th free retires what is done, and with events complete at
 * once that is the block just freed): the caller's reference must outlive
 * the block's. Under ASan this was a use-after-free of the fence. */
static void test_fence_out_retired_at_once(void **state)
{
    (void)state;
    env e = env_make("free_semantics:stream", CAP);
    fake_auto_complete(e.fake, true);
    for (int i = 0; i < 200; i++) {
        void *b = must_alloc(&e, S1, 4096);
        fs_fence *f = NULL;
        assert_int_equal(fs_record_stream(e.a, b, S2), FS_OK);
        assert_int_equal(fs_free_async(e.a, b, S1, &f), FS_OK);
        assert_non_null(f);
        assert_int_equal(fs_fence_query(e.a, f), FS_DEV_OK);
        fs_fence_release(e.a, f);
    }
    env_free(&e);
}

static void test_sync_semantics(void **state)
{
    (void)state;
    env e = env_make("free_semantics:sync", CAP);
    void *a = must_alloc(&e, S1, BIG);
    fs_free(e.a, a, NULL);
    assert_int_equal(counts(&e).device_sync, 1);
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(0));
    assert_int_equal(counts(&e).event_record, 0);
    assert_int_equal(stats(&e).pending_frees, 0);
    env_free(&e);
}

static void test_stream_semantics(void **state)
{
    (void)state;
    env e = env_make("free_semantics:stream", CAP);
    void *a = must_alloc(&e, S1, BIG);
    fs_free(e.a, a, NULL);
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(0));
    void *b = must_alloc(&e, S2, BIG);
    assert_int_equal(fs_free_async(e.a, b, S2, NULL), FS_OK);
    assert_int_equal(U(must_alloc(&e, S2, BIG)), SEG(10));
    fake_counts c = counts(&e);
    /* one event, on S2's first miss: it marks S1's free for other streams */
    assert_int_equal(c.event_record, 1);
    assert_int_equal(c.device_sync, 0);
    env_free(&e);
}

static void test_free_async_on_other_stream(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    void *a = must_alloc(&e, S1, BIG);
    assert_int_equal(fs_free_async(e.a, a, S2, NULL), FS_OK); /* PyTorch's unifier stream */
    assert_int_equal(counts(&e).event_record, 1);
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(10)); /* not yet for its creator */
    assert_int_equal(U(must_alloc(&e, S2, BIG)), SEG(0));  /* at once on the freeing stream */
    void *b = (void *)SEG(0);
    assert_int_equal(fs_free_async(e.a, b, S2, NULL), FS_OK);
    fake_complete_stream(e.fake, S2);
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(0)); /* back to its creation stream */
    env_free(&e);
}

static void test_record_stream(void **state)
{
    (void)state;
    env e = env_make("free_semantics:stream", CAP);
    char *a = must_alloc(&e, S1, BIG);
    assert_int_equal(fs_record_stream(e.a, a + 100, S2), FS_OK);
    assert_int_equal(fs_record_stream(e.a, a, S1), FS_OK); /* its own stream: nothing */
    assert_int_equal(fs_record_stream(e.a, a, S2), FS_OK); /* twice: one use */
    fs_free(e.a, a, NULL);
    fake_counts c = counts(&e);
    assert_int_equal(c.event_record, 2); /* S1 (the free) and S2 (the use) */
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(10));
    fake_complete_stream(e.fake, S1);
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(20)); /* the use is still running */
    fake_complete_stream(e.fake, S2);
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(0));
    /* the next life of the block starts without the old use */
    fs_free(e.a, (void *)SEG(0), NULL);
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(0));
    env_free(&e);
}

static void test_cross_stream_none(void **state)
{
    (void)state;
    env e = env_make("free_semantics:stream;cross_stream_reuse:none", CAP);
    void *a = must_alloc(&e, S1, BIG);
    fs_free(e.a, a, NULL);
    fake_complete_all(e.fake);
    must_alloc(&e, S3, BIG);
    fake_complete_all(e.fake);
    assert_int_equal(U(must_alloc(&e, S2, BIG)), SEG(20));
    env_free(&e);
}

static void test_cross_stream_completed(void **state)
{
    (void)state;
    env e = env_make("free_semantics:stream", CAP);
    void *a = must_alloc(&e, S1, BIG);
    fs_free(e.a, a, NULL);
    /* a miss on S3 marks S1's stream-ordered frees; until the mark
     * completes they are S1's alone */
    assert_int_equal(U(must_alloc(&e, S3, BIG)), SEG(10));
    assert_int_equal(counts(&e).event_record, 1);
    fake_complete_all(e.fake);
    void *b = must_alloc(&e, S2, BIG);
    assert_int_equal(U(b), SEG(0));
    fs_block_info bi;
    assert_int_equal(fs_alloc_block_info(e.a, b, &bi), FS_OK);
    assert_true(bi.stream == S2);
    /* freed on S2, it is pending on S2's event, then S1's again */
    fs_free(e.a, b, NULL);
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(20));
    fake_complete_all(e.fake);
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(0));
    env_free(&e);
}

static void test_cross_stream_wait(void **state)
{
    (void)state;
    env e = env_make("cross_stream_reuse:wait", CAP);
    void *a = must_alloc_ordered(&e, S1, BIG);
    fs_free(e.a, a, NULL);
    void *p = NULL;
    /* not stream-ordered: no stream to order a wait on (nor ordered memory) */
    assert_int_equal(fs_malloc(e.a, 0, S2, BIG, 0, &p), FS_OK);
    assert_int_equal(U(p), SEG(10));
    assert_int_equal(counts(&e).stream_wait, 0);
    assert_int_equal(fs_malloc(e.a, 0, S3, BIG, FS_ALLOC_STREAM_ORDERED, &p), FS_OK);
    assert_int_equal(U(p), SEG(0));
    fake_counts c = counts(&e);
    /* the batch (recorded at the free of a block this big) has the legacy
     * and S1 events */
    assert_int_equal(c.stream_wait, 2);
    assert_int_equal(c.event_sync, 0);
    assert_int_equal(c.device_sync, 0);
    fs_stream_t w, on;
    assert_true(fake_wait_log(e.fake, 0, &w, &on));
    assert_true(w == S3);
    assert_true(on == LEG);
    assert_true(fake_wait_log(e.fake, 1, &w, &on));
    assert_true(w == S3 && on == S1);
    assert_int_equal(stats(&e).pending_frees, 0);
    env_free(&e);
}

static void test_capture(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    void *a = must_alloc(&e, S2, BIG);
    assert_int_equal(fs_record_stream(e.a, a, S1), FS_OK);
    fs_alloc_stream_note_work(e.a, 0, S1);
    fake_set_capturing(e.fake, S1, true);
    fs_free(e.a, a, NULL);
    assert_int_equal(U(must_alloc(&e, S2, BIG)), SEG(10)); /* fence deferred */
    void *b = must_alloc(&e, S3, BIG);
    fs_free_async(e.a, b, S3, NULL);
    fs_alloc_note_host_sync(e.a, 0);
    fake_counts c = counts(&e);
    assert_int_equal(c.records_on_capturing, 0);
    assert_int_equal(c.queries_while_capturing, 0);
    assert_int_equal(stats(&e).pending_frees, 1);
    fake_set_capturing(e.fake, S1, false);
    must_alloc(&e, S2, 4096); /* a miss: the batch can be recorded now */
    fake_complete_all(e.fake);
    assert_int_equal(U(must_alloc(&e, S2, BIG)), SEG(0));
    env_free(&e);
    /* sync semantics never synchronises during a capture */
    e = env_make("free_semantics:sync", CAP);
    void *s = must_alloc(&e, S2, 4096);
    fake_set_capturing(e.fake, S1, true);
    fs_free(e.a, s, NULL);
    assert_int_equal(counts(&e).device_sync, 0);
    fake_set_capturing(e.fake, S1, false);
    env_free(&e);
}

static void test_stream_retire(void **state)
{
    (void)state;
    env e = env_make("free_semantics:stream", CAP);
    void *a = must_alloc(&e, S1, BIG);
    fs_free(e.a, a, NULL);
    fs_alloc_stream_retire(e.a, 0, S1);
    assert_int_equal(counts(&e).event_record, 1); /* its frees marked while it exists */
    fs_alloc_stream_register(e.a, 0, S1, FS_STREAM_NONBLOCKING); /* same handle, new stream */
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(10));
    fake_complete_all(e.fake);
    assert_int_equal(U(must_alloc(&e, S2, BIG)), SEG(0)); /* the old cache serves others */
    /* a live block of a retired stream can still be freed */
    void *b = must_alloc(&e, S3, BIG);
    fs_alloc_stream_retire(e.a, 0, S3);
    assert_int_equal(fs_free(e.a, b, NULL), FS_OK);
    fs_alloc_empty_cache(e.a, 0);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, 40 * MiB);
    env_free(&e);
}

static void test_host_sync_and_empty_cache(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    void *a = must_alloc(&e, S1, BIG);
    void *b = must_alloc(&e, S1, BIG);
    fs_free(e.a, a, NULL);
    must_alloc(&e, S1, 4096); /* the miss records the batch (a small block: no wait) */
    fake_complete_all(e.fake);
    assert_int_equal(counts(&e).event_sync, 0);
    assert_int_equal(stats(&e).pending_frees, 1);
    fs_alloc_note_host_sync(e.a, -1);
    assert_int_equal(stats(&e).pending_frees, 0);
    /* empty_cache waits (on events) for the pending frees, then releases */
    fs_free(e.a, b, NULL);
    fs_alloc_empty_cache(e.a, -1);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.num_device_free, 2);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, 2 * MiB);
    assert_true(counts(&e).event_sync > 0);
    assert_int_equal(counts(&e).device_sync, 0);
    env_free(&e);
}

/* cudaFree (device-ordered, not yet fenced) + cudaDeviceSynchronize +
 * cudaMemPoolTrimTo(0): the synchronisation makes the free reusable, so
 * trim gives everything back; a free made after the token stays pending. */
static void test_device_sync_retires_unfenced(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    fs_alloc_census c;
    void *a = must_alloc(&e, S1, 64 * MiB);
    void *b = must_alloc(&e, S2, BIG);
    assert_int_equal(fs_free(e.a, a, NULL), FS_OK);
    assert_int_equal(stats(&e).pending_frees, 1);
    uint64_t token = fs_alloc_sync_begin(e.a, 0);
    assert_int_equal(fs_free(e.a, b, NULL), FS_OK); /* another thread, during the sync */
    fs_alloc_note_host_sync_since(e.a, 0, token);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.pending_frees, 1);
    assert_int_equal(st.pending_free_bytes, (int64_t)(20 * MiB));
    assert_int_equal(st.active_bytes[FS_SIZE_ALL].current, (int64_t)(20 * MiB));
    /* frees this big fence at once (legacy and S1, then legacy and S2);
     * the synchronisation retired the first without looking at its fence */
    assert_int_equal(counts(&e).event_record, 4);
    assert_null(fs_alloc_check(e.a, 0, &c));
    fs_alloc_trim(e.a, 0, 0);
    st = stats(&e);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, (int64_t)(20 * MiB));
    /* a second synchronisation covers the later free, fenced meanwhile or not */
    must_alloc(&e, S3, 4096); /* a miss: the later free gets its batch fence */
    token = fs_alloc_sync_begin(e.a, 0);
    fs_alloc_note_host_sync_since(e.a, 0, token);
    assert_int_equal(stats(&e).pending_frees, 0);
    assert_null(fs_alloc_check(e.a, 0, &c));
    fs_alloc_trim(e.a, 0, 0);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, (int64_t)(2 * MiB));
    /* no token for a device that does not exist, and nothing happens */
    assert_int_equal(fs_alloc_sync_begin(e.a, 7), 0);
    fs_alloc_note_host_sync_since(e.a, 7, 0);
    env_free(&e);
}

/* A whole free segment another stream takes (cross_stream_reuse:completed)
 * changes pools: the taker's stream-ordered frees of it are then reusable
 * at once on its stream, with no event recorded per free, and the first
 * stream gets it back the same way once those frees complete. */
static void test_cross_stream_adopts_whole_segment(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    fs_alloc_census c;
    fake_auto_complete(e.fake, true);
    void *a = must_alloc_ordered(&e, LEG, BIG);
    assert_int_equal(fs_free(e.a, a, NULL), FS_OK);
    void *p = NULL;
    assert_int_equal(fs_malloc(e.a, 0, S1, BIG, FS_ALLOC_STREAM_ORDERED, &p), FS_OK);
    assert_int_equal(U(p), SEG(0));
    long records = counts(&e).event_record;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fs_free_async(e.a, p, S1, NULL), FS_OK);
        assert_int_equal(fs_malloc(e.a, 0, S1, BIG, FS_ALLOC_STREAM_ORDERED, &p), FS_OK);
        assert_int_equal(U(p), SEG(0));
    }
    assert_int_equal(counts(&e).event_record, records);
    assert_int_equal(stats(&e).pending_frees, 0);
    assert_true(block_size(&e, p) == 20 * MiB);
    assert_null(fs_alloc_check(e.a, 0, &c));
    assert_int_equal(c.segments, 1);
    /* back to the legacy stream once S1's free has completed (its mark) */
    assert_int_equal(fs_free_async(e.a, p, S1, NULL), FS_OK);
    assert_int_equal(U(must_alloc_ordered(&e, LEG, BIG)), SEG(0));
    assert_int_equal(stats(&e).num_device_alloc, 1);
    assert_null(fs_alloc_check(e.a, 0, &c));
    env_free(&e);
}

/* A poor fit (the request fills less than half of the block) is lent,
 * not adopted, and from the top of the block: the lender keeps the rest
 * in one piece at the bottom. */
static void test_cross_stream_lends_from_the_top(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    fs_alloc_census c;
    fake_auto_complete(e.fake, true);
    void *a = must_alloc_ordered(&e, LEG, BIG);
    assert_int_equal(fs_free(e.a, a, NULL), FS_OK);
    void *p = must_alloc_ordered(&e, S1, 2 * MiB);
    assert_int_equal(U(p), SEG(9)); /* the top 2 MiB of the 20 MiB segment */
    assert_int_equal(U(must_alloc_ordered(&e, LEG, 18 * MiB)), SEG(0));
    assert_int_equal(stats(&e).num_device_alloc, 1);
    assert_null(fs_alloc_check(e.a, 0, &c));
    assert_int_equal(c.segments, 1);
    env_free(&e);
}

static int events_seen[8];
static fs_alloc_event last_event[8];

static void on_event(void *ctx, const fs_alloc_event *ev)
{
    (void)ctx;
    events_seen[ev->kind]++;
    last_event[ev->kind] = *ev;
}

static void test_observer(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    memset(events_seen, 0, sizeof events_seen);
    fs_alloc_observer obs = {.on_event = on_event};
    fs_alloc_set_observer(e.a, &obs);
    void *a = must_alloc(&e, S1, 4000);
    /* the totals after the allocation: one block of 4096 bytes in a segment */
    fs_alloc_event *ev = &last_event[FS_EV_ALLOC];
    assert_ptr_equal((void *)ev->addr, a);
    assert_int_equal(ev->size, 4096);
    assert_int_equal(ev->requested, 4000);
    assert_int_equal(ev->pool, FS_SIZE_SMALL);
    assert_int_equal(ev->allocated, 4096);
    assert_int_equal(ev->reserved, last_event[FS_EV_SEGMENT_ALLOC].size);
    assert_int_equal(last_event[FS_EV_SEGMENT_ALLOC].allocated, 0);
    fs_free(e.a, a, NULL);
    fs_alloc_empty_cache(e.a, 0);
    assert_int_equal(events_seen[FS_EV_ALLOC], 1);
    assert_int_equal(events_seen[FS_EV_FREE_REQUESTED], 1);
    assert_int_equal(events_seen[FS_EV_FREE_COMPLETED], 1);
    assert_int_equal(events_seen[FS_EV_SEGMENT_ALLOC], 1);
    assert_int_equal(events_seen[FS_EV_SEGMENT_FREE], 1);
    assert_int_equal(last_event[FS_EV_FREE_REQUESTED].requested, 4000);
    assert_int_equal(last_event[FS_EV_FREE_COMPLETED].allocated, 0);
    assert_int_equal(last_event[FS_EV_SEGMENT_FREE].reserved, 0);
    fs_alloc_set_observer(e.a, NULL);
    must_alloc(&e, S1, 4096);
    assert_int_equal(events_seen[FS_EV_ALLOC], 1);
    env_free(&e);
}

static fs_alloc_event seq[16];
static int nseq;

static void on_event_seq(void *ctx, const fs_alloc_event *ev)
{
    (void)ctx;
    if (nseq < 16) seq[nseq++] = *ev;
}

/* The API a block was allocated and freed through is observed, and a
 * pending block handed out again completes its free first: an observer
 * (the trace) sees every free_requested completed before its memory is
 * allocated again. */
static void test_observer_api_and_pending_reuse(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    nseq = 0;
    fs_alloc_set_observer(e.a, &(fs_alloc_observer){.on_event = on_event_seq});
    void *a = must_alloc(&e, S1, BIG);
    assert_int_equal(nseq, 2); /* the segment, the block */
    assert_int_equal(seq[1].kind, FS_EV_ALLOC);
    assert_false(seq[1].stream_ordered);
    assert_int_equal(fs_free_async(e.a, a, S2, NULL), FS_OK); /* pending on S2's work */
    assert_int_equal(seq[2].kind, FS_EV_FREE_REQUESTED);
    assert_true(seq[2].stream_ordered);
    assert_int_equal(nseq, 3);
    assert_int_equal(U(must_alloc(&e, S2, BIG)), SEG(0)); /* at once on the freeing stream */
    assert_int_equal(nseq, 5);
    assert_int_equal(seq[3].kind, FS_EV_FREE_COMPLETED);
    assert_int_equal(seq[3].addr, SEG(0));
    assert_int_equal(seq[3].size, seq[2].size); /* the block its free_requested named */
    assert_int_equal(seq[4].kind, FS_EV_ALLOC);
    assert_int_equal(seq[4].addr, SEG(0));
    void *b = must_alloc_ordered(&e, S1, BIG);
    assert_int_equal(seq[nseq - 1].kind, FS_EV_ALLOC);
    assert_true(seq[nseq - 1].stream_ordered);
    fs_free(e.a, b, NULL);
    assert_int_equal(seq[nseq - 1].kind, FS_EV_FREE_REQUESTED);
    assert_false(seq[nseq - 1].stream_ordered);
    env_free(&e);
}

/* The walk lists each segment, then its blocks in address order, with
 * their states; a cut copy still says how many entries there are. */
static void test_walk(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    void *a = must_alloc(&e, S1, 4000);
    void *b = must_alloc(&e, S1, 8192);
    fs_walk_entry w[16], cut[2];
    fs_free(e.a, a, NULL);
    fs_alloc_empty_cache(e.a, 0); /* waits for the free: a is cached now */
    size_t n = fs_alloc_walk(e.a, 0, w, 16);
    assert_true(n >= 3 && n <= 16);
    assert_int_equal(w[0].state, FS_WALK_SEGMENT);
    assert_false(w[0].large); /* 4000 and 8192 bytes: the small pool's segment */
    size_t live = 0, cached = 0, seg_bytes = w[0].size, block_bytes = 0;
    for (size_t i = 1; i < n; i++) {
        assert_int_not_equal(w[i].state, FS_WALK_SEGMENT); /* one segment */
        assert_true(w[i].addr > w[i - 1].addr || i == 1);
        block_bytes += w[i].size;
        if (w[i].state == FS_WALK_LIVE) {
            live++;
            assert_ptr_equal((void *)w[i].addr, b);
            assert_int_equal(w[i].requested, 8192);
        }
        if (w[i].state == FS_WALK_CACHED) cached++;
    }
    assert_int_equal(live, 1);
    assert_true(cached >= 1);
    assert_int_equal(block_bytes, seg_bytes); /* the blocks tile the segment */
    assert_int_equal(fs_alloc_walk(e.a, 0, cut, 2), n);
    assert_int_equal(fs_alloc_walk(e.a, 7, w, 16), 0); /* no such device */
    void *big = must_alloc(&e, S1, 3 << 20);
    n = fs_alloc_walk(e.a, 0, w, 16);
    bool seen = false;
    for (size_t i = 0; i < n && i < 16; i++)
        if (w[i].addr == (uintptr_t)big && w[i].state == FS_WALK_LIVE) seen = w[i].large;
    assert_true(seen);
    fs_free(e.a, big, NULL);
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_ordered_batches),
        cmocka_unit_test(test_miss_no_host_wait),
        cmocka_unit_test(test_no_gpu_wait),
        cmocka_unit_test(test_full_device_waits_bounded),
        cmocka_unit_test(test_fence_out_and_limit),
        cmocka_unit_test(test_fence_out_retired_at_once),
        cmocka_unit_test(test_sync_semantics),
        cmocka_unit_test(test_stream_semantics),
        cmocka_unit_test(test_free_async_on_other_stream),
        cmocka_unit_test(test_record_stream),
        cmocka_unit_test(test_cross_stream_none),
        cmocka_unit_test(test_cross_stream_completed),
        cmocka_unit_test(test_cross_stream_wait),
        cmocka_unit_test(test_capture),
        cmocka_unit_test(test_stream_retire),
        cmocka_unit_test(test_host_sync_and_empty_cache),
        cmocka_unit_test(test_device_sync_retires_unfenced),
        cmocka_unit_test(test_cross_stream_adopts_whole_segment),
        cmocka_unit_test(test_cross_stream_lends_from_the_top),
        cmocka_unit_test(test_observer),
        cmocka_unit_test(test_observer_api_and_pending_reuse),
        cmocka_unit_test(test_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
