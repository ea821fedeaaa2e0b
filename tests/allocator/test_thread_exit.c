/* test_thread_exit.c - a thread's per-thread default stream at the thread's
 * exit (fs_alloc_stream_exit). The runtime may already have destroyed the
 * stream, so nothing is recorded on it, and an event recorded anywhere
 * after the exit proves nothing about its queued work: the fake device's
 * events complete whenever the test says, as a destroyed stream's
 * replacement or a legacy stream that does not wait for it would. Only a
 * whole-device synchronisation that began after the exit makes what the
 * stream's work may touch reusable: the program's, or the allocator's own
 * before it reports out of memory and in empty_cache. */
#include "common.h"

#define BIG (19 * MiB)
#define CAP ((size_t)64 << 30)
#define PT  ((fs_stream_t)0x2001) /* a thread's per-thread stream */

static env env_with_pt(void)
{
    env e = env_make(NULL, CAP);
    fs_alloc_stream_register(e.a, 0, PT, FS_STREAM_BLOCKING);
    return e;
}

/* Its stream-ordered frees: reusable at once on the stream while the
 * thread lives, by other streams only after a synchronisation past the
 * exit; one that began before the exit is not enough. */
static void test_stream_ordered_frees(void **state)
{
    (void)state;
    env e = env_with_pt();
    void *a = must_alloc(&e, PT, BIG);
    assert_int_equal(U(a), SEG(0));
    assert_int_equal(fs_free_async(e.a, a, PT, NULL), FS_OK);
    uint64_t before = fs_alloc_sync_begin(e.a, 0);
    long records = counts(&e).event_record;
    fs_alloc_stream_exit(e.a, 0, PT);
    assert_int_equal(counts(&e).event_record, records); /* nothing recorded on it */
    fake_complete_all(e.fake);
    assert_int_equal(U(must_alloc(&e, S2, BIG)), SEG(10));
    fs_alloc_note_host_sync_since(e.a, 0, before);
    fake_complete_all(e.fake);
    assert_int_equal(U(must_alloc(&e, S2, BIG)), SEG(20));
    fs_alloc_note_host_sync_since(e.a, 0, fs_alloc_sync_begin(e.a, 0));
    assert_int_equal(U(must_alloc(&e, S3, BIG)), SEG(0));
    assert_int_equal(counts(&e).device_sync, 0); /* the program's synchronisation did it */
    env_free(&e);
}

/* A device-ordered free while the exited stream may still work: its batch
 * fence's legacy-stream event completing is not enough, event-based
 * retirement leaves it pending; a synchronisation returns it. */
static void test_device_ordered_frees(void **state)
{
    (void)state;
    env e = env_with_pt();
    fs_alloc_census census;
    void *x = must_alloc(&e, S1, BIG);
    fs_alloc_stream_note_work(e.a, 0, PT);
    assert_int_equal(fs_free(e.a, x, NULL), FS_OK);
    fs_alloc_stream_exit(e.a, 0, PT);
    assert_int_equal(U(must_alloc(&e, S2, BIG)), SEG(10)); /* the miss records the batch */
    fake_complete_all(e.fake);
    fs_alloc_note_host_sync(e.a, 0);
    assert_int_equal(stats(&e).pending_frees, 1);
    assert_int_equal(U(must_alloc(&e, S2, BIG)), SEG(20));
    assert_null(fs_alloc_check(e.a, 0, &census));
    fs_alloc_note_host_sync_since(e.a, 0, fs_alloc_sync_begin(e.a, 0));
    assert_int_equal(stats(&e).pending_frees, 0);
    assert_int_equal(U(must_alloc(&e, S1, BIG)), SEG(0));
    /* once synchronised past every exit, batch fences count again */
    void *y = must_alloc(&e, S1, BIG);
    assert_int_equal(fs_free(e.a, y, NULL), FS_OK);
    must_alloc(&e, S3, BIG);
    fake_complete_all(e.fake);
    fs_alloc_note_host_sync(e.a, 0);
    assert_int_equal(stats(&e).pending_frees, 0);
    env_free(&e);
}

/* cross_stream_reuse:wait never orders a stream after a batch fence that
 * an exit has put in doubt. */
