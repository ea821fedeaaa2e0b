/* report_timeline.c - gathers the memory timeline of `report --html`
 * (report_timeline.h) in report's one reading of each trace, in time order.
 *
 * The devices' curves are the totals every memory event carries. A
 * stream's are followed block by block: an allocation adds its bytes to
 * its stream until the program frees it, a segment its bytes to its pool's
 * stream until it goes back. The live blocks and the annotation ranges are
 * the replayer's (replayer.h), as export's are. A free the allocator held back until the block's
 * streams passed it is a free_requested followed by a free_completed at the same address; a free
 * reusable at once has no free_completed, so its entry goes when the address is allocated again.
 *
 * Memory: the buckets (FS_TL_BUCKETS per series and lane, whatever the
 * trace's length), and while a trace is read its live blocks, segments and
 * freed blocks by address. */
#include "report_timeline.h"

#include "render.h"
#include "replayer.h"
#include "sites.h"

#include <stdlib.h>
#include <string.h>

#define FIRST_WIDTH_NS 1024 /* a bucket's width at the start: doubled as needed */

/* A block the program freed, until the allocator says it is free for reuse
 * (or its address is allocated again) */
typedef struct freed {
    uint64_t addr, size, since;
    uint32_t series; /* index + 1 */
} freed;

/* A thread's rate-limiter wait (the replayer's per-thread state) */
typedef struct thread_wait {
    bool waiting; /* in a rate-limiter wait, since wait_since */
    uint64_t wait_since;
} thread_wait;

typedef struct fs_tl_reading {
    fs_reader *t;
    fs_replayer *rp;   /* live blocks (site = series index + 1), annotation ranges */
    size_t k;          /* the bucket of the event being read */
    fs_live segments;  /* segments by base: site = series index + 1 */
    fs_u64map freed;   /* addr -> freed */
    uint32_t *name_of; /* annotation id -> names index + 1, 0 not yet known */
    size_t capname_of;
    size_t last_series; /* the series found last: most events follow their neighbour's */
    size_t stream_curves;
    uint32_t wait_name;
} fs_tl_reading;

static void *alloc_or_die(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) fs_analysis_oom("report");
    return p;
}

/* ---- names ---------------------------------------------------------------------- */

static const char *name_path(const void *owner, uint32_t i)
{
    return ((const fs_timeline *)owner)->names[i].path;
}

/* The name whose path is `path`, made if new: its index + 1 */
static uint32_t intern(fs_timeline *tl, const char *path, const char *name)
{
    uint64_t hash = fs_hash_text(path);
    uint32_t at = fs_text_index_find(&tl->by_path, path, hash, name_path, tl);
    if (at) return at;
    tl->names = fs_grow(tl->names, &tl->capnames, tl->nnames + 1, sizeof *tl->names);
    fs_tl_name *n = &tl->names[tl->nnames];
    n->path = strdup(path);
    n->name = strdup(name);
    if (!n->path || !n->name) fs_analysis_oom("report");
    fs_text_index_add(&tl->by_path, (uint32_t)tl->nnames, hash);
    return (uint32_t)++tl->nnames;
}

/* Annotation node id's name, rendered once per id and trace */
static uint32_t name_of(fs_timeline *tl, const fs_reader *t, uint32_t id)
{
    fs_tl_reading *rd = tl->reading;
    uint32_t parent, domain, name;
    char path[4096];

    rd->name_of = fs_grow(rd->name_of, &rd->capname_of, (size_t)id + 1, sizeof *rd->name_of);
    if (!rd->name_of[id]) {
        fs_reader_annot(t, id, &parent, &domain, &name);
        fs_render_annot(t, id, path, sizeof path);
        rd->name_of[id] = intern(tl, path, fs_render_str(t, name));
    }
    return rd->name_of[id];
}

/* ---- the buckets ------------------------------------------------------------------- */

static bool point_empty(const fs_tl_point *p)
{
    return p->amin > p->amax;
}

fs_tl_point fs_tl_merge_points(fs_tl_point a, fs_tl_point b)
{
    if (point_empty(&b)) return a;
    if (point_empty(&a)) return b;
    a.amin = a.amin < b.amin ? a.amin : b.amin;
    a.amax = a.amax > b.amax ? a.amax : b.amax;
    a.rmin = a.rmin < b.rmin ? a.rmin : b.rmin;
    a.rmax = a.rmax > b.rmax ? a.rmax : b.rmax;
    a.alast = b.alast;
    a.rlast = b.rlast;
    return a;
}

