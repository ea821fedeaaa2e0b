/* segment.c - device memory as segments tiled by blocks: block split and
 * coalescing, the pools' free bins, growing (a new segment, or pages mapped
 * into an expandable one wherever a run of free and unmapped blocks can
 * hold the request) and releasing (whole free segments, or the whole pages
 * inside the free blocks of an expandable one), and the sorted index of
 * every segment that answers "whose pointer is this?". */
#include "internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define FS_SPARE_BLOCKS               256
#define FS_EXPANDABLE_DEFAULT_RESERVE ((size_t)256 << 30)

/* ---- block metadata ------------------------------------------------------ */

/* Block metadata starts on a cache line, so that its first line holds
 * everything a best-fit search reads ("internal.h"). */
#define FS_BLOCK_BYTES ((sizeof(fs_block) + 63) / 64 * 64)

static fs_block *block_alloc(void)
{
    fs_block *b = aligned_alloc(64, FS_BLOCK_BYTES);
    if (b) memset(b, 0, sizeof *b);
    return b;
}

static fs_block *block_new(fs_stream_cache *p)
{
    fs_block *b = p->spare;
    if (!b) return block_alloc();
    p->spare = b->lnext;
    p->nspare--;
    /* field by field: zeroing the whole block compiles to a string
     * instruction that costs more than the rest of a split. Spare blocks
     * were free ones, whose pending-free fields (the third cache line) are
     * already clear: retirement and hand-out clear them. */
    assert(!b->fence && !b->uses_fence && !b->ready_stream && !b->has_ready && !b->dev_seq);
    b->prev = b->next = NULL;
    b->left = b->right = NULL;
    b->state = FS_BLOCK_FREE;
    b->requested = 0;
    b->stream = 0;
    b->map_next = b->lnext = b->lprev = NULL;
    b->free_seq = 0;
    b->gc_age = 0;
    b->nuses = b->capuses = 0;
    b->uses = NULL; /* fs_block_free gave the array back */
    return b;
}

void fs_block_free(fs_stream_cache *p, fs_block *b)
{
    if (b->uses) {
        free(b->uses);
        b->uses = NULL;
    }
    if (p && p->nspare < FS_SPARE_BLOCKS) {
        b->lnext = p->spare;
        p->spare = b;
        p->nspare++;
        return;
    }
    free(b);
}

/* Cuts b to `size` bytes; the rest goes to r, fresh metadata, linked in
 * right after b. */
static void split_into(fs_block *b, size_t size, fs_block *r)
{
    r->addr = b->addr + size;
    r->size = b->size - size;
    r->seg = b->seg;
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
}

/* Cuts b to `size` bytes; the rest becomes a new, not yet inserted block
 * right after it. NULL (b unchanged) if metadata cannot be allocated. */
fs_block *fs_block_split(fs_stream_cache *p, fs_block *b, size_t size)
{
    fs_block *r = block_new(p);
    if (!r) return NULL;
    split_into(b, size, r);
    return r;
}

/* ---- free bins ------------------------------------------------------------ */

void fs_free_take(fs_stream_cache *p, fs_block *b, fs_delta *dl)
{
    fs_bins_remove(&p->free[fs_seg_set(b->seg)], b);
    p->free_bytes[fs_seg_set(b->seg)] -= b->size;
    if (fs_block_is_split(b)) {
        dl->inactive_split--;
        dl->inactive_split_bytes -= (int64_t)b->size;
    }
}

/* Absorbs `n` (a free neighbour of b, already out of its bin, or an
 * unmapped neighbour of an unmapped b) into b. Always inlined: with two
 * callers the compiler would call it from fs_free_insert, on every free's
 * path. */
__attribute__((always_inline)) static inline void absorb(fs_stream_cache *p, fs_block *b,
                                                         fs_block *n)
{
    if (n == b->prev) {
        b->addr = n->addr;
        b->prev = n->prev;
        if (n->prev)
            n->prev->next = b;
        else
            b->seg->head = b;
    } else {
        b->next = n->next;
        if (n->next) n->next->prev = b;
    }
    b->size += n->size;
    if (n->free_seq > b->free_seq) b->free_seq = n->free_seq;
    fs_block_free(p, n);
}

