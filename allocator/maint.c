/* maint.c - the calls that look after the cache rather than serve a
 * request: host-synchronisation notes, empty_cache and trim, the per-device
 * cap on growth (PyTorch's memory fraction), cudaDeviceReset
 * (what survives it and what the shim forgets), segment pinning (NCCL
 * registration) and describing an address. */
#include "internal.h"

static void for_devices(fs_allocator *a, int device, void (*fn)(fs_allocator *, fs_dev *, void *),
                        void *arg)
{
    for (int i = 0; i < a->ndev; i++)
        if (device < 0 || device == i) fn(a, &a->devs[i], arg);
}

static void host_sync(fs_allocator *a, fs_dev *d, void *arg)
{
    (void)a;
    (void)arg;
    pthread_mutex_lock(&d->lock);
    fs_dev_retire_all(d, false);
    pthread_mutex_unlock(&d->lock);
}

void fs_alloc_note_host_sync(fs_allocator *a, int device)
{
    for_devices(a, device, host_sync, NULL);
}

uint64_t fs_alloc_sync_begin(fs_allocator *a, int device)
{
    fs_dev *d = fs_dev_of(a, device);
    return d ? atomic_load_explicit(&d->dev_frees, memory_order_acquire) : 0;
}

void fs_alloc_note_host_sync_since(fs_allocator *a, int device, uint64_t token)
{
    fs_dev *d = fs_dev_of(a, device);
    if (!d) return;
    pthread_mutex_lock(&d->lock);
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        fs_cache_lock(p);
        fs_cache_retire_synced(a, p, token);
        fs_cache_unlock(p);
    }
    pthread_mutex_unlock(&d->lock);
}

static void empty(fs_allocator *a, fs_dev *d, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&d->lock);
    fs_dev_retire_all(d, true);
    fs_segments_release(a, d, FS_RELEASE_LARGEST, SIZE_MAX);
    fs_private_forget_spent(d);
    pthread_mutex_unlock(&d->lock);
}

fs_status fs_alloc_empty_cache(fs_allocator *a, int device)
{
    if (device >= a->ndev) return FS_ERR_INVALID;
    for_devices(a, device, empty, NULL);
    return FS_OK;
}

static void set_limit(fs_allocator *a, fs_dev *d, void *arg)
{
    (void)a;
    atomic_store_explicit(&d->limit, *(size_t *)arg, memory_order_relaxed);
}

void fs_alloc_set_limit(fs_allocator *a, int device, size_t bytes)
{
    if (device < a->ndev) for_devices(a, device, set_limit, &bytes);
}

size_t fs_alloc_limit(fs_allocator *a, int device)
{
    if (device < 0 || device >= a->ndev) return 0;
    return atomic_load_explicit(&a->devs[device].limit, memory_order_relaxed);
}

static void trim(fs_allocator *a, fs_dev *d, void *arg)
{
    size_t keep = *(size_t *)arg;
    pthread_mutex_lock(&d->lock);
    fs_dev_retire_all(d, false);
    fs_alloc_stats st;
    fs_stats_read(d, &st);
    int64_t unused = st.reserved_bytes[FS_SIZE_ALL].current - st.active_bytes[FS_SIZE_ALL].current;
    if (unused > 0 && (size_t)unused > keep)
        fs_segments_release(a, d, FS_RELEASE_LARGEST, (size_t)unused - keep);
    pthread_mutex_unlock(&d->lock);
}

fs_status fs_alloc_trim(fs_allocator *a, int device, size_t keep_bytes)
{
    if (device >= a->ndev) return FS_ERR_INVALID;
    for_devices(a, device, trim, &keep_bytes);
    return FS_OK;
}

/* ---- cudaDeviceReset ---- */

/* The reset destroyed the events every pending free waited for, and left
 * the device idle: each such block is free. p->lock held. */
static void reset_pending(fs_allocator *a, fs_stream_cache *p, fs_blist *l, fs_delta dl[FS_KINDS])
{
    while (l->head) {
        fs_block *b = l->head;
        fs_blist_del(l, b);
        fs_block_retire(a, p, b, dl);
    }
}

void fs_live_drop(fs_allocator *a, fs_stream_cache *p, fs_block *b, fs_delta dl[FS_KINDS])
{
    fs_delta *x = &dl[b->seg->kind];
    fs_live_remove(&p->live, b->addr);
    x->allocation--;
    x->allocated_bytes -= (int64_t)b->size;
    x->requested_bytes -= (int64_t)b->requested;
    x->oversize -= fs_oversize(p, b->size);
    x->active--;
    x->active_bytes -= (int64_t)b->size;
    fs_observe(a, FS_EV_FREE_REQUESTED, p->dev->id, b->stream, b->addr, b->size, b->requested,
               false);
    fs_observe(a, FS_EV_FREE_COMPLETED, p->dev->id, b->stream, b->addr, b->size, b->requested,
               false);
    b->free_seq = 0;
    fs_free_insert(p, b, x);
}

/* Brings pool p through the reset; returns the plain segments it gave up
 * (chained through `next`), for the caller to drop from the index. Memory
 * that survives stays with its blocks: ordered segments, and mappings. */
