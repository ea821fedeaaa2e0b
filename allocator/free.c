/* free.c - giving blocks back: the three free semantics of cudaFree
 * (sync, device-ordered with batched fences, stream-ordered), cudaFreeAsync,
 * and the record-stream uses that hold a freed block until the other
 * streams are done with it. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Past this many unfenced frees on a device, a free records the batch fence
 * itself rather than waiting for the next miss. */
#define FS_UNFENCED_LIMIT 256

/* A free of a block this big records the batch fence at once (unless a
 * miss holds the device lock; it fences anyway): a block is reusable only
 * once a fence covers it and completes, and until then a request it would
 * fit splits some bigger block instead. With every tensor freed by
 * cudaFree (PyTorch without caching), waiting for the next miss or the
 * 256th free to fence left the large frees of the last few milliseconds
 * out of reach, and a 6-layer MLP under FSDP2 peaked 3-4% above PyTorch's
 * caching allocator. A fence is an event per stream with work, far less
 * than the synchronisation a GPU's own cudaFree makes. */
#define FS_FENCE_AT_ONCE_BYTES ((size_t)2 << 20)

/* Every so many frees into a pool with pending blocks, the free retires
 * the completed ones (a few event queries, no waiting). */
#define FS_RETIRE_EVERY 64

/* claim() when the block is not in the guessed pool: the segment index
 * names the pool. */
FS_SLOW_PATH static fs_block *claim_by_index(fs_allocator *a, const void *ptr, fs_status *st)
{
    fs_block *b = NULL;
    /* the index lock keeps the segment in its pool while we lock that pool */
    pthread_rwlock_rdlock(&a->segidx_lock);
    fs_segment *s = fs_segidx_find(a, (uintptr_t)ptr);
    if (s) {
        fs_stream_cache *p = s->pool;
        fs_cache_lock(p);
        b = fs_live_remove(&p->live, (uintptr_t)ptr);
        if (!b) fs_cache_unlock(p);
    }
    pthread_rwlock_unlock(&a->segidx_lock);
    if (!b) *st = s ? FS_ERR_INVALID : FS_ERR_NOT_OWNED;
    return b;
}

/* The live block at ptr, taken out of its pool's live map, with that pool
 * locked; or NULL and why there is none. The pool tried first is `guess`,
 * the one the freeing thread allocated from last. */
static fs_block *claim(fs_allocator *a, const void *ptr, fs_stream_cache *guess, fs_status *st)
{
    if (guess) {
        fs_cache_lock(guess);
        fs_block *b = fs_live_remove(&guess->live, (uintptr_t)ptr);
        if (b) return b;
        fs_cache_unlock(guess);
    }
    return claim_by_index(a, ptr, st);
}

static void dead_delta(fs_delta *dl, const fs_block *b)
{
    dl->allocation--;
    dl->allocated_bytes -= (int64_t)b->size;
    dl->requested_bytes -= (int64_t)b->requested;
    dl->oversize -= fs_oversize(b->seg->pool, b->size);
}

static void pace_retire(fs_allocator *a, fs_stream_cache *p)
{
    if (p->pending.n && (++p->frees % FS_RETIRE_EVERY) == 0) fs_cache_retire(a, p);
}

/* The recorded uses other than stream `skip`; n is returned. */
static int other_uses(const fs_block *b, fs_stream_t skip, fs_stream_t *out)
{
    int n = 0;
    for (int i = 0; i < b->nuses; i++)
        if (b->uses[i] != skip) out[n++] = b->uses[i];
    return n;
}

/* Device-ordered, first half: b goes on the unfenced list until the next
 * batch fence; uf holds the events of its recorded uses. p->lock held. */
static void push_unfenced(fs_allocator *a, fs_stream_cache *p, fs_block *b, fs_fence *uf)
{
    fs_dev *d = p->dev;
    fs_delta dl = {.kind = b->seg->kind, .pending = 1, .pending_bytes = (int64_t)b->size};
    dead_delta(&dl, b);
    b->uses_fence = uf;
    b->state = FS_BLOCK_UNFENCED;
    /* numbered under the pool lock: a host-sync retirement that reads a
     * token at or past this number finds the block on the list */
    b->dev_seq = atomic_fetch_add_explicit(&d->dev_frees, 1, memory_order_acq_rel) + 1;
    fs_blist_push(&p->unfenced, b);
    fs_stats_apply(p, &dl);
    pace_retire(a, p);
}

/* Records the batch fence now; *fence_out (when asked) gets what covers
 * the free just made. Unless `must`, not while someone holds the device
 * lock (a miss, which fences itself, may be waiting there for frees). */
FS_SLOW_PATH static void fence_now(fs_dev *d, fs_fence *uf, fs_fence **fence_out, bool must)
{
    if (must)
        pthread_mutex_lock(&d->lock);
    else if (pthread_mutex_trylock(&d->lock) != 0)
        return;
    bool fenced = fs_batch_fence(d);
    if (fence_out && fenced && d->last_batch) {
        if (uf) {
            fs_fence_get(uf);
            atomic_store_explicit(&uf->after_batch, d->last_batch->batch_seq, memory_order_release);
            *fence_out = uf;
        } else {
            fs_fence_get(d->last_batch);
            *fence_out = d->last_batch;
        }
    }
    pthread_mutex_unlock(&d->lock);
}