/* Puts free block b, already merged with its neighbours, into its bin. */
static void bin_in(fs_stream_cache *p, fs_block *b, fs_delta *dl)
{
    fs_bins_insert(&p->free[fs_seg_set(b->seg)], b);
    p->free_bytes[fs_seg_set(b->seg)] += b->size;
    if (fs_block_is_split(b)) {
        dl->inactive_split++;
        dl->inactive_split_bytes += (int64_t)b->size;
    }
}

void fs_free_insert(fs_stream_cache *p, fs_block *b, fs_delta *dl)
{
    b->state = FS_BLOCK_FREE;
    b->stream = p->stream;
    b->nuses = 0; /* requested stays: the last request, which snapshots show */
    b->gc_age = atomic_load_explicit(&p->dev->gc_clock, memory_order_relaxed);
    if (b->prev && b->prev->state == FS_BLOCK_FREE) {
        fs_block *n = b->prev;
        fs_free_take(p, n, dl);
        absorb(p, b, n);
    }
    if (b->next && b->next->state == FS_BLOCK_FREE) {
        fs_block *n = b->next;
        fs_free_take(p, n, dl);
        absorb(p, b, n);
    }
    bin_in(p, b, dl);
}

void fs_free_insert_rest(fs_stream_cache *p, fs_block *r, fs_delta *dl)
{
    r->state = FS_BLOCK_FREE;
    r->stream = p->stream;
    r->gc_age = atomic_load_explicit(&p->dev->gc_clock, memory_order_relaxed);
    bin_in(p, r, dl);
}

/* ---- the segment index ----------------------------------------------------- */

