/* segment.c - device memory as segments tiled by blocks: block split and
 * coalescing, the pools' free bins, growing (a new segment, or more pages
 * mapped at the end of an expandable one) and releasing (whole free
 * segments, or the free tail pages of an expandable one), and the sorted
 * index of every segment that answers "whose pointer is this?". */
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

static fs_block *block_new(fs_pool *p)
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

void fs_block_free(fs_pool *p, fs_block *b)
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

/* Cuts b to `size` bytes; the rest becomes a new, not yet inserted block
 * right after it. NULL (b unchanged) if metadata cannot be allocated. */
fs_block *fs_block_split(fs_pool *p, fs_block *b, size_t size)
{
    fs_block *r = block_new(p);
    if (!r) return NULL;
    r->addr = b->addr + size;
    r->size = b->size - size;
    r->seg = b->seg;
    r->prev = b;
    r->next = b->next;
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = size;
    return r;
}

/* ---- free bins ------------------------------------------------------------ */

void fs_free_take(fs_pool *p, fs_block *b, fs_delta *dl)
{
    fs_bins_remove(&p->free[fs_seg_set(b->seg)], b);
    p->free_bytes[fs_seg_set(b->seg)] -= b->size;
    if (fs_block_is_split(b)) {
        dl->inactive_split--;
        dl->inactive_split_bytes -= (int64_t)b->size;
    }
}

/* Absorbs `n` (a free neighbour of b, already out of its bin) into b. */
static void absorb(fs_pool *p, fs_block *b, fs_block *n)
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
static void bin_in(fs_pool *p, fs_block *b, fs_delta *dl)
{
    fs_bins_insert(&p->free[fs_seg_set(b->seg)], b);
    p->free_bytes[fs_seg_set(b->seg)] += b->size;
    if (fs_block_is_split(b)) {
        dl->inactive_split++;
        dl->inactive_split_bytes += (int64_t)b->size;
    }
}

