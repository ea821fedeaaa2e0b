/* check.c - the invariant walker: every segment and block of a device,
 * compared with the free bins and the statistics, for the property tests
 * and for debugging (the mimalloc page-validity idea). */
#include "internal.h"

#include <string.h>

/* Counts a free set in order, checking that order and the block states. */
static size_t bins_count(const fs_bins *s, size_t *bytes, const char **err)
{
    size_t n = 0;
    const fs_block *prev = NULL;
    for (const fs_block *b = fs_bins_first(s); b; prev = b, b = fs_bins_next(s, b)) {
        if (b->state != FS_BLOCK_FREE) *err = "a free bin holds a block that is not free";
        if (prev && (prev->size > b->size || (prev->size == b->size && prev->addr >= b->addr)))
            *err = "the free bins are out of (size, address) order";
        *bytes += b->size;
        n++;
    }
    return n;
}

static const char *walk_pool(fs_stream_cache *p, fs_alloc_census *c)
{
    const char *err = NULL;
    size_t bin_blocks = 0, bin_bytes = 0, seg_free = 0, seg_free_bytes = 0;
    for (int k = 0; k < FS_SETS; k++)
        bin_blocks += bins_count(&p->free[k], &bin_bytes, &err);
    for (fs_segment *s = p->segs; s; s = s->next) {
        if (s->size) { /* a reservation with nothing mapped is no segment */
            c->segments++;
            c->mapped_bytes += s->size;
        }
        uintptr_t at = s->base;
        size_t mapped = 0;
        const fs_block *prev = NULL;
        for (fs_block *b = s->head; b; prev = b, b = b->next) {
            if (b->addr != at || b->seg != s || b->prev != prev || b->size == 0 ||
                b->size % FS_MIN_BLOCK)
                return "blocks do not tile their segment";
            if (prev && prev->state == FS_BLOCK_FREE && b->state == FS_BLOCK_FREE)
                return "two free neighbours were not coalesced";
            at += b->size;
            if (b->state != FS_BLOCK_UNMAPPED) mapped += b->size;
            switch (b->state) {
            case FS_BLOCK_UNMAPPED:
                if (!s->expandable || (b->addr - s->base) % s->page || b->size % s->page)
                    return "an unmapped block is not whole pages of an expandable segment";
                if (prev && prev->state == FS_BLOCK_UNMAPPED)
                    return "two unmapped neighbours were not merged";
                break;
            case FS_BLOCK_LIVE:
                c->live_blocks++;
                c->live_bytes += b->size;
                c->requested_bytes += b->requested;
                break;
            case FS_BLOCK_FREE:
                c->free_blocks++;
                c->free_bytes += b->size;
                seg_free++;
                seg_free_bytes += b->size;
                if (fs_block_is_split(b)) c->split_free_blocks++;
                break;
            default:
                c->pending_blocks++;
                c->pending_bytes += b->size;
                break;
            }
        }
        if (at != s->base + s->extent) return "blocks do not cover their segment";
        if (mapped != s->size) return "a segment's size disagrees with its mapped blocks";
    }
    if (err) return err;
    if (bin_blocks != seg_free || bin_bytes != seg_free_bytes)
        return "the free bins and the segments disagree";
    return NULL;
}

/* Every pool of the device stops: its lock, then every pool held still
 * (locked, or parked with its critical section done: see "stats.c"). */
static void lock_device(fs_dev *d)
{
    pthread_mutex_lock(&d->lock);
    fs_stats_stop(d);
}

static void unlock_device(fs_dev *d)
{
    fs_stats_resume(d);
    pthread_mutex_unlock(&d->lock);
}

const char *fs_alloc_check(fs_allocator *a, int device, fs_alloc_census *out)
{
    fs_dev *d = fs_dev_of(a, device);
    memset(out, 0, sizeof *out);
    if (!d) return "no such device";
    const char *err = NULL;
    lock_device(d);
    size_t listed = 0;
    for (int i = 0; i < d->npools && !err; i++) {
        err = walk_pool(d->pools[i], out);
        listed += d->pools[i]->pending.n + d->pools[i]->unfenced.n;
    }
    fs_alloc_stats st;
    fs_stats_read_stopped(d, &st);
    unlock_device(d);
    if (err) return err;
    if (listed != out->pending_blocks) return "pending lists and pending blocks disagree";
    if ((size_t)st.reserved_bytes[FS_SIZE_ALL].current != out->mapped_bytes)
        return "reserved_bytes disagrees with the segments";
    if ((size_t)st.allocated_bytes[FS_SIZE_ALL].current != out->live_bytes ||
        (size_t)st.allocation[FS_SIZE_ALL].current != out->live_blocks)
        return "allocated_bytes or allocation disagrees with the live blocks";
    if ((size_t)st.requested_bytes[FS_SIZE_ALL].current != out->requested_bytes)
        return "requested_bytes disagrees with the live blocks";
    if ((size_t)st.pending_free_bytes != out->pending_bytes ||
        (size_t)st.pending_frees != out->pending_blocks)
        return "pending frees disagree with the pending blocks";
    if ((size_t)st.active_bytes[FS_SIZE_ALL].current != out->live_bytes + out->pending_bytes)
        return "active_bytes is not live + pending";
    if ((size_t)st.inactive_split[FS_SIZE_ALL].current != out->split_free_blocks)
        return "inactive_split disagrees with the split free blocks";
    if ((size_t)st.segment[FS_SIZE_ALL].current != out->segments) return "segment count disagrees";
    return NULL;
}

static size_t walk_segments(fs_stream_cache *p, fs_walk_entry *out, size_t max, size_t n)
{
    for (fs_segment *s = p->segs; s; s = s->next) {
        if (!s->size) continue; /* a reservation with nothing mapped */
        if (n < max)
            out[n] = (fs_walk_entry){.state = FS_WALK_SEGMENT,
                                     .stream = p->stream,
                                     .addr = s->base,
                                     .size = s->size,
                                     .expandable = s->expandable,
                                     .large = s->kind == FS_KIND_LARGE,
                                     .priv = p->priv};
        n++;
        for (fs_block *b = s->head; b; b = b->next) {
            fs_walk_state st = b->state == FS_BLOCK_LIVE   ? FS_WALK_LIVE
                               : b->state == FS_BLOCK_FREE ? FS_WALK_CACHED
                                                           : FS_WALK_PENDING;
            if (b->state == FS_BLOCK_UNMAPPED) continue;
            if (n < max)
                out[n] = (fs_walk_entry){.state = st,
                                         .stream = p->stream,
                                         .addr = b->addr,
                                         .size = b->size,
                                         .requested = b->requested,
                                         .large = s->kind == FS_KIND_LARGE,
                                         .priv = p->priv};
            n++;
        }
    }
    return n;
}

size_t fs_alloc_walk(fs_allocator *a, int device, fs_walk_entry *out, size_t max)
{
    fs_dev *d = fs_dev_of(a, device);
    size_t n = 0;
    if (!d) return 0;
    lock_device(d);
    for (int i = 0; i < d->npools; i++)
        n = walk_segments(d->pools[i], out, max, n);
    unlock_device(d);
    return n;
}
