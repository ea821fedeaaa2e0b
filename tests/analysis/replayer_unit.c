/* replayer_unit.c - the replayer's live blocks and per-thread state
 * (analysis/lib/replayer.c) and pair_ids (analysis/lib/pair_ids.c) on
 * records made here: which callbacks an allocation, a replacing allocation,
 * a free, a free of an unknown block, a snapshot's block and an event of a
 * damaged device number give, in which order, and what the table holds
 * after. The annotation ranges need a trace's definitions: the golden
 * outputs of report --html, export --chrome and --perfetto check them. */
#include "pair_ids.h"
#include "replayer.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

/* what the callbacks saw, one letter and a block per call */
typedef struct seen {
    char log[64];
    size_t n;
    fs_live_block last;
    uint32_t next_site;
} seen;

static uint32_t site(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    seen *s = ctx;
    (void)t, (void)r, (void)tid;
    s->log[s->n++] = 's';
    return ++s->next_site;
}

static void added(void *ctx, const fs_live_block *b, const fs_fmt_record *r)
{
    seen *s = ctx;
    (void)r;
    s->log[s->n++] = 'a';
    s->last = *b;
}

static void gone(void *ctx, const fs_live_block *b, const fs_fmt_record *r)
{
    seen *s = ctx;
    s->log[s->n++] = r->kind == FS_REC_FREE_REQUESTED ? 'f' : 'r';
    s->last = *b;
}

static fs_fmt_record rec(unsigned kind, int device, uint64_t addr, uint64_t size)
{
    fs_fmt_record r = {.kind = kind};
    r.ev.device = device;
    r.ev.addr = addr;
    r.ev.size = size;
    return r;
}

static void see(fs_replayer *rp, fs_fmt_record r)
{
    fs_replayer_see(rp, NULL, &r, 7);
}

static void blocks_follow_allocations_and_frees(void **state)
{
    (void)state;
    seen s = {0};
    fs_replayer_ops ops = {.site = site, .added = added, .gone = gone, .devices = 2};
    fs_replayer *rp = fs_replayer_create(&ops, &s);

    see(rp, rec(FS_REC_ALLOC, 0, 0x1000, 512));
    assert_string_equal(s.log, "sa");
    assert_int_equal(s.last.site, 1);
    /* allocated again without a free: the old block goes, the new comes */
    see(rp, rec(FS_REC_ALLOC, 1, 0x1000, 1024));
    assert_string_equal(s.log, "sasra");
    assert_int_equal(s.last.size, 1024);
    assert_int_equal(s.last.device, 1);
    assert_int_equal(fs_live_count(fs_replayer_live(rp)), 1);
    /* a free of a block the trace never allocated, a damaged device */
    see(rp, rec(FS_REC_FREE_REQUESTED, 0, 0x2000, 0));
    see(rp, rec(FS_REC_ALLOC, 5, 0x3000, 512));
    see(rp, rec(FS_REC_FREE_REQUESTED, -1, 0x1000, 0));
    assert_string_equal(s.log, "sasra");
    /* a snapshot's blocks are not the trace's unless asked for */
    fs_fmt_record snap = rec(FS_REC_SNAP_BLOCK, 0, 0x4000, 512);
    snap.ev.aux = FS_BLOCK_LIVE;
    see(rp, snap);
    see(rp, rec(FS_REC_FREE_REQUESTED, 1, 0x1000, 0));
    assert_string_equal(s.log, "sasraf");
    assert_int_equal(s.last.site, 2);
    assert_int_equal(fs_live_count(fs_replayer_live(rp)), 0);
    fs_replayer_free(rp);
}

static void requested_bytes_and_snapshots(void **state)
{
    (void)state;
    seen s = {0};
    fs_replayer_ops ops = {.site = site, .requested = true, .snapshot_blocks = true};
    fs_replayer *rp = fs_replayer_create(&ops, &s);
    fs_fmt_record r = rec(FS_REC_ALLOC, 0, 0x1000, 1024);
    r.ev.requested = 1000;
    see(rp, r);
    see(rp, rec(FS_REC_ALLOC, 0, 0x2000, 512)); /* requested not known */
    fs_fmt_record snap = rec(FS_REC_SNAP_BLOCK, 0, 0x4000, 2048);
    snap.ev.aux = FS_BLOCK_LIVE;
    see(rp, snap);
    snap.ev.aux = FS_BLOCK_LIVE + 1; /* not live */
    snap.ev.addr = 0x5000;
    see(rp, snap);
    uint64_t bytes = 0;
    fs_live_block b;
    for (size_t pos = 0; fs_live_next(fs_replayer_live(rp), &pos, &b);)
        bytes += b.size;
    assert_int_equal(bytes, 1000 + 512 + 2048);
    fs_replayer_free(rp);
}

static void threads_keep_state_in_order(void **state)
{
    (void)state;
    fs_replayer_ops ops = {.thread_size = sizeof(uint64_t)};
    fs_replayer *rp = fs_replayer_create(&ops, NULL);
    fs_fmt_record r = rec(FS_REC_COLLECTIVE, 0, 0, 0);
    for (uint32_t round = 0; round < 3; round++)
        for (uint32_t tid = 40; tid > 0; tid--) { /* past the scanned few: the map */
            uint64_t *v = fs_replayer_see(rp, NULL, &r, tid);
            assert_non_null(v);
            assert_int_equal(*v, round * tid);
            *v += tid;
        }
    assert_null(fs_replayer_see(rp, NULL, &(fs_fmt_record){.kind = FS_REC_STRING}, 1));
    uint32_t tid;
    void *v;
    for (size_t i = 0; i < 40; i++) {
        assert_true(fs_replayer_thread_at(rp, i, &tid, &v));
        assert_int_equal(tid, 40 - i);
        assert_ptr_equal(v, fs_replayer_thread(rp, tid));
    }
    assert_false(fs_replayer_thread_at(rp, 40, &tid, &v));
    fs_replayer_free(rp);
}

static void pairs_numbered_as_first_seen(void **state)
{
    (void)state;
    fs_pair_ids m = {0};
    bool added;
    for (uint64_t i = 0; i < 5000; i++) {
        assert_int_equal(fs_pair_id(&m, i % 97, i, &added), i + 1);
        assert_true(added);
    }
    for (uint64_t i = 0; i < 5000; i++) {
        uint64_t a, b;
        assert_int_equal(fs_pair_id(&m, i % 97, i, &added), i + 1);
        assert_false(added);
        fs_pair_of(&m, (uint32_t)i + 1, &a, &b);
        assert_int_equal(a, i % 97);
        assert_int_equal(b, i);
    }
    assert_int_equal(fs_pair_ids_count(&m), 5000);
    fs_pair_ids_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(blocks_follow_allocations_and_frees),
        cmocka_unit_test(requested_bytes_and_snapshots),
        cmocka_unit_test(threads_keep_state_in_order),
        cmocka_unit_test(pairs_numbered_as_first_seen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
