/* fence.c - ordering freed memory after the GPU work that may still touch
 * it: events (recycled per device), fences (a set of events, reference
 * counted), the device's batch fences that cover every unfenced
 * device-ordered free at once, the mark events that let other streams reuse
 * a pool's stream-ordered frees, and the retirement of pending blocks whose
 * fences have completed.
 *
 * Batch fences complete in order: batch k counts as done only when its own
 * events and every earlier batch's have completed, so a batch need not hold
 * events for streams that had no work since the batch before it. */
#include "internal.h"

#include <stdlib.h>
#include <time.h>

/* ---- events ------------------------------------------------------------- */

static bool get_event(fs_dev *d, fs_event_t *out)
{
    fs_spin_lock(&d->ev_lock);
    if (d->nev) {
        *out = d->evcache[--d->nev];
        fs_spin_unlock(&d->ev_lock);
        return true;
    }
    fs_spin_unlock(&d->ev_lock);
    const fs_device_ops *o = d->a->ops;
    return o->event_create(o->ctx, d->id, out) == FS_DEV_OK;
}

static void put_event(fs_dev *d, unsigned epoch, fs_event_t ev)
{
    if (epoch != atomic_load_explicit(&d->epoch, memory_order_acquire))
        return; /* made before cudaDeviceReset: already gone */
    fs_spin_lock(&d->ev_lock);
    if (d->nev == d->capev) {
        int cap = d->capev ? d->capev * 2 : 64;
        fs_event_t *n = realloc(d->evcache, (size_t)cap * sizeof *n);
        if (!n) {
            fs_spin_unlock(&d->ev_lock);
            d->a->ops->event_destroy(d->a->ops->ctx, d->id, ev);
            return;
        }
        d->evcache = n;
        d->capev = cap;
    }
    d->evcache[d->nev++] = ev;
    fs_spin_unlock(&d->ev_lock);
}

void fs_dev_events_fini(fs_dev *d, bool destroy)
{
    if (destroy)
        for (int i = 0; i < d->nev; i++)
            d->a->ops->event_destroy(d->a->ops->ctx, d->id, d->evcache[i]);
    free(d->evcache);
    d->evcache = NULL;
    d->nev = d->capev = 0;
}

/* ---- fences ----------------------------------------------------------- */

static bool capturing(fs_dev *d, fs_stream_t s)
{
    const fs_device_ops *o = d->a->ops;
    return o->stream_is_capturing && o->stream_is_capturing(o->ctx, d->id, s);
}

FS_SLOW_PATH fs_fence *fs_fence_make(fs_dev *d, const fs_stream_t *streams, int n)
{
    const fs_device_ops *o = d->a->ops;
    for (int i = 0; i < n; i++)
        if (capturing(d, streams[i])) return NULL;
    fs_fence *f = malloc(sizeof *f + (size_t)n * sizeof f->ev[0]);
    if (!f) return NULL;
    atomic_init(&f->refs, 1);
    atomic_init(&f->done, false);
    atomic_init(&f->after_batch, 0);
    f->device = d->id;
    f->epoch = atomic_load_explicit(&d->epoch, memory_order_acquire);
    f->batch_seq = 0;
    f->fifo_next = NULL;
    f->n = 0;
    for (int i = 0; i < n; i++) {
        if (!get_event(d, &f->ev[f->n])) goto fail;
        f->n++;
        if (o->event_record(o->ctx, d->id, f->ev[f->n - 1], streams[i]) != FS_DEV_OK) goto fail;
    }
    return f;
fail:
    fs_fence_put(d, f);
    return NULL;
}

