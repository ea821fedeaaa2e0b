/* test_segment_growth.c - the large pool's shared segment (requests under
 * 10 MiB) grows with the memory the device holds: the request rounded up to
 * 2 MiB on an idle device, doubling steps at an eighth of the reserved
 * bytes, large_segment_mb (PyTorch's 20 MiB) from eight of them on; requests
 * of 10 MiB and more, and the small pool, keep PyTorch's sizes throughout
 * (docs/allocator.md, "Pools and segments"). */
#include "common.h"

#define CAP ((size_t)64 << 30)

static size_t segment_of(env *e, void *p)
{
    fs_block_info bi;
    assert_int_equal(fs_alloc_block_info(e->a, p, &bi), FS_OK);
    assert_ptr_equal(bi.segment, p); /* a fresh segment each time */
    return bi.segment_size;
}

/* The segment grown for `size` bytes on a fresh stream of a device that
 * already holds `held` bytes (one block of its own on another stream). */
static size_t segment_at(const char *conf, size_t held, size_t size)
{
    env e = env_make(conf, CAP);
    if (held) must_alloc(&e, S3, held);
    assert_int_equal(stats(&e).reserved_bytes[FS_POOL_ALL].current, held);
    size_t seg = segment_of(&e, must_alloc(&e, LEG, size));
    env_free(&e);
    return seg;
}

#define SHARED (MiB + 512) /* the least request the large pool serves */

static void test_small_job_pays_its_blocks(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    void *a = must_alloc(&e, LEG, 1600000); /* the demo's unsharded layer */
    void *b = must_alloc(&e, S1, 1600000);
    void *c = must_alloc(&e, S2, 5 * MiB);
    void *d = must_alloc(&e, S3, 9 * MiB + 1);
    assert_int_equal(segment_of(&e, a), 2 * MiB);
    assert_int_equal(segment_of(&e, b), 2 * MiB);
    assert_int_equal(segment_of(&e, c), 6 * MiB);
    assert_int_equal(segment_of(&e, d), 10 * MiB);
    assert_int_equal(U(b), SEG(1)); /* no 20 MiB gap between them */
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.reserved_bytes[FS_POOL_LARGE].current, 20 * MiB);
    assert_int_equal(st.segment[FS_POOL_LARGE].current, 4);
    env_free(&e);
}

