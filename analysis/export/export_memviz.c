/* export_memviz.c - `fsdpshim export --memviz`: a trace as the snapshot
 * that PyTorch's memory_viz page (pytorch.org/memory_viz) and `python -m
 * torch.cuda._memory_viz` load (docs/cli.md, `--memviz`, its fields
 * in "The pickle, field by field").
 *
 * torch.cuda.memory._snapshot() is the allocator's segments and their
 * blocks at one moment, plus the trace of its latest actions per device. A
 * trace file holds every action, so the export replays them in time order:
 * the segments of each device by address, the live blocks by address
 * (sites.c's table), and the newest --max-entries actions of each device in
 * a ring. The state is taken at the moment --at names, and the trace
 * written is the one that ends there, as if PyTorch's _snapshot() had been
 * called then: memory_viz's segment view walks the trace backwards from
 * the segments, so the two must agree (a block or a free it cannot place
 * would stop the page). For --at peak that is each device's own peak: the
 * moment its allocated total was highest, the figure `top` and `report`
 * call the peak, and the one PyTorch users read as max_memory_allocated.
 * One pickle per trace (rank); memory grows with the live blocks, the
 * segments and the ring, never with the trace's length. */
#include "export.h"

#include "exit_status.h"
#include "pickle.h"
#include "progress.h"
#include "render.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES FS_SITES_MAX_DEVICES
#define NONE        SIZE_MAX

/* PyTorch's names for the actions (TraceEntry in CUDACachingAllocator.h) */
enum action {
    A_ALLOC,
    A_FREE_REQUESTED,
    A_FREE_COMPLETED,
    A_SEGMENT_ALLOC,
    A_SEGMENT_FREE,
    A_SEGMENT_MAP,
    A_SEGMENT_UNMAP,
    A_OOM,
    A_SNAPSHOT,
};
static const char *const action_names[] = {
    "alloc",        "free_requested", "free_completed", "segment_alloc",
    "segment_free", "segment_map",    "segment_unmap",  "oom",
    "snapshot",
};

typedef struct entry {
    uint8_t action;
    uint64_t time_ns, addr, size, stream;
    uint32_t stack, pystack, annot, name;
} entry;

typedef struct segment {
    uint64_t addr, size, stream;
    uint32_t stack, pystack; /* the allocation it was made for */
    bool expandable;         /* pages mapped in an expandable segment */
    bool small;              /* it held a small-pool block */
} segment;

/* A live block's details; its address and size are in the fs_live table */
typedef struct block {
    uint64_t seq; /* allocations before it */
    uint64_t requested, stream;
    uint32_t stack, pystack;
    bool pending; /* freed by the program, waiting for its streams */
} block;

typedef struct span {
    uint64_t addr, size;
} span;

typedef struct device {
    bool used, frozen;
    uint64_t events;             /* this device's events so far */
    uint64_t cut;                /* --at peak: its state is taken after this event; 0: at the end */
    uint64_t peak;               /* the highest allocated total, the first time */
    uint64_t allocated, time_ns; /* after the latest event taken */
    entry *ring;                 /* the newest entries, by count % max_entries */
    size_t capring;
    uint64_t count; /* entries added */
    segment *segs;  /* by address */
    size_t nsegs, capsegs;
    uint64_t made;      /* count of a segment entry waiting for the next allocation's frames */
    uint32_t made_tid;  /* the thread that made the segment, for that allocation */
    uint64_t made_addr; /* where its pages start */
    span *pending;      /* blocks freed by the program, waiting for their streams: by address */
    size_t npending, cappending;
} device;

typedef struct memviz {
    const fs_export_opts *o;
    fs_symbols *sym;
    device dev[MAX_DEVICES];
    fs_live live; /* site: index + 1 into blocks */
    uint64_t allocs;
    block *blocks;
    size_t nblocks, capblocks;
    uint32_t *spare; /* indexes of blocks no longer live */
    size_t nspare, capspare;
    uint64_t unknown_frees; /* frees of blocks the trace never allocated */
    uint64_t outside;       /* live blocks in no segment, left out */
    uint64_t lost;    /* live blocks whose free the trace lost: under a later one, or released */
    fs_u64map frames; /* stack << 32 | pystack -> its frames list's memo id (uint32_t) */
} memviz;

/* ---- the trace entries ------------------------------------------------------ */

