/* replay.c - `fsdpshim replay --conf CONF TRACE...`: a trace's allocation
 * sequence replayed through the caching allocator under the recorded
 * configuration and under others, side by side (docs/cli.md, "fsdpshim
 * replay", which also says why each choice below was made).
 *
 * The allocator is linked in and runs over a device model of this file:
 * memory of a given capacity at made-up addresses, and events that complete
 * at once, except those that fence a free the recording held back: they
 * complete at the moment the recording saw that free complete. A first pass
 * over the trace finds those frees (a free_requested followed by its
 * free_completed); the second drives one allocator per configuration in
 * step, in trace time order, with the recorded addresses mapped to each
 * replay's own. */
#include "replay.h"

#include "analysis.h"
#include "cmdline.h"
#include "conf_lex.h"
#include "reader.h"
#include "render.h"
#include "sites.h"
#include "size_parse.h"
#include "u64map.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES FS_SITES_MAX_DEVICES
#define PAGE        ((size_t)2 << 20) /* segments' alignment and the mapping granule */

/* The legacy stream's handle, as the interposer keys it (the trace writes
 * it as 0). A handle with the top bit set is a hold: an event recorded on
 * it completes at the trace time in its other bits (program streams are
 * pointers or small odd numbers, never that large). */
#define LEGACY_STREAM ((fs_stream_t)1)
#define HOLD_BIT      ((uint64_t)1 << 63)

/* ---- (device, address) -> value ------------------------------------------------ */

/* One u64map (u64map.h) per device: a zeroed map ({0}) is an empty one. */
typedef struct addr_map {
    fs_u64map by_device[MAX_DEVICES];
} addr_map;

/* The value at (device, addr), NULL when there is none; valid until the
 * next put or delete on that device. */
static uint64_t *map_find(addr_map *m, int device, uint64_t addr)
{
    return fs_u64map_get(&m->by_device[device], addr);
}

static void map_put(addr_map *m, int device, uint64_t addr, uint64_t val)
{
    fs_u64map *d = &m->by_device[device];
    if (!d->stride) fs_u64map_init(d, sizeof(uint64_t));
    uint64_t *v = fs_u64map_put(d, addr, NULL);
    if (!v) fs_analysis_oom("replay");
    *v = val;
}

static void map_del(addr_map *m, int device, uint64_t addr)
{
    fs_u64map_take(&m->by_device[device], addr, NULL);
}

static void map_free(addr_map *m)
{
    for (int d = 0; d < MAX_DEVICES; d++)
        if (m->by_device[d].stride) fs_u64map_free(&m->by_device[d]);
    *m = (addr_map){0};
}

/* ---- the replay device ------------------------------------------------------------- */

typedef struct model_event {
    uint64_t done; /* the trace time it completes at; 0: complete */
    int device;
} model_event;

typedef struct model {
    fs_device_ops ops;
    const uint64_t *now;          /* the trace time being replayed */
    size_t capacity[MAX_DEVICES]; /* 0: unlimited */
    size_t used[MAX_DEVICES];
    uintptr_t next_seg[MAX_DEVICES], next_vm[MAX_DEVICES];
    addr_map segs; /* plain segments' sizes, for segment_free */
    model_event *ev;
    size_t nev, capev;
} model;

/* No device has this much (1 PiB): an "unlimited" device, or one whose
 * size a damaged trace gives, has no more, so that a request no device
 * could serve fails here as it would on the device, instead of carrying
 * the allocator's figures past 2^63. */
#define MOST_ANY_DEVICE_HAS ((size_t)1 << 50)

static fs_dev_status m_charge(model *m, int device, size_t size)
{
    size_t cap = m->capacity[device];
    if (!cap || cap > MOST_ANY_DEVICE_HAS) cap = MOST_ANY_DEVICE_HAS;
    if (size > cap || m->used[device] > cap - size) return FS_DEV_OUT_OF_MEMORY;
    m->used[device] += size;
    return FS_DEV_OK;
}

/* Addresses are never touched: each device's segments and reservations
 * come from bump pointers in ranges of their own. */
static uintptr_t m_bump(uintptr_t *next, size_t size)
{
    uintptr_t at = *next;
    *next += (size + PAGE - 1) / PAGE * PAGE;
    return at;
}

static fs_dev_status m_seg_alloc(void *ctx, int device, fs_seg_memory mem, size_t size, void **out)
{
    model *m = ctx;
    (void)mem;
    if (m_charge(m, device, size) != FS_DEV_OK) return FS_DEV_OUT_OF_MEMORY;
    *out = (void *)m_bump(&m->next_seg[device], size);
    map_put(&m->segs, device, (uintptr_t)*out, size);
    return FS_DEV_OK;
}

static fs_dev_status m_seg_free(void *ctx, int device, fs_seg_memory mem, void *ptr)
{
    model *m = ctx;
    (void)mem;
    uint64_t *size = map_find(&m->segs, device, (uintptr_t)ptr);
    if (!size) return FS_DEV_ERROR;
    m->used[device] -= *size;
    map_del(&m->segs, device, (uintptr_t)ptr);
    return FS_DEV_OK;
}

static size_t m_granularity(void *ctx, int device)
{
    (void)ctx, (void)device;
    return PAGE;
}

static fs_dev_status m_reserve(void *ctx, int device, size_t size, void **out)
{
    model *m = ctx;
    if (size > MOST_ANY_DEVICE_HAS) return FS_DEV_OUT_OF_MEMORY; /* no address range so wide */
    *out = (void *)m_bump(&m->next_vm[device], size);
    return FS_DEV_OK;
}

static fs_dev_status m_release(void *ctx, int device, void *base, size_t size)
{
    (void)ctx, (void)device, (void)base, (void)size;
    return FS_DEV_OK;
}

