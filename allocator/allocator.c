/* allocator.c - creating and destroying the allocator, and allocation: the
 * cached hot path (one pool lock, one block-map shard, one statistics
 * update, no device call) and the miss path under the device lock: retire
 * completed frees, fence the unfenced, take another stream's block when
 * cross_stream_reuse allows, collect garbage, grow, and finally release
 * every cached segment and retry once before reporting out of memory. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static atomic_uint serials = 1;

/* ---- observation ---------------------------------------------------------- */

void fs_observe(fs_allocator *a, fs_alloc_event_kind kind, int device, fs_stream_t s,
                uintptr_t addr, size_t size, size_t requested, bool stream_ordered)
{
    fs_observer_node *o = atomic_load_explicit(&a->obs, memory_order_acquire);
    if (!o || !o->obs.on_event) return;
    fs_alloc_event ev = {.kind = kind,
                         .device = device,
                         .stream = s,
                         .addr = addr,
                         .size = size,
                         .requested = requested,
                         .pool = FS_SIZE_ALL,
                         .stream_ordered = stream_ordered};
    if (kind == FS_EV_ALLOC || kind == FS_EV_FREE_REQUESTED || kind == FS_EV_FREE_COMPLETED)
        ev.pool = fs_size_kind(size) == FS_KIND_SMALL ? FS_SIZE_SMALL : FS_SIZE_LARGE;
    fs_stats_totals(&a->devs[device], &ev.allocated, &ev.reserved);
    ev.capacity = fs_dev_capacity(&a->devs[device]);
    /* A free is observed before its accounting (so that it precedes any
     * reuse of the block): the totals after it are the block's fewer. */
    if (kind == FS_EV_FREE_REQUESTED) ev.allocated -= ev.allocated < size ? ev.allocated : size;
    o->obs.on_event(o->obs.ctx, &ev);
}

void fs_alloc_set_observer(fs_allocator *a, const fs_alloc_observer *obs)
{
    fs_observer_node *n = NULL;
    if (obs) {
        n = calloc(1, sizeof *n);
        if (!n) return;
        n->obs = *obs;
    }
    pthread_mutex_lock(&a->obs_lock);
    fs_observer_node *old = atomic_exchange_explicit(&a->obs, n, memory_order_acq_rel);
    if (old) {
        old->next = a->obs_old;
        a->obs_old = old;
    }
    pthread_mutex_unlock(&a->obs_lock);
}

/* ---- lifetime --------------------------------------------------------------- */

fs_allocator *fs_allocator_create(const fs_alloc_config *cfg, const fs_device_ops *ops,
                                  int device_count)
{
    if (!ops || device_count <= 0) return NULL;
    fs_allocator *a = fs_zalloc_lines(sizeof *a); /* see segidx_lock */
    if (!a) return NULL;
    fs_settings *set = calloc(1, sizeof *set);
    if (!set) {
        free(a);
        return NULL;
    }
    if (cfg)
        set->cfg = *cfg;
    else
        fs_alloc_config_default(&set->cfg);
    if (set->cfg.cross_stream_reuse == FS_REUSE_WAIT &&
        set->cfg.free_semantics == FS_FREE_SEMANTICS_SYNC)
        set->cfg.cross_stream_reuse = FS_REUSE_COMPLETED; /* nothing is ever pending */
    set->plain_rounding = fs_rounding_is_plain(&set->cfg);
    a->settings = set;
    a->ops = ops;
    a->ndev = device_count;
    a->serial = atomic_fetch_add(&serials, 1);
    pthread_rwlock_init(&a->segidx_lock, NULL);
    pthread_mutex_init(&a->obs_lock, NULL);
    atomic_init(&a->obs, NULL);
    /* cache-line aligned: see fs_dev */
    a->devs = aligned_alloc(64, (size_t)device_count * sizeof *a->devs);
    if (a->devs) memset(a->devs, 0, (size_t)device_count * sizeof *a->devs);
    if (!a->devs) {
        free(a->settings);
        free(a);
        return NULL;
    }
    for (int i = 0; i < device_count; i++) {
        fs_dev *d = &a->devs[i];
        pthread_mutex_init(&d->lock, NULL);
        fs_spin_init(&d->stats_lock);
        fs_spin_init(&d->peak_lock);
        fs_spin_init(&d->room_lock);
        fs_spin_init(&d->ev_lock);
        fs_spin_init(&d->batch_lock);
        d->a = a;
        d->id = i;
        atomic_init(&d->capacity, SIZE_MAX);
    }
    return a;
}

/* Gives every segment of `d` without live blocks back to the device and
 * frees the metadata of every pool; live blocks are forgotten. dev->lock
 * held. */
