/* test_policy.c - SPEC section 4 rule by rule, with the exact sizes and
 * addresses the fake device makes predictable: rounding, pools, segment
 * sizes, splitting, max_split_size, best fit, coalescing, OOM and
 * release-and-retry, expandable segments, garbage collection, statistics,
 * pinning, address queries and device reset. */
#include "common.h"

#define STREAM "free_semantics:stream"
#define CAP    ((size_t)64 << 30)

/* A busy device: one that already holds 160 MiB (a live block on S3, in
 * slots SEG(0) to SEG(79)). From there on the large pool's shared segment is
 * PyTorch's 20 MiB; the tests of PyTorch's segment and split rules start
 * from here, a small job's segments are test_segment_growth.c's. */
#define BUSY    (160 * MiB)
#define BSEG(n) SEG(80 + (n))

static void make_busy(env *e)
{
    assert_int_equal(U(must_alloc(e, S3, BUSY)), SEG(0));
}

static void test_rounding(void **state)
{
    (void)state;
    env e = env_make(STREAM, CAP);
    void *a = must_alloc(&e, LEG, 1);
    void *b = must_alloc(&e, LEG, 512);
    void *c = must_alloc(&e, LEG, 513);
    void *d = must_alloc(&e, LEG, MiB);
    assert_int_equal(U(a), SEG(0));
    assert_int_equal(block_size(&e, a), 512);
    assert_int_equal(U(b), SEG(0) + 512);
    assert_int_equal(block_size(&e, b), 512);
    assert_int_equal(U(c), SEG(0) + 1024);
    assert_int_equal(block_size(&e, c), 1024);
    assert_int_equal(U(d), SEG(0) + 2048);
    assert_int_equal(block_size(&e, d), MiB);
    void *p = (void *)1;
    assert_int_equal(fs_malloc(e.a, 0, LEG, 0, 0, &p), FS_ERR_INVALID);
    assert_int_equal(fs_malloc(e.a, 0, LEG, SIZE_MAX, 0, &p), FS_ERR_OOM);
    assert_int_equal(fs_malloc(e.a, 0, LEG, SIZE_MAX - 511, 0, &p), FS_ERR_OOM);
    assert_int_equal(fs_malloc(e.a, 0, LEG, SIZE_MAX / 2 + 3, 0, &p), FS_ERR_OOM);
    assert_ptr_equal(p, (void *)1); /* untouched on failure */
    env_free(&e);
}

static void test_roundup_divisions(void **state)
{
    (void)state;
    env e = env_make(STREAM ";roundup_power2_divisions:4", CAP);
    make_busy(&e); /* large blocks split off 20 MiB segments: block size = rounded size */
    assert_int_equal(block_size(&e, must_alloc(&e, LEG, 1500)), 1536); /* below 4 * 512 */
    assert_int_equal(block_size(&e, must_alloc(&e, LEG, 1200000)), 1310720);
    assert_int_equal(block_size(&e, must_alloc(&e, LEG, 4 * MiB)), 4 * MiB); /* a power of 2 */
    env_free(&e);
    e = env_make(STREAM ";roundup_power2_divisions:[1:2,2:4,>:8]", CAP);
    make_busy(&e);
    assert_int_equal(block_size(&e, must_alloc(&e, LEG, 1536 * 1024 + 1)), 2 * MiB);
    assert_int_equal(block_size(&e, must_alloc(&e, LEG, 2200000)), 2621440);
    assert_int_equal(block_size(&e, must_alloc(&e, LEG, 5 * MiB + 1)), 5767168);
    env_free(&e);
}