static fs_dev_status m_map(void *ctx, int device, void *addr, size_t size)
{
    (void)addr;
    return m_charge(ctx, device, size);
}

static fs_dev_status m_unmap(void *ctx, int device, void *addr, size_t size)
{
    model *m = ctx;
    (void)addr;
    m->used[device] -= size;
    return FS_DEV_OK;
}

static fs_dev_status m_ev_create(void *ctx, int device, fs_event_t *out)
{
    model *m = ctx;
    if (m->nev == m->capev) {
        size_t cap = m->capev ? 2 * m->capev : 256;
        model_event *more = realloc(m->ev, cap * sizeof *more);
        if (!more) return FS_DEV_ERROR;
        m->ev = more;
        m->capev = cap;
    }
    m->ev[m->nev] = (model_event){.device = device};
    *out = (fs_event_t)++m->nev;
    return FS_DEV_OK;
}

static void m_ev_destroy(void *ctx, int device, fs_event_t e)
{
    (void)ctx, (void)device, (void)e;
}

static fs_dev_status m_ev_record(void *ctx, int device, fs_event_t e, fs_stream_t s)
{
    model *m = ctx;
    (void)device;
    m->ev[e - 1].done = s & HOLD_BIT ? s & ~HOLD_BIT : 0;
    return FS_DEV_OK;
}

static fs_dev_status m_ev_query(void *ctx, int device, fs_event_t e)
{
    model *m = ctx;
    (void)device;
    return m->ev[e - 1].done <= *m->now ? FS_DEV_OK : FS_DEV_NOT_READY;
}

/* A host wait: the host waited until the GPU got there, so it is there. */
static fs_dev_status m_ev_sync(void *ctx, int device, fs_event_t e)
{
    model *m = ctx;
    (void)device;
    m->ev[e - 1].done = 0;
    return FS_DEV_OK;
}

static fs_dev_status m_stream_wait(void *ctx, int device, fs_stream_t s, fs_event_t e)
{
    (void)ctx, (void)device, (void)s, (void)e;
    return FS_DEV_OK;
}

static bool m_capturing(void *ctx, int device, fs_stream_t s)
{
    (void)ctx, (void)device, (void)s;
    return false;
}

static bool m_underway(void *ctx)
{
    (void)ctx;
    return false;
}

static fs_dev_status m_dev_sync(void *ctx, int device)
{
    model *m = ctx;
    for (size_t i = 0; i < m->nev; i++)
        if (m->ev[i].device == device) m->ev[i].done = 0;
    return FS_DEV_OK;
}

static size_t m_capacity(void *ctx, int device)
{
    return ((model *)ctx)->capacity[device];
}

static void model_init(model *m, const uint64_t *now, const size_t capacity[MAX_DEVICES])
{
    *m = (model){
        .ops =
            {
                .ctx = m,
                .segment_alloc = m_seg_alloc,
                .segment_free = m_seg_free,
                .vm_granularity = m_granularity,
                .vm_reserve = m_reserve,
                .vm_release = m_release,
                .vm_map = m_map,
                .vm_unmap = m_unmap,
                .event_create = m_ev_create,
                .event_destroy = m_ev_destroy,
                .event_record = m_ev_record,
                .event_query = m_ev_query,
                .event_synchronize = m_ev_sync,
                .stream_wait_event = m_stream_wait,
                .stream_is_capturing = m_capturing,
                .capture_underway = m_underway,
                .device_synchronize = m_dev_sync,
                /* without a capacity there is nothing to collect garbage
                 * against, and reservations take the allocator's default */
                .mem_capacity = m_capacity,
            },
        .now = now,
    };
    memcpy(m->capacity, capacity, sizeof m->capacity);
    for (int d = 0; d < MAX_DEVICES; d++) {
        m->next_seg[d] = (uintptr_t)(d + 1) << 52;
        m->next_vm[d] = m->next_seg[d] | (uintptr_t)1 << 51;
    }
}

/* ---- the replays ---------------------------------------------------------------------- */

/* One configuration's allocator and what it saw. */
typedef struct replay {
    fs_allocator *a;
    fs_alloc_config cfg;
    model m;
    fs_replay_figures fig[MAX_DEVICES];
    bool new_peak[MAX_DEVICES]; /* allocated reached a new peak in the current request */
    fs_oom_info oom;            /* the last failure's figures */
    size_t kept_ooms;
} replay;

/* A recorded block, live in the replays. */
typedef struct block {
    uintptr_t ptr[FS_REPLAY_MAX_CONFIGS]; /* 0: that replay could not allocate it */
    fs_stream_t stream;
    bool ordered; /* a cudaMallocAsync block (else cudaMalloc) */
} block;

/* A free the recording held back, by its number among the trace's frees. */
typedef struct deferred {
    uint64_t free, done; /* done: when the recording saw it complete */
} deferred;

typedef struct run {
    const fs_replay_options *opt;
    fs_replay_result *out;
    uint64_t now;
    replay *rep;
    size_t nrep;
    int devices; /* highest device number + 1 */
    addr_map live;
    uint64_t nfree;
    /* pass 1 */
    deferred *def;
    size_t ndef, capdef;
    uint64_t legacy_immediate[MAX_DEVICES], legacy_deferred[MAX_DEVICES];
    fs_replay_figures rec[MAX_DEVICES];
    bool seen[MAX_DEVICES];
    /* pass 2 */
    bool api_recorded; /* allocations say whether they were cudaMallocAsync */
    size_t cursor;     /* into def */
    block *blocks;
    size_t nblocks, capblocks, free_block; /* free_block: a free list through ptr[0], + 1 */
    addr_map streams;                      /* streams registered, per device */
    bool retire_due[MAX_DEVICES];
    fs_sites sites; /* OOM sites */
    bool sites_ready;
} run;