static void dev_teardown(fs_allocator *a, fs_dev *d)
{
    const fs_device_ops *o = a->ops;
    fs_dev_retire_all(d, true);
    fs_segments_release(a, d, FS_RELEASE_EVERYTHING, SIZE_MAX);
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        for (fs_segment *s = p->segs, *sn; s; s = sn) {
            sn = s->next;
            for (fs_block *b = s->head, *bn; b; b = bn) {
                bn = b->next;
                fs_fence_put(d, b->fence);
                fs_fence_put(d, b->uses_fence);
                fs_block_free(NULL, b);
            }
            fs_segidx_remove(a, s);
            if (s->expandable && s->size == 0)
                o->vm_release(o->ctx, d->id, (void *)s->base, s->reserve);
            free(s);
        }
        fs_fence_put(d, p->mark);
        fs_live_fini(&p->live);
        for (fs_block *b = p->spare, *bn; b; b = bn) {
            bn = b->lnext;
            free(b);
        }
        free(p);
    }
    free(d->pools);
    d->pools = NULL;
    d->npools = d->cappools = 0;
    for (int i = 0; i < d->ndead; i++)
        free(d->dead[i]);
    free(d->dead);
    d->dead = NULL;
    d->ndead = d->capdead = 0;
    free(atomic_load(&d->view));
    atomic_store(&d->view, NULL);
    memset(d->hash, 0, sizeof d->hash);
    fs_batches_drop(d);
    fs_dev_events_fini(d, true);
    fs_private_fini(d);
}

void fs_allocator_destroy(fs_allocator *a)
{
    if (!a) return;
    for (int i = 0; i < a->ndev; i++) {
        fs_dev *d = &a->devs[i];
        pthread_mutex_lock(&d->lock);
        dev_teardown(a, d);
        pthread_mutex_unlock(&d->lock);
        pthread_mutex_destroy(&d->lock);
    }
    free(a->segidx);
    free(a->devs);
    free(atomic_load(&a->obs));
    for (fs_observer_node *o = a->obs_old, *n; o; o = n) {
        n = o->next;
        free(o);
    }
    for (fs_settings *s = a->settings, *n; s; s = n) {
        n = s->older;
        free(s);
    }
    pthread_rwlock_destroy(&a->segidx_lock);
    pthread_mutex_destroy(&a->obs_lock);
    free(a);
}

void fs_alloc_config_get(const fs_allocator *a, fs_alloc_config *out)
{
    *out = *fs_cfg(a);
}

void fs_alloc_tune(fs_allocator *a, const fs_alloc_config *cfg)
{
    fs_settings *set = malloc(sizeof *set);
    if (!set) return; /* the settings in force stay */
    pthread_mutex_lock(&a->obs_lock);
    set->older = a->settings;
    set->cfg = set->older->cfg;
    set->cfg.max_split_size = cfg->max_split_size;
    memcpy(set->cfg.roundup_divisions, cfg->roundup_divisions, sizeof cfg->roundup_divisions);
    set->cfg.garbage_collection_threshold = cfg->garbage_collection_threshold;
    set->cfg.expandable_segments = cfg->expandable_segments;
    set->plain_rounding = fs_rounding_is_plain(&set->cfg);
    __atomic_store_n(&a->settings, set, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&a->obs_lock);
}

/* ---- taking blocks ------------------------------------------------------------ */

/* PyTorch's limits around max_split_size: an oversize block never serves a
 * small request, and an oversize request takes an oversize block only if it
 * wastes less than a large segment. */
static bool fits(const fs_alloc_config *cfg, const fs_block *b, size_t rounded)
{
    if (cfg->max_split_size == SIZE_MAX) return true;
    if (b->size >= cfg->max_split_size && rounded < cfg->max_split_size) return false;
    if (rounded >= cfg->max_split_size && b->size >= rounded + FS_LARGE_BUFFER) return false;
    return true;
}

static void live_delta(fs_delta *dl, const fs_block *b, int sign)
{
    dl->allocation += sign;
    dl->allocated_bytes += sign * (int64_t)b->size;
    dl->requested_bytes += sign * (int64_t)b->requested;
    dl->oversize += sign * fs_oversize(b->seg->pool, b->size);
}

/* Block b, just out of p's free bins, becomes live on `stream`. */
__attribute__((always_inline)) static inline void
go_live(fs_stream_cache *p, fs_block *b, size_t req, fs_stream_t stream, fs_delta *dl)
{
    b->state = FS_BLOCK_LIVE;
    b->stream = stream;
    b->requested = req;
    b->free_seq = 0;
    fs_live_insert(&p->live, b);
    live_delta(dl, b, 1);
    dl->active++;
    dl->active_bytes += (int64_t)b->size;
}

