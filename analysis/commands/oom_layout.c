/* oom_layout.c - the cache's segments and live blocks followed through a
 * trace, and where its free bytes lay for a failed request (oom_layout.h).
 *
 * A segment's stream is in its own event; its pool and its memory are not,
 * but every segment is grown for a request that is then served from it, so
 * the first allocation that lands in a segment says both (its pool in the
 * event's aux, and from format 2 whether it was stream-ordered). Expandable
 * segments are followed as the pages mapped (segment_map), adjacent pages
 * of one stream's segment joined, so that a free run across two mappings
 * is one piece, as it is in the allocator. A snapshot's segments say
 * neither pool nor memory: its blocks give the pool by their size, and its
 * memory stays unknown, which counts as the request's own. */
#include "oom_layout.h"

#include "sites.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES FS_SITES_MAX_DEVICES
#define SMALL_MAX   ((uint64_t)1 << 20) /* the small pool's largest block */
#define MIN_BLOCK   512u                /* every block is a multiple of this */

enum { POOL_SMALL, POOL_LARGE }; /* segment.pool; -1: not known yet */

typedef struct segment {
    uint64_t addr, size, stream;
    int8_t pool;
    int8_t ordered; /* 1 stream-ordered memory, 0 cudaMalloc's, -1 not known */
    bool expandable;
} segment;

typedef struct segments {
    segment *s; /* by address, never overlapping */
    size_t n, cap;
} segments;

/* A stream's allocations, for the guess at a failed request's API. */
typedef struct stream_use {
    uint64_t stream;
    int device;
    uint64_t ordered, plain;
} stream_use;

struct fs_oom_layout {
    segments dev[MAX_DEVICES];
    fs_live live; /* site 1: every live block */
    stream_use *use;
    size_t nuse, capuse;
    bool api_recorded;
};

fs_oom_layout *fs_oom_layout_create(void)
{
    fs_oom_layout *l = calloc(1, sizeof *l);
    if (!l) fs_analysis_oom("report");
    return l;
}

void fs_oom_layout_free(fs_oom_layout *l)
{
    if (!l) return;
    for (int d = 0; d < MAX_DEVICES; d++)
        free(l->dev[d].s);
    fs_live_free(&l->live);
    free(l->use);
    free(l);
}

/* ---- segments by address --------------------------------------------------------- */