static bool device_ok(int device)
{
    return device >= 0 && device < MAX_DEVICES;
}

/* ---- pass 1: the recorded figures, and which frees the recording held back ---- */

static void note_recorded(run *o, unsigned kind, const fs_fmt_event *ev)
{
    int d = ev->device;
    fs_replay_figures *f = &o->rec[d];
    o->seen[d] = true;
    if (d + 1 > o->devices) o->devices = d + 1;
    if (ev->allocated > f->peak_allocated) {
        f->peak_allocated = ev->allocated;
        f->reserved_at_peak = ev->reserved;
    }
    if (ev->reserved > f->peak_reserved) f->peak_reserved = ev->reserved;
    f->segments += kind == FS_REC_SEGMENT_ALLOC;
    f->mappings += kind == FS_REC_SEGMENT_MAP;
    f->ooms += kind == FS_REC_OOM;
}

/* A legacy-stream free decided: made reusable at once (a stream-ordered
 * cudaFreeAsync) or held back (a device-ordered cudaFree). */
static void vote(run *o, int device, uint64_t val, bool held)
{
    if (!(val & 1)) return;
    if (held)
        o->legacy_deferred[device]++;
    else
        o->legacy_immediate[device]++;
}

/* In the live map, pass 1 keeps 0 for a live block and, once freed, the
 * free's number + 1 shifted left, the low bit set for the legacy stream. */
static int classify(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    run *o = ctx;
    const fs_fmt_event *ev = &r->ev;
    (void)t, (void)tid;
    if (r->kind > FS_REC_EVENT_LAST || !device_ok(ev->device)) return 0;
    if (r->kind <= FS_REC_OOM) note_recorded(o, r->kind, ev);
    uint64_t *s = map_find(&o->live, ev->device, ev->addr);
    switch (r->kind) {
    case FS_REC_ALLOC:
        if (s && *s) vote(o, ev->device, *s, false); /* reused without completing */
        map_put(&o->live, ev->device, ev->addr, 0);
        break;
    case FS_REC_FREE_REQUESTED:
        if (s) *s = (o->nfree + 1) << 1 | (ev->stream == 0);
        o->nfree++;
        break;
    case FS_REC_FREE_COMPLETED:
        if (!s || !*s) break;
        if (o->ndef == o->capdef) {
            o->capdef = o->capdef ? 2 * o->capdef : 1024;
            if (!(o->def = realloc(o->def, o->capdef * sizeof *o->def))) fs_analysis_oom("replay");
        }
        o->def[o->ndef++] = (deferred){(*s >> 1) - 1, ev->time_ns};
        vote(o, ev->device, *s, true);
        map_del(&o->live, ev->device, ev->addr);
        break;
    }
    return 0;
}

static int by_free(const void *a, const void *b)
{
    const deferred *x = a, *y = b;
    return (x->free > y->free) - (x->free < y->free);
}

/* ---- pass 2: driving the allocators ---------------------------------------------- */

static void on_event(void *ctx, const fs_alloc_event *ev)
{
    replay *rp = ctx;
    fs_replay_figures *f = &rp->fig[ev->device];
    if (ev->kind == FS_EV_SEGMENT_ALLOC) f->segments++;
    if (ev->kind == FS_EV_SEGMENT_MAP) f->mappings++;
    if (ev->kind == FS_EV_ALLOC && ev->allocated > f->peak_allocated) {
        f->peak_allocated = ev->allocated;
        rp->new_peak[ev->device] = true; /* the rest of the picture once it returns */
    }
}

static void on_oom(void *ctx, const fs_oom_info *info)
{
    ((replay *)ctx)->oom = *info;
}

static fs_stream_t stream_of(uint64_t traced)
{
    return traced ? (fs_stream_t)traced : LEGACY_STREAM;
}

/* Registers a stream with every replay the first time it is seen (or again
 * when a creation says what kind it is). */
static void see_stream(run *o, int device, fs_stream_t s, int kind, bool again)
{
    if (!again && map_find(&o->streams, device, s)) return;
    map_put(&o->streams, device, s, 1);
    if (s == LEGACY_STREAM) kind = FS_STREAM_LEGACY;
    for (size_t c = 0; c < o->nrep; c++)
        fs_alloc_stream_register(o->rep[c].a, device, s, (enum fs_stream_kind)kind);
}

/* Frees the recording saw complete since the last request: the replays
 * retire theirs now too, as the recorded allocator did (on a host
 * synchronisation, a miss or its pacing), so that best fit sees the same
 * free blocks. */
static void catch_up(run *o, int device)
{
    if (!o->retire_due[device]) return;
    o->retire_due[device] = false;
    for (size_t c = 0; c < o->nrep; c++)
        fs_alloc_note_host_sync(o->rep[c].a, device);
}

static void keep_oom(run *o, size_t c, fs_reader *t, const fs_fmt_event *ev, size_t size,
                     bool recorded)
{
    replay *rp = &o->rep[c];
    fs_replay_result *out = o->out;
    if (rp->kept_ooms == FS_REPLAY_MAX_OOMS) return;
    rp->kept_ooms++;
    fs_replay_oom *more = realloc(out->ooms, (out->nooms + 1) * sizeof *more);
    if (!more) fs_analysis_oom("replay");
    out->ooms = more;
    fs_replay_oom *k = &out->ooms[out->nooms++];
    *k = (fs_replay_oom){.config = (int)c,
                         .device = ev->device,
                         .time_ns = ev->time_ns,
                         .stream = ev->stream,
                         .requested = size,
                         .allocated = rp->oom.allocated,
                         .reserved = rp->oom.reserved,
                         .largest_free = rp->oom.largest_free,
                         .recorded = recorded};
    if (!ev->stack) return;
    if (!o->sites_ready) {
        o->sites = (fs_sites){.by = FS_BY_FRAME};
        if (o->opt->symbols && !(o->sites.sym = fs_symbols_create(o->opt->warn, o->opt->warn_ctx)))
            fs_analysis_oom("replay");
        fs_sites_next_file(&o->sites);
        o->sites_ready = true;
    }
    uint32_t site = fs_sites_of(&o->sites, t, ev, 0); /* by frame: no thread enters it */
    if (!(k->site = strdup(o->sites.all[site - 1].key))) fs_analysis_oom("replay");
}