static void test_wait_reuse(void **state)
{
    (void)state;
    env e = env_make("cross_stream_reuse:wait", CAP);
    fs_alloc_stream_register(e.a, 0, PT, FS_STREAM_BLOCKING);
    void *x = must_alloc(&e, S1, BIG);
    fs_alloc_stream_note_work(e.a, 0, PT);
    assert_int_equal(fs_free(e.a, x, NULL), FS_OK);
    fs_alloc_stream_exit(e.a, 0, PT);
    void *p = NULL;
    assert_int_equal(fs_malloc(e.a, 0, S3, BIG, FS_ALLOC_STREAM_ORDERED, &p), FS_OK);
    assert_int_equal(U(p), SEG(10));
    assert_int_equal(counts(&e).stream_wait, 0);
    env_free(&e);
}

/* Memory held for an exited thread is still given back: the miss path
 * synchronises the device before it reports out of memory, and so does
 * empty_cache. */
static void test_reclaimed_before_oom_and_by_empty_cache(void **state)
{
    (void)state;
    env e = env_with_pt();
    void *a = must_alloc(&e, PT, BIG);
    assert_int_equal(fs_free_async(e.a, a, PT, NULL), FS_OK);
    void *x = must_alloc(&e, S1, BIG);
    assert_int_equal(fs_free(e.a, x, NULL), FS_OK);
    fs_alloc_stream_exit(e.a, 0, PT);
    fake_complete_all(e.fake);
    fake_set_capacity(e.fake, 40 * MiB); /* both segments, nothing more */
    void *b = must_alloc(&e, S2, BIG);
    void *c = must_alloc(&e, S3, BIG);
    assert_non_null(b);
    assert_non_null(c);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.num_ooms, 0);
    assert_int_equal(st.pending_frees, 0);
    assert_int_equal(counts(&e).device_sync, 1);
    fs_free(e.a, b, NULL);
    fs_free(e.a, c, NULL);
    env_free(&e);

    e = env_with_pt();
    a = must_alloc(&e, PT, BIG);
    assert_int_equal(fs_free_async(e.a, a, PT, NULL), FS_OK);
    x = must_alloc(&e, S1, BIG);
    assert_int_equal(fs_free(e.a, x, NULL), FS_OK);
    fs_alloc_stream_exit(e.a, 0, PT);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    st = stats(&e);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.pending_frees, 0);
    assert_int_equal(counts(&e).device_sync, 1);
    env_free(&e);
}

/* A per-thread stream that never had work holds nothing up. */
static void test_idle_stream(void **state)
{
    (void)state;
    env e = env_with_pt();
    void *x = must_alloc(&e, S1, BIG);
    assert_int_equal(fs_free(e.a, x, NULL), FS_OK);
    fs_alloc_stream_exit(e.a, 0, PT);
    must_alloc(&e, S2, BIG);
    fake_complete_all(e.fake);
    fs_alloc_note_host_sync(e.a, 0);
    assert_int_equal(stats(&e).pending_frees, 0);
    fs_alloc_empty_cache(e.a, 0);
    assert_int_equal(counts(&e).device_sync, 0);
    env_free(&e);
}

/* A device reset ends an exited thread's work with everything else. */
static void test_reset_ends_the_wait(void **state)
{
    (void)state;
    env e = env_with_pt();
    must_alloc(&e, PT, BIG);
    fs_alloc_stream_exit(e.a, 0, PT);
    fs_alloc_device_reset(e.a, 0);
    fs_alloc_stream_register(e.a, 0, LEG, FS_STREAM_LEGACY);
    fs_alloc_stream_register(e.a, 0, S1, FS_STREAM_NONBLOCKING);
    void *x = must_alloc(&e, S1, BIG);
    assert_int_equal(fs_free(e.a, x, NULL), FS_OK);
    must_alloc(&e, S2, BIG);
    fake_complete_all(e.fake);
    fs_alloc_note_host_sync(e.a, 0);
    assert_int_equal(stats(&e).pending_frees, 0);
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_ordered_frees),
        cmocka_unit_test(test_device_ordered_frees),
        cmocka_unit_test(test_wait_reuse),
        cmocka_unit_test(test_reclaimed_before_oom_and_by_empty_cache),
        cmocka_unit_test(test_idle_stream),
        cmocka_unit_test(test_reset_ends_the_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
