/* test_config.c - the allocator's FSDPSHIM_CONF keys in PyTorch's syntax:
 * defaults, every valid form, and bad values that leave the config as it
 * was and name the valid choices. */
#include "common.h"

static void test_defaults(void **state)
{
    (void)state;
    fs_alloc_config c;
    fs_alloc_config_default(&c);
    assert_int_equal(c.free_semantics, FS_FREE_SEMANTICS_DEVICE);
    assert_int_equal(c.cross_stream_reuse, FS_REUSE_COMPLETED);
    assert_true(c.max_split_size == SIZE_MAX);
    assert_true(c.garbage_collection_threshold == 0.0);
    assert_false(c.expandable_segments);
    for (int i = 0; i < FS_ROUNDUP_BUCKETS; i++)
        assert_int_equal(c.roundup_divisions[i], 0);
}

static void test_valid(void **state)
{
    (void)state;
    fs_alloc_config c;
    char err[256];
    fs_alloc_config_default(&c);
    assert_int_equal(fs_alloc_config_set(&c, "free_semantics", "sync", err, sizeof err), 1);
    assert_int_equal(c.free_semantics, FS_FREE_SEMANTICS_SYNC);
    assert_int_equal(fs_alloc_config_set(&c, "free_semantics", "stream", err, sizeof err), 1);
    assert_int_equal(c.free_semantics, FS_FREE_SEMANTICS_STREAM);
    assert_int_equal(fs_alloc_config_set(&c, "cross_stream_reuse", "wait", err, sizeof err), 1);
    assert_int_equal(c.cross_stream_reuse, FS_REUSE_WAIT);
    assert_int_equal(fs_alloc_config_set(&c, "cross_stream_reuse", "none", err, sizeof err), 1);
    assert_int_equal(c.cross_stream_reuse, FS_REUSE_NONE);
    assert_int_equal(fs_alloc_config_set(&c, "max_split_size_mb", "512", err, sizeof err), 1);
    assert_int_equal(c.max_split_size, 512 * MiB);
    assert_int_equal(
        fs_alloc_config_set(&c, "garbage_collection_threshold", "0.8", err, sizeof err), 1);
    assert_true(c.garbage_collection_threshold > 0.79 && c.garbage_collection_threshold < 0.81);
    assert_int_equal(fs_alloc_config_set(&c, "expandable_segments", "True", err, sizeof err), 1);
    assert_true(c.expandable_segments);
    assert_int_equal(fs_alloc_config_set(&c, "roundup_power2_divisions", "4", err, sizeof err), 1);
    for (int i = 0; i < FS_ROUNDUP_BUCKETS; i++)
        assert_int_equal(c.roundup_divisions[i], 4);
    assert_int_equal(
        fs_alloc_config_set(&c, "roundup_power2_divisions", "[256:1,512:2,>:4]", err, sizeof err),
        1);
    for (int i = 0; i < 8; i++)
        assert_int_equal(c.roundup_divisions[i], 1); /* the first entry fills below it */
    assert_int_equal(c.roundup_divisions[8], 1);
    assert_int_equal(c.roundup_divisions[9], 2);
    for (int i = 10; i < FS_ROUNDUP_BUCKETS; i++)
        assert_int_equal(c.roundup_divisions[i], 4);
    assert_int_equal(fs_alloc_config_set(&c, "ag_limit", "2", err, sizeof err), 0); /* not ours */
}

static void test_bad(void **state)
{
    (void)state;
    static const char *bad[][2] = {
        {"free_semantics", "async"},
        {"cross_stream_reuse", ""},
        {"max_split_size_mb", "20"},
        {"max_split_size_mb", "-5"},
        {"max_split_size_mb", "12x"},
        {"garbage_collection_threshold", "1.0"},
        {"garbage_collection_threshold", "0"},
        {"garbage_collection_threshold", "abc"},
        {"expandable_segments", "yes"},
        {"roundup_power2_divisions", "3"},
        {"roundup_power2_divisions", "[256:3]"},
        {"roundup_power2_divisions", "[300:2]"},
        {"roundup_power2_divisions", "[512:2,256:2]"},
        {"roundup_power2_divisions", "[256:2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fs_alloc_config c, before;
        fs_alloc_config_default(&c);
        before = c;
        char err[256] = "";
        assert_int_equal(fs_alloc_config_set(&c, bad[i][0], bad[i][1], err, sizeof err), -1);
        assert_memory_equal(&c, &before, sizeof c);
        assert_non_null(strstr(err, bad[i][0]));
        assert_non_null(strstr(err, "default"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
