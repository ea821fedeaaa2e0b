/* test_expandable.c - expandable segments page by page, on a fake device
 * that keeps the driver's rules (whole mappings only, never overlapping):
 * release gives back the whole pages inside any free block and never asks
 * for part of a mapping; pages between live blocks serve a larger request,
 * in place when they can; a failed map or unmap leaves the statistics equal
 * to what the device holds; the miss path unmaps other pools' free pages
 * and maps them again before reporting out of memory; garbage collection
 * takes the oldest free pages; every page mapped or unmapped is a device
 * allocation or free. */
#include "common.h"

#define EXP  "free_semantics:stream;expandable_segments:true"
#define BASE FAKE_VM_BASE

/* The allocator's walk holds, the device refused nothing, and what the
 * statistics call reserved is what the device has mapped. */
static void agree(env *e)
{
    fs_alloc_census c;
    const char *err = fs_alloc_check(e->a, 0, &c);
    if (err) fail_msg("%s", err);
    assert_int_equal(counts(e).vm_refused, 0);
    fs_alloc_stats st = stats(e);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, fake_used(e->fake, 0));
    assert_int_equal(c.mapped_bytes, fake_used(e->fake, 0));
    assert_int_equal(st.num_device_alloc - st.num_device_free,
                     fake_mappings(e->fake, 0) + fake_live_segments(e->fake, 0));
}

/* Everything freed and emptied: nothing is left on the device. */
static void all_back(env *e)
{
    assert_int_equal(fs_alloc_empty_cache(e->a, 0), FS_OK);
    agree(e);
    assert_int_equal(fake_used(e->fake, 0), 0);
    assert_int_equal(fake_mappings(e->fake, 0), 0);
    fs_alloc_stats st = stats(e);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.segment[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.num_device_alloc, st.num_device_free);
}

/* Growth steps of many sizes, then frees in the middle and at the end:
 * release unmaps only whole mappings (issue 9, item 3: it unmapped from a
 * page boundary inside a growth step's mapping, which the driver refuses). */
static void test_release_whole_mappings(void **state)
{
    (void)state;
    env e = env_make(EXP, 64 * MiB);
    /* one growth step of four pages, then a block in its first page: the
     * free pages after it go back, the first one stays */
    void *x = must_alloc(&e, LEG, 7 * MiB);
    fs_free(e.a, x, NULL);
    x = must_alloc(&e, LEG, 3 * MiB / 2);
    assert_int_equal(U(x), BASE);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    agree(&e);
    assert_int_equal(fake_used(e.fake, 0), 2 * MiB);
    fs_free(e.a, x, NULL);
    all_back(&e);
    /* growth steps of many sizes, frees in the middle and at the end */
    void *a = must_alloc(&e, LEG, 3 * MiB);
    void *b = must_alloc(&e, LEG, 5 * MiB);
    void *c = must_alloc(&e, LEG, 7 * MiB);
    void *d = must_alloc(&e, LEG, 3 * MiB / 2);
    assert_int_equal(U(b), U(a) + 3 * MiB); /* contiguous */
    assert_int_equal(U(d), U(c) + 7 * MiB);
    agree(&e);
    fs_free(e.a, b, NULL);
    fs_free(e.a, d, NULL);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    agree(&e);
    /* b was [3, 8) MiB: pages [4, 8) went; d was [15, 16.5): page [16, 18) */
    assert_int_equal(fake_used(e.fake, 0), 18 * MiB - 4 * MiB - 2 * MiB);
    fs_free(e.a, a, NULL);
    fs_free(e.a, c, NULL);
    all_back(&e);
    /* grows again from the start of the range */
    void *f = must_alloc(&e, LEG, 32 * MiB);
    assert_int_equal(U(f), BASE);
    fs_free(e.a, f, NULL);
    all_back(&e);
    env_free(&e);
}

/* Only the whole pages inside a free block go; the partial pages at its
 * ends stay mapped as free memory. */