fs_tl_cell fs_tl_merge_cells(fs_tl_cell a, fs_tl_cell b)
{
    if (!b.name) return a;
    if (!a.name) return b;
    if (a.name == b.name && a.start == b.start) { /* one range over both halves */
        a.cover += b.cover;
        a.end = a.end > b.end ? a.end : b.end;
        return a;
    }
    return a.cover >= b.cover ? a : b;
}

const fs_tl_point fs_tl_empty_point = {.amin = UINT64_MAX, .rmin = UINT64_MAX};

static fs_tl_point *new_points(void)
{
    fs_tl_point *p = alloc_or_die(FS_TL_BUCKETS, sizeof *p);
    for (size_t k = 0; k < FS_TL_BUCKETS; k++)
        p[k] = fs_tl_empty_point;
    return p;
}

/* Halves the resolution: bucket k becomes buckets 2k and 2k + 1 merged */
static void coarsen(fs_tl_rank *r)
{
    const size_t half = FS_TL_BUCKETS / 2;
    for (size_t i = 0; i < r->nseries; i++) {
        fs_tl_point *p = r->series[i].points;
        if (!p) continue;
        for (size_t k = 0; k < half; k++)
            p[k] = fs_tl_merge_points(p[2 * k], p[2 * k + 1]);
        for (size_t k = half; k < FS_TL_BUCKETS; k++)
            p[k] = fs_tl_empty_point;
    }
    for (int l = 0; l <= FS_TL_LANES; l++) {
        fs_tl_cell *c = r->lanes[l];
        if (!c) continue;
        for (size_t k = 0; k < half; k++)
            c[k] = fs_tl_merge_cells(c[2 * k], c[2 * k + 1]);
        memset(c + half, 0, half * sizeof *c);
    }
    if (r->colls) {
        fs_tl_colls *c = r->colls;
        for (size_t k = 0; k < half; k++) {
            for (int op = 0; op < FS_TL_OPS; op++)
                c[k].count[op] = c[2 * k].count[op] + c[2 * k + 1].count[op];
            c[k].bytes = c[2 * k].bytes + c[2 * k + 1].bytes;
        }
        memset(c + half, 0, half * sizeof *c);
    }
    r->width *= 2;
    r->used = (r->used + 1) / 2;
}

static size_t bucket_of(const fs_tl_rank *r, uint64_t ns)
{
    /* the reading's window can let an event come a little early */
    uint64_t k = ns > r->origin ? (ns - r->origin) / r->width : 0;
    return k < FS_TL_BUCKETS ? (size_t)k : FS_TL_BUCKETS - 1;
}

/* Makes room for an event at ns: its bucket */
static size_t fit(fs_tl_rank *r, uint64_t ns)
{
    if (!r->used) {
        r->origin = r->first_ns = ns;
        r->width = FIRST_WIDTH_NS;
    }
    while (ns > r->origin && (ns - r->origin) / r->width >= FS_TL_BUCKETS)
        coarsen(r);
    size_t k = bucket_of(r, ns);
    if (k + 1 > r->used) r->used = k + 1;
    if (ns > r->last_ns) r->last_ns = ns;
    return k;
}

void fs_tl_bucket_span(const fs_tl_rank *r, size_t k, uint64_t *from, uint64_t *to)
{
    *from = r->base + r->origin + k * r->width;
    *to = *from + r->width;
}

/* ---- the series ----------------------------------------------------------------------- */

static void note(fs_tl_series *s, size_t k)
{
    if (s->allocated > s->peak_allocated) s->peak_allocated = s->allocated;
    if (s->reserved > s->peak_reserved) s->peak_reserved = s->reserved;
    if (!s->points) return;
    fs_tl_point now = {s->allocated, s->allocated, s->allocated,
                       s->reserved,  s->reserved,  s->reserved};
    s->points[k] = fs_tl_merge_points(s->points[k], now);
}

/* The series of the device's totals (is_stream false) or of a stream: its
 * index, made if new */