/* Hands out free block b of pool p (p->lock held), split if worth it. */
static void use_free_block(fs_allocator *a, fs_stream_cache *p, fs_block *b, size_t rounded,
                           size_t req, fs_stream_t stream, fs_delta *dl)
{
    fs_free_take(p, b, dl);
    b->state = FS_BLOCK_LIVE; /* before the remainder goes in: no merging back */
    if (fs_should_split(fs_cfg(a), b, rounded)) {
        fs_block *r = fs_block_split(p, b, rounded);
        if (r) {
            r->free_seq = b->free_seq;
            fs_free_insert_rest(p, r, dl);
        }
    }
    go_live(p, b, req, stream, dl);
}

/* Hands out free block b of pool q (q->lock held) to another stream. When
 * it splits, the stream gets the top of b and the rest stays at the
 * bottom: a borrowed block lives by the borrower's stream, not by q's, and
 * at the top it leaves q's free memory in one piece rather than cutting
 * it in two. */
static fs_block *lend_free_block(fs_allocator *a, fs_stream_cache *q, fs_block *b, size_t rounded,
                                 size_t req, fs_stream_t stream, fs_delta *dl)
{
    if (!fs_should_split(fs_cfg(a), b, rounded)) {
        use_free_block(a, q, b, rounded, req, stream, dl);
        return b;
    }
    fs_free_take(q, b, dl);
    fs_block *top = fs_block_split(q, b, b->size - rounded);
    if (!top) { /* no metadata for a split: lend b whole */
        top = b;
    } else {
        top->state = FS_BLOCK_LIVE; /* before the rest goes in: no merging back */
        fs_free_insert_rest(q, b, dl);
    }
    go_live(q, top, req, stream, dl);
    return top;
}

/* Best fit among p's own free blocks of free set `set`; p->lock held. */
static fs_block *take_own(fs_allocator *a, fs_stream_cache *p, int set, size_t rounded, size_t req,
                          fs_stream_t stream)
{
    fs_block *b = fs_bins_lower_bound(&p->free[set], rounded);
    if (!b || !fits(fs_cfg(a), b, rounded)) return NULL;
    fs_delta dl = {.kind = fs_set_kind(set)};
    use_free_block(a, p, b, rounded, req, stream, &dl);
    fs_stats_handout(p, &dl);
    return b;
}

/* Whether lending `rounded` bytes of q's free block b would cut it: leave a
 * rest larger than both the request and PyTorch's kLargeBuffer. Such a block
 * is one q's own stream freed whole and will ask for whole again (FSDP2's
 * 500 MiB logits, freed and requested once a step on the default stream):
 * lent to the all-gather stream, whose own 50 MiB buffers were still
 * pending, it came back in pieces, and the default stream grew a 500 MiB
 * segment in each step (examples/train_fsdp.py --size medium --batch 8
 * --seq 512, one rank: 9436 MiB reserved on the sim against PyTorch's 8826,
 * 9190 against 8826 on an H200). The borrower grows a segment of its own
 * instead, once, as it would natively; close fits are still lent. */
static bool lend_would_cut(const fs_block *b, size_t rounded)
{
    size_t rest = b->size - rounded;
    return rest > rounded && rest > FS_LARGE_BUFFER;
}

/* Best fit among q's free blocks that every stream may use: not freed
 * stream-ordered after q's last completed mark. q->lock held. When that
 * block is a whole segment that the request fills at least half of, it is
 * not taken but named in *adopt: the segment should change pools, so that
 * the taker's frees of it stay stream-local (no event per free on a
 * borrowed block). A poor fit is lent instead, split, and the rest stays
 * q's: adopting a 32 MiB segment for a 2 MiB request left q's stream
 * without it until a mark on the taker's stream completed, and FSDP2's
 * next 32 MiB request on q's stream grew a segment while NCCL's stream,
 * the taker, was still behind (4 ranks on the sim: 1.04x PyTorch's peak). */
static fs_block *take_completed(fs_allocator *a, fs_stream_cache *q, int set, size_t rounded,
                                size_t req, fs_stream_t stream, fs_segment **adopt)
{
    fs_block *b = fs_bins_lower_bound(&q->free[set], rounded);
    for (int scanned = 0; b && scanned < 32; scanned++, b = fs_bins_next(&q->free[set], b)) {
        if (!fits(fs_cfg(a), b, rounded)) return NULL;
        if (b->free_seq <= q->so_done && !fs_block_is_split(b) && !b->seg->expandable &&
            !b->seg->pinned && b->size / 2 < rounded) {
            *adopt = b->seg;
            return NULL;
        }
        if (b->free_seq <= q->so_done) {
            if (lend_would_cut(b, rounded)) return NULL; /* larger ones would too */
            fs_delta dl = {.kind = fs_set_kind(set)};
            b = lend_free_block(a, q, b, rounded, req, stream, &dl);
            fs_stats_handout(q, &dl);
            return b;
        }
    }
    return NULL;
}