static void test_partial_pages_stay(void **state)
{
    (void)state;
    env e = env_make(EXP, 64 * MiB);
    void *a = must_alloc(&e, LEG, 3 * MiB);
    void *b = must_alloc(&e, LEG, 9 * MiB);
    void *c = must_alloc(&e, LEG, 3 * MiB);
    assert_int_equal(fake_used(e.fake, 0), 16 * MiB);
    fs_free(e.a, b, NULL);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    agree(&e);
    assert_int_equal(fake_used(e.fake, 0), 8 * MiB); /* [4, 12) MiB went */
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.allocated_bytes[FS_SIZE_ALL].current, 6 * MiB);
    fs_free(e.a, a, NULL);
    fs_free(e.a, c, NULL);
    all_back(&e);
    env_free(&e);
}

/* Twelve 10 MiB blocks on a 128 MiB device, every other one freed: a 30 MiB
 * and a 15 MiB request succeed, as they do with plain segments (issue 9,
 * item 7). */
static void test_holes_serve_larger(void **state)
{
    (void)state;
    env e = env_make(EXP, 128 * MiB);
    void *blk[12], *p = NULL;
    for (int i = 0; i < 12; i++) {
        blk[i] = must_alloc(&e, LEG, 10 * MiB);
        assert_int_equal(U(blk[i]), BASE + (uintptr_t)i * 10 * MiB);
    }
    for (int i = 0; i < 12; i += 2)
        fs_free(e.a, blk[i], NULL);
    assert_int_equal(fs_malloc(e.a, 0, LEG, 30 * MiB, 0, &p), FS_OK);
    void *q = must_alloc(&e, LEG, 15 * MiB);
    agree(&e);
    assert_int_equal(fake_used(e.fake, 0), 60 * MiB + 30 * MiB + 16 * MiB);
    for (int i = 1; i < 12; i += 2)
        fs_free(e.a, blk[i], NULL);
    fs_free(e.a, p, NULL);
    fs_free(e.a, q, NULL);
    all_back(&e);
    env_free(&e);
}

/* An unmapped hole between live blocks is mapped again in place for a
 * request it can hold; one it cannot hold goes past the live blocks. */
static void test_hole_remapped_in_place(void **state)
{
    (void)state;
    env e = env_make(EXP, 1024 * MiB);
    void *a = must_alloc(&e, LEG, 10 * MiB);
    void *b = must_alloc(&e, LEG, 10 * MiB);
    void *c = must_alloc(&e, LEG, 10 * MiB);
    fs_free(e.a, b, NULL);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    assert_int_equal(fake_used(e.fake, 0), 20 * MiB);
    void *d = must_alloc(&e, LEG, 8 * MiB);
    assert_int_equal(U(d), BASE + 10 * MiB);
    void *f = must_alloc(&e, LEG, 12 * MiB);
    assert_int_equal(U(f), BASE + 30 * MiB);
    agree(&e);
    assert_int_equal(fake_used(e.fake, 0), 40 * MiB);
    fs_free(e.a, a, NULL);
    fs_free(e.a, c, NULL);
    fs_free(e.a, d, NULL);
    fs_free(e.a, f, NULL);
    all_back(&e);
    env_free(&e);
}

/* A request that needs the free pages of another pool (no cross-stream
 * reuse): the miss path unmaps them and maps the memory again where the
 * request fits, instead of reporting out of memory. */
static void test_miss_remaps_other_pools_pages(void **state)
{
    (void)state;
    env e = env_make(EXP ";cross_stream_reuse:none", 64 * MiB);
    void *p[6];
    for (int i = 0; i < 6; i++)
        p[i] = must_alloc(&e, S1, 10 * MiB);
    for (int i = 0; i < 6; i++)
        fs_free(e.a, p[i], NULL);
    assert_int_equal(fake_used(e.fake, 0), 60 * MiB);
    void *big = must_alloc(&e, LEG, 40 * MiB);
    agree(&e);
    assert_int_equal(fake_used(e.fake, 0), 40 * MiB);
    assert_int_equal(stats(&e).num_alloc_retries, 1);
    assert_int_equal(counts(&e).segment_alloc, 0);
    fs_free(e.a, big, NULL);
    all_back(&e);
    env_free(&e);
}