static size_t series_of(fs_timeline *tl, int device, bool is_stream, uint64_t stream)
{
    fs_tl_rank *r = &tl->ranks[tl->nranks - 1];
    fs_tl_reading *rd = tl->reading;
    size_t i = rd->last_series;

    if (i < r->nseries && r->series[i].device == device && r->series[i].is_stream == is_stream &&
        r->series[i].stream == stream)
        return i;
    for (i = 0; i < r->nseries; i++)
        if (r->series[i].device == device && r->series[i].is_stream == is_stream &&
            r->series[i].stream == stream)
            return rd->last_series = i;
    fs_tl_series *more = realloc(r->series, (r->nseries + 1) * sizeof *more);
    if (!more) fs_analysis_oom("report");
    r->series = more;
    r->series[i] = (fs_tl_series){.device = device, .is_stream = is_stream, .stream = stream};
    if (!is_stream) r->series[i].points = new_points();
    r->nseries++;
    return rd->last_series = i;
}

/* ---- freed blocks by address ------------------------------------------------------------ */

static void freed_put(fs_tl_reading *rd, freed f)
{
    freed *slot = fs_u64map_put(&rd->freed, f.addr, NULL);
    if (!slot) fs_analysis_oom("report");
    *slot = f;
}

/* Removes the entry of addr into *out; false when there is none. */
static bool freed_take(fs_tl_reading *rd, uint64_t addr, freed *out)
{
    return fs_u64map_take(&rd->freed, addr, out);
}

/* ---- memory events ---------------------------------------------------------------------- */

static void take_bytes(uint64_t *from, uint64_t n)
{
    *from -= n < *from ? n : *from;
}

/* Stream series s changed at bucket k: the first streams to hold memory
 * get curves (not the first created: a stream pool creates many that may
 * never allocate) */
static void stream_note(fs_timeline *tl, size_t s, size_t k)
{
    fs_tl_rank *r = &tl->ranks[tl->nranks - 1];
    fs_tl_reading *rd = tl->reading;

    if (!r->series[s].points && rd->stream_curves < FS_TL_STREAM_CURVES) {
        r->series[s].points = new_points();
        rd->stream_curves++;
    }
    note(&r->series[s], k);
}

/* The device's totals, as every memory event carries them */
static void device_totals(fs_timeline *tl, const fs_fmt_event *ev, size_t k)
{
    fs_tl_rank *r = &tl->ranks[tl->nranks - 1];
    size_t s = series_of(tl, ev->device, false, 0);
    r->series[s].allocated = ev->allocated;
    r->series[s].reserved = ev->reserved;
    note(&r->series[s], k);
}

/* An allocation (replayer.h): its bytes go to its stream until the program
 * frees it; its block's site is the stream's series */
static uint32_t block_site(void *ctx, fs_reader *t, const fs_fmt_record *rec, uint32_t tid)
{
    fs_timeline *tl = ctx;
    fs_tl_rank *r = &tl->ranks[tl->nranks - 1];
    const fs_fmt_event *ev = &rec->ev;
    freed f;
    (void)t, (void)tid;

    size_t s = series_of(tl, ev->device, true, ev->stream);
    r->series[s].allocated += ev->size;
    r->series[s].allocs++;
    r->series[s].alloc_bytes += ev->size;
    freed_take(tl->reading, ev->addr, &f); /* a free reusable at once: it was not held back */
    stream_note(tl, s, tl->reading->k);
    return (uint32_t)s + 1;
}

/* The program freed a live block: its stream's bytes go down, and the
 * block waits in `freed` for the allocator's free_completed. A block an
 * allocation replaced (its free lost) changes nothing. */
static void block_gone(void *ctx, const fs_live_block *b, const fs_fmt_record *rec)
{
    fs_timeline *tl = ctx;
    fs_tl_rank *r = &tl->ranks[tl->nranks - 1];
    size_t s = b->site - 1;

    if (rec->kind != FS_REC_FREE_REQUESTED) return;
    take_bytes(&r->series[s].allocated, b->size);
    freed_put(tl->reading, (freed){b->addr, b->size, rec->ev.time_ns, (uint32_t)s + 1});
    stream_note(tl, s, tl->reading->k);
}