/* Index of the first segment whose base is above addr. */
static size_t upper(fs_allocator *a, uintptr_t addr)
{
    size_t lo = 0, hi = a->nseg;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->segidx[mid]->base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

fs_segment *fs_segidx_find(fs_allocator *a, uintptr_t addr)
{
    size_t i = upper(a, addr);
    if (i == 0) return NULL;
    fs_segment *s = a->segidx[i - 1];
    return addr - s->base < s->extent ? s : NULL;
}

static bool segidx_insert(fs_allocator *a, fs_segment *s)
{
    pthread_rwlock_wrlock(&a->segidx_lock);
    if (a->nseg == a->capseg) {
        size_t cap = a->capseg ? a->capseg * 2 : 64;
        fs_segment **n = realloc(a->segidx, cap * sizeof *n);
        if (!n) {
            pthread_rwlock_unlock(&a->segidx_lock);
            return false;
        }
        a->segidx = n;
        a->capseg = cap;
    }
    size_t i = upper(a, s->base);
    memmove(&a->segidx[i + 1], &a->segidx[i], (a->nseg - i) * sizeof *a->segidx);
    a->segidx[i] = s;
    a->nseg++;
    pthread_rwlock_unlock(&a->segidx_lock);
    return true;
}

void fs_segidx_remove(fs_allocator *a, fs_segment *s)
{
    pthread_rwlock_wrlock(&a->segidx_lock);
    size_t i = upper(a, s->base);
    if (i > 0 && a->segidx[i - 1] == s) {
        memmove(&a->segidx[i - 1], &a->segidx[i], (a->nseg - i) * sizeof *a->segidx);
        a->nseg--;
    }
    pthread_rwlock_unlock(&a->segidx_lock);
}

/* ---- pool segment lists ------------------------------------------------------ */

static void list_add(fs_stream_cache *p, fs_segment *s)
{
    s->prev = NULL;
    s->next = p->segs;
    if (p->segs) p->segs->prev = s;
    p->segs = s;
}

static void list_del(fs_stream_cache *p, fs_segment *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        p->segs = s->next;
    if (s->next) s->next->prev = s->prev;
    s->next = s->prev = NULL;
}

void fs_segment_unlink(fs_stream_cache *p, fs_segment *s, fs_delta *dl)
{
    fs_block *b = s->head;
    fs_free_take(p, b, dl);
    fs_block_free(p, b);
    s->head = NULL;
    list_del(p, s);
    s->detached = true;
    dl->segment--;
    dl->oversize_segments -= fs_oversize(p, s->size);
    dl->reserved_bytes -= (int64_t)s->size;
}

/* ---- changing hands ------------------------------------------------------------ */

bool fs_segment_adopt(fs_allocator *a, fs_stream_cache *from, fs_stream_cache *to, fs_segment *s)
{
    bool ok = false;
    fs_delta dl = {.kind = s->kind};
    /* written, so that nobody who found the segment through the index is
     * still about to lock its old pool */
    pthread_rwlock_wrlock(&a->segidx_lock);
    fs_cache_lock(from);
    fs_block *b = s->head;
    if (s->pool == from && !s->detached && !s->pinned && !s->expandable && b &&
        b->state == FS_BLOCK_FREE && !b->next && b->free_seq <= from->so_done) {
        fs_free_take(from, b, &dl);
        list_del(from, s);
        ok = true;
    }
    fs_cache_unlock(from);
    if (ok) {
        fs_cache_lock(to);
        s->pool = to;
        list_add(to, s);
        b->free_seq = 0;
        fs_free_insert(to, b, &dl);
        fs_cache_unlock(to);
    }
    pthread_rwlock_unlock(&a->segidx_lock);
    return ok;
}

/* ---- growing --------------------------------------------------------------- */

/* What the device's cap (fs_alloc_set_limit) leaves to grow by: SIZE_MAX
 * without one. */
static size_t room_under_limit(fs_dev *d)
{
    size_t limit = atomic_load_explicit(&d->limit, memory_order_relaxed);
    if (!limit) return SIZE_MAX;
    size_t reserved = fs_stats_reserved(d);
    return reserved < limit ? limit - reserved : 0;
}

static fs_status dev_status(fs_dev_status st, bool *oom)
{
    if (st == FS_DEV_OK) return FS_OK;
    if (st == FS_DEV_OUT_OF_MEMORY) {
        *oom = true;
        return FS_ERR_OOM;
    }
    return FS_ERR_DEVICE;
}

static size_t round_to(size_t v, size_t g)
{
    return (v + g - 1) / g * g;
}

/* ---- expandable segments: pages ----------------------------------------------
 *
 * A page is mapped by a driver call of its own: the driver unmaps only
 * whole mappings, so that is what lets any page go back alone. The
 * segment's size and the reserved statistic change only by the pages the
 * driver really mapped or unmapped, and each of those calls counts as a
 * device allocation or free. */

static size_t round_down(size_t v, size_t g)
{
    return v / g * g;
}

/* Maps [addr, addr + len), page by page; returns the bytes mapped from
 * addr on, fewer than len when a call failed (its status in *st). */
static size_t map_pages(fs_allocator *a, fs_dev *d, const fs_segment *s, uintptr_t addr, size_t len,
                        fs_dev_status *st)
{
    const fs_device_ops *o = a->ops;
    size_t done = 0;
    *st = FS_DEV_OK;
    while (done < len &&
           (*st = o->vm_map(o->ctx, d->id, (void *)(addr + done), s->page)) == FS_DEV_OK)
        done += s->page;
    if (done) fs_stats_count(d, &d->st.num_device_alloc, (int64_t)(done / s->page));
    return done;
}

/* The same for unmapping: the pages from addr on that are gone. */
static size_t unmap_pages(fs_allocator *a, fs_dev *d, const fs_segment *s, uintptr_t addr,
                          size_t len)
{
    const fs_device_ops *o = a->ops;
    size_t done = 0;
    while (done < len && o->vm_unmap(o->ctx, d->id, (void *)(addr + done), s->page) == FS_DEV_OK)
        done += s->page;
    if (done) fs_stats_count(d, &d->st.num_device_free, (int64_t)(done / s->page));
    return done;
}

/* The pool's expandable segment of free set `set`, reserved on first use
 * as one unmapped block over the whole range; NULL with the reason in *st
 * (FS_ERR_NOT_OWNED: no address space, use plain segments). */
static fs_segment *expandable_of(fs_allocator *a, fs_stream_cache *p, int set, fs_status *st)
{
    fs_dev *d = p->dev;
    const fs_device_ops *o = a->ops;
    if (p->expandable[set]) return p->expandable[set];
    size_t page = o->vm_granularity(o->ctx, d->id);
    if (page == 0 || page % FS_MIN_BLOCK) {
        *st = FS_ERR_NOT_OWNED;
        return NULL;
    }
    size_t cap = fs_dev_capacity(d);
    size_t reserve = round_to(cap ? cap + cap / 8 : FS_EXPANDABLE_DEFAULT_RESERVE, page);
    void *base;
    if (o->vm_reserve(o->ctx, d->id, reserve, &base) != FS_DEV_OK) {
        *st = FS_ERR_NOT_OWNED;
        return NULL;
    }
    fs_segment *s = fs_zalloc_lines(sizeof *s); /* its head moves with coalescing */
    fs_block *b = block_alloc();
    if (s) {
        s->base = (uintptr_t)base;
        s->reserve = reserve;
        s->extent = reserve;
        s->page = page;
        s->expandable = true;
        s->kind = fs_set_kind(set);
        s->ordered = set >= FS_KINDS;
        s->pool = p;
        s->head = b;
    }
    if (b) {
        b->addr = (uintptr_t)base;
        b->size = reserve;
        b->seg = s;
        b->state = FS_BLOCK_UNMAPPED;
    }
    if (!s || !b || !segidx_insert(a, s)) {
        free(s);
        free(b);
        o->vm_release(o->ctx, d->id, base, reserve); /* nothing mapped: nothing else to undo */
        *st = FS_ERR_DEVICE;
        return NULL;
    }
    fs_cache_lock(p);
    p->expandable[set] = s;
    list_add(p, s);
    fs_cache_unlock(p);
    return s;
}

static bool unused_block(const fs_block *b)
{
    return b && (b->state == FS_BLOCK_FREE || b->state == FS_BLOCK_UNMAPPED);
}

/* The first block of the smallest run of free and unmapped blocks (they
 * alternate: neither kind is ever next to its own) that holds `rounded`
 * from its start and has pages to map within that length; NULL if there
 * is none. p->lock held. */
static fs_block *best_run(const fs_segment *s, size_t rounded)
{
    fs_block *best = NULL, *first = NULL;
    size_t best_total = SIZE_MAX, total = 0;
    for (fs_block *b = s->head; b; b = b->next) {
        if (!unused_block(b)) {
            first = NULL;
            continue;
        }
        if (!first) {
            first = b;
            total = 0;
        }
        total += b->size;
        if (!unused_block(b->next) && total >= rounded && total < best_total &&
            (first->state == FS_BLOCK_UNMAPPED || first->size < rounded)) {
            best = first;
            best_total = total;
        }
    }
    return best;
}

/* Maps the pages of unmapped block u below `end` and frees them into the
 * pool, merged with the free blocks around them; *next: the unmapped block
 * that follows below `end`, if any. Caller holds dev->lock. */
static fs_status map_unmapped(fs_allocator *a, fs_stream_cache *p, fs_block *u, uintptr_t end,
                              fs_block **next, bool *oom)
{
    fs_dev *d = p->dev;
    fs_segment *s = u->seg;
    uintptr_t addr = u->addr;
    size_t want = (end < u->addr + u->size ? end : u->addr + u->size) - u->addr;
    *next = NULL;
    fs_cache_lock(p);
    fs_block *rest = block_new(p); /* for the pages that stay unmapped */
    fs_cache_unlock(p);
    if (!rest) return FS_ERR_DEVICE;
    fs_dev_status ds;
    size_t done = map_pages(a, d, s, addr, want, &ds);
    fs_cache_lock(p);
    if (done) {
        if (done < u->size) {
            split_into(u, done, rest);
            rest->state = FS_BLOCK_UNMAPPED;
            rest = NULL;
        }
        fs_delta dl = {.kind = s->kind, .segment = s->size == 0, .reserved_bytes = (int64_t)done};
        s->size += done;
        fs_free_insert(p, u, &dl);
        fs_stats_apply(p, &dl);
        if (ds == FS_DEV_OK && u->next && u->next->state == FS_BLOCK_UNMAPPED &&
            u->next->addr < end)
            *next = u->next;
    }
    if (rest) fs_block_free(p, rest);
    fs_cache_unlock(p);
    if (done) fs_observe(a, FS_EV_SEGMENT_MAP, d->id, p->stream, addr, done, 0, false);
    return dev_status(ds, oom);
}

/* Maps pages of the pool's expandable segment of free set `set` so that a free
 * block can hold `rounded`: in the smallest run of free and unmapped
 * blocks that can, from its start, just the pages the request needs.
 * FS_ERR_NOT_OWNED: no run can, grow a plain segment instead. Pages mapped
 * before a failure stay mapped (and counted) as free memory. */
static fs_status grow_expandable(fs_allocator *a, fs_stream_cache *p, int set, size_t rounded,
                                 bool *oom)
{
    fs_status st = FS_OK;
    fs_segment *s = expandable_of(a, p, set, &st);
    if (!s) return st;
    fs_cache_lock(p);
    fs_block *first = best_run(s, rounded), *u = NULL;
    uintptr_t end = 0;
    if (first) {
        end = s->base + round_to(first->addr - s->base + rounded, s->page);
        u = first->state == FS_BLOCK_UNMAPPED ? first : first->next;
    }
    size_t unmapped = 0; /* what mapping the run up to `end` adds */
    for (fs_block *b = u; b && b->addr < end; b = b->next)
        if (b->state == FS_BLOCK_UNMAPPED)
            unmapped += (end < b->addr + b->size ? end : b->addr + b->size) - b->addr;
    fs_cache_unlock(p);
    if (!first) return FS_ERR_NOT_OWNED;
    if (unmapped > room_under_limit(p->dev)) {
        *oom = true;
        return FS_ERR_OOM;
    }
    while (u && st == FS_OK)
        st = map_unmapped(a, p, u, end, &u, oom);
    return st;
}

/* ---- growing: pages of the expandable segment, else a plain segment ---- */

static fs_seg_memory seg_memory(const fs_segment *s)
{
    return s->ordered ? FS_SEG_ORDERED : FS_SEG_PLAIN;
}

fs_status fs_segment_grow(fs_allocator *a, fs_stream_cache *p, int set, size_t rounded, bool *oom)
{
    fs_dev *d = p->dev;
    const fs_device_ops *o = a->ops;
    int kind = fs_set_kind(set);
    fs_seg_memory mem = set >= FS_KINDS ? FS_SEG_ORDERED : FS_SEG_PLAIN;
    const fs_private_conf *src = p->pconf.segment_alloc ? &p->pconf : NULL;
    if (src && mem != FS_SEG_PLAIN) return FS_ERR_DEVICE; /* a source gives plain memory only */
    if (!src && fs_cfg(a)->expandable_segments && o->vm_map && o->vm_unmap && o->vm_reserve &&
        o->vm_release && o->vm_granularity) {
        fs_status st = grow_expandable(a, p, set, rounded, oom);
        if (st != FS_ERR_NOT_OWNED) return st;
    }
    /* A private pool shares large segments from its first request, as
     * PyTorch's pools do: what a MemPool or a graph's pool holds is
     * registered with NCCL or captured, where fewer segments cost less,
     * and PyTorch's own tests of no_split count on its segment sizes. */
    size_t size = fs_segment_size(fs_cfg(a), rounded, p->priv ? SIZE_MAX : fs_stats_reserved(d));
    size_t least = fs_segment_least(rounded);
    if (size == 0) {
        *oom = true;
        return FS_ERR_OOM;
    }
    void *ptr = NULL;
    fs_status st;
    size_t room = room_under_limit(d);
    /* A device that cannot give the policy's segment may still hold the
     * request: halve down to the least segment that does, so that no
     * allocation fails that the device could serve (SPEC section 4). A
     * 4 MiB request on a nearly full device got cudaErrorMemoryAllocation
     * for want of 20 MiB while 12 MiB were free. A segment past the cap
     * is refused as the device would refuse it. */
    for (;;) {
        if (size > room) {
            *oom = true;
            st = FS_ERR_OOM;
        } else {
            st = dev_status(src ? src->segment_alloc(src->segment_ctx, d->id, size, &ptr)
                                : o->segment_alloc(o->ctx, d->id, mem, size, &ptr),
                            oom);
        }
        if (st != FS_ERR_OOM || size <= least) break;
        size_t half = round_to(size / 2, FS_ROUND_LARGE);
        size = half > least ? half : least;
    }
    if (st != FS_OK) return st;
    fs_segment *s = fs_zalloc_lines(sizeof *s); /* its head moves with coalescing */
    fs_block *b = block_alloc();
    if (s) {
        s->base = (uintptr_t)ptr;
        s->size = size;
        s->extent = size;
        s->kind = kind;
        s->ordered = mem == FS_SEG_ORDERED;
        s->pool = p;
    }
    if (!s || !b || !segidx_insert(a, s)) {
        free(s);
        free(b);
        /* nothing else to undo if this fails too */
        if (src)
            src->segment_free(src->segment_ctx, d->id, ptr, size);
        else
            o->segment_free(o->ctx, d->id, mem, ptr);
        return FS_ERR_DEVICE;
    }
    b->addr = s->base;
    b->size = size;
    b->seg = s;
    s->head = b;
    fs_stats_count(d, &d->st.num_device_alloc, 1);
    fs_cache_lock(p);
    list_add(p, s);
    fs_delta dl = {.kind = kind,
                   .segment = 1,
                   .oversize_segments = fs_oversize(p, size),
                   .reserved_bytes = (int64_t)size};
    fs_free_insert(p, b, &dl);
    fs_stats_apply(p, &dl);
    fs_cache_unlock(p);
    fs_observe(a, FS_EV_SEGMENT_ALLOC, d->id, p->stream, s->base, size, 0, false);
    return FS_OK;
}

/* ---- releasing -------------------------------------------------------------- */

/* A plain segment to free, or a free block of an expandable one (found
 * again by an address inside it) whose whole pages can be unmapped. */
typedef struct candidate {
    fs_stream_cache *pool;
    fs_segment *seg;
    uintptr_t addr;
    size_t bytes;
    uint32_t age;
} candidate;

/* Pages on their way back to the device: an unmapped block cut out of a
 * free one, still mapped until the driver says otherwise. */
typedef struct unmapping {
    fs_stream_cache *pool;
    fs_block *pages;
    fs_block *spare; /* metadata for what a failed unmap leaves mapped */
} unmapping;

static int by_age(const void *x, const void *y)
{
    const candidate *a = x, *b = y;
    return a->age < b->age ? 1 : a->age > b->age ? -1 : 0;
}

static int by_size(const void *x, const void *y)
{
    const candidate *a = x, *b = y;
    return a->bytes < b->bytes ? 1 : a->bytes > b->bytes ? -1 : 0;
}

/* The whole pages inside free block b of an expandable segment: [*lo, *hi). */
static size_t whole_pages(const fs_block *b, uintptr_t *lo, uintptr_t *hi)
{
    const fs_segment *s = b->seg;
    *lo = s->base + round_to(b->addr - s->base, s->page);
    *hi = s->base + round_down(b->addr + b->size - s->base, s->page);
    return *hi > *lo ? *hi - *lo : 0;
}

static bool add_candidate(candidate **c, size_t *n, size_t *cap, candidate v)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 32;
        candidate *m = realloc(*c, nc * sizeof *m);
        if (!m) return false;
        *c = m;
        *cap = nc;
    }
    (*c)[(*n)++] = v;
    return true;
}

