/* test_checkpoint.c - a private pool's layout taken and put back
 * (allocator/checkpoint.c, PyTorch's checkpoint state for CUDA graph
 * trees): the same blocks live again at the same addresses, what came
 * since freed, and a layout that cannot be put back refused with nothing
 * changed. */
#include "common.h"

#define P1 ((uint64_t)7)

typedef struct layout {
    fs_walk_entry w[64];
    size_t n;
} layout;

static void *in_pool(env *e, size_t size)
{
    void *p = NULL;
    assert_int_equal(fs_malloc_private(e->a, 0, S1, P1, size, 0, &p), FS_OK);
    return p;
}

static void hold(env *e)
{
    fs_private_conf c = {.held = true};
    fs_alloc_private_configure(e->a, 0, P1, &c);
}

/* The pool's segments and blocks, with live or not, as a snapshot shows them. */
static layout pool_layout(env *e)
{
    layout l = {0};
    fs_walk_entry all[64];
    size_t n = fs_alloc_walk(e->a, 0, all, 64);
    assert_true(n <= 64);
    for (size_t i = 0; i < n; i++)
        if (all[i].priv == P1) {
            l.w[l.n] = all[i];
            l.w[l.n].requested = 0; /* not a layout's */
            l.n++;
        }
    return l;
}

static void assert_same_layout(const layout *a, const layout *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        assert_int_equal(a->w[i].state, b->w[i].state);
        assert_int_equal(a->w[i].addr, b->w[i].addr);
        assert_int_equal(a->w[i].size, b->w[i].size);
    }
}

static void assert_checks(env *e)
{
    fs_alloc_census census;
    assert_null(fs_alloc_check(e->a, 0, &census));
}

static bool has(const uintptr_t *v, size_t n, void *p)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == U(p)) return true;
    return false;
}

static void restore_ok(env *e, fs_checkpoint *c, uintptr_t **freed, size_t *nf, uintptr_t **made,
                       size_t *nm)
{
    char why[256] = "";
    assert_int_equal(fs_alloc_restore(e->a, c, freed, nf, made, nm, why, sizeof why), FS_OK);
}

/* Put back at once, a checkpoint changes nothing a snapshot shows. */
static void test_own_state_is_a_no_op(void **state)
{
    (void)state;
    env e = env_make(NULL, 1024 * MiB);
    hold(&e);
    void *a = in_pool(&e, 4096), *b = in_pool(&e, 8192), *c = in_pool(&e, 4096);
    void *big = in_pool(&e, 8 * MiB);
    assert_int_equal(fs_free_async(e.a, b, S1, NULL), FS_OK);
    layout before = pool_layout(&e);
    fs_alloc_stats st0 = stats(&e);
    fs_checkpoint *ck = NULL;
    char why[256] = "";
    assert_int_equal(fs_alloc_checkpoint(e.a, 0, P1, &ck, why, sizeof why), FS_OK);
    const fs_checkpoint_segment *segs;
    const fs_checkpoint_block *blocks;
    assert_int_equal(fs_checkpoint_segments(ck, &segs, &blocks), 2); /* small and large */

    uintptr_t *freed, *made;
    size_t nf, nm;
    restore_ok(&e, ck, &freed, &nf, &made, &nm);
    assert_int_equal(nf, 3);
    assert_int_equal(nm, 3);
    assert_true(has(made, nm, a) && has(made, nm, c) && has(made, nm, big));
    assert_true(has(freed, nf, a) && !has(freed, nf, b));
    layout after = pool_layout(&e);
    assert_same_layout(&before, &after);
    fs_alloc_stats st1 = stats(&e);
    assert_int_equal(st1.allocation[FS_SIZE_ALL].current, st0.allocation[FS_SIZE_ALL].current);
    assert_int_equal(st1.allocated_bytes[FS_SIZE_ALL].current,
                     st0.allocated_bytes[FS_SIZE_ALL].current);
    assert_int_equal(st1.segment[FS_SIZE_ALL].current, st0.segment[FS_SIZE_ALL].current);
    assert_checks(&e);
    free(freed);
    free(made);
    /* the blocks made live are ordinary live blocks */
    assert_int_equal(fs_free_async(e.a, a, S1, NULL), FS_OK);
    assert_int_equal(fs_free_async(e.a, c, S1, NULL), FS_OK);
    assert_int_equal(fs_free_async(e.a, big, S1, NULL), FS_OK);
    assert_checks(&e);
    fs_checkpoint_free(ck);
    env_free(&e);
}

/* What changed since is undone: blocks freed since are live again, blocks
 * made since are freed, a segment made since stays, free. */