/* The index of the first segment that ends above addr. */
static size_t first_ending_above(const segments *g, uint64_t addr)
{
    size_t lo = 0, hi = g->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g->s[mid].addr + g->s[mid].size <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static segment *containing(segments *g, uint64_t addr)
{
    size_t i = first_ending_above(g, addr);
    return i < g->n && g->s[i].addr <= addr ? &g->s[i] : NULL;
}

static void insert_at(segments *g, size_t i, const segment *s)
{
    g->s = fs_grow(g->s, &g->cap, g->n + 1, sizeof *g->s);
    memmove(&g->s[i + 1], &g->s[i], (g->n - i) * sizeof *g->s);
    g->s[i] = *s;
    g->n++;
}

static void remove_at(segments *g, size_t i)
{
    memmove(&g->s[i], &g->s[i + 1], (g->n - i - 1) * sizeof *g->s);
    g->n--;
}

/* [addr, addr + size) is no longer reserved: a segment released, or pages
 * of an expandable one unmapped. What of a segment lies outside it stays. */
static void forget(segments *g, uint64_t addr, uint64_t size)
{
    uint64_t end = addr + size;
    size_t i = first_ending_above(g, addr);
    while (i < g->n && g->s[i].addr < end) {
        segment *s = &g->s[i];
        uint64_t s_end = s->addr + s->size;
        if (s->addr < addr && s_end > end) { /* a hole in the middle: two pieces */
            segment right = *s;
            right.addr = end;
            right.size = s_end - end;
            s->size = addr - s->addr;
            insert_at(g, i + 1, &right);
            return;
        }
        if (s->addr < addr) { /* its tail goes */
            s->size = addr - s->addr;
            i++;
        } else if (s_end > end) { /* its head goes */
            s->size = s_end - end;
            s->addr = end;
            return;
        } else {
            remove_at(g, i);
        }
    }
}

/* Whether two adjacent pieces are of one expandable segment: one stream's,
 * neither's pool or memory known to differ. */
static bool joinable(const segment *a, const segment *b)
{
    return a->expandable && b->expandable && a->addr + a->size == b->addr &&
           a->stream == b->stream && (a->pool < 0 || b->pool < 0 || a->pool == b->pool) &&
           (a->ordered < 0 || b->ordered < 0 || a->ordered == b->ordered);
}

static void join(segment *a, const segment *b)
{
    a->size += b->size;
    if (a->pool < 0) a->pool = b->pool;
    if (a->ordered < 0) a->ordered = b->ordered;
}

static void reserve(segments *g, const segment *s)
{
    forget(g, s->addr, s->size); /* a damaged trace's overlap: the newer stands */
    size_t i = first_ending_above(g, s->addr);
    insert_at(g, i, s);
    if (i + 1 < g->n && joinable(&g->s[i], &g->s[i + 1])) {
        join(&g->s[i], &g->s[i + 1]);
        remove_at(g, i + 1);
    }
    if (i > 0 && joinable(&g->s[i - 1], &g->s[i])) {
        join(&g->s[i - 1], &g->s[i]);
        remove_at(g, i);
    }
}

/* ---- following a trace ------------------------------------------------------------ */

static stream_use *use_of(fs_oom_layout *l, int device, uint64_t stream, bool make)
{
    for (size_t i = 0; i < l->nuse; i++)
        if (l->use[i].device == device && l->use[i].stream == stream) return &l->use[i];
    if (!make) return NULL;
    l->use = fs_grow(l->use, &l->capuse, l->nuse + 1, sizeof *l->use);
    l->use[l->nuse] = (stream_use){.stream = stream, .device = device};
    return &l->use[l->nuse++];
}

/* A block landed in its segment: the segment's pool and memory, when they
 * are not known yet. pool: 1 small, 2 large (an allocation's aux), 0: by
 * the block's size; ordered: -1 not known. */
static void landed(segments *g, uint64_t addr, uint64_t size, unsigned pool, int ordered)
{
    segment *s = containing(g, addr);
    if (!s) return;
    if (s->pool < 0)
        s->pool = pool == 1   ? POOL_SMALL
                  : pool == 2 ? POOL_LARGE
                              : (size <= SMALL_MAX ? POOL_SMALL : POOL_LARGE);
    if (s->ordered < 0) s->ordered = (int8_t)ordered;
}

void fs_oom_layout_see(fs_oom_layout *l, const fs_fmt_record *r, bool api_recorded)
{
    const fs_fmt_event *ev = &r->ev;
    fs_live_block gone;
    if (ev->device < 0 || ev->device >= MAX_DEVICES) return;
    segments *g = &l->dev[ev->device];
    segment s = {
        .addr = ev->addr, .size = ev->size, .stream = ev->stream, .pool = -1, .ordered = -1};
    if (api_recorded) l->api_recorded = true;
    switch (r->kind) {
    case FS_REC_SEGMENT_ALLOC:
        reserve(g, &s);
        break;
    case FS_REC_SEGMENT_MAP:
        s.expandable = true;
        reserve(g, &s);
        break;
    case FS_REC_SEGMENT_FREE:
    case FS_REC_SEGMENT_UNMAP:
        forget(g, ev->addr, ev->size);
        break;
    case FS_REC_SNAP_SEGMENT:
        s.expandable = ev->aux & 1;
        reserve(g, &s);
        break;
    case FS_REC_ALLOC: {
        bool ordered = ev->aux & FS_FMT_ALLOC_STREAM_ORDERED;
        fs_live_put(&l->live, ev->addr, ev->size, 1, ev->device);
        landed(g, ev->addr, ev->size, (unsigned)(ev->aux & 3), api_recorded ? ordered : -1);
        if (api_recorded) {
            stream_use *u = use_of(l, ev->device, ev->stream, true);
            if (ordered)
                u->ordered++;
            else
                u->plain++;
        }
        break;
    }
    case FS_REC_SNAP_BLOCK:
        if (ev->aux != FS_BLOCK_LIVE) break;
        fs_live_put(&l->live, ev->addr, ev->size, 1, ev->device);
        landed(g, ev->addr, ev->size, 0, -1);
        break;
    case FS_REC_FREE_REQUESTED:
        fs_live_take(&l->live, ev->addr, &gone);
        break;
    default:
        break;
    }
}

/* ---- at a failure ------------------------------------------------------------------ */

typedef struct span {
    uint64_t addr, size;
} span;

static int by_addr(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

static void add_free(uint64_t *bytes, uint64_t *largest, uint64_t idle, uint64_t piece)
{
    *bytes += idle;
    if (largest && piece > *largest) *largest = piece;
}

void fs_oom_layout_where(const fs_oom_layout *l, const fs_fmt_event *oom, fs_oom_where *out)
{
    *out = (fs_oom_where){.memory_known = l->api_recorded};
    out->rounded =
        oom->size < MIN_BLOCK ? MIN_BLOCK : (oom->size + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK;
    const stream_use *u = use_of((fs_oom_layout *)l, oom->device, oom->stream, false);
    out->by_stream = u && u->ordered + u->plain;
    out->ordered = out->by_stream ? u->ordered > u->plain : oom->stream != 0;
    if (oom->device < 0 || oom->device >= MAX_DEVICES) return;
    const segments *g = &l->dev[oom->device];
    int pool = out->rounded <= SMALL_MAX ? POOL_SMALL : POOL_LARGE;

    size_t n = 0;
    size_t count = fs_live_count(&l->live);
    span *blocks = malloc((count ? count : 1) * sizeof *blocks);
    if (!blocks) fs_analysis_oom("report");
    fs_live_block b;
    for (size_t pos = 0; fs_live_next(&l->live, &pos, &b);)
        if (b.device == oom->device) blocks[n++] = (span){b.addr, b.size};
    qsort(blocks, n, sizeof *blocks, by_addr);

    uint64_t reserved = 0, allocated = 0;
    size_t k = 0;
    for (size_t i = 0; i < g->n; i++) {
        const segment *s = &g->s[i];
        uint64_t end = s->addr + s->size, at = s->addr, idle = 0, piece = 0;
        reserved += s->size;
        for (; k < n && blocks[k].addr < s->addr; k++)
            ; /* a block outside every segment: the totals will not agree */
        for (; k < n && blocks[k].addr < end; k++) {
            uint64_t gap = blocks[k].addr > at ? blocks[k].addr - at : 0;
            idle += gap;
            if (gap > piece) piece = gap;
            allocated += blocks[k].size;
            if (blocks[k].addr + blocks[k].size > at) at = blocks[k].addr + blocks[k].size;
        }
        if (end > at) {
            idle += end - at;
            if (end - at > piece) piece = end - at;
        }
        if (out->memory_known && s->ordered >= 0 && s->ordered != out->ordered)
            add_free(&out->other_memory, NULL, idle, 0);
        else if (s->pool >= 0 && s->pool != pool)
            add_free(&out->other_pool, NULL, idle, 0);
        else if (s->stream == oom->stream)
            add_free(&out->own, &out->own_largest, idle, piece);
        else
            add_free(&out->other, &out->other_largest, idle, piece);
    }
    out->known = reserved == oom->reserved && allocated == oom->allocated;
    free(blocks);
}