/* Hands out pending block b of q (q->lock held); a remainder stays pending
 * under the same fences. An observer sees the free complete first (its
 * fences are passed, or waited for on the GPU), for the whole block its
 * free_requested named: a split's remainder completes later at its own
 * address (docs/trace-format.md). */
static void use_pending_block(fs_allocator *a, fs_stream_cache *q, fs_block *b, size_t rounded,
                              size_t req, fs_stream_t stream)
{
    fs_delta dl = {.kind = b->seg->kind};
    fs_observe(a, FS_EV_FREE_COMPLETED, q->dev->id, b->stream, b->addr, b->size, b->requested,
               false);
    fs_blist_del(&q->pending, b);
    dl.pending--;
    dl.pending_bytes -= (int64_t)b->size;
    dl.active_bytes -= (int64_t)b->size;
    if (fs_should_split(fs_cfg(a), b, rounded)) {
        fs_block *r = fs_block_split(q, b, rounded);
        if (r) {
            r->state = FS_BLOCK_PENDING;
            r->stream = b->stream;
            r->ready_stream = b->ready_stream;
            r->has_ready = b->has_ready;
            r->fence = b->fence;
            r->uses_fence = b->uses_fence;
            r->dev_seq = b->dev_seq;
            if (r->fence) fs_fence_get(r->fence);
            if (r->uses_fence) fs_fence_get(r->uses_fence);
            fs_blist_push(&q->pending, r);
            dl.pending++;
            dl.pending_bytes += (int64_t)r->size;
            dl.active++;
            dl.active_bytes += (int64_t)r->size;
        }
    }
    fs_fence_put(q->dev, b->fence);
    fs_fence_put(q->dev, b->uses_fence);
    b->fence = b->uses_fence = NULL;
    b->ready_stream = 0;
    b->has_ready = false;
    b->nuses = 0;
    b->dev_seq = 0;
    b->state = FS_BLOCK_LIVE;
    b->stream = stream;
    b->requested = req;
    fs_live_insert(&q->live, b);
    live_delta(&dl, b, 1);
    dl.active_bytes += (int64_t)b->size;
    fs_stats_apply(q, &dl);
}

/* What a request may do about a pending block that its stream's order
 * alone does not make safe. */
enum pending_wait {
    WAIT_NONE,   /* nothing: only blocks reusable at once on the stream */
    WAIT_STREAM, /* the requesting stream waits for the block's fences on the GPU */
    WAIT_ALL,    /* every stream waits for the block's batch (a cudaMalloc) */
};

/* Whether b's fences allow the wait: an unfenced free (a capture deferred
 * its fence) has nothing to wait on, a device-ordered free nothing while a
 * thread's exit left work no fence covers (see fs_alloc_stream_exit), and
 * every stream waits only for a device-ordered free's batch (and uses). */
static bool waitable(const fs_block *b, enum pending_wait wait, bool exit_pending)
{
    if (wait == WAIT_NONE || !b->fence || (exit_pending && b->dev_seq)) return false;
    return wait == WAIT_STREAM || b->fence->batch_seq;
}

/* Best-fitting pending block of q that `stream` may take: one freed
 * stream-ordered on `stream` itself, or any whose fences `wait` allows
 * waiting for on the GPU. q->lock held, and dev->lock for WAIT_ALL. */
static fs_block *take_pending(fs_allocator *a, fs_stream_cache *q, int set, size_t rounded,
                              size_t req, fs_stream_t stream, enum pending_wait wait)
{
    fs_block *best = NULL;
    bool best_wait = false;
    bool exit_pending = wait != WAIT_NONE && fs_dev_exit_pending(q->dev);
    for (fs_block *b = q->pending.head; b; b = b->lnext) {
        if (fs_seg_set(b->seg) != set || b->size < rounded || !fits(fs_cfg(a), b, rounded))
            continue;
        if (best && (b->size > best->size || (b->size == best->size && b->addr > best->addr)))
            continue;
        bool own = b->has_ready && b->ready_stream == stream && !b->uses_fence;
        if (!own && !waitable(b, wait, exit_pending)) continue;
        best = b;
        best_wait = !own;
    }
    if (!best) return NULL;
    if (best_wait && wait == WAIT_ALL &&
        fs_fence_gpu_wait_all(a, q->dev, best->fence, best->uses_fence) != FS_OK)
        return NULL;
    if (best_wait && wait == WAIT_STREAM &&
        (fs_fence_gpu_wait(a, best->fence, stream) != FS_OK ||
         fs_fence_gpu_wait(a, best->uses_fence, stream) != FS_OK))
        return NULL;
    use_pending_block(a, q, best, rounded, req, stream);
    return best;
}