/* One replay's allocation; 0 when it fails. */
static uintptr_t alloc_one(run *o, size_t c, fs_reader *t, const fs_fmt_event *ev, size_t size,
                           fs_stream_t s, bool ordered, bool recorded_oom)
{
    replay *rp = &o->rep[c];
    int d = ev->device;
    void *p = NULL;
    if (fs_malloc(rp->a, d, s, size, ordered ? FS_ALLOC_STREAM_ORDERED : 0, &p) == FS_OK) {
        if (rp->new_peak[d]) {
            fs_alloc_stats st;
            fs_alloc_get_stats(rp->a, d, &st);
            rp->fig[d].reserved_at_peak = (uint64_t)st.reserved_bytes[FS_SIZE_ALL].current;
            rp->fig[d].largest_free_at_peak = (uint64_t)st.largest_free_block;
            rp->new_peak[d] = false;
        }
        return (uintptr_t)p;
    }
    rp->fig[d].ooms++;
    keep_oom(o, c, t, ev, size, recorded_oom);
    return 0;
}

/* Whether an allocation was a cudaMallocAsync, as a trace of format 2
 * records it. Before that (and for an OOM's probe): a legacy-stream
 * allocation is a cudaMalloc unless most of that stream's frees were
 * stream-ordered (PyTorch's cudaMallocAsync route allocates on the legacy
 * stream too); any other stream's is a cudaMallocAsync. */
static bool ordered_on(const run *o, const fs_fmt_event *ev)
{
    if (o->api_recorded && ev->kind == FS_REC_ALLOC) return ev->aux & FS_FMT_ALLOC_STREAM_ORDERED;
    return ev->stream || o->legacy_immediate[ev->device] > o->legacy_deferred[ev->device];
}

static uint64_t block_new(run *o)
{
    if (o->free_block) {
        uint64_t i = o->free_block - 1;
        o->free_block = o->blocks[i].ptr[0];
        return i;
    }
    if (o->nblocks == o->capblocks) {
        o->capblocks = o->capblocks ? 2 * o->capblocks : 1024;
        if (!(o->blocks = realloc(o->blocks, o->capblocks * sizeof *o->blocks)))
            fs_analysis_oom("replay");
    }
    return o->nblocks++;
}

/* The recorded block at (device, addr), block i, is no longer live */
static void block_drop(run *o, int device, uint64_t addr, uint64_t i)
{
    o->blocks[i].ptr[0] = o->free_block;
    o->free_block = i + 1;
    map_del(&o->live, device, addr);
}

/* The program's free, as the recording made it: reusable at once on the
 * block's stream, or held back until the recording saw it complete. */
static void free_one(replay *rp, const block *b, uintptr_t ptr, bool held, uint64_t done)
{
    fs_stream_t hold = HOLD_BIT | done;
    if (b->ordered) {
        /* cudaFreeAsync: on a stream of the replay's own that gets there
         * when the recording's free completed */
        fs_free_async(rp->a, (void *)ptr, held ? hold : b->stream, NULL);
        return;
    }
    /* cudaFree: free_semantics decides. Only device-ordered reuse waits for
     * the GPU to pass the free, here for the recorded moment; sync waits on
     * the host and stream semantics reuse at once on the block's stream. */
    if (held && rp->cfg.free_semantics == FS_FREE_SEMANTICS_DEVICE)
        fs_record_stream(rp->a, (void *)ptr, hold);
    fs_free(rp->a, (void *)ptr, NULL);
}

static void replay_alloc(run *o, fs_reader *t, const fs_fmt_event *ev)
{
    int d = ev->device;
    size_t size = ev->requested ? ev->requested : ev->size;
    fs_stream_t s = stream_of(ev->stream);
    if (!size) return;
    see_stream(o, d, s, FS_STREAM_BLOCKING, false);
    catch_up(o, d);
    uint64_t *old = map_find(&o->live, d, ev->addr);
    if (old) { /* its free was lost (dropped events): gone now */
        const block *b = &o->blocks[*old];
        for (size_t c = 0; c < o->nrep; c++)
            if (b->ptr[c]) fs_free_async(o->rep[c].a, (void *)b->ptr[c], b->stream, NULL);
        block_drop(o, d, ev->addr, *old);
    }
    uint64_t i = block_new(o);
    block *b = &o->blocks[i];
    *b = (block){.stream = s, .ordered = ordered_on(o, ev)};
    for (size_t c = 0; c < o->nrep; c++)
        b->ptr[c] = alloc_one(o, c, t, ev, size, s, b->ordered, false);
    map_put(&o->live, d, ev->addr, i);
    o->out->allocs++;
}

