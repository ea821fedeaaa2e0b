/* test_private.c - private pools (allocator/private.c): memory that only
 * the allocations made into it use, kept while held, given back once let
 * go; PyTorch's use_on_oom and no_split; a pool's own segment source; and
 * private pools during a graph capture. */
#include "common.h"

#define P1 ((uint64_t)7)
#define P2 ((uint64_t)8)

static void *must_alloc_in(env *e, uint64_t priv, fs_stream_t s, size_t size)
{
    void *p = NULL;
    assert_int_equal(fs_malloc_private(e->a, 0, s, priv, size, 0, &p), FS_OK);
    assert_non_null(p);
    return p;
}

static void configure(env *e, uint64_t priv, bool held, bool lend, bool no_split)
{
    fs_private_conf c = {.held = held, .lend_on_oom = lend, .no_split = no_split};
    fs_alloc_private_configure(e->a, 0, priv, &c);
}

static void assert_checks(env *e)
{
    fs_alloc_census census;
    assert_null(fs_alloc_check(e->a, 0, &census));
}

/* The private pool a walk finds the block at addr in; -1 when none. */
static long long owner_of(env *e, uintptr_t addr)
{
    fs_walk_entry w[64];
    size_t n = fs_alloc_walk(e->a, 0, w, 64);
    assert_true(n <= 64);
    for (size_t i = 0; i < n; i++)
        if (w[i].state != FS_WALK_SEGMENT && w[i].addr == addr) return (long long)w[i].priv;
    return -1;
}

static void test_blocks_stay_private(void **state)
{
    (void)state;
    env e = env_make(NULL, 1024 * MiB);
    void *mine = must_alloc_in(&e, P1, S1, 4 * MiB);
    assert_int_equal(owner_of(&e, U(mine)), (long long)P1);
    assert_int_equal(fs_free_async(e.a, mine, S1, NULL), FS_OK);
    /* the shared cache does not take it, on the same stream or another */
    void *shared = must_alloc(&e, S1, 4 * MiB);
    assert_true(U(shared) != U(mine));
    assert_int_equal(owner_of(&e, U(shared)), 0);
    /* nor does another private pool */
    void *other = must_alloc_in(&e, P2, S1, 4 * MiB);
    assert_true(U(other) != U(mine));
    /* the pool's own next request does */
    void *again = must_alloc_in(&e, P1, S1, 4 * MiB);
    assert_ptr_equal(again, mine);
    /* and the shared cache's free memory never serves a private request */
    assert_int_equal(fs_free_async(e.a, shared, S1, NULL), FS_OK);
    void *third = must_alloc_in(&e, P1, S1, 4 * MiB);
    assert_true(U(third) != U(shared));
    assert_checks(&e);
    env_free(&e);
}

/* As PyTorch's private pools: blocks serve the stream they were made for. */
static void test_streams_stay_apart(void **state)
{
    (void)state;
    env e = env_make(NULL, 1024 * MiB);
    fake_auto_complete(e.fake, true);
    void *a = must_alloc_in(&e, P1, S1, 4 * MiB);
    assert_int_equal(fs_free_async(e.a, a, S1, NULL), FS_OK);
    fs_alloc_note_host_sync(e.a, 0);
    void *b = must_alloc_in(&e, P1, S2, 4 * MiB);
    assert_true(U(b) != U(a));
    env_free(&e);
}