/* The memory events other than allocations and frees */
static void memory_event(fs_timeline *tl, const fs_fmt_record *rec, size_t k)
{
    fs_tl_rank *r = &tl->ranks[tl->nranks - 1];
    fs_tl_reading *rd = tl->reading;
    const fs_fmt_event *ev = &rec->ev;
    fs_live_block b;
    freed f;
    size_t s;

    switch (rec->kind) {
    case FS_REC_FREE_COMPLETED:
        if (freed_take(rd, ev->addr, &f)) {
            fs_tl_series *x = &r->series[f.series - 1];
            uint64_t ns = ev->time_ns > f.since ? ev->time_ns - f.since : 0;
            x->held_back++;
            x->held_back_bytes += f.size;
            x->held_back_ns += ns;
            if (ns > x->longest_held_back_ns) x->longest_held_back_ns = ns;
        }
        return;
    case FS_REC_SEGMENT_ALLOC:
        s = series_of(tl, ev->device, true, ev->stream);
        r->series[s].reserved += ev->size;
        fs_live_put(&rd->segments, ev->addr, ev->size, (uint32_t)s + 1, ev->device);
        break;
    case FS_REC_SEGMENT_FREE:
        /* an expandable segment has no segment_alloc: its pages went to
         * the stream that mapped them, which the event names */
        s = fs_live_take(&rd->segments, ev->addr, &b) ? b.site - 1
                                                      : series_of(tl, ev->device, true, ev->stream);
        take_bytes(&r->series[s].reserved, ev->size);
        break;
    case FS_REC_SEGMENT_MAP:
        s = series_of(tl, ev->device, true, ev->stream);
        r->series[s].reserved += ev->size;
        break;
    case FS_REC_SEGMENT_UNMAP:
        s = series_of(tl, ev->device, true, ev->stream);
        take_bytes(&r->series[s].reserved, ev->size);
        break;
    default: /* allocations and frees: the replayer's; an out-of-memory event changes nothing */
        return;
    }
    stream_note(tl, s, k);
}

/* ---- annotation ranges and waits ------------------------------------------------------- */

/* Range [start, end] in lane l: each bucket it overlaps keeps it if it
 * covers more of it than the range the bucket holds */
static void paint(fs_tl_rank *r, int l, uint32_t name, uint64_t start, uint64_t end)
{
    if (!r->lanes[l]) r->lanes[l] = alloc_or_die(FS_TL_BUCKETS, sizeof *r->lanes[l]);
    size_t k0 = bucket_of(r, start), k1 = bucket_of(r, end);
    for (size_t k = k0; k <= k1; k++) {
        uint64_t from = r->origin + k * r->width, to = from + r->width;
        uint64_t lo = start > from ? start : from, hi = end < to ? end : to;
        fs_tl_cell c = {name, start, end, (hi > lo ? hi - lo : 0) + 1};
        if (!r->lanes[l][k].name || c.cover > r->lanes[l][k].cover) r->lanes[l][k] = c;
    }
}

/* A range (replayer.h) is named when it opens, and painted in its depth's
 * lane when it closes, once the chart has begun */
static void range_opened(void *ctx, fs_reader *t, const fs_replayer_range *rg)
{
    name_of(ctx, t, rg->node);
}

static void range_closed(void *ctx, fs_reader *t, const fs_replayer_range *rg, uint64_t end_ns)
{
    fs_timeline *tl = ctx;
    fs_tl_rank *r = &tl->ranks[tl->nranks - 1];
    if (rg->depth < FS_TL_LANES && r->used)
        paint(r, rg->depth, name_of(tl, t, rg->node), rg->start_ns, end_ns);
}

/* ---- the reading ------------------------------------------------------------------------- */

void fs_tl_begin(fs_timeline *tl, fs_reader *t)
{
    fs_tl_rank *more = realloc(tl->ranks, (tl->nranks + 1) * sizeof *more);
    if (!more) fs_analysis_oom("report");
    tl->ranks = more;
    tl->ranks[tl->nranks++] = (fs_tl_rank){.base = fs_reader_header(t)->clock_real_ns};
    tl->reading = alloc_or_die(1, sizeof *tl->reading);
    tl->reading->t = t;
    fs_replayer_ops ops = {.site = block_site,
                           .gone = block_gone,
                           .opened = range_opened,
                           .closed = range_closed,
                           .devices = FS_SITES_MAX_DEVICES,
                           .thread_size = sizeof(thread_wait)};
    tl->reading->rp = fs_replayer_create(&ops, tl);
    fs_u64map_init(&tl->reading->freed, sizeof(freed));
    tl->reading->wait_name = intern(tl, "rate-limiter wait", "rate-limiter wait");
}