static void replay_free(run *o, const fs_fmt_event *ev)
{
    uint64_t k = o->nfree++;
    while (o->cursor < o->ndef && o->def[o->cursor].free < k)
        o->cursor++;
    bool held = o->cursor < o->ndef && o->def[o->cursor].free == k;
    uint64_t *s = map_find(&o->live, ev->device, ev->addr);
    if (!s) return;
    uint64_t i = *s;
    catch_up(o, ev->device);
    const block *b = &o->blocks[i];
    for (size_t c = 0; c < o->nrep; c++)
        if (b->ptr[c]) free_one(&o->rep[c], b, b->ptr[c], held, held ? o->def[o->cursor].done : 0);
    block_drop(o, ev->device, ev->addr, i);
    o->out->frees++;
    o->out->deferred_frees += held;
}

/* A request the recording could not serve: would each replay have served
 * it? Given back at once when it would. */
static void replay_probe(run *o, fs_reader *t, const fs_fmt_event *ev)
{
    fs_stream_t s = stream_of(ev->stream);
    if (!ev->size) return;
    see_stream(o, ev->device, s, FS_STREAM_BLOCKING, false);
    catch_up(o, ev->device);
    for (size_t c = 0; c < o->nrep; c++) {
        uintptr_t p = alloc_one(o, c, t, ev, ev->size, s, ordered_on(o, ev), true);
        if (p) fs_free_async(o->rep[c].a, (void *)p, s, NULL);
    }
    o->out->recorded_ooms++;
}

/* A collective's buffer is used on its stream: the shim records that use
 * (SPEC section 7), so the replays do. */
static void replay_use(run *o, const fs_fmt_event *ev)
{
    uint64_t *s = map_find(&o->live, ev->device, ev->addr);
    fs_stream_t use = stream_of(ev->stream);
    if (!s) return;
    const block *b = &o->blocks[*s];
    see_stream(o, ev->device, use, FS_STREAM_BLOCKING, false);
    for (size_t c = 0; c < o->nrep; c++)
        if (b->ptr[c]) fs_record_stream(o->rep[c].a, (void *)b->ptr[c], use);
}

static int drive(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    run *o = ctx;
    const fs_fmt_event *ev = &r->ev;
    (void)tid;
    if (r->kind > FS_REC_EVENT_LAST || !device_ok(ev->device)) return 0;
    o->now = ev->time_ns;
    switch (r->kind) {
    case FS_REC_ALLOC:
        replay_alloc(o, t, ev);
        break;
    case FS_REC_FREE_REQUESTED:
        replay_free(o, ev);
        break;
    case FS_REC_FREE_COMPLETED:
        o->retire_due[ev->device] = true;
        break;
    case FS_REC_OOM:
        replay_probe(o, t, ev);
        break;
    case FS_REC_COLLECTIVE:
        replay_use(o, ev);
        break;
    case FS_REC_STREAM_CREATE:
    case FS_REC_POOL_HIT:
        see_stream(o, ev->device, stream_of(ev->stream),
                   ev->aux & 1 ? FS_STREAM_NONBLOCKING : FS_STREAM_BLOCKING, true);
        break;
    case FS_REC_STREAM_DESTROY: {
        for (size_t c = 0; c < o->nrep; c++)
            fs_alloc_stream_retire(o->rep[c].a, ev->device, stream_of(ev->stream));
        map_del(&o->streams, ev->device,
                stream_of(ev->stream)); /* a new stream may take its handle */
        break;
    }
    }
    return 0;
}

static void run_free(run *o)
{
    for (size_t c = 0; c < o->nrep; c++) {
        if (o->rep[c].a) fs_allocator_destroy(o->rep[c].a);
        free(o->rep[c].m.ev);
        map_free(&o->rep[c].m.segs);
    }
    free(o->rep);
    map_free(&o->live);
    free(o->def);
    free(o->blocks);
    map_free(&o->streams);
    if (o->sites_ready) {
        if (o->sites.sym) fs_symbols_destroy(o->sites.sym);
        fs_sites_free(&o->sites);
    }
}

/* The replays' figures of each device that allocated in the recording. */
static void collect(run *o, const size_t capacity[MAX_DEVICES])
{
    fs_replay_result *out = o->out;
    for (int d = 0; d < o->devices; d++) {
        if (!o->seen[d]) continue;
        fs_replay_device *more = realloc(out->dev, (out->ndev + 1) * sizeof *more);
        if (!more) fs_analysis_oom("replay");
        out->dev = more;
        fs_replay_device *dev = &out->dev[out->ndev++];
        *dev = (fs_replay_device){.device = d, .capacity = capacity[d], .recorded = o->rec[d]};
        for (size_t c = 0; c < o->nrep; c++) {
            fs_alloc_stats st;
            fs_alloc_get_stats(o->rep[c].a, d, &st);
            dev->replayed[c] = o->rep[c].fig[d];
            dev->replayed[c].peak_reserved = (uint64_t)st.reserved_bytes[FS_SIZE_ALL].peak;
            dev->replayed[c].peak_allocated = (uint64_t)st.allocated_bytes[FS_SIZE_ALL].peak;
        }
    }
}

/* The reader hands its visitor's context to the warning callback too. */
static void forward_warning(void *ctx, const char *line)
{
    const run *o = ctx;
    o->opt->warn(o->opt->warn_ctx, line);
}

/* Applies the allocator keys of text over cfg; false at the first key that
 * is not one or does not parse (err says which). */
bool fs_replay_conf_apply(fs_alloc_config *cfg, const char *text, char *err, size_t errlen)
{
    char *copy = strdup(text), *cursor, *key, *value;
    bool ok = true;
    if (!copy) fs_analysis_oom("replay");
    fs_conf_squeeze(copy);
    cursor = copy;
    while (ok && fs_conf_next(&cursor, &key, &value)) {
        /* recorded by the builds of 2026-11-28, whose cudaMalloc misses
         * waited on the host; the key is gone (malloc_reuse replaced it) */
        if (!strcmp(key, "malloc_wait_ms")) continue;
        int rc = fs_alloc_config_set(cfg, key, value, err, errlen);
        if (rc == 0)
            snprintf(err, errlen,
                     "'%s' is not an allocator key (replay takes free_semantics, "
                     "cross_stream_reuse, max_split_size_mb, roundup_power2_divisions, "
                     "garbage_collection_threshold, expandable_segments, large_segment_mb, "
                     "segment_growth, malloc_reuse)",
                     key);
        ok = rc > 0;
    }
    free(copy);
    return ok;
}