void fs_fence_get(fs_fence *f)
{
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

void fs_fence_put(fs_dev *d, fs_fence *f)
{
    if (!f || atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1) return;
    for (int i = 0; i < f->n; i++)
        put_event(d, f->epoch, f->ev[i]);
    free(f);
}

/* Its own events only. A failed query counts as complete: a broken device
 * must not keep memory cached forever. */
static bool events_done(fs_dev *d, fs_fence *f)
{
    const fs_device_ops *o = d->a->ops;
    if (atomic_load_explicit(&f->done, memory_order_acquire)) return true;
    for (int i = 0; i < f->n; i++)
        if (o->event_query(o->ctx, d->id, f->ev[i]) == FS_DEV_NOT_READY) return false;
    return true;
}

/* Pops completed batches off the front of the device's queue. */
static bool batch_reached(fs_dev *d, uint64_t seq)
{
    if (atomic_load_explicit(&d->batch_done, memory_order_acquire) >= seq) return true;
    fs_fence *drop = NULL;
    fs_spin_lock(&d->batch_lock);
    while (d->fifo_head && events_done(d, d->fifo_head)) {
        fs_fence *h = d->fifo_head;
        atomic_store_explicit(&h->done, true, memory_order_release);
        atomic_store_explicit(&d->batch_done, h->batch_seq, memory_order_release);
        d->fifo_head = h->fifo_next;
        if (!d->fifo_head) d->fifo_tail = NULL;
        h->fifo_next = drop;
        drop = h;
    }
    fs_spin_unlock(&d->batch_lock);
    while (drop) {
        fs_fence *n = drop->fifo_next;
        fs_fence_put(d, drop);
        drop = n;
    }
    return atomic_load_explicit(&d->batch_done, memory_order_acquire) >= seq;
}

static bool capture_underway(fs_allocator *a)
{
    return a->ops->capture_underway && a->ops->capture_underway(a->ops->ctx);
}

/* Never queries while a capture is under way. */
static bool fence_done(fs_allocator *a, fs_fence *f)
{
    if (atomic_load_explicit(&f->done, memory_order_acquire)) return true;
    if (capture_underway(a)) return false;
    fs_dev *d = &a->devs[f->device];
    uint64_t after = atomic_load_explicit(&f->after_batch, memory_order_acquire);
    uint64_t need = f->batch_seq ? f->batch_seq : after;
    if (f->batch_seq) {
        if (!batch_reached(d, need)) return false;
    } else {
        if (!events_done(d, f) || (need && !batch_reached(d, need))) return false;
    }
    atomic_store_explicit(&f->done, true, memory_order_release);
    return true;
}

static void sync_events(fs_dev *d, fs_fence *f)
{
    const fs_device_ops *o = d->a->ops;
    for (int i = 0; i < f->n; i++)
        o->event_synchronize(o->ctx, d->id, f->ev[i]);
}

/* Blocks on the host for every batch up to `seq`. */
static void sync_batches(fs_dev *d, uint64_t seq)
{
    for (;;) {
        fs_spin_lock(&d->batch_lock);
        fs_fence *h = d->fifo_head;
        if (h && h->batch_seq <= seq)
            fs_fence_get(h);
        else
            h = NULL;
        fs_spin_unlock(&d->batch_lock);
        if (!h) return;
        sync_events(d, h);
        atomic_store_explicit(&h->done, true, memory_order_release);
        batch_reached(d, h->batch_seq);
        fs_fence_put(d, h);
    }
}

uint64_t fs_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Polls rather than synchronising: an event the program's own host-side
 * gate holds back (a host function waiting for the thread that is now
 * allocating) must cost a bounded delay, never a deadlock. */
bool fs_fence_wait_until(fs_allocator *a, fs_fence *f, uint64_t deadline)
{
    long pause = 2000; /* ns, doubling up to 1 ms */
    for (;;) {
        if (capture_underway(a)) return false;
        if (fence_done(a, f)) return true;
        if (fs_now_ns() >= deadline) return false;
        struct timespec ts = {0, pause};
        nanosleep(&ts, NULL);
        if (pause < 1000000) pause *= 2;
    }
}

/* A host wait for every event of f. */
static void fence_sync(fs_allocator *a, fs_fence *f)
{
    if (atomic_load_explicit(&f->done, memory_order_acquire) || capture_underway(a)) return;
    fs_dev *d = &a->devs[f->device];
    uint64_t after = atomic_load_explicit(&f->after_batch, memory_order_acquire);
    sync_batches(d, f->batch_seq ? f->batch_seq : after);
    if (!f->batch_seq) sync_events(d, f);
    atomic_store_explicit(&f->done, true, memory_order_release);
}

/* The waits for one fence's events on stream s. */
static fs_status gpu_wait_events(fs_allocator *a, fs_fence *f, fs_stream_t s)
{
    const fs_device_ops *o = a->ops;
    for (int i = 0; i < f->n; i++)
        if (o->stream_wait_event(o->ctx, f->device, s, f->ev[i]) != FS_DEV_OK) return FS_ERR_DEVICE;
    return FS_OK;
}

/* A batch fence holds events only for the streams that had work since the
 * batch before it, so a GPU-side wait for it is a wait for every batch up
 * to it still in the queue, oldest first, then for f's own events. Each
 * batch is held by a reference while its waits are issued: the queue may
 * drop it meanwhile. */
fs_status fs_fence_gpu_wait(fs_allocator *a, fs_fence *f, fs_stream_t s)
{
    if (!f || atomic_load_explicit(&f->done, memory_order_acquire)) return FS_OK;
    fs_dev *d = &a->devs[f->device];
    uint64_t need =
        f->batch_seq ? f->batch_seq : atomic_load_explicit(&f->after_batch, memory_order_acquire);
    for (uint64_t seq = 0; need && !batch_reached(d, need);) {
        fs_spin_lock(&d->batch_lock);
        fs_fence *h = d->fifo_head;
        while (h && h->batch_seq <= seq)
            h = h->fifo_next;
        if (h && h->batch_seq <= need)
            fs_fence_get(h);
        else
            h = NULL;
        fs_spin_unlock(&d->batch_lock);
        if (!h) break;
        seq = h->batch_seq;
        fs_status st = h == f ? FS_OK : gpu_wait_events(a, h, s);
        fs_fence_put(d, h);
        if (st != FS_OK) return st;
    }
    return gpu_wait_events(a, f, s);
}

/* Where no stream orders a reuse (a cudaMalloc takes a block whose
 * device-ordered free is still pending), every stream that may use the
 * block waits for the free's batch on the GPU instead of the host waiting:
 * the legacy stream, whose later work every blocking stream's later work
 * follows (per-thread streams included), and every live non-blocking
 * stream. A stream already made to wait for this batch or a later one
 * is skipped (batches complete in order), so the misses of one step pay
 * for the waits once. The block's recorded-use fence, where it has one,
 * is waited for by every stream too. Streams the device learns of
 * afterwards wait when it does (fs_fence_wait_all_new): a new stream has
 * no order with the others. */
static fs_status wait_one_stream(fs_allocator *a, fs_stream_cache *p, fs_fence *f, fs_fence *uses)
{
    if (p->all_waited < f->batch_seq) {
        fs_status st = fs_fence_gpu_wait(a, f, p->stream);
        if (st != FS_OK) return st;
        p->all_waited = f->batch_seq;
    }
    return fs_fence_gpu_wait(a, uses, p->stream);
}

/* Remembers uses for the streams to come, dropping the ones complete. */
static void keep_uses(fs_allocator *a, fs_dev *d, fs_fence *uses)
{
    int n = 0;
    for (int i = 0; i < d->nall_uses; i++) {
        fs_fence *u = d->all_uses[i];
        if (fence_done(a, u))
            fs_fence_put(d, u);
        else
            d->all_uses[n++] = u;
    }
    d->nall_uses = n;
    if (!uses || fence_done(a, uses)) return;
    if (d->nall_uses == d->capall_uses) {
        int cap = d->capall_uses ? 2 * d->capall_uses : 8;
        fs_fence **grown = realloc(d->all_uses, (size_t)cap * sizeof *grown);
        if (!grown) return; /* the caller's waits stand; a later stream may miss this one */
        d->all_uses = grown;
        d->capall_uses = cap;
    }
    fs_fence_get(uses);
    d->all_uses[d->nall_uses++] = uses;
}

fs_status fs_fence_gpu_wait_all(fs_allocator *a, fs_dev *d, fs_fence *f, fs_fence *uses)
{
    if (!f || !f->batch_seq) return FS_ERR_INVALID;
    bool legacy_seen = false;
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        bool legacy = p->kind == FS_STREAM_LEGACY && p->stream == d->legacy;
        legacy_seen |= legacy;
        if (atomic_load_explicit(&p->retired, memory_order_acquire) ||
            (!legacy && p->kind != FS_STREAM_NONBLOCKING))
            continue;
        fs_status st = wait_one_stream(a, p, f, uses);
        if (st != FS_OK) return st;
    }
    /* a legacy stream that never allocated has no pool to remember it by */
    if (!legacy_seen) {
        fs_status st = fs_fence_gpu_wait(a, f, d->legacy);
        if (st == FS_OK) st = fs_fence_gpu_wait(a, uses, d->legacy);
        if (st != FS_OK) return st;
    }
    if (!d->all_wait || d->all_wait->batch_seq < f->batch_seq) {
        fs_fence_get(f);
        fs_fence_put(d, d->all_wait);
        d->all_wait = f;
    }
    keep_uses(a, d, uses);
    return FS_OK;
}