static entry *add_entry(memviz *m, device *d, enum action a, const fs_fmt_event *ev)
{
    size_t max = m->o->max_entries;
    entry *e;
    if (max && d->count >= max) {
        e = &d->ring[d->count % max];
    } else {
        d->ring = fs_grow_at_most(d->ring, &d->capring, (size_t)d->count + 1, sizeof *d->ring, max);
        e = &d->ring[d->count];
    }
    d->count++;
    *e = (entry){.action = (uint8_t)a,
                 .time_ns = ev->time_ns,
                 .addr = ev->addr,
                 .size = ev->size,
                 .stream = ev->stream,
                 .stack = ev->stack,
                 .pystack = ev->pystack,
                 .annot = ev->annot,
                 .name = ev->name};
    return e;
}

/* How many entries the ring holds, and entry i of them, oldest first */
static size_t kept(const memviz *m, const device *d)
{
    size_t max = m->o->max_entries;
    return max && d->count > max ? max : (size_t)d->count;
}

static entry *kept_entry(const memviz *m, device *d, size_t i)
{
    size_t max = m->o->max_entries;
    uint64_t n = d->count - kept(m, d) + i;
    return &d->ring[max ? n % max : n];
}

/* ---- segments by address -------------------------------------------------------- */

/* The segment holding addr, NONE when none does */
static size_t seg_find(const device *d, uint64_t addr)
{
    size_t lo = 0, hi = d->nsegs;
    while (lo < hi) { /* the first segment starting above addr */
        size_t mid = (lo + hi) / 2;
        if (d->segs[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) return NONE;
    const segment *s = &d->segs[lo - 1];
    return addr < s->addr + s->size ? lo - 1 : NONE;
}

static size_t seg_insert(device *d, segment s)
{
    size_t i = 0;
    d->segs = fs_grow(d->segs, &d->capsegs, d->nsegs + 1, sizeof *d->segs);
    while (i < d->nsegs && d->segs[i].addr < s.addr)
        i++;
    memmove(&d->segs[i + 1], &d->segs[i], (d->nsegs - i) * sizeof *d->segs);
    d->segs[i] = s;
    d->nsegs++;
    return i;
}

static void seg_remove(device *d, size_t i)
{
    memmove(&d->segs[i], &d->segs[i + 1], (d->nsegs - i - 1) * sizeof *d->segs);
    d->nsegs--;
}

/* Whether b follows a directly as pages of the same expandable segment,
 * which PyTorch shows as one segment (as memory_viz merges them too) */
static bool joins(const segment *a, const segment *b)
{
    return a->expandable && b->expandable && a->stream == b->stream && a->addr + a->size == b->addr;
}

static void seg_map(device *d, segment s)
{
    size_t i = seg_insert(d, s);
    if (i + 1 < d->nsegs && joins(&d->segs[i], &d->segs[i + 1])) {
        d->segs[i].size += d->segs[i + 1].size;
        seg_remove(d, i + 1);
    }
    if (i > 0 && joins(&d->segs[i - 1], &d->segs[i])) {
        d->segs[i - 1].size += d->segs[i].size;
        seg_remove(d, i);
    }
}

/* Pages [addr, addr + size) of an expandable segment unmapped: the segment
 * shrinks, or is cut in two */
static void seg_unmap(device *d, uint64_t addr, uint64_t size)
{
    size_t i = seg_find(d, addr);
    if (i == NONE) return;
    segment *s = &d->segs[i];
    uint64_t end = s->addr + s->size, cut = addr + size < end ? addr + size : end;
    if (addr == s->addr && cut == end) {
        seg_remove(d, i);
    } else if (addr == s->addr) {
        s->size = end - cut;
        s->addr = cut;
    } else {
        segment rest = *s;
        s->size = addr - s->addr;
        rest.addr = cut;
        rest.size = end - cut;
        if (rest.size) seg_insert(d, rest);
    }
}

/* ---- replaying the events ------------------------------------------------------------ */

/* The device of a memory event or a snapshot file's entry, -1 for any
 * other record */
static int device_of(const fs_fmt_record *r)
{
    bool memory = (r->kind >= FS_REC_ALLOC && r->kind <= FS_REC_SEGMENT_UNMAP) ||
                  r->kind == FS_REC_OOM || r->kind == FS_REC_SNAP_SEGMENT ||
                  r->kind == FS_REC_SNAP_BLOCK;
    return memory && r->ev.device >= 0 && r->ev.device < MAX_DEVICES ? r->ev.device : -1;
}

static int find_peaks(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    memviz *m = ctx;
    int dn = device_of(r);
    (void)t, (void)tid;
    if (dn < 0) return 0;
    device *d = &m->dev[dn];
    d->events++;
    if (r->kind == FS_REC_ALLOC && r->ev.allocated > d->peak) {
        d->peak = r->ev.allocated;
        d->cut = d->events;
    }
    return 0;
}

static uint32_t block_new(memviz *m)
{
    if (m->nspare) return m->spare[--m->nspare];
    m->blocks = fs_grow(m->blocks, &m->capblocks, m->nblocks + 1, sizeof *m->blocks);
    return (uint32_t)m->nblocks++;
}

static void block_release(memviz *m, uint32_t i)
{
    m->spare = fs_grow(m->spare, &m->capspare, m->nspare + 1, sizeof *m->spare);
    m->spare[m->nspare++] = i;
}

/* The first pending block at or above addr */
static size_t pending_at(const device *d, uint64_t addr)
{
    size_t lo = 0, hi = d->npending;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (d->pending[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void pending_add(device *d, uint64_t addr, uint64_t size)
{
    size_t i = pending_at(d, addr);
    d->pending = fs_grow(d->pending, &d->cappending, d->npending + 1, sizeof *d->pending);
    memmove(&d->pending[i + 1], &d->pending[i], (d->npending - i) * sizeof *d->pending);
    d->pending[i] = (span){addr, size};
    d->npending++;
}

static void pending_remove(device *d, uint64_t addr)
{
    size_t i = pending_at(d, addr);
    if (i == d->npending || d->pending[i].addr != addr) return;
    memmove(&d->pending[i], &d->pending[i + 1], (d->npending - i - 1) * sizeof *d->pending);
    d->npending--;
}

/* A free of a known block: its entry, with the block's stream, requested
 * size and frames (the trace records no stack at a free). A free of a
 * block the trace never allocated, which memory_viz could not place, is
 * left out (a free_completed of one is the rest of a pending block handed
 * out in part: complete_pending). */
static void on_free(memviz *m, device *d, int dn, const fs_fmt_event *ev, bool completed)
{
    fs_live_block lb;
    if (!fs_live_take(&m->live, ev->addr, &lb)) {
        if (!completed) m->unknown_frees++;
        return;
    }
    block *b = &m->blocks[lb.site - 1];
    entry *e = add_entry(m, d, completed ? A_FREE_COMPLETED : A_FREE_REQUESTED, ev);
    e->size = b->requested;
    e->stream = b->stream;
    e->stack = b->stack;
    e->pystack = b->pystack;
    if (completed) {
        pending_remove(d, lb.addr);
        block_release(m, lb.site - 1);
    } else {
        b->pending = true; /* still live: back into the table */
        fs_live_put(&m->live, lb.addr, lb.size, lb.site, dn);
        pending_add(d, lb.addr, lb.size);
    }
}

/* Memory [addr, addr + size) is taken again, or given back to the device,
 * where the trace shows no free_completed of the pending blocks it held:
 * their frees complete here, as memory_viz needs to see first. */
static void complete_pending(memviz *m, device *d, int dn, uint64_t addr, uint64_t size,
                             uint64_t time_ns)
{
    size_t pi = pending_at(d, addr);
    if (pi > 0 && d->pending[pi - 1].addr + d->pending[pi - 1].size > addr) pi--;
    while (pi < d->npending && d->pending[pi].addr < addr + size) {
        fs_fmt_event done = {.time_ns = time_ns, .addr = d->pending[pi].addr};
        pending_remove(d, done.addr);
        on_free(m, d, dn, &done, true);
    }
}

/* A segment, or pages of one, given back to the device: nothing lives in
 * it any more. Pending blocks retire with it (complete_pending); a block
 * still allocated there is one whose free the trace lost, dropped. */
static void release(memviz *m, device *d, int dn, uint64_t addr, uint64_t size, uint64_t time_ns)
{
    uint64_t *lost = NULL;
    size_t nlost = 0, cap = 0;
    fs_live_block lb;

    complete_pending(m, d, dn, addr, size, time_ns);
    for (size_t pos = 0; fs_live_next(&m->live, &pos, &lb);) {
        if (lb.device != dn || lb.addr < addr || lb.addr >= addr + size) continue;
        lost = fs_grow(lost, &cap, nlost + 1, sizeof *lost);
        lost[nlost++] = lb.addr; /* taken after the walk: taking moves the table's entries */
    }
    for (size_t i = 0; i < nlost; i++)
        if (fs_live_take(&m->live, lost[i], &lb)) block_release(m, lb.site - 1);
    m->lost += nlost;
    free(lost);
}

static void on_alloc(memviz *m, device *d, int dn, const fs_fmt_event *ev, uint32_t tid)
{
    size_t si = seg_find(d, ev->addr);
    segment *s = si == NONE ? NULL : &d->segs[si];

    /* The allocator hands out the memory of a block whose free is still
     * pending to the stream that freed it (stream order makes that safe),
     * and the trace has no free_completed for it */
    complete_pending(m, d, dn, ev->addr, ev->size, ev->time_ns);
    if (s && (ev->aux & 3) == 1) s->small = true; /* aux: the pool, 1 small */
    /* a segment is made for an allocation, whose frames the trace gives on
     * the allocation only: they are the segment's too, as in PyTorch */
    if (d->made && d->made_tid == tid && s && seg_find(d, d->made_addr) == si) {
        if (!s->stack && !s->pystack) {
            s->stack = ev->stack;
            s->pystack = ev->pystack;
        }
        if (d->count - d->made < kept(m, d)) {
            entry *e = kept_entry(m, d, kept(m, d) - (size_t)(d->count - d->made) - 1);
            e->stack = ev->stack;
            e->pystack = ev->pystack;
        }
    }
    if (d->made_tid == tid) d->made = 0;

    uint32_t bi = block_new(m);
    m->blocks[bi] = (block){m->allocs++, ev->requested, ev->stream, ev->stack, ev->pystack, false};
    fs_live_put(&m->live, ev->addr, ev->size, bi + 1, dn);
    add_entry(m, d, A_ALLOC, ev)->size = ev->requested; /* PyTorch's alloc size: requested */
}

static void apply(memviz *m, device *d, int dn, const fs_fmt_record *r, uint32_t tid)
{
    const fs_fmt_event *ev = &r->ev;
    segment s = {.addr = ev->addr, .size = ev->size, .stream = ev->stream};
    size_t i;

    switch (r->kind) {
    case FS_REC_ALLOC:
        on_alloc(m, d, dn, ev, tid);
        break;
    case FS_REC_FREE_REQUESTED:
    case FS_REC_FREE_COMPLETED:
        on_free(m, d, dn, ev, r->kind == FS_REC_FREE_COMPLETED);
        break;
    case FS_REC_SEGMENT_ALLOC:
    case FS_REC_SEGMENT_MAP:
        s.expandable = r->kind == FS_REC_SEGMENT_MAP;
        if (s.expandable)
            seg_map(d, s);
        else
            seg_insert(d, s);
        add_entry(m, d, s.expandable ? A_SEGMENT_MAP : A_SEGMENT_ALLOC, ev);
        d->made = d->count;
        d->made_tid = tid;
        d->made_addr = ev->addr;
        break;
    case FS_REC_SEGMENT_FREE:
        release(m, d, dn, ev->addr, ev->size, ev->time_ns);
        i = seg_find(d, ev->addr);
        if (i != NONE && d->segs[i].addr == ev->addr) seg_remove(d, i);
        add_entry(m, d, A_SEGMENT_FREE, ev);
        break;
    case FS_REC_SEGMENT_UNMAP:
        release(m, d, dn, ev->addr, ev->size, ev->time_ns);
        seg_unmap(d, ev->addr, ev->size);
        add_entry(m, d, A_SEGMENT_UNMAP, ev);
        break;
    case FS_REC_OOM:
        add_entry(m, d, A_OOM, ev);
        break;
    /* a snapshot file (an OOM's, fsdpshim_snapshot's) holds the state
     * itself: its segments, then their live and pending blocks */
    case FS_REC_SNAP_SEGMENT:
        s.expandable = ev->aux != 0;
        seg_insert(d, s);
        break;
    case FS_REC_SNAP_BLOCK:
        if (ev->aux == FS_BLOCK_LIVE || ev->aux == FS_BLOCK_PENDING) {
            uint32_t bi = block_new(m);
            m->blocks[bi] = (block){m->allocs++, ev->requested, ev->stream,
                                    ev->stack,   ev->pystack,   ev->aux == FS_BLOCK_PENDING};
            fs_live_put(&m->live, ev->addr, ev->size, bi + 1, dn);
        }
        break;
    }
}

static bool past(const memviz *m, const fs_fmt_event *ev)
{
    return m->o->at == FS_AT_TIME && ev->time_ns > m->o->at_ns;
}

static int replay(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    memviz *m = ctx;
    int dn = device_of(r);
    (void)t;

    /* a snapshot of the program's own (fsdpshim_snapshot) names no device */
    if (r->kind == FS_REC_SNAPSHOT && !past(m, &r->ev))
        for (int k = 0; k < MAX_DEVICES; k++)
            if (m->dev[k].used && !m->dev[k].frozen)
                add_entry(m, &m->dev[k], A_SNAPSHOT, &r->ev)->size = m->dev[k].allocated;
    if (dn < 0) return 0;
    device *d = &m->dev[dn];
    if (d->frozen) return 0;
    if (past(m, &r->ev)) {
        d->frozen = true;
        return 0;
    }
    d->used = true;
    d->events++;
    apply(m, d, dn, r, tid);
    d->allocated = r->ev.allocated;
    d->time_ns = r->ev.time_ns;
    if (d->events == d->cut) d->frozen = true;
    return 0;
}

/* ---- frames ------------------------------------------------------------------------ */

static void frame_dict(fs_pickle *p, const char *name, const char *file, unsigned line)
{
    fs_pickle_item(p);
    fs_pickle_dict_begin(p);
    fs_pickle_key_str(p, "name", name);
    fs_pickle_key_str(p, "filename", file);
    fs_pickle_key_int(p, "line", line);
    fs_pickle_dict_end(p);
}

/* Native frame pc as PyTorch's C++ frames: one per source frame (inlined
 * ones expanded), the function, its file and line; without symbols the
 * module+offset as the name, the module as the file, line 0. */
static void native_frames(memviz *m, fs_pickle *p, const fs_reader *t, uint64_t pc)
{
    uint64_t off;
    const fs_reader_module *mod = fs_reader_module_of(t, pc, &off);
    const char *path = mod ? fs_render_str(t, mod->path) : "??";
    const fs_symbol_frame *f;
    size_t n = mod && m->sym
                   ? fs_symbols_resolve(m->sym, path, mod->build_id, mod->build_id_len, off, &f)
                   : 0;
    char name[4200];

    for (size_t i = 0; i < n; i++)
        frame_dict(p, f[i].function ? f[i].function : "??", f[i].file ? f[i].file : path,
                   f[i].file ? f[i].line : 0);
    if (n) return;
    fs_render_frame(t, pc, name, sizeof name);
    frame_dict(p, name, path, 0);
}

/* An allocation's frames, innermost first, Python and native in one list
 * as PyTorch's stacks="all" gives them: the native frames up to the
 * interpreter, then the Python frames it was running, then the
 * interpreter's own native frames outwards. Each distinct list is written
 * once and referenced through the memo afterwards. */
static void write_frames(memviz *m, fs_pickle *p, const fs_reader *t, uint32_t stack,
                         uint32_t pystack)
{
    uint64_t key = (uint64_t)stack << 32 | pystack;
    const uint64_t *pcs;
    const fs_fmt_pyframe *py;
    uint32_t npc = stack ? fs_reader_stack(t, stack, &pcs) : 0;
    uint32_t npy = pystack ? fs_reader_pystack(t, pystack, &py) : 0;
    uint32_t i = 0;

    if (!npc && !npy) {
        fs_pickle_list_begin(p, false);
        fs_pickle_list_end(p);
        return;
    }
    bool added;
    uint32_t *memo = fs_u64map_put(&m->frames, key, &added);
    if (!memo) fs_analysis_oom("export");
    if (!added) {
        fs_pickle_get(p, *memo);
        return;
    }
    *memo = fs_pickle_list_begin(p, true);
    for (uint32_t at = fs_render_python_at(t, pcs, npc); i < at; i++)
        native_frames(m, p, t, pcs[i]);
    for (uint32_t k = 0; k < npy; k++)
        frame_dict(p, fs_render_str(t, py[k].function), fs_render_str(t, py[k].file), py[k].line);
    for (; i < npc; i++)
        native_frames(m, p, t, pcs[i]);
    fs_pickle_list_end(p);
}

/* ---- the snapshot ---------------------------------------------------------------- */

typedef struct live_ref {
    uint64_t addr, size;
    uint32_t block;
} live_ref;

static int by_addr(const void *a, const void *b)
{
    const live_ref *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Device dn's live blocks, by address */
static live_ref *live_of(const memviz *m, int dn, size_t *n)
{
    size_t count = fs_live_count(&m->live);
    live_ref *v = malloc((count ? count : 1) * sizeof *v);
    if (!v) fs_analysis_oom("export");
    *n = 0;
    fs_live_block l;
    for (size_t pos = 0; fs_live_next(&m->live, &pos, &l);)
        if (l.device == dn) v[(*n)++] = (live_ref){l.addr, l.size, l.site - 1};
    qsort(v, *n, sizeof *v, by_addr);
    return v;
}

static void write_block(memviz *m, fs_pickle *p, const fs_reader *t, uint64_t addr, uint64_t size,
                        const block *b)
{
    fs_pickle_item(p);
    fs_pickle_dict_begin(p);
    fs_pickle_key_int(p, "address", (int64_t)addr);
    fs_pickle_key_int(p, "size", (int64_t)size);
    fs_pickle_key_int(p, "requested_size", b ? (int64_t)b->requested : 0);
    fs_pickle_key_str(p, "state",
                      !b           ? "inactive"
                      : b->pending ? "active_pending_free"
                                   : "active_allocated");
    fs_pickle_str(p, "frames");
    write_frames(m, p, t, b ? b->stack : 0, b ? b->pystack : 0);
    fs_pickle_dict_end(p);
}

/* Segment s of device dn with its live blocks lr[0..n), which it holds:
 * the blocks tile it in address order, the gaps between them inactive
 * (free in the cache). */
static void write_segment(memviz *m, fs_pickle *p, const fs_reader *t, int dn, const segment *s,
                          const live_ref *lr, size_t n)
{
    uint64_t allocated = 0, active = 0, requested = 0, at = s->addr;

    for (size_t i = 0; i < n; i++) {
        const block *b = &m->blocks[lr[i].block];
        active += lr[i].size;
        requested += b->requested;
        if (!b->pending) allocated += lr[i].size;
    }
    fs_pickle_item(p);
    fs_pickle_dict_begin(p);
    fs_pickle_key_int(p, "device", dn);
    fs_pickle_key_int(p, "address", (int64_t)s->addr);
    fs_pickle_key_int(p, "total_size", (int64_t)s->size);
    fs_pickle_key_int(p, "allocated_size", (int64_t)allocated);
    fs_pickle_key_int(p, "active_size", (int64_t)active);
    fs_pickle_key_int(p, "requested_size", (int64_t)requested);
    fs_pickle_key_int(p, "stream", (int64_t)s->stream);
    fs_pickle_key_str(p, "segment_type", s->small ? "small" : "large");
    fs_pickle_str(p, "segment_pool_id");
    fs_pickle_int(p, 0);
    fs_pickle_int(p, 0);
    fs_pickle_tuple2(p);
    fs_pickle_str(p, "is_expandable");
    fs_pickle_bool(p, s->expandable);
    fs_pickle_str(p, "frames");
    write_frames(m, p, t, s->stack, s->pystack);
    fs_pickle_str(p, "blocks");
    fs_pickle_list_begin(p, false);
    for (size_t i = 0; i < n; i++) {
        if (lr[i].addr > at) write_block(m, p, t, at, lr[i].addr - at, NULL);
        write_block(m, p, t, lr[i].addr, lr[i].size, &m->blocks[lr[i].block]);
        at = lr[i].addr + lr[i].size;
    }
    if (at < s->addr + s->size) write_block(m, p, t, at, s->addr + s->size - at, NULL);
    fs_pickle_list_end(p);
    fs_pickle_dict_end(p);
}

/* Device dn's segments. A live block that no segment holds (a trace that
 * lost the segment's event) is counted in m->outside and left out; of two
 * that overlap (a free the trace lost), the older is left out. */
static void write_segments(memviz *m, fs_pickle *p, const fs_reader *t, int dn)
{
    const device *d = &m->dev[dn];
    size_t n, j = 0;
    live_ref *lr = live_of(m, dn, &n), *in = malloc((n ? n : 1) * sizeof *in);

    if (!in) fs_analysis_oom("export");
    for (size_t i = 0; i < d->nsegs; i++) {
        const segment *s = &d->segs[i];
        size_t nin = 0;
        for (; j < n && lr[j].addr < s->addr; j++)
            m->outside++;
        for (; j < n && lr[j].addr + lr[j].size <= s->addr + s->size; j++) {
            live_ref *last = nin ? &in[nin - 1] : NULL;
            if (!last || last->addr + last->size <= lr[j].addr) {
                in[nin++] = lr[j];
                continue;
            }
            m->lost++;
            if (m->blocks[lr[j].block].seq > m->blocks[last->block].seq) *last = lr[j];
        }
        write_segment(m, p, t, dn, s, in, nin);
    }
    m->outside += n - j;
    free(in);
    free(lr);
}

static void write_entry(memviz *m, fs_pickle *p, const fs_reader *t, const entry *e)
{
    char meta[4096] = "";

    if (e->action == A_SNAPSHOT && e->name)
        snprintf(meta, sizeof meta, "%s", fs_render_str(t, e->name));
    else
        fs_render_annot(t, e->annot, meta, sizeof meta);
    fs_pickle_item(p);
    fs_pickle_dict_begin(p);
    fs_pickle_key_str(p, "action", action_names[e->action]);
    /* PyTorch's oom entry has the device's free bytes instead of an
     * address; the trace does not record them */
    if (e->action == A_OOM)
        fs_pickle_key_int(p, "device_free", 0);
    else
        fs_pickle_key_int(p, "addr", (int64_t)e->addr);
    fs_pickle_key_int(p, "size", (int64_t)e->size);
    fs_pickle_key_int(p, "stream", (int64_t)e->stream);
    fs_pickle_key_int(p, "time_us",
                      (int64_t)((fs_reader_header(t)->clock_real_ns + e->time_ns) / 1000));
    fs_pickle_key_str(p, "compile_context", "N/A");
    fs_pickle_key_str(p, "user_metadata", meta);
    fs_pickle_str(p, "pool_id");
    fs_pickle_int(p, 0);
    fs_pickle_int(p, 0);
    fs_pickle_tuple2(p);
    fs_pickle_str(p, "frames");
    write_frames(m, p, t, e->stack, e->pystack);
    fs_pickle_dict_end(p);
}

static void empty_list(fs_pickle *p, const char *key)
{
    fs_pickle_str(p, key);
    fs_pickle_list_begin(p, false);
    fs_pickle_list_end(p);
}

/* The snapshot dict, with the keys torch.cuda.memory._snapshot() has */
static bool write_snapshot(memviz *m, const fs_reader *t, FILE *f)
{
    fs_pickle *p = fs_pickle_open(f);
    int ndev = 1;

    for (int dn = 0; dn < MAX_DEVICES; dn++)
        if (m->dev[dn].used) ndev = dn + 1;
    fs_pickle_dict_begin(p);
    fs_pickle_str(p, "segments");
    fs_pickle_list_begin(p, false);
    for (int dn = 0; dn < ndev; dn++)
        write_segments(m, p, t, dn);
    fs_pickle_list_end(p);
    fs_pickle_str(p, "device_traces");
    fs_pickle_list_begin(p, false);
    for (int dn = 0; dn < ndev; dn++) {
        device *d = &m->dev[dn];
        fs_pickle_item(p);
        fs_pickle_list_begin(p, false);
        for (size_t i = 0; i < kept(m, d); i++)
            write_entry(m, p, t, kept_entry(m, d, i));
        fs_pickle_list_end(p);
    }
    fs_pickle_list_end(p);
    /* the allocator's configuration is not in the trace */
    fs_pickle_str(p, "allocator_settings");
    fs_pickle_dict_begin(p);
    fs_pickle_dict_end(p);
    empty_list(p, "external_annotations");
    empty_list(p, "host_segments");
    empty_list(p, "host_traces");
    fs_pickle_dict_end(p);
    return fs_pickle_close(p);
}

/* ---- one trace, one pickle ---------------------------------------------------------- */

/* One line per device on stderr: the moment taken and what the pickle
 * holds of it. Allocated bytes are the blocks' (what report, top and
 * PyTorch's memory_allocated count); memory_viz's stats sum the blocks'
 * requested_size instead and count the rest as "internal" free, so both
 * are given, with the difference, the allocator's rounding. */
static void summary(const memviz *m, const char *path, const fs_reader *t, const char *out)
{
    char name[64], alloc[32], req[32], round[32], resv[32], when[64];

    fs_render_trace_name(t, name, sizeof name);
    for (int dn = 0; dn < MAX_DEVICES; dn++) {
        const device *d = &m->dev[dn];
        uint64_t allocated = 0, requested = 0, reserved = 0;
        if (!d->used) continue;
        for (size_t i = 0; i < d->nsegs; i++)
            reserved += d->segs[i].size;
        fs_live_block l;
        for (size_t pos = 0; fs_live_next(&m->live, &pos, &l);) {
            if (l.device != dn || m->blocks[l.site - 1].pending) continue;
            allocated += l.size;
            requested += m->blocks[l.site - 1].requested;
        }
        fs_human_bytes(allocated, alloc, sizeof alloc);
        fs_human_bytes(requested, req, sizeof req);
        fs_human_bytes(allocated > requested ? allocated - requested : 0, round, sizeof round);
        fs_human_bytes(reserved, resv, sizeof resv);
        snprintf(when, sizeof when, "%s", m->o->at == FS_AT_END ? "at the end" : "at its peak");
        if (m->o->at == FS_AT_TIME)
            snprintf(when, sizeof when, "at %.6f s", (double)m->o->at_ns / 1e9);
        fs_progress_printf(
            "fsdpshim export: %s: %s: device %d %s (%.6f s in): %s allocated in blocks (%s "
            "requested, memory_viz's total_allocated, and %s of rounding), %s reserved in %zu "
            "segment%s; %zu trace entr%s of %" PRIu64 "\n",
            path, name, dn, when, (double)d->time_ns / 1e9, alloc, req, round, resv, d->nsegs,
            fs_plural(d->nsegs), kept(m, d), kept(m, d) == 1 ? "y" : "ies", d->count);
    }
    if (m->unknown_frees)
        fs_progress_printf("fsdpshim export: %s: %" PRIu64 " free%s of blocks the trace never "
                           "allocated, left out\n",
                           path, m->unknown_frees, fs_plural(m->unknown_frees));
    if (m->outside)
        fs_progress_printf("fsdpshim export: %s: %" PRIu64
                           " live block%s in no segment, left out\n",
                           path, m->outside, fs_plural(m->outside));
    if (m->lost)
        fs_progress_printf("fsdpshim export: %s: %" PRIu64
                           " block%s whose free the trace lost (a later "
                           "block or a released segment took their place), left out\n",
                           path, m->lost, fs_plural(m->lost));
    fs_progress_printf("fsdpshim export: %s: written to %s\n", path, out[0] ? out : "stdout");
}

static void memviz_free(memviz *m)
{
    for (int dn = 0; dn < MAX_DEVICES; dn++) {
        free(m->dev[dn].ring);
        free(m->dev[dn].segs);
        free(m->dev[dn].pending);
    }
    fs_live_free(&m->live);
    free(m->blocks);
    free(m->spare);
    fs_u64map_free(&m->frames);
}

/* Reads trace `path` and writes its pickle, named in out, unless an
 * earlier trace's pickle (done[0..ndone)) has that name. */
static int export_one(const fs_export_opts *o, fs_symbols *sym, const char *path,
                      char (*done)[4096], int ndone)
{
    memviz m = {.o = o, .sym = sym};
    char *out = done[ndone];
    fs_u64map_init(&m.frames, sizeof(uint32_t));
    fs_reader *t;
    int status = 0;

    if (o->at == FS_AT_PEAK) {
        if (!(t = fs_export_open(path))) return FS_EXIT_BAD_INPUT;
        fs_reader_read_ordered(t, find_peaks, fs_export_warn, &m);
        fs_reader_close(t);
        for (int dn = 0; dn < MAX_DEVICES; dn++)
            m.dev[dn].events = 0;
    }
    if (!(t = fs_export_open(path))) return FS_EXIT_BAD_INPUT;
    fs_reader_read_ordered(t, replay, o->at == FS_AT_PEAK ? NULL : fs_export_warn, &m);
    fs_export_path(o, path, t, "pickle", out, sizeof done[ndone]);
    for (int k = 0; k < ndone; k++)
        if (!strcmp(done[k], out)) {
            fs_progress_printf(
                "fsdpshim export: %s: its pickle would overwrite %s, written for another "
                "trace: name them with %%r, %%p or %%n, or give a directory\n",
                path, out);
            status = FS_EXIT_BAD_INPUT;
            out[0] = '\0';
        }
    FILE *f = status ? NULL : fs_export_create(out);
    if (f) {
        bool wrote = write_snapshot(&m, t, f);
        if (!fs_export_finish(f, out) || !wrote) status = FS_EXIT_BAD_INPUT;
        if (!status) summary(&m, path, t, out);
    } else {
        status = FS_EXIT_BAD_INPUT;
    }
    fs_reader_close(t);
    memviz_free(&m);
    return status;
}

int fs_export_memviz(const fs_export_opts *o, int ntraces, char **traces)
{
    fs_symbols *sym = NULL;
    char(*done)[4096] = calloc((size_t)ntraces, sizeof *done);
    int status = 0;

    if (!done) fs_analysis_oom("export");
    if (o->symbols && !(sym = fs_symbols_create(fs_export_warn, NULL))) fs_analysis_oom("export");
    for (int i = 0; i < ntraces; i++)
        if (export_one(o, sym, traces[i], done, i)) status = FS_EXIT_BAD_INPUT;
    fs_symbols_destroy(sym);
    free(done);
    return status;
}