static void collect(fs_stream_cache *p, bool unmap, candidate **c, size_t *n, size_t *cap)
{
    uint32_t now = atomic_load_explicit(&p->dev->gc_clock, memory_order_relaxed);
    fs_cache_lock(p);
    for (fs_segment *s = p->segs; s; s = s->next) {
        if (s->pinned) continue;
        if (s->expandable) {
            for (fs_block *b = unmap ? s->head : NULL; b; b = b->next) {
                uintptr_t lo, hi;
                size_t bytes = b->state == FS_BLOCK_FREE ? whole_pages(b, &lo, &hi) : 0;
                if (bytes &&
                    !add_candidate(c, n, cap, (candidate){p, s, lo, bytes, now - b->gc_age}))
                    goto out;
            }
        } else if (s->head->state == FS_BLOCK_FREE && !s->head->next) {
            if (!add_candidate(c, n, cap,
                               (candidate){p, s, s->base, s->size, now - s->head->gc_age}))
                goto out;
        }
    }
out:
    fs_cache_unlock(p);
}

/* The plain segments of c to release for at least `goal` bytes with as
 * little beyond it as can be: the smallest that holds what is still
 * needed, else the largest and on; moved to the front, their number
 * returned. Every release is a device free (a synchronisation on a GPU)
 * and the memory is grown again if it is needed again, so no more goes
 * than the goal asks. */