/* The configurations and device sizes the replays run with, from what the
 * first reading found in the trace (t) and what the caller asked. */
static void settle(run *o, fs_reader *t, const char *const *confs, size_t nconfs,
                   size_t capacity[MAX_DEVICES])
{
    const fs_replay_options *opt = o->opt;
    fs_replay_result *out = o->out;
    fs_alloc_config recorded;
    char err[512], line[600];
    const char *text = fs_reader_config(t);

    fs_alloc_config_default(&recorded);
    if (confs[0]) {
        fs_replay_conf_apply(&recorded, confs[0], err, sizeof err); /* checked by the caller */
    } else if (text && !fs_replay_conf_apply(&recorded, text, err, sizeof err)) {
        snprintf(line, sizeof line, "%s: its configuration does not parse (%s): the defaults",
                 fs_reader_file(t), err);
        if (opt->warn) opt->warn(opt->warn_ctx, line);
        fs_alloc_config_default(&recorded);
    } else if (text) {
        out->config_in_trace = true;
        /* a trace from before segment_growth was recorded under PyTorch's */
        if (!strstr(text, "segment_growth:")) recorded.pytorch_growth = true;
    }
    fs_alloc_config_describe(&recorded, out->recorded_config, sizeof out->recorded_config);
    o->nrep = nconfs < FS_REPLAY_MAX_CONFIGS ? nconfs : FS_REPLAY_MAX_CONFIGS;
    if (!(o->rep = calloc(o->nrep, sizeof *o->rep))) fs_analysis_oom("replay");
    for (size_t c = 0; c < o->nrep; c++) {
        o->rep[c].cfg = recorded;
        if (c) fs_replay_conf_apply(&o->rep[c].cfg, confs[c], err, sizeof err);
    }
    for (int d = 0; d < MAX_DEVICES; d++)
        capacity[d] = opt->capacity ? opt->capacity : (size_t)fs_reader_device_total(t, d);
}

bool fs_replay_trace(const char *path, const char *const *confs, size_t nconfs,
                     const fs_replay_options *opt, fs_replay_result *out, char *err, size_t errlen)
{
    run o = {.opt = opt, .out = out};
    size_t capacity[MAX_DEVICES];
    *out = (fs_replay_result){.rank = -1};
    fs_reader *t = fs_reader_open(path, err, errlen);
    if (!t) return false;
    fs_reader_read_ordered(t, classify, opt->warn ? forward_warning : NULL, &o);
    settle(&o, t, confs, nconfs, capacity);
    fs_reader_close(t);
    if (o.ndef) qsort(o.def, o.ndef, sizeof *o.def, by_free);
    map_free(&o.live);
    o.nfree = 0;
    if (!(t = fs_reader_open(path, err, errlen))) {
        run_free(&o);
        return false;
    }

    o.api_recorded = fs_reader_header(t)->version >= 2;
    for (size_t c = 0; c < o.nrep; c++) {
        replay *rp = &o.rep[c];
        model_init(&rp->m, &o.now, capacity);
        if (!(rp->a = fs_allocator_create(&rp->cfg, &rp->m.ops, o.devices ? o.devices : 1)))
            fs_analysis_oom("replay");
        fs_alloc_set_observer(
            rp->a, &(fs_alloc_observer){.ctx = rp, .on_event = on_event, .on_oom = on_oom});
    }
    fs_reader_read_ordered(t, drive, NULL, &o);
    out->rank = fs_reader_rank(t);
    out->pid = fs_reader_header(t)->pid;
    fs_reader_close(t);
    collect(&o, capacity);
    run_free(&o);
    return true;
}

void fs_replay_result_free(fs_replay_result *r)
{
    for (size_t i = 0; i < r->nooms; i++)
        free(r->ooms[i].site);
    free(r->ooms);
    free(r->dev);
    *r = (fs_replay_result){.rank = -1};
}

/* ---- the command ------------------------------------------------------------------ */

void usage_replay(FILE *out)
{
    fprintf(out,
            "usage: fsdpshim replay --conf CONF [--conf CONF...] [--recorded CONF] [--mem SIZE]\n"
            "                       [--no-symbols] TRACE...\n"
            "\n"
            "Replays each trace's allocations and frees, in time order on their recorded\n"
            "streams, through the allocator under the configuration it was recorded with and\n"
            "under each CONF, keys applied over it (the allocator's FSDPSHIM_CONF keys: "
            "free_semantics,\n"
            "cross_stream_reuse, max_split_size_mb, roundup_power2_divisions,\n"
            "garbage_collection_threshold, expandable_segments, large_segment_mb), and prints\n"
            "per rank and device, side by side, the recorded and replayed peaks, the free\n"
            "memory at the peak, segments and out-of-memory failures. The 'as recorded'\n"
            "column says whether the replay reproduces the recording.\n"
            "\n"
            "  --conf CONF      a configuration to try; up to %d, a column each\n"
            "  --recorded CONF  the configuration the trace was recorded with [the one it\n"
            "                   records; the defaults for a trace that does not]\n"
            "  --mem SIZE       each replay device's capacity: bytes, or 512M, 80G, 1T\n"
            "                   [each device's memory as the trace records it; unlimited\n"
            "                   for a trace that does not]\n"
            "  --no-symbols     out-of-memory sites as MODULE+0xOFFSET\n"
            "\n"
            "examples:\n"
            "  fsdpshim replay --conf expandable_segments:true train-4242.fst\n"
            "  fsdpshim replay --conf max_split_size_mb:128 \\\n"
            "      --conf garbage_collection_threshold:0.6 --mem 80G rank0.fst\n"
            "\n"
            "Exit status: 0 ok, 1 a file is not a readable trace, 2 usage.\n",
            FS_REPLAY_MAX_CONFIGS - 1);
}