void fs_free_insert(fs_pool *p, fs_block *b, fs_delta *dl)
{
    b->state = FS_BLOCK_FREE;
    b->stream = p->stream;
    b->requested = 0;
    b->nuses = 0;
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

void fs_free_insert_rest(fs_pool *p, fs_block *r, fs_delta *dl)
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

static void list_add(fs_pool *p, fs_segment *s)
{
    s->prev = NULL;
    s->next = p->segs;
    if (p->segs) p->segs->prev = s;
    p->segs = s;
}

static void list_del(fs_pool *p, fs_segment *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        p->segs = s->next;
    if (s->next) s->next->prev = s->prev;
    s->next = s->prev = NULL;
}

void fs_segment_unlink(fs_pool *p, fs_segment *s, fs_delta *dl)
{
    fs_block *b = s->head;
    fs_free_take(p, b, dl);
    fs_block_free(p, b);
    s->head = NULL;
    list_del(p, s);
    s->detached = true;
    dl->segment--;
    dl->reserved_bytes -= (int64_t)s->size;
}

/* ---- changing hands ------------------------------------------------------------ */

bool fs_segment_adopt(fs_allocator *a, fs_pool *from, fs_pool *to, fs_segment *s)
{
    bool ok = false;
    fs_delta dl = {.kind = s->kind};
    /* written, so that nobody who found the segment through the index is
     * still about to lock its old pool */
    pthread_rwlock_wrlock(&a->segidx_lock);
    fs_spin_lock(&from->lock);
    fs_block *b = s->head;
    if (s->pool == from && !s->detached && !s->pinned && !s->expandable && b &&
        b->state == FS_BLOCK_FREE && !b->next && b->free_seq <= from->so_done) {
        fs_free_take(from, b, &dl);
        list_del(from, s);
        ok = true;
    }
    fs_spin_unlock(&from->lock);
    if (ok) {
        fs_spin_lock(&to->lock);
        s->pool = to;
        list_add(to, s);
        b->free_seq = 0;
        fs_free_insert(to, b, &dl);
        fs_spin_unlock(&to->lock);
    }
    pthread_rwlock_unlock(&a->segidx_lock);
    return ok;
}

/* ---- growing --------------------------------------------------------------- */

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

/* Maps enough pages at the end of the pool's expandable segment of free
 * set `set` that its free tail can hold `rounded`. FS_ERR_NOT_OWNED: the
 * reservation is full, grow a plain segment instead. */
static fs_status grow_expandable(fs_allocator *a, fs_pool *p, int set, size_t rounded, bool *oom)
{
    fs_dev *d = p->dev;
    const fs_device_ops *o = a->ops;
    int kind = fs_set_kind(set);
    size_t gran = o->vm_granularity(o->ctx, d->id);
    if (gran == 0 || gran % FS_MIN_BLOCK) return FS_ERR_NOT_OWNED;
    fs_segment *s = p->expandable[set];
    if (!s) {
        size_t cap = o->mem_capacity ? o->mem_capacity(o->ctx, d->id) : 0;
        size_t reserve = round_to(cap ? cap + cap / 8 : FS_EXPANDABLE_DEFAULT_RESERVE, gran);
        void *base;
        fs_status st = dev_status(o->vm_reserve(o->ctx, d->id, reserve, &base), oom);
        if (st != FS_OK) return st == FS_ERR_OOM ? FS_ERR_NOT_OWNED : st;
        s = calloc(1, sizeof *s);
        if (s) {
            s->base = (uintptr_t)base;
            s->reserve = reserve;
            s->extent = reserve;
            s->expandable = true;
            s->kind = kind;
            s->ordered = set >= FS_KINDS;
            s->pool = p;
        }
        if (!s || !segidx_insert(a, s)) {
            free(s);
            o->vm_release(o->ctx, d->id, base, reserve);
            return FS_ERR_DEVICE;
        }
        fs_spin_lock(&p->lock);
        p->expandable[set] = s;
        list_add(p, s);
        fs_spin_unlock(&p->lock);
    }
    fs_spin_lock(&p->lock);
    fs_block *tail = s->head;
    while (tail && tail->next)
        tail = tail->next;
    size_t have = tail && tail->state == FS_BLOCK_FREE ? tail->size : 0;
    size_t old = s->size;
    fs_spin_unlock(&p->lock);
    size_t g = round_to(rounded - (have < rounded ? have : 0), gran);
    if (g > s->reserve - old) return FS_ERR_NOT_OWNED;
    fs_status st = dev_status(o->vm_map(o->ctx, d->id, (void *)(s->base + old), g), oom);
    if (st != FS_OK) return st;
    fs_spin_lock(&p->lock);
    fs_delta dl = {.kind = kind, .reserved_bytes = (int64_t)g, .segment = old == 0};
    fs_block *last = s->head;
    while (last && last->next)
        last = last->next;
    if (last && last->state == FS_BLOCK_FREE) {
        /* the free tail just grows (out of its bin while its size changes) */
        fs_free_take(p, last, &dl);
        last->size += g;
        s->size = old + g;
        fs_free_insert(p, last, &dl);
    } else {
        fs_block *nb = block_new(p);
        if (!nb) {
            fs_spin_unlock(&p->lock);
            o->vm_unmap(o->ctx, d->id, (void *)(s->base + old), g);
            return FS_ERR_DEVICE;
        }
        nb->addr = s->base + old;
        nb->size = g;
        nb->seg = s;
        nb->prev = last;
        if (last)
            last->next = nb;
        else
            s->head = nb;
        s->size = old + g;
        fs_free_insert(p, nb, &dl);
    }
    fs_stats_apply(d, &dl);
    fs_spin_unlock(&p->lock);
    fs_observe(a, FS_EV_SEGMENT_MAP, d->id, p->stream, s->base + old, g);
    return FS_OK;
}

static fs_seg_memory seg_memory(const fs_segment *s)
{
    return s->ordered ? FS_SEG_ORDERED : FS_SEG_PLAIN;
}

fs_status fs_segment_grow(fs_allocator *a, fs_pool *p, int set, size_t rounded, bool *oom)
{
    fs_dev *d = p->dev;
    const fs_device_ops *o = a->ops;
    int kind = fs_set_kind(set);
    fs_seg_memory mem = set >= FS_KINDS ? FS_SEG_ORDERED : FS_SEG_PLAIN;
    if (a->cfg.expandable_segments && o->vm_map && o->vm_reserve && o->vm_granularity) {
        fs_status st = grow_expandable(a, p, set, rounded, oom);
        if (st != FS_ERR_NOT_OWNED) return st;
    }
    fs_alloc_stats held;
    fs_stats_read(d, &held);
    size_t size =
        fs_segment_size(&a->cfg, (size_t)held.reserved_bytes[FS_POOL_ALL].current, rounded);
    if (size == 0) {
        *oom = true;
        return FS_ERR_OOM;
    }
    void *ptr = NULL;
    fs_status st = dev_status(o->segment_alloc(o->ctx, d->id, mem, size, &ptr), oom);
    if (st != FS_OK) return st;
    fs_segment *s = calloc(1, sizeof *s);
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
        o->segment_free(o->ctx, d->id, mem, ptr);
        return FS_ERR_DEVICE;
    }
    b->addr = s->base;
    b->size = size;
    b->seg = s;
    s->head = b;
    fs_stats_count(d, &d->st.num_device_alloc, 1);
    fs_spin_lock(&p->lock);
    list_add(p, s);
    fs_delta dl = {.kind = kind, .segment = 1, .reserved_bytes = (int64_t)size};
    fs_free_insert(p, b, &dl);
    fs_stats_apply(d, &dl);
    fs_spin_unlock(&p->lock);
    fs_observe(a, FS_EV_SEGMENT_ALLOC, d->id, p->stream, s->base, size);
    return FS_OK;
}

/* ---- releasing -------------------------------------------------------------- */

typedef struct candidate {
    fs_pool *pool;
    fs_segment *seg;
    size_t bytes;
    uint32_t age;
} candidate;

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