static size_t fitting(candidate *c, size_t n, size_t goal)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!c[i].seg->expandable) c[m++] = c[i];
    n = m;
    if (n > 1) qsort(c, n, sizeof *c, by_size); /* largest first */
    size_t chosen = 0, bytes = 0;
    while (chosen < n && bytes < goal) {
        size_t pick = chosen; /* the largest left, unless a smaller one does */
        for (size_t i = chosen; i < n && c[i].bytes >= goal - bytes; i++)
            pick = i;
        candidate t = c[chosen];
        c[chosen] = c[pick];
        c[pick] = t;
        bytes += c[chosen++].bytes;
    }
    return chosen;
}

/* Gives a free plain segment back to the device; returns the bytes released. */
static size_t release_segment(fs_allocator *a, fs_dev *d, candidate *c)
{
    const fs_device_ops *o = a->ops;
    fs_stream_cache *p = c->pool;
    fs_segment *s = c->seg;
    fs_delta dl = {.kind = s->kind};
    fs_cache_lock(p);
    fs_block *b = s->head;
    if (s->pinned || b->state != FS_BLOCK_FREE || b->next) {
        fs_cache_unlock(p);
        return 0;
    }
    fs_free_take(p, b, &dl);
    list_del(p, s);
    s->detached = true;
    fs_cache_unlock(p);
    fs_segidx_remove(a, s);
    if (p->pconf.segment_alloc) {
        p->pconf.segment_free(p->pconf.segment_ctx, d->id, (void *)s->base, s->size);
    } else if (o->segment_free(o->ctx, d->id, seg_memory(s), (void *)s->base) != FS_DEV_OK) {
        /* still the device's memory, and still ours: back as it was (the
         * index has room, it just shrank) */
        segidx_insert(a, s);
        fs_cache_lock(p);
        s->detached = false;
        list_add(p, s);
        fs_free_insert(p, b, &dl);
        fs_stats_apply(p, &dl);
        fs_cache_unlock(p);
        return 0;
    }
    fs_cache_lock(p);
    dl.segment = -1;
    dl.oversize_segments = -fs_oversize(p, s->size);
    dl.reserved_bytes = -(int64_t)s->size;
    fs_stats_apply(p, &dl);
    fs_block_free(p, b);
    fs_cache_unlock(p);
    fs_stats_count(d, &d->st.num_device_free, 1);
    fs_observe(a, FS_EV_SEGMENT_FREE, d->id, p->stream, s->base, s->size, 0, false);
    size_t bytes = s->size;
    free(s);
    return bytes;
}