/* The configurations: [0] the recorded one (NULL: the trace's), then each
 * --conf; cfg holds each over the defaults, as checked. */
typedef struct replay_cmd {
    fs_alloc_config cfg[FS_REPLAY_MAX_CONFIGS];
    char *text[FS_REPLAY_MAX_CONFIGS];
    size_t n;
    size_t capacity;
    bool symbols;
} replay_cmd;

/* Checks CONF and keeps it (squeezed) in *kept; false after one line naming
 * the option. Every key must be the allocator's: a key replay cannot model
 * is refused rather than silently left out of the figures. */
static bool parse_conf(const char *option, const char *text, fs_alloc_config *cfg, char **kept)
{
    char err[512];
    if (!(*kept = strdup(text))) fs_analysis_oom("replay");
    fs_conf_squeeze(*kept);
    fs_alloc_config_default(cfg);
    if (!fs_replay_conf_apply(cfg, *kept, err, sizeof err)) {
        fprintf(stderr, "fsdpshim replay: %s %s\n", option, err);
        return false;
    }
    if (!**kept) fprintf(stderr, "fsdpshim replay: %s: no key:value pair in '%s'\n", option, text);
    return **kept;
}

static void warn(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "fsdpshim replay: %s\n", line);
}

enum figure { PEAK_RESERVED, PEAK_ALLOCATED, FREE_AT_PEAK, LARGEST_FREE, SEGMENTS, GROWTHS, OOMS };

static uint64_t figure(const fs_replay_figures *f, enum figure which)
{
    switch (which) {
    case PEAK_RESERVED:
        return f->peak_reserved;
    case PEAK_ALLOCATED:
        return f->peak_allocated;
    case FREE_AT_PEAK:
        return f->reserved_at_peak - f->peak_allocated;
    case LARGEST_FREE:
        return f->largest_free_at_peak;
    case SEGMENTS:
        return f->segments;
    case GROWTHS:
        return f->mappings;
    default:
        return f->ooms;
    }
}

static const char *column(size_t c, char *buf, size_t len)
{
    if (c == 0) return "recorded";
    if (c == 1) return "as recorded";
    snprintf(buf, len, "replay %zu", c - 1);
    return buf;
}

static void print_device(const replay_cmd *rc, const fs_replay_device *d)
{
    static const struct {
        const char *label;
        enum figure which;
        bool bytes;
    } rows[] = {
        {"peak reserved", PEAK_RESERVED, true},          {"peak allocated", PEAK_ALLOCATED, true},
        {"free at peak allocated", FREE_AT_PEAK, true}, /* reserved - allocated */
        {"largest free block then", LARGEST_FREE, true}, {"segments reserved", SEGMENTS, false},
        {"expandable growths", GROWTHS, false},          {"out-of-memory failures", OOMS, false},
    };
    char buf[32];

    printf("  device %-33d", d->device);
    for (size_t c = 0; c <= rc->n; c++)
        printf(" %14s", column(c, buf, sizeof buf));
    printf("\n");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        printf("    %-34s", rows[i].label);
        for (size_t c = 0; c <= rc->n; c++) {
            uint64_t v = figure(c ? &d->replayed[c - 1] : &d->recorded, rows[i].which);
            if (!c && rows[i].which == LARGEST_FREE)
                snprintf(buf, sizeof buf, "-"); /* not in a trace */
            else if (rows[i].bytes)
                fs_human_bytes(v, buf, sizeof buf);
            else
                snprintf(buf, sizeof buf, "%" PRIu64, v);
            printf(" %14s", buf);
        }
        printf("\n");
    }

    uint64_t want = d->recorded.peak_reserved, got = d->replayed[0].peak_reserved;
    if (got == want)
        printf("  device %d: as recorded reproduces the recording's peak reserved, %" PRIu64
               " bytes\n",
               d->device, want);
    else if (d->replayed[0].ooms > d->recorded.ooms)
        printf("  device %d: as recorded failed %" PRIu64
               " requests that the recording served: the replay device (--mem) holds less than "
               "the recording used\n",
               d->device, d->replayed[0].ooms - d->recorded.ooms);
    else
        printf("  device %d: as recorded does not reproduce the recording: peak reserved %" PRIu64
               " bytes against %" PRIu64 " recorded (%+" PRId64
               "); read the other columns with that margin\n",
               d->device, got, want, (int64_t)(got - want));
}