void fs_tl_record(fs_timeline *tl, fs_reader *t, const fs_fmt_record *rec, uint32_t tid)
{
    fs_tl_rank *r = &tl->ranks[tl->nranks - 1];
    const fs_fmt_event *ev = &rec->ev;

    if (rec->kind < FS_REC_ALLOC || rec->kind > FS_REC_EVENT_LAST) return;
    bool memory = rec->kind <= FS_REC_OOM && ev->device >= 0 && ev->device < FS_SITES_MAX_DEVICES;
    /* the buckets begin at the first memory event, as the chart does: the
     * CUDA initialisation before it (a stream pool's streams, seconds of
     * imports) would otherwise take most of the chart and of the buckets'
     * resolution. Before it only the threads' ranges and waits are
     * followed, so that one still open is drawn from the chart's start. */
    size_t k = r->used || memory ? fit(r, ev->time_ns) : 0;
    if (memory) device_totals(tl, ev, k);
    tl->reading->k = k;
    thread_wait *th = fs_replayer_see(tl->reading->rp, t, rec, tid); /* ranges, blocks */
    if (rec->kind <= FS_REC_OOM) {
        if (memory) memory_event(tl, rec, k);
        return;
    }
    switch (rec->kind) {
    case FS_REC_STREAM_CREATE:
    case FS_REC_POOL_HIT:
        if (ev->device >= 0 && ev->device < FS_SITES_MAX_DEVICES) {
            size_t s = series_of(tl, ev->device, true, ev->stream); /* may move r->series */
            r->series[s].created = true;
            r->series[s].priority = (int)(int64_t)ev->aux2;
        }
        break;
    case FS_REC_COLLECTIVE:
        if (!r->used) break; /* before the chart */
        if (!r->colls) r->colls = alloc_or_die(FS_TL_BUCKETS, sizeof *r->colls);
        r->colls[k].count[ev->aux < FS_TL_OPS ? ev->aux : FS_COLL_OTHER]++;
        r->colls[k].bytes += ev->size;
        break;
    case FS_REC_RL_WAIT_START:
        th->waiting = true;
        th->wait_since = ev->time_ns;
        break;
    case FS_REC_RL_WAIT_END:
        if (th->waiting && r->used)
            paint(r, FS_TL_WAIT_LANE, tl->reading->wait_name, th->wait_since, ev->time_ns);
        th->waiting = false;
        break;
    default:
        break;
    }
}

void fs_tl_end(fs_timeline *tl)
{
    fs_tl_reading *rd = tl->reading;
    fs_tl_rank *r = &tl->ranks[tl->nranks - 1];

    fs_replayer_end(rd->rp, rd->t, r->last_ns); /* painted once the chart has begun */
    uint32_t tid;
    void *state;
    for (size_t i = 0; r->used && fs_replayer_thread_at(rd->rp, i, &tid, &state); i++) {
        thread_wait *th = state;
        if (th->waiting) paint(r, FS_TL_WAIT_LANE, rd->wait_name, th->wait_since, r->last_ns);
    }
    fs_replayer_free(rd->rp);
    fs_live_free(&rd->segments);
    fs_u64map_free(&rd->freed);
    free(rd->name_of);
    free(rd);
    tl->reading = NULL;
}

void fs_tl_adopt(fs_timeline *dst, fs_timeline *src)
{
    fs_tl_rank *more = realloc(dst->ranks, (dst->nranks + src->nranks) * sizeof *more);
    if (!more) fs_analysis_oom("report");
    dst->ranks = more;
    for (size_t i = 0; i < src->nranks; i++) {
        fs_tl_rank *r = &src->ranks[i];
        for (int l = 0; l <= FS_TL_LANES; l++) /* the lanes name src's names */
            for (size_t k = 0; r->lanes[l] && k < FS_TL_BUCKETS; k++) {
                fs_tl_cell *c = &r->lanes[l][k];
                if (c->name)
                    c->name =
                        intern(dst, src->names[c->name - 1].path, src->names[c->name - 1].name);
            }
        dst->ranks[dst->nranks++] = *r;
    }
    free(src->ranks); /* the ranks' contents are dst's now */
    src->ranks = NULL;
    src->nranks = 0;
    fs_tl_free(src);
}

void fs_tl_free(fs_timeline *tl)
{
    for (size_t i = 0; i < tl->nranks; i++) {
        fs_tl_rank *r = &tl->ranks[i];
        for (size_t s = 0; s < r->nseries; s++)
            free(r->series[s].points);
        free(r->series);
        for (int l = 0; l <= FS_TL_LANES; l++)
            free(r->lanes[l]);
        free(r->colls);
    }
    for (size_t i = 0; i < tl->nnames; i++) {
        free(tl->names[i].path);
        free(tl->names[i].name);
    }
    free(tl->ranks);
    free(tl->names);
    fs_text_index_free(&tl->by_path);
    *tl = (fs_timeline){0};
}