/* Cuts the whole pages of the free block of expandable segment s that
 * holds addr out of the free bins, as an unmapped block (*u) that is still
 * mapped; the rest stays free. Returns their bytes, 0 if there are none
 * now (or no metadata for the cut). */
static size_t carve(fs_stream_cache *p, fs_segment *s, uintptr_t addr, unmapping *u)
{
    size_t bytes = 0;
    uintptr_t lo, hi;
    fs_cache_lock(p);
    fs_block *b = s->head;
    while (b && addr - b->addr >= b->size)
        b = b->next;
    if (s->pinned || !b || b->state != FS_BLOCK_FREE || !(bytes = whole_pages(b, &lo, &hi))) {
        fs_cache_unlock(p);
        return 0;
    }
    fs_block *head_cut = block_new(p), *tail_cut = block_new(p), *spare = block_new(p);
    if (head_cut && tail_cut && spare) {
        fs_delta dl = {.kind = s->kind};
        uint64_t seq = b->free_seq;
        uint32_t age = b->gc_age;
        fs_free_take(p, b, &dl);
        fs_block *pages = b;
        if (lo > b->addr) {
            split_into(b, lo - b->addr, head_cut);
            pages = head_cut;
            head_cut = NULL;
            bin_in(p, b, &dl); /* its neighbours are final: the pages after it */
        }
        if (hi < pages->addr + pages->size) {
            fs_block *t = tail_cut;
            tail_cut = NULL;
            split_into(pages, hi - pages->addr, t);
            t->state = FS_BLOCK_FREE;
            t->stream = p->stream;
            t->free_seq = seq;
            t->gc_age = age;
            bin_in(p, t, &dl);
        }
        pages->state = FS_BLOCK_UNMAPPED;
        pages->free_seq = 0;
        pages->gc_age = 0;
        fs_stats_apply(p, &dl);
        *u = (unmapping){p, pages, spare};
        spare = NULL;
    } else {
        bytes = 0;
    }
    if (head_cut) fs_block_free(p, head_cut);
    if (tail_cut) fs_block_free(p, tail_cut);
    if (spare) fs_block_free(p, spare);
    fs_cache_unlock(p);
    return bytes;
}

