/* stream.c - the streams a device knows and the pool each one allocates
 * from: registration, the per-thread lookup cache that keeps the hot path
 * off the device lock, work notes for batch fences, and retirement of
 * destroyed streams and of exited threads' per-thread streams (their pool
 * lives on under no handle, so a new stream that gets the same handle value
 * starts with an empty pool). */
#include "internal.h"

#include <stdlib.h>

static size_t bucket(fs_stream_t s)
{
    uint64_t h = (uint64_t)s * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 58);
}

fs_stream_cache *fs_cache_new(fs_dev *d, fs_stream_t s, enum fs_stream_kind kind, uint64_t priv)
{
    fs_stream_cache *p = fs_zalloc_lines(sizeof *p);
    if (!p) return NULL;
    if (fs_live_init(&p->live) != 0) {
        free(p);
        return NULL;
    }
    fs_spin_init(&p->lock);
    atomic_init(&p->had_work, false);
    atomic_init(&p->st.parked, false);
    atomic_init(&p->no_split, false);
    p->pconf.held = priv != 0;
    p->dev = d;
    p->stream = s;
    p->kind = kind;
    p->priv = priv;
    if (!fs_stats_pool_add(d, p)) {
        fs_live_fini(&p->live);
        free(p);
        return NULL;
    }
    if (!priv) {
        size_t h = bucket(s);
        p->hash_next = d->hash[h];
        d->hash[h] = p;
    }
    /* a stream new to the device is ordered after none of the others: it
     * waits for what they were made to wait for (a cudaMalloc that took a
     * block whose free was pending) */
    fs_fence_wait_all_new(d->a, d, p);
    return p;
}

void fs_cache_drop(fs_stream_cache *p)
{
    fs_live_fini(&p->live);
    for (fs_block *b = p->spare, *next; b; b = next) {
        next = b->lnext;
        free(b);
    }
    p->spare = NULL;
}

static fs_stream_cache *lookup_locked(fs_dev *d, fs_stream_t s, bool create)
{
    for (fs_stream_cache *p = d->hash[bucket(s)]; p; p = p->hash_next)
        if (p->stream == s) return p;
    if (!create) return NULL;
    /* First seen in a call: without knowing better, it gets fence events of
     * its own, which is always safe. */
    return fs_cache_new(d, s, s == d->legacy ? FS_STREAM_LEGACY : FS_STREAM_NONBLOCKING, 0);
}

enum fs_stream_kind fs_stream_kind_locked(fs_dev *d, fs_stream_t s)
{
    fs_stream_cache *p = lookup_locked(d, s, false);
    return p ? p->kind : s == d->legacy ? FS_STREAM_LEGACY : FS_STREAM_NONBLOCKING;
}

FS_TLS fs_tls_pool fs_tls_last_pool;

FS_SLOW_PATH fs_stream_cache *fs_cache_lookup(fs_allocator *a, int device, fs_stream_t s)
{
    fs_dev *d = &a->devs[device];
    pthread_mutex_lock(&d->lock);
    fs_stream_cache *p = lookup_locked(d, s, true);
    unsigned gen = atomic_load_explicit(&d->gen, memory_order_acquire);
    pthread_mutex_unlock(&d->lock);
    if (p) {
        fs_tls_pool *t = &fs_tls_last_pool;
        t->serial = a->serial;
        t->device = device;
        t->s = s;
        t->gen = gen;
        t->p = p;
    }
    return p;
}

void fs_alloc_stream_register(fs_allocator *a, int device, fs_stream_t s, enum fs_stream_kind kind)
{
    fs_dev *d = fs_dev_of(a, device);
    if (!d) return;
    pthread_mutex_lock(&d->lock);
    if (kind == FS_STREAM_LEGACY && d->legacy != s) {
        /* the legacy handle moves: whatever pool had it is now a plain stream */
        fs_stream_cache *old = lookup_locked(d, d->legacy, false);
        if (old && old->kind == FS_STREAM_LEGACY) old->kind = FS_STREAM_NONBLOCKING;
        d->legacy = s;
    }
    fs_stream_cache *p = lookup_locked(d, s, true);
    if (p) p->kind = kind;
    pthread_mutex_unlock(&d->lock);
}

void fs_alloc_stream_note_work(fs_allocator *a, int device, fs_stream_t s)
{
    if (device < 0 || device >= a->ndev) return;
    fs_stream_cache *p = fs_cache_get(a, device, s);
    if (p && !atomic_load_explicit(&p->had_work, memory_order_relaxed))
        atomic_store_explicit(&p->had_work, true, memory_order_release);
}

/* Takes p out of the registry: no handle finds it any more. dev->lock held. */
static void unhash(fs_dev *d, fs_stream_cache *p)
{
    fs_stream_cache **at = &d->hash[bucket(p->stream)];
    while (*at != p)
        at = &(*at)->hash_next;
    *at = p->hash_next;
    atomic_fetch_add_explicit(&d->gen, 1, memory_order_acq_rel);
}