static fs_block *try_own(fs_allocator *a, fs_stream_cache *p, int set, size_t rounded, size_t req,
                         fs_stream_t stream)
{
    fs_cache_lock(p);
    fs_cache_retire(a, p);
    fs_block *b = take_own(a, p, set, rounded, req, stream);
    fs_cache_unlock(p);
    return b;
}

fs_block *fs_cache_take_free(fs_allocator *a, fs_stream_cache *p, int set, size_t rounded,
                             size_t req, fs_stream_t stream)
{
    return try_own(a, p, set, rounded, req, stream);
}

/* The block of segment s, just adopted by p, if nobody took it meanwhile. */
static fs_block *take_adopted(fs_allocator *a, fs_stream_cache *p, fs_segment *s, int set,
                              size_t rounded, size_t req, fs_stream_t stream)
{
    fs_block *b = NULL;
    fs_cache_lock(p);
    fs_block *h = s->head;
    if (!h->next && h->state == FS_BLOCK_FREE && h->size >= rounded) {
        fs_delta dl = {.kind = fs_set_kind(set)};
        use_free_block(a, p, h, rounded, req, stream, &dl);
        fs_stats_handout(p, &dl);
        b = h;
    }
    fs_cache_unlock(p);
    return b ? b : try_own(a, p, set, rounded, req, stream);
}

/* Pending frees that would serve the request, and other streams' memory,
 * as cross_stream_reuse allows. A stream-ordered request takes a block of
 * its own pool whose free is still pending by making its stream wait for
 * the free's events on the GPU, never the host: CUDA's stream-ordered
 * pools do the same (internal dependencies), and a host wait here took
 * away the host's run-ahead, which is what keeps a GPU busy (a thread
 * that all-gathered into such blocks while the compute stream was held
 * waited 200 ms per miss and issued 3 of its 6 all-gathers). Other pools'
 * pending blocks are taken that way only under cross_stream_reuse:wait.
 * A cudaMalloc has no stream to order the reuse after: under
 * malloc_reuse:wait it takes its pool's block whose device-ordered free
 * is pending by making every stream wait for the free's batch on the GPU
 * (fs_fence_gpu_wait_all), outside a graph capture, which such waits
 * would join. Caller holds dev->lock. */
static fs_block *try_others(fs_allocator *a, fs_dev *d, fs_stream_cache *p, int set, size_t rounded,
                            size_t req, fs_stream_t stream, unsigned flags)
{
    const fs_device_ops *o = a->ops;
    bool completed = fs_cfg(a)->cross_stream_reuse != FS_REUSE_NONE;
    bool ordered = (flags & FS_ALLOC_STREAM_ORDERED) &&
                   !(o->stream_is_capturing && o->stream_is_capturing(o->ctx, d->id, stream));
    enum pending_wait own = WAIT_NONE, others = WAIT_NONE;
    if (flags & FS_ALLOC_NO_GPU_WAIT)
        own = WAIT_NONE;
    else if (ordered)
        own = WAIT_STREAM;
    else if (!(flags & FS_ALLOC_STREAM_ORDERED) && !fs_cfg(a)->malloc_grow &&
             !(o->capture_underway && o->capture_underway(o->ctx)))
        own = WAIT_ALL;
    if (ordered && fs_cfg(a)->cross_stream_reuse == FS_REUSE_WAIT &&
        !(flags & FS_ALLOC_NO_GPU_WAIT))
        others = WAIT_STREAM;
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *q = d->pools[i];
        fs_segment *adopt = NULL;
        if (!fs_cache_may_serve(q, p)) continue;
        fs_cache_lock(q);
        fs_block *b = take_pending(a, q, set, rounded, req, stream, q == p ? own : others);
        if (!b && completed && q != p) b = take_completed(a, q, set, rounded, req, stream, &adopt);
        fs_cache_unlock(q);
        if (!b && adopt && fs_segment_adopt(a, q, p, adopt))
            b = take_adopted(a, p, adopt, set, rounded, req, stream);
        if (b) return b;
    }
    return NULL;
}

/* How long one miss on a full device may wait on the host for pending
 * frees to complete before it releases the cache and retries. */
#define FS_FREE_WAIT_NS (100ull * 1000 * 1000)

/* A pending block whose fences alone keep it from the request: in p's own
 * pool it retires into p's free bins, in another pool (cross_stream_reuse
 * permitting) it becomes a completed free block. Device-ordered frees do
 * not retire on their fences while a thread's exit is pending. */
static bool waits_on_fences(const fs_block *b, bool exit_pending)
{
    return b->state == FS_BLOCK_PENDING && !(exit_pending && b->dev_seq);
}

