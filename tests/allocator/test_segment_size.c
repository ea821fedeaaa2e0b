/* test_segment_size.c - segment sizes as PyTorch's once the device's cache
 * holds a shared segment's worth: requests from 1 to 10 MiB share
 * large_segment_mb segments (20 MiB by default), larger ones get a segment
 * of their own rounded up to 2 MiB, the small pool 2 MiB segments; below
 * that, each large request gets a segment of its own size; and a device
 * that cannot give the policy's segment gets smaller ones down to the
 * request's own (docs/allocator.md, "Pools and segments"). */
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
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, held);
    size_t seg = segment_of(&e, must_alloc(&e, LEG, size));
    env_free(&e);
    return seg;
}

#define SHARED (MiB + 512) /* the least request the large pool serves */

/* Requests from 1 to 10 MiB share large_segment_mb segments (PyTorch's
 * 20 MiB) once the device holds that much, so that one segment serves
 * blocks of several sizes and a later larger request. */
static void test_shared_segment(void **state)
{
    (void)state;
    static const size_t held[] = {20 * MiB, 30 * MiB, 160 * MiB, 1024 * MiB};
    for (size_t h = 0; h < sizeof held / sizeof held[0]; h++) {
        assert_int_equal(segment_at(NULL, held[h], SHARED), 20 * MiB);
        assert_int_equal(segment_at(NULL, held[h], 4 * MiB), 20 * MiB);
        assert_int_equal(segment_at(NULL, held[h], 9 * MiB + 1), 20 * MiB);
    }
    /* blocks of three streams' sizes in one pool share one segment */
    env e = env_make(NULL, CAP);
    must_alloc(&e, S3, 30 * MiB);
    void *a = must_alloc(&e, LEG, 1600000);
    void *b = must_alloc(&e, LEG, 5 * MiB);
    void *c = must_alloc(&e, LEG, 9 * MiB);
    assert_int_equal(segment_of(&e, a), 20 * MiB);
    fs_block_info bi;
    assert_int_equal(fs_alloc_block_info(e.a, b, &bi), FS_OK);
    assert_ptr_equal(bi.segment, a);
    assert_int_equal(fs_alloc_block_info(e.a, c, &bi), FS_OK);
    assert_ptr_equal(bi.segment, a);
    assert_int_equal(stats(&e).segment[FS_SIZE_LARGE].current, 2);
    env_free(&e);
}

/* Until the device's cache holds one shared segment's worth, a request
 * from 1 to 10 MiB gets a segment of its own size: a small job holds what
 * the device would charge without the shim, not 20 MiB for a 2 MiB block. */
static void test_small_cache(void **state)
{
    (void)state;
    static const size_t held[] = {0, 2 * MiB, 12 * MiB, 18 * MiB};
    for (size_t h = 0; h < sizeof held / sizeof held[0]; h++) {
        assert_int_equal(segment_at(NULL, held[h], SHARED), 2 * MiB);
        assert_int_equal(segment_at(NULL, held[h], 4 * MiB), 4 * MiB);
        assert_int_equal(segment_at(NULL, held[h], 9 * MiB + 1), 10 * MiB);
    }
    assert_int_equal(segment_at("large_segment_mb:64", 30 * MiB, SHARED), 2 * MiB);
    assert_int_equal(segment_at("large_segment_mb:64", 64 * MiB, SHARED), 64 * MiB);
    /* the demo's shape: 1.6 MB blocks, 9 of them live, cost 9 x 2 MiB */
    env e = env_make(NULL, CAP);
    for (int i = 0; i < 9; i++)
        must_alloc(&e, LEG, 1600000);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, 18 * MiB);
    env_free(&e);
}

/* A device that cannot give the policy's segment gives a smaller one,
 * down to the request's own rounded size; only a request that no segment
 * the device can give would hold fails (SPEC section 4). A 32 MiB device
 * holding 20 MiB in segments of their own: the next 4 MiB request gets a
 * 10 MiB segment (20 MiB do not fit), the one after it is cut from that,
 * and only then, with 2 MiB left on the device and 2 MiB in the cache, a
 * 4 MiB request fails; a 2 MiB one is still served. */
static void test_smaller_when_full(void **state)
{
    (void)state;
    env e = env_make(NULL, 32 * MiB);
    void *w = must_alloc(&e, LEG, 8 * MiB);
    assert_int_equal(segment_of(&e, w), 8 * MiB);
    for (int i = 0; i < 3; i++)
        assert_int_equal(segment_of(&e, must_alloc(&e, LEG, 4 * MiB)), 4 * MiB);
    void *p = must_alloc(&e, LEG, 4 * MiB);
    assert_int_equal(segment_of(&e, p), 10 * MiB);
    fs_block_info bi;
    void *q = must_alloc(&e, LEG, 4 * MiB);
    assert_int_equal(fs_alloc_block_info(e.a, q, &bi), FS_OK);
    assert_ptr_equal(bi.segment, p);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, 30 * MiB);
    void *r = NULL;
    assert_int_equal(fs_malloc(e.a, 0, LEG, 4 * MiB, 0, &r), FS_ERR_OOM);
    assert_int_equal(stats(&e).num_ooms, 1);
    /* 2 MiB are still there for a request that fits them */
    void *t = must_alloc(&e, LEG, 2 * MiB);
    assert_int_equal(fs_alloc_block_info(e.a, t, &bi), FS_OK);
    assert_ptr_equal(bi.segment, p);
    env_free(&e);
}

static void test_large_segment_mb(void **state)
{
    (void)state;
    assert_int_equal(segment_at("large_segment_mb:64", 64 * MiB, SHARED), 64 * MiB);
    assert_int_equal(segment_at("large_segment_mb:6", 6 * MiB, SHARED), 6 * MiB);
    assert_int_equal(segment_at("large_segment_mb:6", 6 * MiB, 9 * MiB),
                     10 * MiB); /* at least the block */
    /* 2: every large block has a segment of its own size */
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
        cmocka_unit_test(test_shared_segment),    cmocka_unit_test(test_small_cache),
        cmocka_unit_test(test_smaller_when_full), cmocka_unit_test(test_large_segment_mb),
        cmocka_unit_test(test_others_unchanged),  cmocka_unit_test(test_config_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