static void test_pools_and_segments(void **state)
{
    (void)state;
    env e = env_make(STREAM, CAP);
    make_busy(&e);
    void *small = must_alloc(&e, LEG, MiB);
    void *l2 = must_alloc(&e, LEG, 12 * MiB);
    void *l3 = must_alloc(&e, LEG, 11 * MiB + 1);
    void *l1 = must_alloc(&e, LEG, MiB + 512);
    void *l4 = must_alloc(&e, LEG, 5 * MiB);
    assert_int_equal(U(small), BSEG(0));            /* 2 MiB small segment */
    assert_int_equal(U(l2), BSEG(1));               /* >= 10 MiB: its own 12 MiB segment */
    assert_int_equal(U(l3), BSEG(7));               /* 11 MiB + 512 rounds to a 12 MiB segment */
    assert_int_equal(block_size(&e, l3), 12 * MiB); /* 1 MiB - 512 left: not split */
    assert_int_equal(U(l1), BSEG(13));              /* < 10 MiB: a 20 MiB segment */
    assert_int_equal(U(l4), BSEG(13) + MiB + 512);  /* from its remainder */
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.segment[FS_SIZE_SMALL].current, 1);
    assert_int_equal(st.segment[FS_SIZE_LARGE].current, 1 + 3);
    assert_int_equal(st.reserved_bytes[FS_SIZE_SMALL].current, 2 * MiB);
    assert_int_equal(st.reserved_bytes[FS_SIZE_LARGE].current, BUSY + 44 * MiB);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, BUSY + 46 * MiB);
    assert_int_equal(st.allocated_bytes[FS_SIZE_ALL].current,
                     BUSY + MiB + (MiB + 512) + 12 * MiB + 12 * MiB + 5 * MiB);
    assert_int_equal(st.requested_bytes[FS_SIZE_ALL].current,
                     BUSY + MiB + (MiB + 512) + 12 * MiB + (11 * MiB + 1) + 5 * MiB);
    assert_int_equal(st.num_device_alloc, 1 + 4);
    assert_int_equal(counts(&e).segment_alloc, 1 + 4);
    env_free(&e);
}

static void test_split_rules(void **state)
{
    (void)state;
    env e = env_make(STREAM, CAP);
    make_busy(&e);
    void *a = must_alloc(&e, LEG, 19 * MiB); /* 1 MiB left: not more than 1 MiB, no split */
    assert_int_equal(block_size(&e, a), 20 * MiB);
    void *b = must_alloc(&e, LEG, 9 * MiB); /* 11 MiB left: split */
    assert_int_equal(U(b), BSEG(10));
    assert_int_equal(block_size(&e, b), 9 * MiB);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.inactive_split[FS_SIZE_LARGE].current, 1);
    assert_int_equal(st.inactive_split_bytes[FS_SIZE_LARGE].current, 11 * MiB);
    assert_int_equal(st.allocated_bytes[FS_SIZE_LARGE].current, BUSY + 29 * MiB);
    assert_int_equal(st.requested_bytes[FS_SIZE_LARGE].current, BUSY + 28 * MiB);
    void *c = must_alloc(&e, LEG, MiB); /* small: a 2 MiB segment */
    assert_int_equal(U(c), BSEG(20));
    void *d = must_alloc(&e, LEG, MiB - 512); /* leaves exactly 512: still split */
    assert_int_equal(U(d), BSEG(20) + MiB);
    assert_int_equal(block_size(&e, d), MiB - 512);
    assert_int_equal(U(must_alloc(&e, LEG, 1)), BSEG(20) + 2 * MiB - 512);
    env_free(&e);
}

static void test_max_split_size(void **state)
{
    (void)state;
    env e = env_make(STREAM ";max_split_size_mb:32", CAP);
    make_busy(&e);
    void *big = must_alloc(&e, LEG, 40 * MiB);
    assert_int_equal(U(big), BSEG(0));
    assert_int_equal(fs_free(e.a, big, NULL), FS_OK);
    void *small = must_alloc(&e, LEG, 8 * MiB); /* never from an oversize block */
    assert_int_equal(U(small), BSEG(20));
    void *over = must_alloc(&e, LEG, 36 * MiB); /* oversize: within 20 MiB of it, whole */
    assert_int_equal(U(over), BSEG(0));
    assert_int_equal(block_size(&e, over), 40 * MiB);
    assert_int_equal(fs_free(e.a, over, NULL), FS_OK);
    void *far = must_alloc(&e, LEG, 18 * MiB + 512 * 1024); /* under max_split: not from 40 */
    assert_int_equal(U(far), BSEG(30));
    void *fit = must_alloc(&e, LEG, 33 * MiB);
    assert_int_equal(U(fit), BSEG(0));
    env_free(&e);
}