/* After the driver unmapped `done` bytes from the start of u->pages: those
 * join the unmapped blocks around them and leave the segment's size and
 * the reserved figure; what is still mapped is free again. */
static void settle(unmapping *u, size_t done)
{
    fs_stream_cache *p = u->pool;
    fs_block *pages = u->pages;
    fs_segment *s = pages->seg;
    fs_delta dl = {.kind = s->kind};
    fs_cache_lock(p);
    if (done < pages->size) {
        fs_block *mapped = pages;
        if (done) {
            split_into(pages, done, u->spare);
            mapped = u->spare;
            u->spare = NULL;
        }
        fs_free_insert(p, mapped, &dl);
    }
    if (done) {
        if (pages->next && pages->next->state == FS_BLOCK_UNMAPPED) absorb(p, pages, pages->next);
        if (pages->prev && pages->prev->state == FS_BLOCK_UNMAPPED) absorb(p, pages, pages->prev);
        s->size -= done;
        dl.reserved_bytes = -(int64_t)done;
        dl.segment = s->size == 0 ? -1 : 0;
    }
    fs_stats_apply(p, &dl);
    if (u->spare) fs_block_free(p, u->spare);
    fs_cache_unlock(p);
}

/* Unmaps the carved pages once the device has finished with them
 * (unmapping is not stream-ordered; they left the free bins before the
 * synchronisation, so no work issued after it can use them); returns the
 * bytes that stayed mapped. */