static fs_segment *reset_pool(fs_allocator *a, fs_stream_cache *p)
{
    fs_dev *d = p->dev;
    fs_delta dl[FS_KINDS] = {{.kind = FS_KIND_SMALL}, {.kind = FS_KIND_LARGE}};
    fs_segment *dropped = NULL;
    fs_cache_lock(p);
    reset_pending(a, p, &p->pending, dl);
    reset_pending(a, p, &p->unfenced, dl);
    fs_fence_put(d, p->mark);
    p->mark = NULL;
    p->so_done = p->so_seq; /* every stream-ordered free has completed */
    atomic_store_explicit(&p->had_work, false, memory_order_relaxed);
    for (fs_segment *s = p->segs, *next; s; s = next) {
        next = s->next;
        bool survives = s->ordered || s->expandable;
        /* a block absorbs its free neighbours and stays, so b->next holds */
        for (fs_block *b = s->head; b; b = b->next) {
            if (b->state != FS_BLOCK_LIVE) continue;
            if (s->ordered)
                b->nuses = 0; /* the streams it was used on are gone */
            else
                fs_live_drop(a, p, b, dl); /* the reset destroyed it: nobody's now */
        }
        if (!survives) {
            fs_segment_unlink(p, s, &dl[s->kind]);
            s->next = dropped;
            dropped = s;
        }
    }
    fs_stats_apply(p, &dl[FS_KIND_SMALL]);
    fs_stats_apply(p, &dl[FS_KIND_LARGE]);
    fs_cache_unlock(p);
    return dropped;
}

static bool pool_has_memory(fs_stream_cache *p)
{
    return p->segs != NULL;
}

/* The device's streams are gone: every pool but the legacy stream's leaves
 * the registry (a new stream may get an old handle), retired if it still
 * holds memory, else dropped. Caller holds dev->lock. */
static void reset_streams(fs_dev *d)
{
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        bool legacy = p->kind == FS_STREAM_LEGACY && p->stream == d->legacy;
        if (!legacy || !p->segs) atomic_store(&p->retired, true);
    }
    for (size_t h = 0; h < sizeof d->hash / sizeof d->hash[0]; h++)
        for (fs_stream_cache **at = &d->hash[h]; *at;)
            if (atomic_load(&(*at)->retired))
                *at = (*at)->hash_next;
            else
                at = &(*at)->hash_next;
    fs_stats_pools_keep(d, pool_has_memory, fs_cache_drop);
}

/* Fences of the device: their events died with the reset, and the idle
 * device has passed every one of them. Caller holds dev->lock. */
static void reset_fences(fs_dev *d)
{
    fs_batches_drop(d);
    atomic_store(&d->batch_done, d->batch_seq);
    atomic_store(&d->unfenced, 0);
    /* no pool is left to hold for an exited thread's per-thread stream:
     * the reset ended its work too */
    atomic_store(&d->synced_token, atomic_load(&d->exit_token));
    fs_dev_events_fini(d, false);
}

void fs_alloc_device_reset(fs_allocator *a, int device)
{
    fs_dev *d = fs_dev_of(a, device);
    if (!d) return;
    pthread_mutex_lock(&d->lock);
    /* first: no event made before now goes back into the cache */
    atomic_fetch_add_explicit(&d->epoch, 1, memory_order_acq_rel);
    fs_segment *dropped = NULL;
    for (int i = 0; i < d->npools; i++) {
        fs_segment *s = reset_pool(a, d->pools[i]);
        while (s) {
            fs_segment *next = s->next;
            s->next = dropped;
            dropped = s;
            s = next;
        }
    }
    /* out of the index before a new segment may get one of their addresses */
    for (fs_segment *s = dropped; s; s = s->next)
        fs_segidx_remove(a, s);
    reset_fences(d);
    /* what survived unused goes back: the device starts afresh, holding
     * only the blocks the program still has */
    fs_segments_release(a, d, FS_RELEASE_EVERYTHING, SIZE_MAX);
    /* before any pool goes: no thread's cached lookup may still name it */
    atomic_fetch_add_explicit(&d->gen, 1, memory_order_acq_rel);
    reset_streams(d);
    pthread_mutex_unlock(&d->lock);
    while (dropped) {
        fs_segment *s = dropped;
        dropped = s->next;
        fs_observe(a, FS_EV_SEGMENT_FREE, device, 0, s->base, s->size, 0, false);
        free(s);
    }
}

fs_status fs_alloc_segment_pin(fs_allocator *a, void *ptr, bool pin)
{
    fs_status st = FS_ERR_NOT_OWNED;
    pthread_rwlock_rdlock(&a->segidx_lock);
    fs_segment *s = fs_segidx_find(a, (uintptr_t)ptr);
    if (s) {
        fs_cache_lock(s->pool);
        if (s->detached) {
            st = FS_ERR_NOT_OWNED;
        } else if (pin) {
            s->pinned++;
            st = FS_OK;
        } else {
            st = s->pinned > 0 ? FS_OK : FS_ERR_INVALID;
            if (s->pinned > 0) s->pinned--;
        }
        fs_cache_unlock(s->pool);
    }
    pthread_rwlock_unlock(&a->segidx_lock);
    return st;
}

static fs_status describe(fs_block *b, void *arg)
{
    fs_block_info *out = arg;
    out->device = b->seg->pool->dev->id;
    out->stream = b->stream;
    out->block = (void *)b->addr;
    out->block_size = b->size;
    out->requested = b->requested;
    out->segment = (void *)b->seg->base;
    out->segment_size = b->seg->size;
    out->page = b->seg->expandable ? b->seg->page : 0;
    return FS_OK;
}

fs_status fs_alloc_block_info(fs_allocator *a, const void *ptr, fs_block_info *out)
{
    return fs_with_live_block(a, ptr, describe, out);
}