void fs_fence_wait_all_new(fs_allocator *a, fs_dev *d, fs_stream_cache *p)
{
    if (capturing(d, p->stream)) return;
    if (d->all_wait && !fence_done(a, d->all_wait)) (void)wait_one_stream(a, p, d->all_wait, NULL);
    for (int i = 0; i < d->nall_uses; i++)
        (void)fs_fence_gpu_wait(a, d->all_uses[i], p->stream);
}

/* ---- the public fence calls -------------------------------------------------- */

fs_dev_status fs_fence_query(fs_allocator *a, fs_fence *f)
{
    return fence_done(a, f) ? FS_DEV_OK : FS_DEV_NOT_READY;
}

fs_dev_status fs_fence_wait(fs_allocator *a, fs_fence *f)
{
    fence_sync(a, f);
    return atomic_load_explicit(&f->done, memory_order_acquire) ? FS_DEV_OK : FS_DEV_NOT_READY;
}

void fs_fence_release(fs_allocator *a, fs_fence *f)
{
    if (f) fs_fence_put(&a->devs[f->device], f);
}

/* ---- block lists -------------------------------------------------------------- */

void fs_blist_push(fs_blist *l, fs_block *b)
{
    b->lprev = NULL;
    b->lnext = l->head;
    if (l->head) l->head->lprev = b;
    l->head = b;
    l->n++;
}