static void test_best_fit(void **state)
{
    (void)state;
    env e = env_make(STREAM, CAP);
    void *a = must_alloc(&e, LEG, 4096);
    must_alloc(&e, LEG, 512);
    void *c = must_alloc(&e, LEG, 8192);
    must_alloc(&e, LEG, 512);
    void *x = must_alloc(&e, LEG, 4096);
    must_alloc(&e, LEG, 512);
    assert_int_equal(U(x), SEG(0) + 13312);
    fs_free(e.a, x, NULL);
    fs_free(e.a, c, NULL);
    fs_free(e.a, a, NULL);
    assert_int_equal(U(must_alloc(&e, LEG, 4000)), SEG(0));         /* smallest, lowest */
    assert_int_equal(U(must_alloc(&e, LEG, 4096)), SEG(0) + 13312); /* then the other 4096 */
    void *m = must_alloc(&e, LEG, 5000);                            /* the 8192 hole */
    assert_int_equal(U(m), SEG(0) + 4608);
    assert_int_equal(U(must_alloc(&e, LEG, 3072)), SEG(0) + 4608 + 5120); /* its remainder */
    assert_int_equal(U(must_alloc(&e, LEG, 512)), SEG(0) + 17920);        /* the tail */
    env_free(&e);
}

static void test_coalesce(void **state)
{
    (void)state;
    env e = env_make(STREAM, CAP);
    void *a = must_alloc(&e, LEG, 4096);
    void *b = must_alloc(&e, LEG, 4096);
    void *c = must_alloc(&e, LEG, 4096);
    assert_int_equal(stats(&e).inactive_split[FS_SIZE_ALL].current, 1);
    fs_free(e.a, b, NULL);
    assert_int_equal(stats(&e).inactive_split[FS_SIZE_ALL].current, 2);
    fs_free(e.a, a, NULL);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.inactive_split[FS_SIZE_ALL].current, 2);
    assert_int_equal(st.inactive_split_bytes[FS_SIZE_ALL].current, 2 * MiB - 4096);
    assert_int_equal(st.largest_free_block, 2 * MiB - 3 * 4096);
    fs_free(e.a, c, NULL);
    st = stats(&e);
    assert_int_equal(st.inactive_split[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.inactive_split_bytes[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.largest_free_block, 2 * MiB);
    assert_int_equal(U(must_alloc(&e, LEG, 2 * MiB - 512 * 1024 * 2)), SEG(0)); /* whole again */
    env_free(&e);
}

static fs_oom_info last_oom;
static int ooms;

static void on_oom(void *ctx, const fs_oom_info *info)
{
    (void)ctx;
    last_oom = *info;
    ooms++;
}

static void test_oom_and_retry(void **state)
{
    (void)state;
    env e = env_make(STREAM, 64 * MiB);
    fs_alloc_observer obs = {.on_oom = on_oom};
    fs_alloc_set_observer(e.a, &obs);
    ooms = 0;
    void *a = must_alloc(&e, S1, 30 * MiB);
    must_alloc(&e, S1, 30 * MiB);
    void *p = NULL;
    assert_int_equal(fs_malloc(e.a, 0, S1, 10 * MiB, 0, &p), FS_ERR_OOM);
    assert_int_equal(ooms, 1);
    assert_int_equal(last_oom.requested, 10 * MiB);
    assert_int_equal(last_oom.allocated, 60 * MiB);
    assert_int_equal(last_oom.reserved, 60 * MiB);
    assert_int_equal(last_oom.reserved_free, 0);
    assert_int_equal(last_oom.largest_free, 0);
    assert_true(last_oom.stream == S1);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.num_ooms, 1);
    assert_int_equal(st.num_alloc_retries, 1);
    /* a cached 30 MiB block stands in the way of 32 MiB: released, retried */
    fs_free(e.a, a, NULL);
    void *b = must_alloc(&e, S1, 32 * MiB);
    assert_int_equal(U(b), SEG(30));
    st = stats(&e);
    assert_int_equal(st.num_alloc_retries, 2);
    assert_int_equal(st.num_device_free, 1);
    assert_int_equal(st.num_ooms, 1);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, 62 * MiB);
    /* a cached small segment is released by the retry before the report */
    void *s = must_alloc(&e, S1, 4096);
    fs_free(e.a, s, NULL);
    assert_int_equal(fs_malloc(e.a, 0, S1, 20 * MiB, 0, &p), FS_ERR_OOM);
    assert_int_equal(last_oom.reserved_free, 0); /* released by the retry */
    assert_int_equal(last_oom.reserved, 62 * MiB);
    assert_int_equal(ooms, 2);
    env_free(&e);
}