/* The pools retiring stream s concerns, with d->lock held: its registry
 * pool (none for the legacy stream's, which never retires) and the
 * private pools on it. Returns how many went into out (at most max). */
static int retirable(fs_dev *d, fs_stream_t s, fs_stream_cache **out, int max)
{
    int n = 0;
    if (s == d->legacy) return 0;
    fs_stream_cache *p = lookup_locked(d, s, false);
    if (p && p->kind != FS_STREAM_LEGACY) out[n++] = p;
    for (int i = 0; i < d->npools && n < max; i++) {
        fs_stream_cache *q = d->pools[i];
        if (q->priv && q->stream == s && !atomic_load_explicit(&q->retired, memory_order_relaxed))
            out[n++] = q;
    }
    return n;
}

/* Private pools on one stream beyond this many are left unretired (their
 * frees then wait for events, which is always safe). */
#define FS_RETIRE_MAX 64

void fs_alloc_stream_retire(fs_allocator *a, int device, fs_stream_t s)
{
    fs_dev *d = fs_dev_of(a, device);
    fs_stream_cache *pools[FS_RETIRE_MAX];
    if (!d) return;
    pthread_mutex_lock(&d->lock);
    int n = retirable(d, s, pools, FS_RETIRE_MAX);
    if (n) {
        /* Fence what the stream did while it still exists: its work before
         * the unfenced frees, and its stream-ordered frees for the other
         * streams. */
        fs_batch_fence(d);
        fs_marks_record(d);
    }
    for (int i = 0; i < n; i++) {
        fs_stream_cache *p = pools[i];
        fs_cache_lock(p);
        p->retired = true;
        fs_cache_unlock(p);
        if (!p->priv) unhash(d, p);
    }
    pthread_mutex_unlock(&d->lock);
}

/* Why a thread's exit takes a token instead of recording a fence.
 *
 * The runtime destroys a thread's per-thread stream in a thread-exit
 * destructor of its own, and the order of thread-exit destructors is not
 * specified: by the time the shim learns of the exit the stream may be gone.
 * An event recorded then lands on a new, empty per-thread stream the runtime
 * makes for the purpose and completes at once, while the old stream's queued
 * work (which a destroyed stream still runs) has not. Nor can a legacy-stream
 * event stand in: the legacy stream waits for the blocking streams of its
 * context, and CUDA does not say that a destroyed stream with work queued is
 * still one of them. The exiting thread must not wait either (its queued work
 * may wait for a thread that joins it).
 *
 * What CUDA does promise is that cudaDeviceSynchronize returns once all work
 * issued before it began has completed, a destroyed stream's included. So
 * the exit takes a number from the device's host-sync tokens (dev_frees)
 * after everything the thread issued; a whole-device synchronisation whose
 * token is at or past it proves that work done. Until one does:
 *   - the pool's stream-ordered frees serve no other stream (its mark, which
 *     another thread may have recorded on the legacy stream in its stead,
 *     is dropped; exit_token takes its place);
 *   - no device-ordered free of the device is reusable on the strength of
 *     its batch fence, whose legacy-stream event is the very promise in
 *     doubt (fs_cache_retire, and take_pending in wait mode), though a
 *     synchronisation covering the free itself still returns it.
 * A synchronisation comes from the program (cudaDeviceSynchronize, as in
 * torch.cuda.empty_cache) or from the allocator itself, before it reports
 * out of memory and in empty_cache (fs_dev_retire_all). A pool whose
 * stream had no work gets no token: there is nothing to wait for. */
void fs_alloc_stream_exit(fs_allocator *a, int device, fs_stream_t s)
{
    fs_dev *d = fs_dev_of(a, device);
    fs_stream_cache *pools[FS_RETIRE_MAX];
    if (!d) return;
    pthread_mutex_lock(&d->lock);
    int n = retirable(d, s, pools, FS_RETIRE_MAX);
    for (int i = 0; i < n; i++) {
        fs_stream_cache *p = pools[i];
        fs_fence *mark = NULL;
        fs_cache_lock(p);
        p->retired = true;
        if (atomic_load_explicit(&p->had_work, memory_order_acquire) || p->so_seq > p->so_done) {
            uint64_t token = atomic_fetch_add_explicit(&d->dev_frees, 1, memory_order_acq_rel) + 1;
            atomic_store_explicit(&d->exit_token, token, memory_order_release);
            p->exit_token = token;
            mark = p->mark;
            p->mark = NULL;
        }
        fs_cache_unlock(p);
        fs_fence_put(d, mark);
        if (!p->priv) unhash(d, p);
    }
    pthread_mutex_unlock(&d->lock);
}