void fs_blist_del(fs_blist *l, fs_block *b)
{
    if (b->lprev)
        b->lprev->lnext = b->lnext;
    else
        l->head = b->lnext;
    if (b->lnext) b->lnext->lprev = b->lprev;
    b->lnext = b->lprev = NULL;
    l->n--;
}

/* ---- batch fences and marks ---------------------------------------------------- */

bool fs_batch_fence(fs_dev *d)
{
    bool ok = false;
    if (atomic_load_explicit(&d->unfenced, memory_order_acquire) == 0) return true;
    fs_blist *taken = calloc((size_t)d->npools, sizeof *taken);
    fs_stream_t *streams = malloc(((size_t)d->npools + 1) * sizeof *streams);
    fs_stream_cache **flagged = malloc(((size_t)d->npools + 1) * sizeof *flagged);
    if (!taken || !streams || !flagged) goto out;
    /* First the blocks freed so far, then the streams whose work they may
     * follow: work noted before a free is then always seen. */
    long count = 0;
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        fs_cache_lock(p);
        taken[i] = p->unfenced;
        p->unfenced = (fs_blist){0};
        fs_cache_unlock(p);
        count += (long)taken[i].n;
    }
    int n = 0, nf = 0;
    streams[n++] = d->legacy;
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        if (p->retired || p->kind != FS_STREAM_NONBLOCKING) continue;
        if (atomic_exchange_explicit(&p->had_work, false, memory_order_acq_rel)) {
            flagged[nf++] = p;
            streams[n++] = p->stream;
        }
    }
    fs_fence *f = fs_fence_make(d, streams, n);
    if (!f) {
        /* a capture is under way on one of them: try again later */
        for (int i = 0; i < nf; i++)
            atomic_store_explicit(&flagged[i]->had_work, true, memory_order_release);
        for (int i = 0; i < d->npools; i++) {
            fs_stream_cache *p = d->pools[i];
            fs_cache_lock(p);
            for (fs_block *b = taken[i].head, *next; b; b = next) {
                next = b->lnext;
                fs_blist_push(&p->unfenced, b);
            }
            fs_cache_unlock(p);
        }
        goto out;
    }
    fs_spin_lock(&d->batch_lock);
    f->batch_seq = ++d->batch_seq;
    fs_fence_get(f); /* the queue's reference */
    if (d->fifo_tail)
        d->fifo_tail->fifo_next = f;
    else
        d->fifo_head = f;
    d->fifo_tail = f;
    fs_spin_unlock(&d->batch_lock);
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        if (!taken[i].head) continue;
        fs_cache_lock(p);
        for (fs_block *b = taken[i].head, *next; b; b = next) {
            next = b->lnext;
            fs_fence_get(f);
            b->fence = f;
            b->state = FS_BLOCK_PENDING;
            fs_blist_push(&p->pending, b);
        }
        fs_cache_unlock(p);
    }
    atomic_fetch_sub_explicit(&d->unfenced, count, memory_order_acq_rel);
    fs_fence_put(d, d->last_batch);
    d->last_batch = f;
    ok = true;