static size_t unmap_carved(fs_allocator *a, fs_dev *d, unmapping *um, size_t n)
{
    const fs_device_ops *o = a->ops;
    bool idle = o->device_synchronize(o->ctx, d->id) == FS_DEV_OK;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        fs_block *pages = um[i].pages;
        uintptr_t addr = pages->addr;
        size_t size = pages->size;
        size_t done = idle ? unmap_pages(a, d, pages->seg, addr, size) : 0;
        kept += size - done;
        settle(&um[i], done);
        if (done)
            fs_observe(a, FS_EV_SEGMENT_UNMAP, d->id, um[i].pool->stream, addr, done, 0, false);
    }
    return kept;
}

/* Releases free memory of the pools of d that `only` names (0: every
 * pool the mode may release from, see fs_cache_releasable). Nothing goes
 * while a capture is under way but at teardown: a device free (cudaFree
 * synchronises) or an unmap would break the capture. */
static size_t release(fs_allocator *a, fs_dev *d, fs_release_mode mode, size_t goal, uint64_t only)
{
    const fs_device_ops *o = a->ops;
    bool capture = o->capture_underway && o->capture_underway(o->ctx);
    if (capture && mode != FS_RELEASE_EVERYTHING) return 0;
    bool unmap = o->vm_unmap && !capture;
    candidate *c = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        if (only ? p->priv == only : fs_cache_releasable(p, mode)) collect(p, unmap, &c, &n, &cap);
    }
    if (mode == FS_RELEASE_OLDEST) {
        /* PyTorch's rule: only blocks at least as old as the average go */
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += c[i].age;
        uint32_t avg = n ? (uint32_t)(sum / n) : 0;
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].age >= avg) c[m++] = c[i];
        n = m;
        if (n > 1) qsort(c, n, sizeof *c, by_age);
    } else if (mode == FS_RELEASE_FITTING) {
        n = fitting(c, n, goal);
    } else if (n > 1) {
        qsort(c, n, sizeof *c, by_size);
    }
    unmapping *um = n ? malloc(n * sizeof *um) : NULL;
    size_t freed = 0, nu = 0;
    for (size_t i = 0; i < n && freed < goal; i++) {
        if (!c[i].seg->expandable) {
            freed += release_segment(a, d, &c[i]);
        } else if (um) {
            size_t bytes = carve(c[i].pool, c[i].seg, c[i].addr, &um[nu]);
            if (bytes) nu++;
            freed += bytes;
        }
    }
    if (nu) freed -= unmap_carved(a, d, um, nu);
    free(um);
    free(c);
    return freed;
}

size_t fs_segments_release(fs_allocator *a, fs_dev *d, fs_release_mode mode, size_t goal)
{
    return release(a, d, mode, goal, 0);
}

size_t fs_segments_release_private(fs_allocator *a, fs_dev *d, uint64_t priv)
{
    return priv ? release(a, d, FS_RELEASE_LARGEST, SIZE_MAX, priv) : 0;
}