/* A failed unmap: the pages before it are gone (and counted), the rest
 * stays mapped, free and reserved; a later release takes it. */
static void test_unmap_failure(void **state)
{
    (void)state;
    env e = env_make(EXP, 1024 * MiB);
    void *a = must_alloc(&e, LEG, 10 * MiB);
    fs_free(e.a, a, NULL);
    fake_fail_vm(e.fake, 0, 3);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    agree(&e);
    assert_int_equal(fake_used(e.fake, 0), 6 * MiB);
    assert_int_equal(stats(&e).num_device_free, 2);
    /* the memory left is still usable, and still given back later */
    a = must_alloc(&e, LEG, 10 * MiB);
    assert_int_equal(U(a), BASE);
    agree(&e);
    fs_free(e.a, a, NULL);
    all_back(&e);
    env_free(&e);
}

/* A failed map: the pages mapped before it stay, counted and free; the
 * request fails with the device's error and the next one succeeds. */
static void test_map_failure(void **state)
{
    (void)state;
    env e = env_make(EXP, 1024 * MiB);
    void *p = NULL;
    fake_fail_vm(e.fake, 3, 0);
    assert_int_equal(fs_malloc(e.a, 0, LEG, 10 * MiB, 0, &p), FS_ERR_DEVICE);
    agree(&e);
    assert_int_equal(fake_used(e.fake, 0), 4 * MiB);
    assert_int_equal(stats(&e).num_device_alloc, 2);
    p = must_alloc(&e, LEG, 10 * MiB);
    assert_int_equal(U(p), BASE);
    agree(&e);
    fs_free(e.a, p, NULL);
    all_back(&e);
    env_free(&e);
}

/* Out of memory part-way through a growth: nothing is leaked, and the
 * report comes only after the pages were released and tried again. */
static void test_map_out_of_memory(void **state)
{
    (void)state;
    env e = env_make(EXP, 6 * MiB);
    void *p = NULL;
    assert_int_equal(fs_malloc(e.a, 0, LEG, 10 * MiB, 0, &p), FS_ERR_OOM);
    agree(&e);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.num_alloc_retries, 1);
    assert_int_equal(st.num_ooms, 1);
    p = must_alloc(&e, LEG, 6 * MiB);
    agree(&e);
    fs_free(e.a, p, NULL);
    all_back(&e);
    env_free(&e);
}

/* Pages of a pinned segment (NCCL registration) stay mapped. */
static void test_pinned_stays_mapped(void **state)
{
    (void)state;
    env e = env_make(EXP, 1024 * MiB);
    void *a = must_alloc(&e, LEG, 10 * MiB);
    void *b = must_alloc(&e, LEG, 10 * MiB);
    assert_int_equal(fs_alloc_segment_pin(e.a, a, true), FS_OK);
    fs_free(e.a, b, NULL);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    assert_int_equal(fake_used(e.fake, 0), 20 * MiB);
    assert_int_equal(fs_alloc_segment_pin(e.a, a, false), FS_OK);
    fs_free(e.a, a, NULL);
    all_back(&e);
    env_free(&e);
}

/* Garbage collection unmaps the pages of the oldest free blocks, not of
 * the younger ones, until reserved memory is under the threshold. */
static void test_garbage_collection(void **state)
{
    (void)state;
    env e = env_make(EXP ";garbage_collection_threshold:0.5", 100 * MiB);
    void *a = must_alloc(&e, LEG, 20 * MiB);
    void *k = must_alloc(&e, LEG, 2 * MiB);
    fs_free(e.a, a, NULL);
    void *b = must_alloc(&e, LEG, 30 * MiB);
    assert_int_equal(U(b), BASE + 22 * MiB); /* a's 20 MiB cannot hold it */
    fs_free(e.a, b, NULL);
    assert_int_equal(stats(&e).num_device_free, 0); /* 52 MiB: the miss for b was under */
    void *c = must_alloc(&e, LEG, 40 * MiB);        /* 52 MiB > 50 MiB: a's pages go */
    assert_int_equal(U(c), BASE + 22 * MiB);        /* b's pages stayed, and serve c */
    agree(&e);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.num_device_free, 10);
    assert_int_equal(st.num_ooms, 0);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, 42 * MiB);
    fs_free(e.a, c, NULL);
    fs_free(e.a, k, NULL);
    all_back(&e);
    env_free(&e);
}