static void test_held_until_let_go(void **state)
{
    (void)state;
    env e = env_make(NULL, 1024 * MiB);
    void *p = must_alloc_in(&e, P1, S1, 4 * MiB);
    void *q = must_alloc_in(&e, P1, S1, 30 * MiB); /* a segment of its own */
    void *s = must_alloc(&e, S1, 30 * MiB);
    assert_int_equal(fs_free_async(e.a, q, S1, NULL), FS_OK);
    assert_int_equal(fs_free_async(e.a, s, S1, NULL), FS_OK);
    long segs = fake_live_segments(e.fake, 0);
    /* empty_cache gives back the shared cache's, not the held pool's */
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    assert_int_equal(fake_live_segments(e.fake, 0), segs - 1);
    /* nor does emptying the pool itself while it is held */
    assert_int_equal(fs_alloc_private_empty(e.a, 0, P1), FS_OK);
    assert_int_equal(fake_live_segments(e.fake, 0), segs - 1);
    /* let go: its free segment goes, the one with a live block stays */
    configure(&e, P1, false, false, false);
    assert_int_equal(fs_alloc_private_empty(e.a, 0, P1), FS_OK);
    assert_int_equal(fake_live_segments(e.fake, 0), segs - 2);
    assert_int_equal(owner_of(&e, U(p)), (long long)P1);
    /* its last block comes back to it and goes at the next empty_cache */
    assert_int_equal(fs_free_async(e.a, p, S1, NULL), FS_OK);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    assert_int_equal(fake_live_segments(e.fake, 0), segs - 3);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.allocation[FS_SIZE_ALL].current, 0);
    assert_checks(&e);
    /* a pool of that name later is a new one, held */
    void *r = must_alloc_in(&e, P1, S1, 4 * MiB);
    assert_int_equal(fs_free_async(e.a, r, S1, NULL), FS_OK);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    assert_int_equal(fake_live_segments(e.fake, 0), 1);
    env_free(&e);
}

/* A held pool's free memory is not given back before out of memory; a
 * pool let go is, as the shared cache is. */
static void test_out_of_memory(void **state)
{
    (void)state;
    env e = env_make(NULL, 64 * MiB);
    void *p = must_alloc_in(&e, P1, S1, 40 * MiB);
    assert_int_equal(fs_free_async(e.a, p, S1, NULL), FS_OK);
    void *x = NULL;
    assert_int_equal(fs_malloc(e.a, 0, S1, 40 * MiB, 0, &x), FS_ERR_OOM);
    configure(&e, P1, false, false, false);
    x = must_alloc(&e, S1, 40 * MiB);
    assert_int_equal(owner_of(&e, U(x)), 0);
    env_free(&e);
}

/* use_on_oom: a shared request on a full device takes a free block of
 * the pool on its stream, which stays the pool's. */
static void test_lend_on_oom(void **state)
{
    (void)state;
    env e = env_make(NULL, 64 * MiB);
    configure(&e, P1, true, true, false);
    void *p = must_alloc_in(&e, P1, S1, 40 * MiB);
    assert_int_equal(fs_free_async(e.a, p, S1, NULL), FS_OK);
    void *x = NULL;
    /* another stream: not lent */
    assert_int_equal(fs_malloc(e.a, 0, S2, 40 * MiB, 0, &x), FS_ERR_OOM);
    x = must_alloc(&e, S1, 40 * MiB);
    assert_ptr_equal(x, p);
    assert_int_equal(owner_of(&e, U(x)), (long long)P1);
    assert_int_equal(fs_free_async(e.a, x, S1, NULL), FS_OK);
    /* back in the pool: its own request finds it */
    assert_ptr_equal(must_alloc_in(&e, P1, S1, 40 * MiB), p);
    /* the device still has room: a shared request grows rather than borrow */
    void *y = must_alloc(&e, S1, 4 * MiB);
    assert_int_equal(owner_of(&e, U(y)), 0);
    env_free(&e);
}

static void test_no_split(void **state)
{
    (void)state;
    env e = env_make(NULL, 1024 * MiB);
    configure(&e, P1, true, false, true);
    void *small = must_alloc_in(&e, P1, S1, 1000);
    assert_int_equal(block_size(&e, small), 2 * MiB); /* the whole small segment */
    /* a 20 MiB segment: a private pool shares large segments from the first */
    void *large = must_alloc_in(&e, P1, S1, 3 * MiB);
    assert_int_equal(fs_free_async(e.a, large, S1, NULL), FS_OK);
    large = must_alloc_in(&e, P1, S1, 2 * MiB);
    assert_int_equal(block_size(&e, large), 20 * MiB);
    /* the shared cache still splits */
    void *shared = must_alloc(&e, S1, 1000);
    assert_int_equal(block_size(&e, shared), 1024);
    assert_checks(&e);
    env_free(&e);
}

/* A pool's own segment source (a MemPool's allocator). */
typedef struct source {
    long allocs, frees;
    uintptr_t next;
    size_t last_size;
} source;

