/* replayer.c - a trace's events replayed into live blocks and annotation
 * ranges (replayer.h), for the commands' callbacks. */
#include "replayer.h"

#include "mem.h"

#include <stdlib.h>
#include <string.h>

/* A thread's annotation stack, as its latest event showed it */
typedef struct thread {
    uint32_t annot; /* the innermost node; 0: none */
    int depth;
    uint32_t node[FS_READER_MAX_NESTING]; /* outermost first */
    uint64_t since[FS_READER_MAX_NESTING];
} thread;

struct fs_replayer {
    fs_replayer_ops ops;
    void *ctx;
    bool ranges; /* stacks are followed */
    fs_live live;
    uint32_t *tids;  /* the threads, in the order first seen */
    thread *threads; /* their stacks, beside them (when followed) */
    size_t nthreads, captids, capthreads;
    unsigned char *states; /* ops.thread_size bytes per thread, beside threads */
    size_t capstates;
    fs_u64map by_tid; /* tid -> index in tids: used past SCANNED threads */
    size_t last;      /* the thread found last: events come in runs of one thread */
};

fs_replayer *fs_replayer_create(const fs_replayer_ops *ops, void *ctx)
{
    fs_replayer *rp = calloc(1, sizeof *rp);
    if (!rp) fs_analysis_oom("analysis");
    rp->ops = *ops;
    rp->ctx = ctx;
    rp->ranges = ops->opened || ops->closed;
    fs_u64map_init(&rp->by_tid, sizeof(uint32_t));
    return rp;
}

void fs_replayer_free(fs_replayer *rp)
{
    if (!rp) return;
    fs_live_free(&rp->live);
    fs_u64map_free(&rp->by_tid);
    free(rp->tids);
    free(rp->threads);
    free(rp->states);
    free(rp);
}

/* ---- threads ------------------------------------------------------------------------ */

/* A job's processes run a handful of threads that allocate: up to this
 * many are found by a scan of tids, the rest through by_tid */
#define SCANNED 16

/* A thread not seen before: its index (off the hot path, so that the
 * lookup below stays a leaf) */
__attribute__((noinline, cold)) static size_t thread_new(fs_replayer *rp, uint32_t tid)
{
    size_t n = rp->nthreads;
    rp->tids = fs_grow(rp->tids, &rp->captids, n + 1, sizeof *rp->tids);
    rp->tids[n] = tid;
    if (rp->ranges) rp->threads = fs_grow(rp->threads, &rp->capthreads, n + 1, sizeof *rp->threads);
    if (rp->ops.thread_size)
        rp->states = fs_grow(rp->states, &rp->capstates, n + 1, rp->ops.thread_size);
    uint32_t *at = fs_u64map_put(&rp->by_tid, tid, NULL); /* every thread: ready to be used */
    if (!at) fs_analysis_oom("analysis");
    *at = (uint32_t)n;
    return rp->last = rp->nthreads++;
}

static inline size_t thread_index(fs_replayer *rp, uint32_t tid)
{
    size_t n = rp->nthreads;
    if (rp->last < n && rp->tids[rp->last] == tid) return rp->last;
    if (n <= SCANNED) {
        for (size_t i = 0; i < n; i++)
            if (rp->tids[i] == tid) return rp->last = i;
    } else {
        uint32_t *at = fs_u64map_get(&rp->by_tid, tid);
        if (at) return rp->last = *at;
    }
    return thread_new(rp, tid);
}

void *fs_replayer_thread(fs_replayer *rp, uint32_t tid)
{
    size_t i = thread_index(rp, tid);
    return rp->ops.thread_size ? rp->states + i * rp->ops.thread_size : NULL;
}

bool fs_replayer_thread_at(fs_replayer *rp, size_t i, uint32_t *tid, void **state)
{
    if (i >= rp->nthreads) return false;
    *tid = rp->tids[i];
    *state = rp->ops.thread_size ? rp->states + i * rp->ops.thread_size : NULL;
    return true;
}

/* ---- annotation ranges -------------------------------------------------------------- */

/* Thread i's ranges from depth `keep` in close, the innermost first */
static void close_from(fs_replayer *rp, fs_reader *t, size_t i, int keep, uint64_t ns)
{
    for (int d = rp->threads[i].depth - 1; d >= keep; d--) {
        const thread *th = &rp->threads[i]; /* a callback may see a new thread */
        fs_replayer_range r = {rp->tids[i], d, th->node[d], th->since[d]};
        rp->threads[i].depth = d;
        if (rp->ops.closed) rp->ops.closed(rp->ctx, t, &r, ns);
    }
}