/* fs_alloc_set_limit, PyTorch's memory fraction: growth stops at the cap as
 * at the device's size (cached segments given back first, then OOM with
 * the figures), what is reserved stays when the cap drops below it, and
 * 0 lifts it. */
static void test_limit(void **state)
{
    (void)state;
    env e = env_make(STREAM, (size_t)1 << 30);
    fs_alloc_observer obs = {.on_oom = on_oom};
    fs_alloc_set_observer(e.a, &obs);
    ooms = 0;
    assert_int_equal(fs_alloc_limit(e.a, 0), 0);
    fs_alloc_set_limit(e.a, 0, 64 * MiB);
    assert_int_equal(fs_alloc_limit(e.a, 0), 64 * MiB);
    assert_int_equal(fs_alloc_limit(e.a, 1), 0); /* no such device */
    void *a = must_alloc(&e, S1, 30 * MiB);
    void *b = must_alloc(&e, S1, 30 * MiB);
    void *p = NULL;
    assert_int_equal(fs_malloc(e.a, 0, S1, 10 * MiB, 0, &p), FS_ERR_OOM);
    assert_int_equal(ooms, 1);
    assert_int_equal(last_oom.requested, 10 * MiB);
    assert_int_equal(last_oom.reserved, 60 * MiB);
    /* a small request still fits the 4 MiB left under the cap: a 2 MiB segment */
    void *s = must_alloc(&e, S1, 4096);
    /* 20 MiB shared segments do not fit under the cap; the request's own size does */
    void *m = must_alloc(&e, S1, 2 * MiB);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, 64 * MiB);
    /* the cached 30 MiB block is given back for a 32 MiB request under the cap */
    fs_free(e.a, a, NULL);
    fs_free(e.a, m, NULL);
    void *c = must_alloc(&e, S1, 32 * MiB);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, 64 * MiB);
    /* a cap below what is reserved keeps it, and stops growth */
    fs_alloc_set_limit(e.a, 0, 16 * MiB);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, 64 * MiB);
    assert_int_equal(fs_malloc(e.a, 0, S1, 12 * MiB, 0, &p), FS_ERR_OOM);
    assert_int_equal(ooms, 2);
    /* lifted: growth is bounded by the device again */
    fs_alloc_set_limit(e.a, 0, 0);
    void *d = must_alloc(&e, S1, 100 * MiB);
    assert_true(stats(&e).reserved_bytes[FS_SIZE_ALL].current > (int64_t)(64 * MiB));
    fs_free(e.a, b, NULL);
    fs_free(e.a, c, NULL);
    fs_free(e.a, d, NULL);
    fs_free(e.a, s, NULL);
    fs_alloc_census census;
    assert_null(fs_alloc_check(e.a, 0, &census));
    env_free(&e);
}