out:
    free(taken);
    free(streams);
    free(flagged);
    return ok;
}

void fs_batches_drop(fs_dev *d)
{
    while (d->fifo_head) {
        fs_fence *h = d->fifo_head;
        d->fifo_head = h->fifo_next;
        fs_fence_put(d, h);
    }
    d->fifo_tail = NULL;
    fs_fence_put(d, d->last_batch);
    d->last_batch = NULL;
    fs_fence_put(d, d->all_wait);
    d->all_wait = NULL;
    for (int i = 0; i < d->nall_uses; i++)
        fs_fence_put(d, d->all_uses[i]);
    free(d->all_uses);
    d->all_uses = NULL;
    d->nall_uses = d->capall_uses = 0;
}

void fs_marks_record(fs_dev *d)
{
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        fs_cache_lock(p);
        bool need = !p->mark && p->so_seq > p->so_done && !p->retired;
        uint64_t seq = p->so_seq;
        fs_cache_unlock(p);
        if (!need) continue;
        fs_fence *m = fs_fence_make(d, &p->stream, 1);
        if (!m) continue;
        fs_cache_lock(p);
        p->mark = m;
        p->mark_seq = seq;
        fs_cache_unlock(p);
    }
}

/* ---- retirement ------------------------------------------------------------------ */

/* Fences already seen incomplete in one retirement pass: many pending
 * blocks share a batch fence, and asking the device again for each of them
 * would cost one query per block. */
typedef struct seen {
    fs_fence *f[8];
    int n;
} seen;

static bool done_once(fs_allocator *a, fs_fence *f, seen *s)
{
    if (!f) return true;
    for (int i = 0; i < s->n; i++)
        if (s->f[i] == f) return false;
    if (fence_done(a, f)) return true;
    if (s->n < 8) s->f[s->n++] = f;
    return false;
}

void fs_block_retire(fs_allocator *a, fs_stream_cache *p, fs_block *b, fs_delta *dl)
{
    fs_dev *d = p->dev;
    fs_fence_put(d, b->fence);
    fs_fence_put(d, b->uses_fence);
    b->fence = b->uses_fence = NULL;
    b->dev_seq = 0;
    b->ready_stream = 0;
    b->has_ready = false;
    fs_delta *x = &dl[b->seg->kind];
    x->active--;
    x->active_bytes -= (int64_t)b->size;
    x->pending--;
    x->pending_bytes -= (int64_t)b->size;
    b->free_seq = 0;
    fs_observe(a, FS_EV_FREE_COMPLETED, d->id, b->stream, b->addr, b->size, b->requested, false);
    fs_free_insert(p, b, x);
}

bool fs_dev_exit_pending(fs_dev *d)
{
    return atomic_load_explicit(&d->exit_token, memory_order_acquire) >
           atomic_load_explicit(&d->synced_token, memory_order_acquire);
}