/* A pending block of p, or of a pool p may take from, that would serve a
 * request of `rounded` bytes of free set `set` once its fences complete:
 * the run of free and such pending blocks around it in its segment holds
 * the request. Its fences are returned with a reference each (fence,
 * uses; either may be NULL); false when there is none. Caller holds
 * dev->lock. */
static bool pending_would_serve(fs_allocator *a, fs_dev *d, fs_stream_cache *p, int set,
                                size_t rounded, fs_fence **fence, fs_fence **uses)
{
    bool exit_pending = fs_dev_exit_pending(d), found = false;
    for (int i = 0; i < d->npools && !found; i++) {
        fs_stream_cache *q = d->pools[i];
        if (q != p && fs_cfg(a)->cross_stream_reuse == FS_REUSE_NONE) continue;
        if (!fs_cache_may_serve(q, p)) continue;
        fs_cache_lock(q);
        for (fs_block *b = q->pending.head; b && !found; b = b->lnext) {
            if (!waits_on_fences(b, exit_pending) || fs_seg_set(b->seg) != set) continue;
            size_t run = b->size;
            for (fs_block *x = b->prev;
                 x && (x->state == FS_BLOCK_FREE || waits_on_fences(x, exit_pending)); x = x->prev)
                run += x->size;
            for (fs_block *x = b->next;
                 x && (x->state == FS_BLOCK_FREE || waits_on_fences(x, exit_pending)); x = x->next)
                run += x->size;
            if (run < rounded) continue;
            found = true;
            if ((*fence = b->fence)) fs_fence_get(*fence);
            if ((*uses = b->uses_fence)) fs_fence_get(*uses);
        }
        fs_cache_unlock(q);
    }
    return found;
}

/* Frees still pending when the request misses would often serve it a
 * moment later: the host runs ahead of the GPU, and every free it made
 * meanwhile waits for the work before it (a device-ordered cudaFree for
 * every stream, a stream-ordered free for the streams that used the
 * block). Once growing has failed (the device is full), and only then,
 * the miss waits on the host for their fences, one block's at a time, for
 * at most `wait_ns`, before the release-and-retry that synchronises the
 * whole device: bounded, so that work the program holds back until this
 * thread goes on costs a delay, not a deadlock. Before that, pending frees
 * are taken with GPU-side waits (try_others), never host ones. Caller
 * holds dev->lock. */
static fs_block *wait_for_frees(fs_allocator *a, fs_dev *d, fs_stream_cache *p, int set,
                                size_t rounded, size_t req, fs_stream_t stream, unsigned flags,
                                uint64_t wait_ns)
{
    fs_block *b = NULL;
    fs_fence *f = NULL, *u = NULL;
    uint64_t deadline = 0;
    while (!b && (!deadline || fs_now_ns() < deadline) &&
           pending_would_serve(a, d, p, set, rounded, &f, &u)) {
        if (!deadline) deadline = fs_now_ns() + wait_ns;
        bool done = (!f || fs_fence_wait_until(a, f, deadline)) &&
                    (!u || fs_fence_wait_until(a, u, deadline));
        fs_fence_put(d, f);
        fs_fence_put(d, u);
        if (!done) break;
        fs_dev_retire_all(d, false);
        if (!(b = try_own(a, p, set, rounded, req, stream)))
            b = try_others(a, d, p, set, rounded, req, stream, flags);
    }
    return b;
}

static void collect_garbage(fs_allocator *a, fs_dev *d)
{
    double t = fs_cfg(a)->garbage_collection_threshold;
    size_t capacity = fs_dev_capacity(d);
    if (t <= 0.0 || !capacity) return; /* a device that cannot say: nothing to measure against */
    double limit = t * (double)capacity;
    double reserved = (double)fs_stats_reserved(d);
    if (reserved > limit) fs_segments_release(a, d, FS_RELEASE_OLDEST, (size_t)(reserved - limit));
}

/* Whether the work issued so far on every stream of d has completed, for
 * a request on `stream`: asked once, never waited for. Giving a segment
 * back synchronises the device (a GPU's cudaFree waits for all its work),
 * which costs the host nothing only when the device is idle; a busy one
 * keeps the host running ahead and the miss grows instead. Blocking streams are
 * covered by an event on the legacy stream, which every later piece of
 * work on a blocking stream then waits for: recorded for a request on
 * another stream, that would tie the requester's own work (a per-thread
 * stream's, say) to streams it never waited for, so only a request on the
 * legacy stream, whose work waits for them anyway, asks. Caller holds
 * dev->lock. */