/* Every page mapped is a device allocation, every page unmapped a device
 * free, in the statistics and in the summary. */
static void test_device_allocation_counts(void **state)
{
    (void)state;
    env e = env_make(EXP, 1024 * MiB);
    void *a = must_alloc(&e, LEG, 10 * MiB);
    void *s = must_alloc(&e, LEG, 4096);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.num_device_alloc, 6); /* five large pages, one small */
    assert_int_equal(st.num_device_alloc, counts(&e).vm_map);
    char buf[8192];
    fs_alloc_summary(e.a, 0, buf, sizeof buf);
    assert_non_null(strstr(buf, "device allocs: 6 "));
    fs_free(e.a, a, NULL);
    fs_free(e.a, s, NULL);
    all_back(&e);
    st = stats(&e);
    assert_int_equal(st.num_device_free, 6);
    assert_int_equal(st.num_device_free, counts(&e).vm_unmap);
    env_free(&e);
}

/* cudaDeviceReset with a hole in both an ordered and a plain range: the
 * ordered range keeps its live blocks and its hole, which a later request
 * maps again in place; the plain range's blocks are forgotten and its
 * pages go back; the unmapped pages are neither live nor free throughout. */
static void test_reset_keeps_holes(void **state)
{
    (void)state;
    env e = env_make(EXP, 128 * MiB);
    void *a = must_alloc_ordered(&e, LEG, 3 * MiB);
    void *b = must_alloc_ordered(&e, LEG, 9 * MiB);
    void *c = must_alloc_ordered(&e, LEG, 3 * MiB);
    void *pa = must_alloc(&e, LEG, 3 * MiB);
    void *pb = must_alloc(&e, LEG, 9 * MiB);
    must_alloc(&e, LEG, 3 * MiB);
    assert_int_equal(fs_free_async(e.a, b, LEG, NULL), FS_OK);
    fs_free(e.a, pb, NULL);
    fake_complete_all(e.fake);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    agree(&e);
    assert_int_equal(fake_used(e.fake, 0), 16 * MiB); /* [4, 12) MiB of each range went */
    fake_reset(e.fake, 0);
    fs_alloc_device_reset(e.a, 0);
    agree(&e);
    /* the ordered range's pages [0, 4) and [12, 16) MiB stay, the plain range's go */
    assert_int_equal(fake_used(e.fake, 0), 8 * MiB);
    assert_int_equal(stats(&e).allocated_bytes[FS_SIZE_ALL].current, (int64_t)(6 * MiB));
    assert_int_equal(fs_free(e.a, pa, NULL), FS_ERR_INVALID);
    void *n = must_alloc_ordered(&e, LEG, 8 * MiB);
    assert_int_equal(U(n), U(a) + 3 * MiB); /* in the hole, mapped again */
    agree(&e);
    assert_int_equal(fs_free_async(e.a, a, LEG, NULL), FS_OK);
    assert_int_equal(fs_free_async(e.a, c, LEG, NULL), FS_OK);
    assert_int_equal(fs_free_async(e.a, n, LEG, NULL), FS_OK);
    fake_complete_all(e.fake);
    all_back(&e);
    assert_int_equal(counts(&e).dead_event_calls, 0);
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_whole_mappings),
        cmocka_unit_test(test_partial_pages_stay),
        cmocka_unit_test(test_holes_serve_larger),
        cmocka_unit_test(test_hole_remapped_in_place),
        cmocka_unit_test(test_miss_remaps_other_pools_pages),
        cmocka_unit_test(test_unmap_failure),
        cmocka_unit_test(test_map_failure),
        cmocka_unit_test(test_map_out_of_memory),
        cmocka_unit_test(test_pinned_stays_mapped),
        cmocka_unit_test(test_garbage_collection),
        cmocka_unit_test(test_device_allocation_counts),
        cmocka_unit_test(test_reset_keeps_holes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