FS_SLOW_PATH size_t fs_cache_retire(fs_allocator *a, fs_stream_cache *p)
{
    if (capture_underway(a)) return 0;
    fs_dev *d = p->dev;
    if (p->mark && fence_done(a, p->mark)) {
        p->so_done = p->mark_seq;
        fs_fence_put(d, p->mark);
        p->mark = NULL;
    }
    if (p->exit_token &&
        atomic_load_explicit(&d->synced_token, memory_order_acquire) >= p->exit_token) {
        p->so_done = p->so_seq; /* its exited thread's work is done */
        p->exit_token = 0;
    }
    /* device-ordered frees wait for a synchronisation past a thread's exit:
     * see fs_alloc_stream_exit */
    bool exit_pending = fs_dev_exit_pending(d);
    fs_delta dl[FS_KINDS] = {{.kind = FS_KIND_SMALL}, {.kind = FS_KIND_LARGE}};
    seen pending = {.n = 0};
    size_t n = 0;
    for (fs_block *b = p->pending.head, *next; b; b = next) {
        next = b->lnext;
        if (exit_pending && b->dev_seq) continue;
        if (!done_once(a, b->fence, &pending) || !done_once(a, b->uses_fence, &pending)) continue;
        fs_blist_del(&p->pending, b);
        fs_block_retire(a, p, b, dl);
        n++;
    }
    if (n) {
        fs_stats_apply(p, &dl[0]);
        fs_stats_apply(p, &dl[1]);
    }
    return n;
}

size_t fs_cache_retire_synced(fs_allocator *a, fs_stream_cache *p, uint64_t token)
{
    if (capture_underway(a)) return 0;
    fs_dev *d = p->dev;
    if (token > atomic_load_explicit(&d->synced_token, memory_order_acquire))
        atomic_store_explicit(&d->synced_token, token, memory_order_release);
    fs_delta dl[FS_KINDS] = {{.kind = FS_KIND_SMALL}, {.kind = FS_KIND_LARGE}};
    size_t n = 0;
    long unfenced = 0;
    for (fs_block *b = p->unfenced.head, *next; b; b = next) {
        next = b->lnext;
        if (b->dev_seq > token) continue;
        fs_blist_del(&p->unfenced, b);
        fs_block_retire(a, p, b, dl);
        unfenced++;
        n++;
    }
    for (fs_block *b = p->pending.head, *next; b; b = next) {
        next = b->lnext;
        if (!b->dev_seq || b->dev_seq > token) continue;
        fs_blist_del(&p->pending, b);
        fs_block_retire(a, p, b, dl);
        n++;
    }
    if (unfenced) atomic_fetch_sub_explicit(&d->unfenced, unfenced, memory_order_acq_rel);
    if (n) {
        fs_stats_apply(p, &dl[0]);
        fs_stats_apply(p, &dl[1]);
    }
    return n + fs_cache_retire(a, p);
}

/* Host-waits for every fence a pool of `d` still holds, then retires. */
static void sync_pool(fs_allocator *a, fs_stream_cache *p)
{
    fs_dev *d = p->dev;
    for (;;) {
        fs_fence *f = NULL;
        fs_cache_lock(p);
        if (p->mark && !atomic_load(&p->mark->done)) f = p->mark;
        for (fs_block *b = p->pending.head; b && !f; b = b->lnext) {
            if (b->fence && !atomic_load(&b->fence->done))
                f = b->fence;
            else if (b->uses_fence && !atomic_load(&b->uses_fence->done))
                f = b->uses_fence;
        }
        if (f) fs_fence_get(f);
        fs_cache_unlock(p);
        if (!f) return;
        fence_sync(a, f);
        fs_fence_put(d, f);
        if (!atomic_load(&f->done)) return; /* a capture began: stop waiting */
    }
}

/* The device's own whole-device synchronisation, for what only one can
 * prove done: work an exited thread left on its per-thread stream. */
static void sync_device(fs_allocator *a, fs_dev *d)
{
    const fs_device_ops *o = a->ops;
    if (capture_underway(a)) return; /* it would break the capture */
    uint64_t token = atomic_load_explicit(&d->dev_frees, memory_order_acquire);
    if (o->device_synchronize(o->ctx, d->id) != FS_DEV_OK) return;
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        fs_cache_lock(p);
        fs_cache_retire_synced(a, p, token);
        fs_cache_unlock(p);
    }
}

void fs_dev_retire_all(fs_dev *d, bool sync)
{
    fs_allocator *a = d->a;
    if (sync) {
        if (fs_dev_exit_pending(d)) sync_device(a, d);
        fs_batch_fence(d);
        fs_marks_record(d);
        for (int i = 0; i < d->npools; i++)
            sync_pool(a, d->pools[i]);
    }
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        fs_cache_lock(p);
        fs_cache_retire(a, p);
        fs_cache_unlock(p);
    }
}