static bool device_idle(fs_allocator *a, fs_dev *d, fs_stream_t stream)
{
    if (stream != d->legacy) return false;
    fs_stream_t *streams = malloc(((size_t)d->npools + 1) * sizeof *streams);
    if (!streams) return false;
    int n = 0;
    streams[n++] = d->legacy;
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        if (!atomic_load_explicit(&p->retired, memory_order_acquire) &&
            p->kind == FS_STREAM_NONBLOCKING)
            streams[n++] = p->stream;
    }
    fs_fence *f = fs_fence_make(d, streams, n);
    free(streams);
    bool done = f && fs_fence_wait_until(a, f, 0); /* one query */
    fs_fence_put(d, f);
    return done;
}

/* A miss about to grow the device's reserved memory past the most it ever
 * held, while the cache keeps wholly free segments that cannot serve the
 * request (too small, another pool's not yet known complete, the other
 * kind), gives those back first, as much as the growth would raise the
 * peak: else the peak holds memory nobody uses. Free segments left by
 * fragmentation made PyTorch FSDP on the sim peak 3-6% above PyTorch's
 * own allocator (whose per-stream pools fragment differently) with the
 * same allocated peak; PyTorch gives cached memory back only when the
 * device is full. Below the high-water mark nothing is released, so a
 * steady training loop, which stops missing once its cache holds what a
 * step needs, pays for this once, not every step. Caller holds dev->lock. */
static void keep_peak(fs_allocator *a, fs_dev *d, size_t rounded, fs_stream_t stream)
{
    const fs_device_ops *o = a->ops;
    if (fs_cfg(a)->expandable_segments || (o->capture_underway && o->capture_underway(o->ctx)))
        return;
    size_t reserved = fs_stats_reserved(d);
    size_t grown = reserved + fs_segment_size(fs_cfg(a), rounded, reserved);
    if (grown > d->reserved_high && device_idle(a, d, stream))
        fs_segments_release(a, d, FS_RELEASE_FITTING, grown - d->reserved_high);
}

/* After a growth: the new high-water mark. Caller holds dev->lock. */
static void note_high(fs_dev *d)
{
    size_t reserved = fs_stats_reserved(d);
    if (reserved > d->reserved_high) d->reserved_high = reserved;
}

FS_SLOW_PATH static void report_oom(fs_allocator *a, fs_dev *d, fs_stream_t stream, size_t size)
{
    fs_alloc_stats st;
    fs_stats_count(d, &d->st.num_ooms, 1);
    fs_alloc_get_stats(a, d->id, &st);
    fs_oom_info info = {
        .device = d->id,
        .stream = stream,
        .requested = size,
        .allocated = (size_t)st.allocated_bytes[FS_SIZE_ALL].current,
        .reserved_free = (size_t)(st.reserved_bytes[FS_SIZE_ALL].current -
                                  st.allocated_bytes[FS_SIZE_ALL].current),
        .largest_free = (size_t)st.largest_free_block,
        .reserved = (size_t)st.reserved_bytes[FS_SIZE_ALL].current,
        .other_free = fs_stats_free_elsewhere(d, stream),
        .pending = (size_t)st.pending_free_bytes,
    };
    fs_observer_node *o = atomic_load_explicit(&a->obs, memory_order_acquire);
    if (o && o->obs.on_oom) o->obs.on_oom(o->obs.ctx, &info);
}

/* The device's total memory, asked once, at its first miss: a CUDA call,
 * so before the device lock, under which the miss grows (garbage
 * collection, expandable segments' reservations and the trace's device
 * record need it there). The device is in use by then, so asking makes no
 * context on a device the program never touches. */
void fs_dev_learn_capacity(fs_allocator *a, fs_dev *d)
{
    if (atomic_load_explicit(&d->capacity, memory_order_acquire) != SIZE_MAX) return;
    const fs_device_ops *o = a->ops;
    size_t c = o->mem_capacity ? o->mem_capacity(o->ctx, d->id) : 0;
    atomic_store_explicit(&d->capacity, c == SIZE_MAX ? 0 : c, memory_order_release);
}

size_t fs_dev_capacity(fs_dev *d)
{
    size_t c = atomic_load_explicit(&d->capacity, memory_order_acquire);
    return c == SIZE_MAX ? 0 : c;
}