static void print_ooms(const replay_cmd *rc, const fs_replay_result *r)
{
    char name[32], req[32], al[32], res[32], lf[32];
    for (size_t c = 0; c < rc->n; c++) {
        uint64_t n = 0;
        for (size_t i = 0; i < r->ndev; i++)
            n += r->dev[i].replayed[c].ooms;
        if (!n) continue;
        printf("  %s: %" PRIu64 " request%s failed (each skipped, with its free; the replay "
               "went on)%s\n",
               column(c + 1, name, sizeof name), n, fs_plural(n),
               n > FS_REPLAY_MAX_OOMS ? ", the first ones:" : ":");
        for (size_t i = 0; i < r->nooms; i++) {
            const fs_replay_oom *o = &r->ooms[i];
            if (o->config != (int)c) continue;
            fs_human_bytes(o->requested, req, sizeof req);
            fs_human_bytes(o->allocated, al, sizeof al);
            fs_human_bytes(o->reserved, res, sizeof res);
            fs_human_bytes(o->largest_free, lf, sizeof lf);
            printf("    %s at %.6f s on device %d, stream 0x%" PRIx64
                   ": %s allocated, %s reserved, the largest free block %s%s\n",
                   req, (double)o->time_ns / 1e9, o->device, o->stream, al, res, lf,
                   o->recorded ? " (failed in the recording too)" : "");
            for (const char *line = o->site; line && *line;) {
                const char *end = strchr(line, '\n');
                int len = end ? (int)(end - line) : (int)strlen(line);
                printf("        %.*s\n", len, line);
                line += len + (end ? 1 : 0);
            }
        }
    }
}

static bool replay_file(const replay_cmd *rc, const char *path)
{
    fs_replay_options opt = {.capacity = rc->capacity, .symbols = rc->symbols, .warn = warn};
    fs_replay_result r;
    char err[4200], cap[32];
    if (!fs_replay_trace(path, (const char *const *)rc->text, rc->n, &opt, &r, err, sizeof err)) {
        fprintf(stderr, "fsdpshim replay: %s\n", err);
        return false;
    }
    uint64_t least = 0, most = 0; /* the replay devices' sizes */
    for (size_t i = 0; i < r.ndev; i++) {
        uint64_t c = r.dev[i].capacity;
        if (!i || c < least) least = c;
        if (c > most) most = c;
    }
    if (!least)
        snprintf(cap, sizeof cap, "unlimited");
    else
        fs_human_bytes(least, cap, sizeof cap);
    printf("\n%s: as recorded: %s (%s)\n", path, r.recorded_config,
           rc->text[0]         ? "--recorded"
           : r.config_in_trace ? "the trace's"
                               : "the defaults: the trace does not record its configuration; "
                                 "--recorded CONF gives it");
    printf("%s: pid %u, rank ", path, r.pid);
    if (r.rank >= 0)
        printf("%d", r.rank);
    else
        printf("?");
    printf(": %" PRIu64 " allocation%s, %" PRIu64 " free%s (%" PRIu64
           " held back until the recording saw them complete), %" PRIu64
           " failed request%s replayed as probes; replay devices: %s%s%s\n",
           r.allocs, fs_plural(r.allocs), r.frees, fs_plural(r.frees), r.deferred_frees,
           r.recorded_ooms, fs_plural(r.recorded_ooms), cap,
           rc->capacity    ? ""
           : least == most ? (least ? " (recorded)" : "")
                           : " and more (recorded)",
           !least && !rc->capacity && r.ndev ? " (the trace does not say the device's memory)"
                                             : "");
    if (!r.ndev) printf("  no memory events\n");
    for (size_t i = 0; i < r.ndev; i++)
        print_device(rc, &r.dev[i]);
    print_ooms(rc, &r);
    if (r.recorded_ooms && !least)
        printf("  the recording ran out of memory, but the trace does not say the device's "
               "capacity: give --mem to replay at it\n");
    for (size_t i = 0; !least && i < rc->n; i++)
        if (rc->cfg[i].garbage_collection_threshold > 0) {
            printf("  garbage_collection_threshold was off: it is a fraction of the device's "
                   "memory, which the trace does not say: give --mem\n");
            break;
        }
    fs_replay_result_free(&r);
    return true;
}

int command_replay(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"conf", required_argument, NULL, 'c'}, {"recorded", required_argument, NULL, 'r'},
        {"mem", required_argument, NULL, 'm'},  {"no-symbols", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0},
    };
    replay_cmd rc = {.n = 1, .symbols = true};
    const char *recorded = NULL;
    int c, status = 0;
    bool ok = true;

    optind = 1;
    while (ok && (c = fs_getopt(argc, argv, "h", longopts)) != -1) {
        switch (c) {
        case 'c':
            if (rc.n == FS_REPLAY_MAX_CONFIGS) {
                fprintf(stderr, "fsdpshim replay: at most %d --conf\n", FS_REPLAY_MAX_CONFIGS - 1);
                ok = false;
            } else {
                ok = parse_conf("--conf", optarg, &rc.cfg[rc.n], &rc.text[rc.n]);
                rc.n++;
            }
            break;
        case 'r':
            recorded = optarg;
            break;
        case 'm':
            if (!(rc.capacity = sim_parse_size(optarg))) {
                fprintf(stderr,
                        "fsdpshim replay: --mem takes a size such as 80G or 512MiB, not '%s'\n",
                        optarg);
                ok = false;
            }
            break;
        case 'N':
            rc.symbols = false;
            break;
        case 'h':
            usage_replay(stdout);
            return 0;
        default:
            ok = false;
        }
    }
    if (ok && recorded) ok = parse_conf("--recorded", recorded, &rc.cfg[0], &rc.text[0]);
    if (!recorded) fs_alloc_config_default(&rc.cfg[0]); /* the trace's, read with it */
    if (ok && (rc.n < 2 || optind >= argc)) {
        fs_usage_error(argv[0], "%s",
                       rc.n < 2 ? "--conf CONF is required: the configuration to try"
                                : "no trace named");
        ok = false;
    }
    if (ok) {
        for (size_t i = 1; i < rc.n; i++)
            printf("replay %zu: %s\n", i, rc.text[i]);
        for (int i = optind; i < argc; i++)
            if (!replay_file(&rc, argv[i])) status = FS_EXIT_BAD_INPUT;
    }
    for (size_t i = 0; i < rc.n; i++)
        free(rc.text[i]);
    return ok ? status : FS_EXIT_USAGE;
}