/* Thread i's stack becomes annot's at ns: the ranges it leaves close, the
 * ones it enters open */
static void stack_to(fs_replayer *rp, fs_reader *t, size_t i, uint32_t annot, uint64_t ns)
{
    uint32_t chain[FS_READER_MAX_NESTING];
    int n = fs_reader_annot_chain(t, annot, chain), same = 0;
    thread *th = &rp->threads[i];

    while (same < n && same < th->depth && th->node[same] == chain[same])
        same++;
    close_from(rp, t, i, same, ns);
    for (int d = same; d < n; d++) {
        th = &rp->threads[i]; /* a callback may see a new thread */
        th->node[d] = chain[d];
        th->since[d] = ns;
        th->depth = d + 1;
        fs_replayer_range r = {rp->tids[i], d, chain[d], ns};
        if (rp->ops.opened) rp->ops.opened(rp->ctx, t, &r);
    }
    rp->threads[i].annot = annot;
}

void fs_replayer_end_thread(fs_replayer *rp, fs_reader *t, uint32_t tid, uint64_t end_ns)
{
    uint32_t *at = fs_u64map_get(&rp->by_tid, tid);
    if (!at || !rp->ranges) return;
    close_from(rp, t, *at, 0, end_ns);
    rp->threads[*at].annot = 0;
}

void fs_replayer_end(fs_replayer *rp, fs_reader *t, uint64_t end_ns)
{
    for (size_t i = 0; rp->ranges && i < rp->nthreads; i++) {
        close_from(rp, t, i, 0, end_ns);
        rp->threads[i].annot = 0;
    }
}

/* ---- blocks ------------------------------------------------------------------------- */

static void block_event(fs_replayer *rp, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    const fs_fmt_event *ev = &r->ev;
    fs_live_block b;

    if (rp->ops.devices > 0 && (ev->device < 0 || ev->device >= rp->ops.devices)) return;
    if (r->kind != FS_REC_FREE_REQUESTED) { /* an allocation, or a snapshot's live block */
        uint32_t site = rp->ops.site(rp->ctx, t, r, tid);
        uint64_t size = rp->ops.requested && ev->requested ? ev->requested : ev->size;
        if (!site) return;
        if (fs_live_replace(&rp->live, ev->addr, size, site, ev->device, &b)) {
            if (rp->ops.gone) rp->ops.gone(rp->ctx, &b, r);
            /* moved as if the old block had been taken before the new one
             * was put: the table's order (export --perfetto's heap profile
             * follows it) is the one the analyzer always had */
            fs_live_take(&rp->live, ev->addr, &b);
            fs_live_put(&rp->live, ev->addr, size, site, ev->device);
        }
        b = (fs_live_block){ev->addr, size, site, ev->device};
        if (rp->ops.added) rp->ops.added(rp->ctx, &b, r);
    } else if (fs_live_take(&rp->live, ev->addr, &b) && rp->ops.gone) {
        rp->ops.gone(rp->ctx, &b, r);
    }
}

void *fs_replayer_see(fs_replayer *rp, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    bool event = r->kind >= FS_REC_ALLOC && r->kind <= FS_REC_EVENT_LAST;
    size_t i = 0;
    if (event && (rp->ranges || rp->ops.thread_size)) {
        i = thread_index(rp, tid);
        if (rp->ranges && r->ev.annot != rp->threads[i].annot)
            stack_to(rp, t, i, r->ev.annot, r->ev.time_ns);
    }
    bool block =
        r->kind == FS_REC_ALLOC || r->kind == FS_REC_FREE_REQUESTED ||
        (r->kind == FS_REC_SNAP_BLOCK && r->ev.aux == FS_BLOCK_LIVE && rp->ops.snapshot_blocks);
    if (block && rp->ops.site) block_event(rp, t, r, tid);
    /* after the callbacks, which may have seen new threads */
    return event && rp->ops.thread_size ? rp->states + i * rp->ops.thread_size : NULL;
}

static int visit(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    fs_replayer *rp = ctx;
    fs_replayer_see(rp, t, r, tid);
    return rp->ops.record ? rp->ops.record(rp->ctx, t, r, tid) : 0;
}

static void warn(void *ctx, const char *line)
{
    fs_replayer *rp = ctx;
    rp->ops.warn(rp->ctx, line);
}

uint64_t fs_replayer_read(fs_replayer *rp, fs_reader *t)
{
    return fs_reader_read_ordered(t, visit, rp->ops.warn ? warn : NULL, rp);
}

const fs_live *fs_replayer_live(const fs_replayer *rp)
{
    return &rp->live;
}