/* Second half, no lock held: when the caller wants the fence, past
 * FS_UNFENCED_LIMIT unfenced frees, or for a big block, fence now. */
static fs_status after_unfenced(fs_dev *d, fs_fence *uf, size_t size, fs_fence **fence_out)
{
    long n = atomic_fetch_add_explicit(&d->unfenced, 1, memory_order_acq_rel) + 1;
    if (fence_out || n >= FS_UNFENCED_LIMIT)
        fence_now(d, uf, fence_out, true);
    else if (size >= FS_FENCE_AT_ONCE_BYTES)
        fence_now(d, uf, NULL, false);
    return FS_OK;
}

/* Device-ordered: on the unfenced list until the next batch fence. */
FS_SLOW_PATH static fs_status free_device(fs_allocator *a, fs_block *b, fs_fence **fence_out)
{
    fs_stream_cache *p = b->seg->pool;
    fs_fence *uf = NULL;
    if (b->nuses) {
        uf = fs_fence_make(p->dev, b->uses, b->nuses);
        /* NULL (a use stream is capturing): the batch fence covers every
         * stream with work, the uses included */
    }
    fs_cache_lock(p);
    size_t size = b->size;
    push_unfenced(a, p, b, uf);
    fs_cache_unlock(p);
    return after_unfenced(p->dev, uf, size, fence_out);
}

/* Stream-ordered on the block's own pool stream, nothing else used it:
 * reusable at once on that stream. p->lock held. */
static void free_local(fs_allocator *a, fs_stream_cache *p, fs_block *b)
{
    fs_delta dl = {.kind = b->seg->kind, .active = -1, .active_bytes = -(int64_t)b->size};
    dead_delta(&dl, b);
    b->free_seq = ++p->so_seq;
    fs_free_insert(p, b, &dl);
    fs_stats_putback(p, &dl);
    pace_retire(a, p);
}

/* Stream-ordered on s: reusable at once on s when s is the block's pool
 * stream and nothing else used it; otherwise pending on events recorded on
 * s and on the recorded uses. */
FS_SLOW_PATH static fs_status free_on_stream(fs_allocator *a, fs_block *b, fs_stream_t s,
                                             fs_fence **fence_out)
{
    fs_stream_cache *p = b->seg->pool;
    fs_dev *d = p->dev;
    bool retired = atomic_load_explicit(&p->retired, memory_order_acquire);
    if (retired && s == p->stream) return free_device(a, b, fence_out); /* that stream is gone */
    fs_stream_t local[8];
    fs_stream_t *streams =
        b->nuses + 1 <= 8 ? local : malloc(((size_t)b->nuses + 1) * sizeof *streams);
    if (!streams) return free_device(a, b, fence_out);
    int n = other_uses(b, s, streams + 1);
    if (n == 0 && s == p->stream) {
        fs_cache_lock(p);
        free_local(a, p, b);
        fs_cache_unlock(p);
        if (fence_out) *fence_out = fs_fence_make(d, &s, 1);
        return FS_OK;
    }
    fs_delta dl = {.kind = b->seg->kind};
    dead_delta(&dl, b);
    streams[0] = s;
    fs_fence *f = fs_fence_make(d, streams, n + 1);
    if (streams != local) free(streams);
    if (!f) return free_device(a, b, fence_out);
    dl.pending = 1;
    dl.pending_bytes = (int64_t)b->size;
    fs_cache_lock(p);
    b->fence = f;
    b->ready_stream = s;
    b->has_ready = n == 0;
    b->state = FS_BLOCK_PENDING;
    fs_blist_push(&p->pending, b);
    fs_stats_apply(p, &dl);
    /* The caller's reference first: pace_retire may retire this very block
     * at once and drop the block's reference, the last one but this. */
    if (fence_out) {
        fs_fence_get(f);
        *fence_out = f;
    }
    pace_retire(a, p);
    fs_cache_unlock(p);
    return FS_OK;
}

/* free_semantics:sync: the device is idle afterwards, so the block and
 * everything pending on the device are reusable at once. */
FS_SLOW_PATH static fs_status free_sync(fs_allocator *a, fs_block *b, fs_fence **fence_out)
{
    fs_stream_cache *p = b->seg->pool;
    fs_dev *d = p->dev;
    const fs_device_ops *o = a->ops;
    if (o->device_synchronize(o->ctx, d->id) != FS_DEV_OK) return free_device(a, b, fence_out);
    fs_delta dl = {.kind = b->seg->kind, .active = -1, .active_bytes = -(int64_t)b->size};
    dead_delta(&dl, b);
    fs_cache_lock(p);
    fs_free_insert(p, b, &dl);
    fs_stats_putback(p, &dl);
    fs_cache_retire(a, p);
    fs_cache_unlock(p);
    if (fence_out) *fence_out = fs_fence_make(d, NULL, 0);
    return FS_OK;
}