static void test_back_to_the_checkpoint(void **state)
{
    (void)state;
    env e = env_make(NULL, 1024 * MiB);
    hold(&e);
    void *a = in_pool(&e, 4096), *b = in_pool(&e, 4096);
    layout at = pool_layout(&e);
    fs_checkpoint *ck = NULL;
    char why[256] = "";
    assert_int_equal(fs_alloc_checkpoint(e.a, 0, P1, &ck, why, sizeof why), FS_OK);
    assert_int_equal(fs_free_async(e.a, a, S1, NULL), FS_OK);
    void *d = in_pool(&e, 1024), *g = in_pool(&e, 30 * MiB); /* a new segment */
    size_t segments = (size_t)stats(&e).segment[FS_SIZE_ALL].current;

    uintptr_t *freed, *made;
    size_t nf, nm;
    restore_ok(&e, ck, &freed, &nf, &made, &nm);
    assert_true(has(freed, nf, d) && has(freed, nf, g) && has(freed, nf, b));
    assert_int_equal(nm, 2);
    assert_true(has(made, nm, a) && has(made, nm, b));
    assert_int_equal(stats(&e).segment[FS_SIZE_ALL].current, (int64_t)segments);
    assert_int_equal(stats(&e).allocation[FS_SIZE_ALL].current, 2);
    layout now = pool_layout(&e); /* the checkpoint's entries, and the new segment's, free */
    for (size_t i = 0; i < at.n; i++) {
        bool found = false;
        for (size_t j = 0; j < now.n; j++)
            if (now.w[j].addr == at.w[i].addr && now.w[j].state == at.w[i].state &&
                now.w[j].size == at.w[i].size)
                found = true;
        assert_true(found);
    }
    assert_checks(&e);
    free(freed);
    free(made);
    fs_checkpoint_free(ck);
    env_free(&e);
}

/* A free still waiting for its streams cannot be in a checkpoint, nor be
 * cut through by one: refused, the pool as it was. */
static void test_refused_changes_nothing(void **state)
{
    (void)state;
    env e = env_make(NULL, 1024 * MiB);
    hold(&e);
    void *a = in_pool(&e, 4096), *b = in_pool(&e, 4096);
    fs_checkpoint *ck = NULL;
    char why[256] = "";
    assert_int_equal(fs_alloc_checkpoint(e.a, 0, P1, &ck, why, sizeof why), FS_OK);
    assert_int_equal(fs_record_stream(e.a, b, S2), FS_OK);
    assert_int_equal(fs_free_async(e.a, b, S1, NULL), FS_OK); /* pending: S2's work */
    layout before = pool_layout(&e);
    uintptr_t *freed, *made;
    size_t nf, nm;
    assert_int_equal(fs_alloc_restore(e.a, ck, &freed, &nf, &made, &nm, why, sizeof why),
                     FS_ERR_INVALID);
    assert_non_null(strstr(why, "waits for its streams"));
    assert_int_equal(nf + nm, 0);
    layout after = pool_layout(&e);
    assert_same_layout(&before, &after);
    fs_checkpoint *ck2 = NULL;
    assert_int_equal(fs_alloc_checkpoint(e.a, 0, P1, &ck2, why, sizeof why), FS_ERR_INVALID);
    assert_null(ck2);
    /* once S2 has passed it, both work */
    fake_complete_all(e.fake);
    assert_int_equal(fs_alloc_checkpoint(e.a, 0, P1, &ck2, why, sizeof why), FS_OK);
    restore_ok(&e, ck, &freed, &nf, &made, &nm);
    assert_int_equal(nm, 2);
    assert_true(has(made, nm, a) && has(made, nm, b));
    assert_checks(&e);
    free(freed);
    free(made);
    fs_checkpoint_free(ck);
    fs_checkpoint_free(ck2);
    env_free(&e);
}

/* A segment given back since cannot be cut again. */
static void test_segment_gone(void **state)
{
    (void)state;
    env e = env_make(NULL, 1024 * MiB);
    hold(&e);
    void *a = in_pool(&e, 30 * MiB);
    fs_checkpoint *ck = NULL;
    char why[256] = "";
    assert_int_equal(fs_alloc_checkpoint(e.a, 0, P1, &ck, why, sizeof why), FS_OK);
    assert_int_equal(fs_free_async(e.a, a, S1, NULL), FS_OK);
    fs_private_conf c = {.held = false};
    fs_alloc_private_configure(e.a, 0, P1, &c);
    assert_int_equal(fs_alloc_private_empty(e.a, 0, P1), FS_OK);
    uintptr_t *freed, *made;
    size_t nf, nm;
    assert_int_equal(fs_alloc_restore(e.a, ck, &freed, &nf, &made, &nm, why, sizeof why),
                     FS_ERR_INVALID);
    assert_non_null(strstr(why, "no longer the pool's"));
    fs_checkpoint_free(ck);
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_state_is_a_no_op),
        cmocka_unit_test(test_back_to_the_checkpoint),
        cmocka_unit_test(test_refused_changes_nothing),
        cmocka_unit_test(test_segment_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
