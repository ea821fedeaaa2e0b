/* test_conf_lex.c - the PYTORCH_CUDA_ALLOC_CONF syntax shared by FSDPSHIM_CONF:
 * whitespace ignored as PyTorch ignores it, commas inside brackets kept in the
 * value, empty entries skipped; and the allocator's description of its
 * configuration reads back as the same configuration. */
#include "common.h"

#include "conf_lex.h"

/* "key=value|key=value|..." of a string, squeezed and split. */
static void lex(const char *in, char *out, size_t len)
{
    char buf[256], *cur = buf, *key, *value;
    size_t n = 0;

    snprintf(buf, sizeof buf, "%s", in);
    fs_conf_squeeze(buf);
    out[0] = '\0';
    while (fs_conf_next(&cur, &key, &value))
        n += (size_t)snprintf(out + n, len - n, "%s%s=%s", n ? "|" : "", key,
                              value ? value : "(none)");
}

static void test_split(void **state)
{
    (void)state;
    char out[256];

    lex(" ag_limit:1", out, sizeof out);
    assert_string_equal(out, "ag_limit=1");
    lex("ag_limit:2 , free_semantics:sync", out, sizeof out);
    assert_string_equal(out, "ag_limit=2|free_semantics=sync");
    lex("\tmax_split_size_mb : 512 ,\n roundup_power2_divisions: [256:1, 512:2 ,>:4] ", out,
        sizeof out);
    assert_string_equal(out, "max_split_size_mb=512|roundup_power2_divisions=[256:1,512:2,>:4]");
    lex(",,a:1,,b,:c,", out, sizeof out);
    assert_string_equal(out, "a=1|b=(none)|=c");
    lex("   ", out, sizeof out);
    assert_string_equal(out, "");
}

static void test_describe_reads_back(void **state)
{
    (void)state;
    static const char *const confs[] = {
        "",
        "free_semantics:sync,cross_stream_reuse:wait,max_split_size_mb:512",
        "roundup_power2_divisions:4,garbage_collection_threshold:0.75,expandable_segments:True",
        "roundup_power2_divisions:[256:1,512:2,>:4],free_semantics:stream",
    };

    for (size_t i = 0; i < sizeof confs / sizeof confs[0]; i++) {
        fs_alloc_config c, again;
        char buf[256], desc[512], *cur = buf, *key, *value;

        fs_alloc_config_default(&c);
        snprintf(buf, sizeof buf, "%s", confs[i]);
        while (fs_conf_next(&cur, &key, &value))
            assert_int_equal(fs_alloc_config_set(&c, key, value, NULL, 0), 1);
        fs_alloc_config_describe(&c, desc, sizeof desc);
        fs_alloc_config_default(&again);
        for (cur = desc; fs_conf_next(&cur, &key, &value);)
            if (strcmp(value, "unlimited") && strcmp(value, "none") && strcmp(value, "off"))
                assert_int_equal(fs_alloc_config_set(&again, key, value, NULL, 0), 1);
        assert_memory_equal(&c, &again, sizeof c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_describe_reads_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