/* Called with the block's pool locked: an observer sees the free before
 * anyone can reuse the block. */
static void note_free_requested(fs_allocator *a, fs_block *b, bool stream_ordered)
{
    fs_stream_cache *p = b->seg->pool;
    fs_observe(a, FS_EV_FREE_REQUESTED, p->dev->id, b->stream, b->addr, b->size, b->requested,
               stream_ordered);
}

FS_HOT_PATH fs_status fs_free(fs_allocator *a, void *ptr, fs_fence **fence_out)
{
    if (fence_out) *fence_out = NULL;
    if (!ptr) return FS_OK;
    fs_status st = FS_OK;
    fs_block *b = claim(a, ptr, fs_cache_guess(a, FS_ANY_STREAM), &st);
    if (!b) return st;
    fs_stream_cache *p = b->seg->pool;
    note_free_requested(a, b, false);
    const fs_device_ops *o = a->ops;
    fs_free_semantics sem = fs_cfg(a)->free_semantics;
    if (sem == FS_FREE_SEMANTICS_DEVICE && !b->nuses) {
        size_t size = b->size;
        push_unfenced(a, p, b, NULL); /* the common case, in the claim's lock */
        fs_cache_unlock(p);
        return after_unfenced(p->dev, NULL, size, fence_out);
    }
    fs_cache_unlock(p);
    if (sem == FS_FREE_SEMANTICS_SYNC && o->capture_underway && o->capture_underway(o->ctx))
        sem = FS_FREE_SEMANTICS_DEVICE; /* a synchronisation would break the capture */
    switch (sem) {
    case FS_FREE_SEMANTICS_SYNC:
        return free_sync(a, b, fence_out);
    case FS_FREE_SEMANTICS_STREAM:
        return free_on_stream(a, b, b->stream, fence_out);
    default:
        return free_device(a, b, fence_out);
    }
}

FS_HOT_PATH fs_status fs_free_async(fs_allocator *a, void *ptr, fs_stream_t stream,
                                    fs_fence **fence_out)
{
    if (fence_out) *fence_out = NULL;
    if (!ptr) return FS_OK;
    fs_status st = FS_OK;
    fs_block *b = claim(a, ptr, fs_cache_guess(a, stream), &st);
    if (!b) return st;
    fs_stream_cache *p = b->seg->pool;
    note_free_requested(a, b, true);
    if (stream == p->stream && !b->nuses &&
        !atomic_load_explicit(&p->retired, memory_order_acquire)) {
        free_local(a, p, b); /* the common case, in the claim's lock */
        fs_cache_unlock(p);
        if (fence_out) *fence_out = fs_fence_make(p->dev, &stream, 1);
        return FS_OK;
    }
    fs_cache_unlock(p);
    return free_on_stream(a, b, stream, fence_out);
}

/* ---- record-stream ----------------------------------------------------------- */

/* The live block of segment s containing addr; s->pool->lock held. */
static fs_block *block_at(fs_segment *s, uintptr_t addr)
{
    for (fs_block *b = s->head; b; b = b->next)
        if (addr >= b->addr && addr - b->addr < b->size)
            return b->state == FS_BLOCK_LIVE ? b : NULL;
    return NULL;
}

/* Runs fn on the live block containing ptr under its pool's lock. */
fs_status fs_with_live_block(fs_allocator *a, const void *ptr,
                             fs_status (*fn)(fs_block *b, void *arg), void *arg)
{
    fs_status st = FS_ERR_NOT_OWNED;
    pthread_rwlock_rdlock(&a->segidx_lock);
    fs_segment *s = fs_segidx_find(a, (uintptr_t)ptr);
    if (s) {
        fs_stream_cache *p = s->pool;
        fs_cache_lock(p);
        fs_block *b = s->detached ? NULL : block_at(s, (uintptr_t)ptr);
        if (b) st = fn(b, arg);
        fs_cache_unlock(p);
    }
    pthread_rwlock_unlock(&a->segidx_lock);
    return st;
}

static fs_status add_use(fs_block *b, void *arg)
{
    fs_stream_t s = *(fs_stream_t *)arg;
    if (s == b->stream) return FS_OK; /* its own stream orders itself */
    for (int i = 0; i < b->nuses; i++)
        if (b->uses[i] == s) return FS_OK;
    if (b->nuses == b->capuses) {
        int cap = b->capuses ? b->capuses * 2 : 4;
        fs_stream_t *n = realloc(b->uses, (size_t)cap * sizeof *n);
        if (!n) return FS_ERR_DEVICE;
        b->uses = n;
        b->capuses = cap;
    }
    b->uses[b->nuses++] = s;
    return FS_OK;
}

fs_status fs_record_stream(fs_allocator *a, void *ptr, fs_stream_t stream)
{
    return fs_with_live_block(a, ptr, add_use, &stream);
}

static fs_status drop_uses(fs_block *b, void *arg)
{
    (void)arg;
    b->nuses = 0;
    return FS_OK;
}

fs_status fs_forget_uses(fs_allocator *a, void *ptr)
{
    return fs_with_live_block(a, ptr, drop_uses, NULL);
}