static void test_expandable(void **state)
{
    (void)state;
    size_t cap = 64 * MiB;
    env e = env_make(STREAM ";expandable_segments:true", cap);
    size_t reserve = cap + cap / 8;
    void *a = must_alloc(&e, LEG, MiB + 512);
    assert_int_equal(U(a), FAKE_VM_BASE);
    void *b = must_alloc(&e, LEG, 3 * MiB);
    assert_int_equal(U(b), FAKE_VM_BASE + MiB + 512); /* contiguous: no sliver */
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.reserved_bytes[FS_SIZE_LARGE].current, 6 * MiB);
    assert_int_equal(st.segment[FS_SIZE_LARGE].current, 1);
    void *s = must_alloc(&e, LEG, 512);
    assert_int_equal(U(s), FAKE_VM_BASE + reserve); /* the small pool's own range */
    fake_counts c = counts(&e);
    assert_int_equal(c.vm_reserve, 2);
    assert_int_equal(c.vm_map, 4); /* a call per page: 1 + 2 large, 1 small */
    assert_int_equal(c.segment_alloc, 0);
    assert_int_equal(fake_used(e.fake, 0), 8 * MiB);
    fs_block_info bi;
    assert_int_equal(fs_alloc_block_info(e.a, b, &bi), FS_OK);
    assert_int_equal(U(bi.segment), FAKE_VM_BASE);
    assert_int_equal(bi.segment_size, 6 * MiB);
    /* freeing b leaves pages past a's end free: they go back */
    fs_free(e.a, b, NULL);
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    assert_int_equal(fake_used(e.fake, 0), 2 * MiB + 2 * MiB);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_LARGE].current, 2 * MiB);
    fs_free(e.a, a, NULL);
    fs_free(e.a, s, NULL);
    fs_alloc_empty_cache(e.a, 0);
    assert_int_equal(fake_used(e.fake, 0), 0);
    st = stats(&e);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.segment[FS_SIZE_ALL].current, 0);
    /* grows again from the start of the same range */
    assert_int_equal(U(must_alloc(&e, LEG, 4 * MiB)), FAKE_VM_BASE);
    env_free(&e);
}

static void test_garbage_collection(void **state)
{
    (void)state;
    env e = env_make(STREAM ";garbage_collection_threshold:0.5", 100 * MiB);
    void *a = must_alloc(&e, LEG, 30 * MiB);
    fs_free(e.a, a, NULL);
    void *b = must_alloc(&e, LEG, 32 * MiB);
    assert_int_equal(U(b), SEG(15));
    assert_int_equal(stats(&e).num_device_free, 0); /* 30 MiB reserved: under the threshold */
    fs_free(e.a, b, NULL);
    void *c = must_alloc(&e, LEG, 34 * MiB); /* 62 MiB > 50 MiB: the oldest goes */
    assert_int_equal(U(c), SEG(31));
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.num_device_free, 1);
    assert_int_equal(st.num_ooms, 0);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, 66 * MiB);
    assert_int_equal(U(must_alloc(&e, LEG, 32 * MiB)), SEG(15)); /* the younger one stayed */
    env_free(&e);
}

