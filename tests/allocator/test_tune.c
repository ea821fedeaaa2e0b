/* test_tune.c - settings changed while the allocator runs (fs_alloc_tune,
 * PyTorch's _set_allocator_settings), and what PyTorch's snapshots expect
 * of the allocator besides: a cached block's last request, and private
 * pools that share large segments from their first request. */
#include "common.h"

static size_t segment_size_of(env *e, void *p)
{
    fs_block_info info;
    assert_int_equal(fs_alloc_block_info(e->a, p, &info), FS_OK);
    return info.segment_size;
}

static void test_roundup_for_later_requests(void **state)
{
    (void)state;
    env e = env_make(NULL, 1024 * MiB);
    const size_t n = 84 * MiB + 1000; /* between 64 and 128 MiB: quarters of 16 MiB */
    void *exact = must_alloc(&e, S1, n);
    assert_int_equal(block_size(&e, exact), 84 * MiB + 1024);

    fs_alloc_config cfg;
    fs_alloc_config_get(e.a, &cfg);
    for (int i = 0; i < FS_ROUNDUP_BUCKETS; i++)
        cfg.roundup_divisions[i] = 4;
    fs_alloc_tune(e.a, &cfg);
    void *rounded = must_alloc(&e, S1, n);
    assert_int_equal(block_size(&e, rounded), 96 * MiB);
    assert_int_equal(block_size(&e, exact), 84 * MiB + 1024); /* made before: as it was */

    for (int i = 0; i < FS_ROUNDUP_BUCKETS; i++)
        cfg.roundup_divisions[i] = 0;
    fs_alloc_tune(e.a, &cfg);
    void *again = must_alloc(&e, S1, n);
    assert_int_equal(block_size(&e, again), 84 * MiB + 1024);
    fs_alloc_census census;
    assert_null(fs_alloc_check(e.a, 0, &census));
    env_free(&e);
}

/* Only the keys a program may change while it runs change. */
static void test_other_keys_stay(void **state)
{
    (void)state;
    env e = env_make("free_semantics:stream;max_split_size_mb:100", 1024 * MiB);
    fs_alloc_config cfg, now;
    fs_alloc_config_get(e.a, &cfg);
    assert_int_equal(cfg.free_semantics, FS_FREE_SEMANTICS_STREAM);
    cfg.free_semantics = FS_FREE_SEMANTICS_DEVICE;
    cfg.max_split_size = 200 * MiB;
    cfg.garbage_collection_threshold = 0.5;
    cfg.expandable_segments = true;
    fs_alloc_tune(e.a, &cfg);
    fs_alloc_config_get(e.a, &now);
    assert_int_equal(now.free_semantics, FS_FREE_SEMANTICS_STREAM);
    assert_int_equal(now.max_split_size, 200 * MiB);
    assert_true(now.garbage_collection_threshold == 0.5);
    assert_true(now.expandable_segments);
    env_free(&e);
}

/* As PyTorch's snapshot shows an inactive block's requested_size. */
static void test_cached_block_keeps_its_last_request(void **state)
{
    (void)state;
    env e = env_make(NULL, 1024 * MiB);
    void *p = must_alloc(&e, S1, 3000);
    assert_int_equal(fs_free_async(e.a, p, S1, NULL), FS_OK);
    fs_walk_entry w[16];
    size_t n = fs_alloc_walk(e.a, 0, w, 16);
    bool found = false;
    for (size_t i = 0; i < n && i < 16; i++) {
        if (w[i].state != FS_WALK_CACHED || w[i].addr != U(p)) continue;
        assert_int_equal(w[i].requested, 3000);
        found = true;
    }
    assert_true(found);
    env_free(&e);
}

static void test_private_pools_share_large_segments(void **state)
{
    (void)state;
    env e = env_make(NULL, 1024 * MiB);
    void *shared = must_alloc(&e, S1, 4 * MiB);
    assert_int_equal(segment_size_of(&e, shared), 4 * MiB); /* small_first: its own size */
    void *priv = NULL;
    assert_int_equal(fs_malloc_private(e.a, 0, S1, 7, 4 * MiB, 0, &priv), FS_OK);
    assert_int_equal(segment_size_of(&e, priv), 20 * MiB); /* as PyTorch's pools */
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundup_for_later_requests),
        cmocka_unit_test(test_other_keys_stay),
        cmocka_unit_test(test_cached_block_keeps_its_last_request),
        cmocka_unit_test(test_private_pools_share_large_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