/* An eighth of the reserved bytes, rounded down to 2 MiB times a power of two. */
static void test_doubling_steps(void **state)
{
    (void)state;
    static const size_t steps[][2] = {
        {0, 2},    {30, 2},   {32, 4},   {62, 4},    {64, 8},     {126, 8},
        {128, 16}, {158, 16}, {160, 20}, {1024, 20}, {16384, 20},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        assert_int_equal(segment_at(NULL, steps[i][0] * MiB, SHARED), steps[i][1] * MiB);
}

/* Everything the device holds counts: other streams, the small pool, and
 * what it no longer holds does not. (No cross-stream reuse: each request
 * must grow a segment of its own.) */
static void test_follows_reserved_memory(void **state)
{
    (void)state;
    env e = env_make("free_semantics:stream;cross_stream_reuse:none", CAP);
    for (int i = 0; i < 32; i++) /* two 1 MiB blocks per 2 MiB small segment */
        must_alloc(&e, S1, MiB);
    assert_int_equal(stats(&e).reserved_bytes[FS_POOL_SMALL].current, 32 * MiB);
    assert_int_equal(segment_of(&e, must_alloc(&e, LEG, SHARED)), 4 * MiB);
    void *busy = must_alloc(&e, S2, 160 * MiB);
    assert_int_equal(segment_of(&e, must_alloc(&e, S3, SHARED)), 20 * MiB);
    /* given back: the device holds 36 + 20 MiB again, 7 MiB an eighth */
    assert_int_equal(fs_free(e.a, busy, NULL), FS_OK);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    assert_int_equal(stats(&e).reserved_bytes[FS_POOL_ALL].current, 56 * MiB);
    void *again = must_alloc(&e, S2, SHARED);
    assert_int_equal(segment_of(&e, again), 4 * MiB);
    env_free(&e);
}

static void test_large_segment_mb(void **state)
{
    (void)state;
    const char *big = "large_segment_mb:64";
    assert_int_equal(segment_at(big, 0, SHARED), 2 * MiB);
    assert_int_equal(segment_at(big, 160 * MiB, SHARED), 16 * MiB);
    assert_int_equal(segment_at(big, 256 * MiB, SHARED), 32 * MiB);
    assert_int_equal(segment_at(big, 510 * MiB, SHARED), 32 * MiB);
    assert_int_equal(segment_at(big, 512 * MiB, SHARED), 64 * MiB);
    const char *small = "large_segment_mb:6";
    assert_int_equal(segment_at(small, 30 * MiB, SHARED), 2 * MiB);
    assert_int_equal(segment_at(small, 32 * MiB, SHARED), 4 * MiB);
    assert_int_equal(segment_at(small, 48 * MiB, SHARED), 6 * MiB);
    assert_int_equal(segment_at(small, 1024 * MiB, SHARED), 6 * MiB);
    assert_int_equal(segment_at(small, 1024 * MiB, 9 * MiB), 10 * MiB); /* at least the block */
    /* 2: every large block has a segment of its own size, busy or not */
    assert_int_equal(segment_at("large_segment_mb:2", 1024 * MiB, SHARED), 2 * MiB);
    assert_int_equal(segment_at("large_segment_mb:2", 1024 * MiB, 3 * MiB), 4 * MiB);
}

static void test_others_unchanged(void **state)
{
    (void)state;
    static const char *confs[] = {NULL, "large_segment_mb:64"};
    static const size_t held[] = {0, 1024 * MiB};
    for (int c = 0; c < 2; c++) {
        for (int h = 0; h < 2; h++) {
            assert_int_equal(segment_at(confs[c], held[h], 512), 2 * MiB);       /* small pool */
            assert_int_equal(segment_at(confs[c], held[h], MiB), 2 * MiB);       /* small pool */
            assert_int_equal(segment_at(confs[c], held[h], 10 * MiB), 10 * MiB); /* its own */
            assert_int_equal(segment_at(confs[c], held[h], 11 * MiB + 1), 12 * MiB);
            assert_int_equal(segment_at(confs[c], held[h], 100 * MiB), 100 * MiB);
        }
    }
    void *p = (void *)1;
    env e = env_make(NULL, CAP);
    assert_int_equal(fs_malloc(e.a, 0, LEG, SIZE_MAX - 511, 0, &p), FS_ERR_OOM); /* would wrap */
    assert_int_equal(fs_malloc(e.a, 0, LEG, SIZE_MAX - MiB, 0, &p), FS_ERR_OOM);
    assert_ptr_equal(p, (void *)1);
    assert_int_equal(stats(&e).num_alloc_retries, 0); /* refused before the miss path */
    env_free(&e);
}

static void test_config_key(void **state)
{
    (void)state;
    fs_alloc_config c;
    char err[256];
    fs_alloc_config_default(&c);
    assert_int_equal(c.large_segment, 20 * MiB);
    assert_int_equal(fs_alloc_config_set(&c, "large_segment_mb", "64", err, sizeof err), 1);
    assert_int_equal(c.large_segment, 64 * MiB);
    assert_int_equal(fs_alloc_config_set(&c, "large_segment_mb", "2", err, sizeof err), 1);
    assert_int_equal(c.large_segment, 2 * MiB);
    static const char *bad[] = {"",   "0",  "1",   "3",   "21",
                                "-2", "+4", "20x", "1e3", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fs_alloc_config_default(&c);
        err[0] = '\0';
        assert_int_equal(fs_alloc_config_set(&c, "large_segment_mb", bad[i], err, sizeof err), -1);
        assert_int_equal(c.large_segment, 20 * MiB); /* unchanged */
        assert_non_null(strstr(err, "large_segment_mb: '"));
        assert_non_null(strstr(err, "even whole number of MiB"));
        assert_non_null(strstr(err, "(default: 20)"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_job_pays_its_blocks), cmocka_unit_test(test_doubling_steps),
        cmocka_unit_test(test_follows_reserved_memory),   cmocka_unit_test(test_large_segment_mb),
        cmocka_unit_test(test_others_unchanged),          cmocka_unit_test(test_config_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