static void test_stats_and_peaks(void **state)
{
    (void)state;
    env e = env_make(STREAM, CAP);
    void *a = must_alloc(&e, LEG, 1000);
    void *b = must_alloc(&e, LEG, 4 * MiB); /* its own 4 MiB segment: the cache is small */
    fs_free(e.a, a, NULL);
    fs_free(e.a, b, NULL);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.allocation[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.allocation[FS_SIZE_ALL].peak, 2);
    assert_int_equal(st.allocation[FS_SIZE_ALL].allocated, 2);
    assert_int_equal(st.allocation[FS_SIZE_ALL].freed, 2);
    assert_int_equal(st.allocated_bytes[FS_SIZE_ALL].peak, 1024 + 4 * MiB);
    assert_int_equal(st.allocated_bytes[FS_SIZE_SMALL].peak, 1024);
    assert_int_equal(st.requested_bytes[FS_SIZE_ALL].peak, 1000 + 4 * MiB);
    assert_int_equal(st.active_bytes[FS_SIZE_LARGE].freed, 4 * MiB);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, 6 * MiB);
    fs_alloc_reset_peak(e.a, 0);
    st = stats(&e);
    assert_int_equal(st.allocated_bytes[FS_SIZE_ALL].peak, 0);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].peak, 6 * MiB);
    char buf[8192];
    size_t n = fs_alloc_summary(e.a, 0, buf, sizeof buf);
    assert_true(n > 0 && n < sizeof buf);
    assert_int_equal(strlen(buf), n);
    assert_non_null(strstr(buf, "memory summary, device ID 0"));
    assert_non_null(strstr(buf, "| Allocated memory      |      0 B   |"));
    assert_non_null(strstr(
        buf, "| GPU reserved memory   |   6144 KiB |   6144 KiB |   6144 KiB |      0 B   |"));
    assert_non_null(strstr(buf, "|       from small pool |"));
    char tiny[16];
    assert_int_equal(fs_alloc_summary(e.a, 0, tiny, sizeof tiny), n);
    assert_int_equal(strlen(tiny), sizeof tiny - 1);
    env_free(&e);
}

static void test_pin_info_and_bad_frees(void **state)
{
    (void)state;
    env e = env_make(STREAM, CAP);
    char *p = must_alloc(&e, LEG, MiB);
    fs_block_info bi;
    assert_int_equal(fs_alloc_block_info(e.a, p + 100, &bi), FS_OK);
    assert_ptr_equal(bi.block, p);
    assert_int_equal(bi.block_size, MiB);
    assert_int_equal(bi.requested, MiB);
    assert_int_equal(U(bi.segment), SEG(0));
    assert_int_equal(bi.segment_size, 2 * MiB);
    assert_int_equal(fs_alloc_block_info(e.a, p + MiB + 10, &bi), FS_ERR_NOT_OWNED); /* free part */
    assert_int_equal(fs_alloc_block_info(e.a, (void *)0x1234, &bi), FS_ERR_NOT_OWNED);
    assert_int_equal(fs_free(e.a, p + 512, NULL), FS_ERR_INVALID);
    assert_int_equal(fs_free(e.a, (void *)0x1234, NULL), FS_ERR_NOT_OWNED);
    assert_int_equal(fs_record_stream(e.a, (void *)0x1234, S1), FS_ERR_NOT_OWNED);
    assert_int_equal(fs_free(e.a, NULL, NULL), FS_OK);
    assert_int_equal(fs_alloc_segment_pin(e.a, p + 4096, true), FS_OK);
    assert_int_equal(fs_free(e.a, p, NULL), FS_OK);
    assert_int_equal(fs_free(e.a, p, NULL), FS_ERR_INVALID); /* double free */
    fs_alloc_empty_cache(e.a, 0);
    assert_int_equal(fake_live_segments(e.fake, 0), 1); /* pinned: kept */
    assert_int_equal(fs_alloc_segment_pin(e.a, p, false), FS_OK);
    assert_int_equal(fs_alloc_segment_pin(e.a, p, false), FS_ERR_INVALID);
    fs_alloc_empty_cache(e.a, 0);
    assert_int_equal(fake_live_segments(e.fake, 0), 0);
    assert_int_equal(fs_free(e.a, p, NULL), FS_ERR_NOT_OWNED); /* segment gone */
    env_free(&e);
}

static void test_trim(void **state)
{
    (void)state;
    env e = env_make(STREAM, CAP);
    void *a = must_alloc(&e, LEG, 30 * MiB);
    void *b = must_alloc(&e, LEG, 40 * MiB);
    must_alloc(&e, LEG, 12 * MiB);
    fs_free(e.a, a, NULL);
    fs_free(e.a, b, NULL);
    fs_alloc_trim(e.a, 0, 35 * MiB); /* 70 MiB unused: the 40 MiB one goes */
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, 42 * MiB);
    fs_alloc_trim(e.a, 0, 0);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, 12 * MiB);
    env_free(&e);
}