FS_SLOW_PATH static fs_block *miss(fs_allocator *a, fs_dev *d, fs_stream_cache *p, int set,
                                   size_t rounded, size_t req, fs_stream_t stream, unsigned flags,
                                   fs_status *st)
{
    fs_block *b = NULL;
    *st = FS_OK;
    fs_dev_learn_capacity(a, d); /* a device query: not under the lock */
    pthread_mutex_lock(&d->lock);
    atomic_fetch_add_explicit(&d->gc_clock, 1, memory_order_relaxed);
    for (int attempt = 0; attempt < 2 && !b; attempt++) {
        if (attempt == 1) {
            /* release and retry: wait for every outstanding event, give all
             * cached memory back, then grow once more */
            fs_stats_count(d, &d->st.num_alloc_retries, 1);
            fs_stats_count(d, &d->st.num_sync_all_streams, 1);
            fs_dev_retire_all(d, true);
            fs_segments_release(a, d, FS_RELEASE_LARGEST, SIZE_MAX);
        }
        if ((b = try_own(a, p, set, rounded, req, stream))) break;
        fs_batch_fence(d);
        if (fs_cfg(a)->cross_stream_reuse != FS_REUSE_NONE) fs_marks_record(d);
        fs_dev_retire_all(d, false);
        if ((b = try_own(a, p, set, rounded, req, stream))) break;
        if ((b = try_others(a, d, p, set, rounded, req, stream, flags))) break;
        collect_garbage(a, d);
        if (attempt == 0) keep_peak(a, d, rounded, stream);
        for (int grow = 0; grow < 4 && !b; grow++) {
            bool oom = false;
            fs_status gs = fs_segment_grow(a, p, set, rounded, &oom);
            if (gs == FS_ERR_OOM) break;
            if (gs != FS_OK) {
                *st = gs;
                pthread_mutex_unlock(&d->lock);
                return NULL;
            }
            note_high(d);
            b = try_own(a, p, set, rounded, req, stream);
        }
        if (!b && !p->priv) b = fs_private_lend(a, d, set, rounded, req, stream);
        /* the device is full: now the host may wait, for what is pending */
        if (!b && attempt == 0)
            b = wait_for_frees(a, d, p, set, rounded, req, stream, flags, FS_FREE_WAIT_NS);
    }
    pthread_mutex_unlock(&d->lock);
    if (!b) *st = FS_ERR_OOM;
    return b;
}

/* A request of pool p's, from its free bins or else through a miss. */
__attribute__((always_inline)) static inline fs_status malloc_in(fs_allocator *a, fs_dev *d,
                                                                 fs_stream_cache *p,
                                                                 fs_stream_t stream, size_t size,
                                                                 unsigned flags, void **out)
{
    size_t rounded = fs_round_request(a, size);
    int set = fs_set_of(fs_size_kind(rounded), flags & FS_ALLOC_STREAM_ORDERED);
    /* an allocation is a promise of work on its stream */
    if (!atomic_load_explicit(&p->had_work, memory_order_relaxed))
        atomic_store_explicit(&p->had_work, true, memory_order_release);
    fs_block *b = NULL;
    fs_status st = FS_OK;
    if (rounded && fs_segment_least(rounded)) {
        fs_cache_lock(p);
        /* When the best free block is a poor fit (twice the request or
         * more, so it would be split), completed deferred frees are retired
         * first, as PyTorch processes its events before an allocation: else
         * a big free block is split while a better fit only waits to be
         * retired. Only then: retiring walks the pending list and queries
         * fences, which a good fit need not pay for. */
        if (p->pending.head) {
            fs_block *fit = fs_bins_lower_bound(&p->free[set], rounded);
            if (fit && fit->size / 2 >= rounded) fs_cache_retire(a, p);
        }
        b = take_own(a, p, set, rounded, size, stream);
        fs_cache_unlock(p);
        if (!b) b = miss(a, d, p, set, rounded, size, stream, flags, &st);
    } else {
        st = FS_ERR_OOM; /* would wrap around: no device has that much */
    }
    if (!b) {
        if (st == FS_ERR_OOM) report_oom(a, d, stream, size);
        return st;
    }
    fs_observe(a, FS_EV_ALLOC, d->id, stream, b->addr, b->size, b->requested,
               flags & FS_ALLOC_STREAM_ORDERED);
    *out = (void *)b->addr;
    return FS_OK;
}

FS_HOT_PATH fs_status fs_malloc(fs_allocator *a, int device, fs_stream_t stream, size_t size,
                                unsigned flags, void **out)
{
    fs_dev *d = fs_dev_of(a, device);
    if (!d || !out || size == 0) return FS_ERR_INVALID;
    fs_stream_cache *p = fs_cache_get(a, device, stream);
    if (!p) return FS_ERR_DEVICE;
    return malloc_in(a, d, p, stream, size, flags, out);
}

fs_status fs_malloc_private(fs_allocator *a, int device, fs_stream_t stream, uint64_t priv,
                            size_t size, unsigned flags, void **out)
{
    fs_dev *d = fs_dev_of(a, device);
    if (!d || !out || size == 0) return FS_ERR_INVALID;
    fs_stream_cache *p =
        priv ? fs_private_get(a, device, stream, priv) : fs_cache_get(a, device, stream);
    if (!p) return FS_ERR_DEVICE;
    return malloc_in(a, d, p, stream, size, flags, out);
}
