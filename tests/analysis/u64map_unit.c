/* u64map_unit.c - the analyzer's hash table (analysis/lib/u64map.c) and its
 * growing arrays (analysis/lib/mem.c) against a model: a million random
 * puts, gets and takes over keys that share their low bits as block
 * addresses do (and 0 and UINT64_MAX), each checked against a plain array
 * of the keys present and their values; then the table's walk visits each
 * entry once, clear and reserve keep it usable, and a table emptied by
 * takes shrinks to nothing live (backward shift leaves no tombstones: gets
 * of absent keys end at once). */
#include "live_blocks.h"
#include "mem.h"
#include "u64map.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define KEYS 4096

typedef struct value {
    uint64_t a;
    uint32_t b;
} value;

/* the model: key i of keys[] present when present[i], with its value */
static uint64_t keys[KEYS];
static bool present[KEYS];
static value model[KEYS];

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void make_keys(void)
{
    keys[0] = 0;
    keys[1] = UINT64_MAX;
    for (size_t i = 2; i < KEYS; i++) /* 2 MiB-aligned segments, 512-byte blocks */
        keys[i] = 0x7f0000000000ull + (i / 64) * (2u << 20) + (i % 64) * 512;
}

static void check_all(const fs_u64map *m)
{
    size_t n = 0;
    for (size_t i = 0; i < KEYS; i++) {
        const value *v = fs_u64map_get(m, keys[i]);
        if (!present[i]) {
            assert_null(v);
            continue;
        }
        n++;
        assert_non_null(v);
        assert_int_equal(v->a, model[i].a);
        assert_int_equal(v->b, model[i].b);
    }
    assert_int_equal(m->n, n);
}

static void test_against_model(void **state)
{
    (void)state;
    fs_u64map m;
    fs_u64map_init(&m, sizeof(value));
    make_keys();
    memset(present, 0, sizeof present);
    for (int op = 0; op < 1000000; op++) {
        size_t i = next_random() % KEYS;
        uint64_t r = next_random();
        if (r % 3) { /* put, twice as often as take: the table grows and shrinks */
            bool added;
            value *v = fs_u64map_put(&m, keys[i], &added);
            assert_non_null(v);
            assert_int_equal(added, !present[i]);
            if (added) assert_int_equal(v->a, 0); /* new values come zeroed */
            *v = model[i] = (value){r, (uint32_t)op};
            present[i] = true;
        } else {
            value out;
            assert_int_equal(fs_u64map_take(&m, keys[i], &out), present[i]);
            if (present[i]) assert_memory_equal(&out, &model[i], sizeof out);
            present[i] = false;
        }
        if (op % 50000 == 0) check_all(&m);
    }
    check_all(&m);

    /* the walk: every entry once */
    size_t seen = 0, pos = 0;
    uint64_t key;
    void *v;
    while (fs_u64map_next(&m, &pos, &key, &v)) {
        size_t i = 0;
        while (keys[i] != key)
            i++;
        assert_true(present[i]);
        assert_memory_equal(v, &model[i], sizeof model[i]);
        seen++;
    }
    assert_int_equal(seen, m.n);

    /* emptied by takes: nothing left, every get misses */
    for (size_t i = 0; i < KEYS; i++)
        if (present[i]) assert_true(fs_u64map_take(&m, keys[i], NULL));
    memset(present, 0, sizeof present);
    assert_int_equal(m.n, 0);
    check_all(&m);
    fs_u64map_free(&m);
}

static void test_clear_reserve(void **state)
{
    (void)state;
    fs_u64map m;
    fs_u64map_init(&m, 0); /* a set */
    assert_null(fs_u64map_get(&m, 7));
    assert_false(fs_u64map_take(&m, 7, NULL));
    assert_true(fs_u64map_reserve(&m, 1000));
    assert_int_equal(m.cap, 1024);
    for (uint64_t k = 0; k < 600; k++)
        assert_non_null(fs_u64map_put(&m, k << 21, NULL));
    assert_int_equal(m.cap, 2048); /* at most half full */
    fs_u64map_clear(&m);
    assert_int_equal(m.n, 0);
    assert_null(fs_u64map_get(&m, 0));
    assert_non_null(fs_u64map_put(&m, 5, NULL));
    assert_non_null(fs_u64map_get(&m, 5));
    fs_u64map_free(&m);
    assert_int_equal(m.cap, 0);
}

static void test_live_blocks(void **state)
{
    (void)state;
    fs_live l = {0};
    fs_live_block old, b;
    assert_false(fs_live_take(&l, 0x1000, &b));
    fs_live_put(&l, 0x1000, 512, 3, 0);
    assert_true(fs_live_replace(&l, 0x1000, 1024, 4, 1, &old));
    assert_int_equal(old.size, 512);
    assert_int_equal(old.site, 3);
    assert_int_equal(fs_live_count(&l), 1);
    size_t pos = 0;
    assert_true(fs_live_next(&l, &pos, &b));
    assert_int_equal(b.addr, 0x1000);
    assert_int_equal(b.device, 1);
    assert_false(fs_live_next(&l, &pos, &b));
    assert_true(fs_live_take(&l, 0x1000, &b));
    assert_int_equal(b.size, 1024);
    assert_int_equal(fs_live_count(&l), 0);
    fs_live_free(&l);
}

static void test_grow(void **state)
{
    (void)state;
    size_t cap = 0;
    uint32_t *a = fs_grow(NULL, &cap, 1, sizeof *a);
    assert_int_equal(cap, 64);
    a[63] = 7;
    a = fs_grow(a, &cap, 65, sizeof *a);
    assert_int_equal(cap, 128);
    assert_int_equal(a[63], 7);
    for (size_t i = 64; i < cap; i++)
        assert_int_equal(a[i], 0); /* grown elements come zeroed */
    a = fs_grow(a, &cap, 1000, sizeof *a);
    assert_int_equal(cap, 1024);
    a = fs_grow_at_most(a, &cap, 1025, sizeof *a, 1500);
    assert_int_equal(cap, 1500);
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_model),
        cmocka_unit_test(test_clear_reserve),
        cmocka_unit_test(test_live_blocks),
        cmocka_unit_test(test_grow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
