/* maint.c - the calls that look after the cache rather than serve a
 * request: host-synchronisation notes, empty_cache and trim, cudaDeviceReset,
 * segment pinning (NCCL registration) and describing an address. */
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
        fs_pool *p = d->pools[i];
        fs_spin_lock(&p->lock);
        fs_pool_retire_synced(a, p, token);
        fs_spin_unlock(&p->lock);
    }
    pthread_mutex_unlock(&d->lock);
}

static void empty(fs_allocator *a, fs_dev *d, void *arg)
{
    (void)arg;
    pthread_mutex_lock(&d->lock);
    fs_dev_retire_all(d, true);
    fs_segments_release(a, d, FS_RELEASE_LARGEST, SIZE_MAX);
    pthread_mutex_unlock(&d->lock);
}

fs_status fs_alloc_empty_cache(fs_allocator *a, int device)
{
    if (device >= a->ndev) return FS_ERR_INVALID;
    for_devices(a, device, empty, NULL);
    return FS_OK;
}

static void trim(fs_allocator *a, fs_dev *d, void *arg)
{
    size_t keep = *(size_t *)arg;
    pthread_mutex_lock(&d->lock);
    fs_dev_retire_all(d, false);
    fs_alloc_stats st;
    fs_stats_read(d, &st);
    int64_t unused = st.reserved_bytes[FS_POOL_ALL].current - st.active_bytes[FS_POOL_ALL].current;
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

void fs_alloc_device_reset(fs_allocator *a, int device)
{
    fs_dev *d = fs_dev_of(a, device);
    if (!d) return;
    pthread_mutex_lock(&d->lock);
    fs_dev_teardown(a, d, false);
    pthread_mutex_unlock(&d->lock);
}

fs_status fs_alloc_segment_pin(fs_allocator *a, void *ptr, bool pin)
{
    fs_status st = FS_ERR_NOT_OWNED;
    pthread_rwlock_rdlock(&a->segidx_lock);
    fs_segment *s = fs_segidx_find(a, (uintptr_t)ptr);
    if (s) {
        fs_spin_lock(&s->pool->lock);
        if (s->detached) {
            st = FS_ERR_NOT_OWNED;
        } else if (pin) {
            s->pinned++;
            st = FS_OK;
        } else {
            st = s->pinned > 0 ? FS_OK : FS_ERR_INVALID;
            if (s->pinned > 0) s->pinned--;
        }
        fs_spin_unlock(&s->pool->lock);
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
    return FS_OK;
}

fs_status fs_alloc_block_info(fs_allocator *a, const void *ptr, fs_block_info *out)
{
    return fs_with_live_block(a, ptr, describe, out);
}