/* Free whole pages at the end of an expandable segment (0 if none). */
static size_t expandable_slack(const fs_segment *s, size_t gran, fs_block **tail_out)
{
    fs_block *t = s->head;
    while (t && t->next)
        t = t->next;
    *tail_out = t;
    if (!t || t->state != FS_BLOCK_FREE) return 0;
    size_t keep = round_to(t->addr - s->base, gran);
    return s->size - keep;
}

static void collect(fs_pool *p, size_t gran, candidate **c, size_t *n, size_t *cap)
{
    fs_spin_lock(&p->lock);
    for (fs_segment *s = p->segs; s; s = s->next) {
        size_t bytes = 0;
        uint32_t age = 0;
        if (s->pinned) continue;
        if (s->expandable) {
            fs_block *t;
            if (gran) bytes = expandable_slack(s, gran, &t);
            if (bytes)
                age = atomic_load_explicit(&p->dev->gc_clock, memory_order_relaxed) - t->gc_age;
        } else if (s->head->state == FS_BLOCK_FREE && !s->head->next) {
            bytes = s->size;
            age = atomic_load_explicit(&p->dev->gc_clock, memory_order_relaxed) - s->head->gc_age;
        }
        if (!bytes) continue;
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 32;
            candidate *m = realloc(*c, nc * sizeof *m);
            if (!m) break;
            *c = m;
            *cap = nc;
        }
        (*c)[(*n)++] = (candidate){p, s, bytes, age};
    }
    fs_spin_unlock(&p->lock);
}

/* Gives one candidate back to the device; returns the bytes released. */
static size_t release_one(fs_allocator *a, fs_dev *d, candidate *c, size_t gran)
{
    const fs_device_ops *o = a->ops;
    fs_pool *p = c->pool;
    fs_segment *s = c->seg;
    fs_delta dl = {.kind = s->kind};
    fs_spin_lock(&p->lock);
    if (s->pinned) {
        fs_spin_unlock(&p->lock);
        return 0;
    }
    if (s->expandable) {
        fs_block *t;
        size_t bytes = expandable_slack(s, gran, &t);
        if (!bytes) {
            fs_spin_unlock(&p->lock);
            return 0;
        }
        size_t keep = s->size - bytes;
        fs_free_take(p, t, &dl);
        if (t->addr < s->base + keep) {
            /* keep the part below the page boundary as a free block */
            fs_block *cut = fs_block_split(p, t, s->base + keep - t->addr);
            if (!cut) {
                fs_free_insert(p, t, &dl);
                fs_stats_apply(d, &dl);
                fs_spin_unlock(&p->lock);
                return 0;
            }
            t->next = NULL;
            fs_block_free(p, cut);
            fs_free_insert(p, t, &dl);
        } else {
            /* coalescing left no free block before t: nothing else to account */
            if (t->prev)
                t->prev->next = NULL;
            else
                s->head = NULL;
            fs_block_free(p, t);
        }
        s->size = keep;
        dl.reserved_bytes = -(int64_t)bytes;
        dl.segment = keep == 0 ? -1 : 0;
        fs_stats_apply(d, &dl);
        fs_spin_unlock(&p->lock);
        o->vm_unmap(o->ctx, d->id, (void *)(s->base + keep), bytes);
        fs_observe(a, FS_EV_SEGMENT_UNMAP, d->id, p->stream, s->base + keep, bytes);
        return bytes;
    }
    fs_block *b = s->head;
    if (!b || b->state != FS_BLOCK_FREE || b->next) {
        fs_spin_unlock(&p->lock);
        return 0;
    }
    fs_free_take(p, b, &dl);
    list_del(p, s);
    s->detached = true;
    dl.segment = -1;
    dl.reserved_bytes = -(int64_t)s->size;
    fs_stats_apply(d, &dl);
    fs_block_free(p, b);
    fs_spin_unlock(&p->lock);
    fs_segidx_remove(a, s);
    o->segment_free(o->ctx, d->id, seg_memory(s), (void *)s->base);
    fs_stats_count(d, &d->st.num_device_free, 1);
    fs_observe(a, FS_EV_SEGMENT_FREE, d->id, p->stream, s->base, s->size);
    free(s);
    return c->bytes;
}

size_t fs_segments_release(fs_allocator *a, fs_dev *d, fs_release_mode mode, size_t goal)
{
    const fs_device_ops *o = a->ops;
    size_t gran = 0;
    if (o->vm_granularity && o->vm_unmap && !(o->capture_underway && o->capture_underway(o->ctx)))
        gran = o->vm_granularity(o->ctx, d->id);
    candidate *c = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < d->npools; i++)
        collect(d->pools[i], gran, &c, &n, &cap);
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
    } else if (n > 1) {
        qsort(c, n, sizeof *c, by_size);
    }
    bool synced = false;
    size_t freed = 0;
    for (size_t i = 0; i < n && freed < goal; i++) {
        if (c[i].seg->expandable && !synced) {
            /* unmapping is not stream-ordered: let the device finish first */
            o->device_synchronize(o->ctx, d->id);
            synced = true;
        }
        freed += release_one(a, d, &c[i], gran);
    }
    free(c);
    return freed;
}