static void test_device_reset(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    void *a = must_alloc(&e, S1, 4096);
    void *b = must_alloc(&e, S1, 40 * MiB);
    fs_free(e.a, a, NULL);
    long frees = counts(&e).segment_free;
    fs_alloc_device_reset(e.a, 0);
    assert_int_equal(counts(&e).segment_free, frees); /* nothing given back: it is gone */
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.allocation[FS_SIZE_ALL].current, 0);
    assert_int_equal(fs_free(e.a, b, NULL), FS_ERR_NOT_OWNED);
    void *c = must_alloc(&e, S1, 4096);
    assert_int_equal(U(c), SEG(21)); /* a fresh segment */
    env_free(&e);
}

/* The device's state after a reset: what the fake still holds is what the
 * allocator reserves, the walk agrees with the statistics, and no event the
 * reset destroyed is ever used. */
static void expect_consistent(env *e, size_t live_blocks)
{
    fs_alloc_census c;
    assert_null(fs_alloc_check(e->a, 0, &c));
    assert_int_equal(c.live_blocks, live_blocks);
    assert_int_equal(c.pending_blocks, 0);
    assert_int_equal(stats(e).reserved_bytes[FS_SIZE_ALL].current, (int64_t)fake_used(e->fake, 0));
    assert_int_equal(counts(e).dead_event_calls, 0);
}

/* cudaDeviceReset keeps stream-ordered memory and its live blocks, which
 * stay freeable; plain memory is gone (forgotten, never given back);
 * pending frees waited on events the reset destroyed, on an idle device:
 * they are free, and unused survivors go back to the device. */
static void test_device_reset_keeps_ordered(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    void *plain = must_alloc(&e, S1, 4096);
    void *kept = must_alloc_ordered(&e, S1, 4096);
    void *big = must_alloc_ordered(&e, S2, 12 * MiB);
    void *pending = must_alloc_ordered(&e, S1, 8192);
    void *unused = must_alloc_ordered(&e, S3, 30 * MiB);
    assert_int_equal(fs_record_stream(e.a, kept, S3), FS_OK);
    assert_int_equal(fs_free_async(e.a, pending, S2, NULL), FS_OK);
    assert_int_equal(fs_free_async(e.a, unused, S1, NULL), FS_OK);
    fs_free(e.a, must_alloc(&e, S1, 8192), NULL); /* device-ordered, unfenced */
    fake_counts before = counts(&e);
    assert_int_equal(before.segment_alloc_ordered, 3);
    fake_reset(e.fake, 0);
    fs_alloc_device_reset(e.a, 0);
    /* only the unused 30 MiB segment went back, through the device; the
     * small and the 12 MiB segment stay with their blocks */
    assert_int_equal(counts(&e).segment_free, before.segment_free + 1);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, (int64_t)(14 * MiB));
    assert_int_equal(stats(&e).allocated_bytes[FS_SIZE_ALL].current, (int64_t)(12 * MiB + 4096));
    expect_consistent(&e, 2);
    assert_int_equal(fs_free(e.a, plain, NULL), FS_ERR_NOT_OWNED);
    assert_int_equal(fs_free_async(e.a, kept, S2, NULL), FS_OK);
    assert_int_equal(fs_free(e.a, big, NULL), FS_OK);
    assert_int_equal(fs_free(e.a, kept, NULL), FS_ERR_INVALID);
    fake_complete_all(e.fake);
    void *again = must_alloc_ordered(&e, S1, 4096);
    must_alloc(&e, S1, 4096);
    fs_alloc_empty_cache(e.a, 0);
    expect_consistent(&e, 2);
    assert_int_equal(fs_free_async(e.a, again, S1, NULL), FS_OK);
    env_free(&e);
}

/* Mappings survive a reset too: with expandable segments a plain block's
 * memory stays mapped, but the block is forgotten, as the runtime forgets
 * cudaMalloc memory; a stream-ordered block stays live. */
