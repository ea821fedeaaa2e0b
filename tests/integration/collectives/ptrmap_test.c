/* ptrmap_test.c - unit test of the NCCL glue's address map
 * (interpose/nccl/nccl_ptrmap.c), against a plain array as the reference.
 *
 * The map backs the rate limiter's marks, which see one insert and one
 * remove per all-gather for the life of a training run: backward-shift
 * deletion must keep every key reachable through long churn, wrap-around
 * probes and growth. */
#include "../../../interpose/nccl/nccl_ptrmap.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

static void empty_map(void **state)
{
    (void)state;
    fs_ptrmap m = {0};
    uintptr_t v = 7;
    assert_false(fs_ptrmap_get(&m, 0x1000, &v));
    assert_false(fs_ptrmap_remove(&m, 0x1000, &v));
    assert_int_equal(v, 7);
}

static void put_overwrites(void **state)
{
    (void)state;
    fs_ptrmap m = {0};
    uintptr_t v;
    assert_true(fs_ptrmap_put(&m, 0x2000, 1));
    assert_true(fs_ptrmap_put(&m, 0x2000, 2));
    assert_int_equal(m.count, 1);
    assert_true(fs_ptrmap_get(&m, 0x2000, &v));
    assert_int_equal(v, 2);
    assert_true(fs_ptrmap_remove(&m, 0x2000, &v));
    assert_int_equal(v, 2);
    assert_false(fs_ptrmap_get(&m, 0x2000, NULL));
    free(m.slots);
}

/* Random inserts and removes over a small key space (so that runs collide
 * and wrap), checked against the reference after every step. */
static void churn_matches_reference(void **state)
{
    (void)state;
    enum { KEYS = 300, STEPS = 200000 };
    static uintptr_t ref[KEYS]; /* 0 = absent, else value */
    fs_ptrmap m = {0};
    unsigned seed = 12345;
    for (int step = 0; step < STEPS; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 8) % KEYS;
        uintptr_t key = 0x7f0000000000u + (uintptr_t)k * 512u;
        uintptr_t v;
        if ((seed >> 4) & 1) {
            uintptr_t value = (uintptr_t)step + 1;
            assert_true(fs_ptrmap_put(&m, key, value));
            ref[k] = value;
        } else {
            bool had = fs_ptrmap_remove(&m, key, &v);
            assert_int_equal(had, ref[k] != 0);
            if (had) assert_int_equal(v, ref[k]);
            ref[k] = 0;
        }
        if (step % 997 == 0) {
            size_t present = 0;
            for (unsigned i = 0; i < KEYS; i++) {
                uintptr_t got = 0;
                bool has = fs_ptrmap_get(&m, 0x7f0000000000u + (uintptr_t)i * 512u, &got);
                assert_int_equal(has, ref[i] != 0);
                if (has) {
                    assert_int_equal(got, ref[i]);
                    present++;
                }
            }
            assert_int_equal(present, m.count);
            assert_true(m.count * 2 <= m.mask + 1);
        }
    }
    free(m.slots);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_map),
        cmocka_unit_test(put_overwrites),
        cmocka_unit_test(churn_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