static fs_dev_status src_alloc(void *ctx, int device, size_t size, void **out)
{
    source *s = ctx;
    (void)device;
    s->allocs++;
    s->last_size = size;
    *out = (void *)s->next;
    s->next += (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
    return FS_DEV_OK;
}

static void src_free(void *ctx, int device, void *ptr, size_t size)
{
    (void)device;
    (void)ptr;
    (void)size;
    ((source *)ctx)->frees++;
}

static void test_segment_source(void **state)
{
    (void)state;
    env e = env_make("expandable_segments:True;segment_growth:pytorch", 1024 * MiB);
    source src = {.next = (uintptr_t)0x300000000000ull};
    fs_private_conf c = {
        .held = true, .segment_alloc = src_alloc, .segment_free = src_free, .segment_ctx = &src};
    fs_alloc_private_configure(e.a, 0, P1, &c);
    long before = fake_live_segments(e.fake, 0);
    void *p = must_alloc_in(&e, P1, S1, 3 * MiB);
    assert_int_equal(U(p), 0x300000000000ull);
    assert_int_equal(src.allocs, 1);
    assert_int_equal(src.last_size, 20 * MiB); /* a whole segment, never expandable */
    assert_int_equal(fake_live_segments(e.fake, 0), before);
    assert_int_equal(fs_free_async(e.a, p, S1, NULL), FS_OK);
    c.held = false;
    fs_alloc_private_configure(e.a, 0, P1, &c);
    assert_int_equal(fs_alloc_private_empty(e.a, 0, P1), FS_OK);
    assert_int_equal(src.frees, 1);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, 0);
    /* at teardown a source's segments are left to it */
    c.held = true;
    fs_alloc_private_configure(e.a, 0, P2, &c);
    must_alloc_in(&e, P2, S1, 3 * MiB);
    env_free(&e);
    assert_int_equal(src.frees, 1);
}

/* During a capture: the pool serves the capturing stream, reuses what the
 * capture freed on it, queries and records nothing, and nothing is given
 * back (a device free would break the capture). */
static void test_capture(void **state)
{
    (void)state;
    env e = env_make(NULL, 1024 * MiB);
    void *shared = must_alloc(&e, S2, 30 * MiB);
    assert_int_equal(fs_free_async(e.a, shared, S2, NULL), FS_OK);
    long segs = fake_live_segments(e.fake, 0);
    fake_set_capturing(e.fake, S1, true);
    void *a = must_alloc_in(&e, P1, S1, 4 * MiB);
    assert_int_equal(fs_free_async(e.a, a, S1, NULL), FS_OK);
    void *b = must_alloc_in(&e, P1, S1, 4 * MiB);
    assert_ptr_equal(b, a);
    /* a block used on another stream and freed waits for the capture's end */
    assert_int_equal(fs_record_stream(e.a, b, S3), FS_OK);
    assert_int_equal(fs_free_async(e.a, b, S1, NULL), FS_OK);
    void *c = must_alloc_in(&e, P1, S1, 4 * MiB);
    assert_true(U(c) != U(b));
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    assert_int_equal(fake_live_segments(e.fake, 0), segs + 1);
    fake_counts k = counts(&e);
    assert_int_equal(k.queries_while_capturing, 0);
    assert_int_equal(k.records_on_capturing, 0);
    fake_set_capturing(e.fake, S1, false);
    fake_auto_complete(e.fake, true);
    fake_complete_all(e.fake);
    assert_int_equal(fs_free_async(e.a, c, S1, NULL), FS_OK);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK); /* the shared one goes now */
    assert_int_equal(fake_live_segments(e.fake, 0), segs);
    /* after the capture the deferred block is the pool's again */
    void *d = must_alloc_in(&e, P1, S1, 8 * MiB);
    assert_int_equal(owner_of(&e, U(d)), (long long)P1);
    assert_checks(&e);
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_stay_private), cmocka_unit_test(test_streams_stay_apart),
        cmocka_unit_test(test_held_until_let_go),   cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_lend_on_oom),         cmocka_unit_test(test_no_split),
        cmocka_unit_test(test_segment_source),      cmocka_unit_test(test_capture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