static void test_device_reset_expandable(void **state)
{
    (void)state;
    env e = env_make("expandable_segments:true", CAP);
    void *plain = must_alloc(&e, S1, 4096);
    void *kept = must_alloc_ordered(&e, S1, 4096);
    fake_reset(e.fake, 0);
    fs_alloc_device_reset(e.a, 0);
    expect_consistent(&e, 1);
    assert_int_equal(fs_free(e.a, plain, NULL), FS_ERR_INVALID);
    assert_int_equal(fs_free(e.a, kept, NULL), FS_OK);
    env_free(&e);
}

static void test_two_devices(void **state)
{
    (void)state;
    env e = env_make(STREAM, CAP);
    void *p = NULL;
    assert_int_equal(fs_malloc(e.a, 1, LEG, 4096, 0, &p), FS_OK);
    assert_int_equal(U(p), FAKE_SEG_BASE + FAKE_DEV_STRIDE);
    fs_block_info bi;
    assert_int_equal(fs_alloc_block_info(e.a, p, &bi), FS_OK);
    assert_int_equal(bi.device, 1);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, 0);
    fs_alloc_stats all;
    fs_alloc_get_stats(e.a, -1, &all);
    assert_int_equal(all.reserved_bytes[FS_SIZE_ALL].current, 2 * MiB);
    assert_int_equal(fs_malloc(e.a, 2, LEG, 4096, 0, &p), FS_ERR_INVALID);
    env_free(&e);
}

/* A miss that would grow reserved memory past the most it ever held first
 * gives back wholly free segments that cannot serve it, as few bytes
 * beyond what the growth adds to the peak as it can; below that mark it
 * keeps them. */
static void test_keep_peak(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    fake_auto_complete(e.fake, true);
    void *a = must_alloc_ordered(&e, LEG, 30 * MiB);
    void *b = must_alloc_ordered(&e, LEG, 40 * MiB);
    assert_int_equal(fs_free_async(e.a, b, LEG, NULL), FS_OK);
    assert_int_equal(fs_alloc_trim(e.a, 0, 0), FS_OK); /* b's segment goes: 30 MiB left */
    assert_int_equal(fs_free_async(e.a, a, LEG, NULL), FS_OK);
    assert_int_equal(stats(&e).num_device_free, 1);
    /* 30 + 36 MiB stays under the 70 MiB high-water mark: a's segment stays */
    void *c = must_alloc_ordered(&e, LEG, 36 * MiB);
    assert_int_equal(stats(&e).num_device_free, 1);
    assert_int_equal(stats(&e).reserved_bytes[FS_SIZE_ALL].current, (int64_t)(66 * MiB));
    assert_int_equal(fs_free_async(e.a, c, LEG, NULL), FS_OK);
    /* 66 + 50 MiB would pass it by 46: neither free segment holds 46 alone,
     * so the larger (36) goes, then the smallest that holds the other 10 */
    must_alloc_ordered(&e, LEG, 50 * MiB);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.num_device_free, 3);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, (int64_t)(50 * MiB));
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].peak, (int64_t)(70 * MiB));
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_roundup_divisions),
        cmocka_unit_test(test_pools_and_segments),
        cmocka_unit_test(test_split_rules),
        cmocka_unit_test(test_max_split_size),
        cmocka_unit_test(test_best_fit),
        cmocka_unit_test(test_coalesce),
        cmocka_unit_test(test_oom_and_retry),
        cmocka_unit_test(test_expandable),
        cmocka_unit_test(test_garbage_collection),
        cmocka_unit_test(test_keep_peak),
        cmocka_unit_test(test_stats_and_peaks),
        cmocka_unit_test(test_pin_info_and_bad_frees),
        cmocka_unit_test(test_trim),
        cmocka_unit_test(test_limit),
        cmocka_unit_test(test_device_reset),
        cmocka_unit_test(test_device_reset_keeps_ordered),
        cmocka_unit_test(test_device_reset_expandable),
        cmocka_unit_test(test_two_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
