/* stats.c - the statistics PyTorch users know ({current, peak, allocated,
 * freed} per pool kind), kept per device.
 *
 * Every change an operation makes (often five or six counters) is applied
 * at once under a short lock of its own: peaks exact, and a reader sees a
 * snapshot in which allocated + cached + pending == reserved always holds.
 * Inside, counters are kept by pool kind only; the all-pools current and
 * allocated figures are sums made by readers. Peaks cannot be summed, so
 * the all-pools peak of each field is kept too, checked against the sum of
 * the two kinds' currents whenever one of them rises. */
#include "internal.h"

#include <assert.h>
#include <string.h>

/* The rows one kind's change touches, found once per update. */
typedef struct stat_rows {
    int64_t *cur, *other, *total, *peak, *peak_all;
} stat_rows;

static inline stat_rows rows_of(fs_dev_stats *s, int k)
{
    return (stat_rows){s->cur[k], s->cur[1 - k], s->total[k], s->peak[k + 1], s->peak[FS_POOL_ALL]};
}

static inline void rise(const stat_rows *r, int f, int64_t v)
{
    int64_t c = r->cur[f] += v;
    r->total[f] += v;
    if (c > r->peak[f]) r->peak[f] = c;
    c += r->other[f];
    if (c > r->peak_all[f]) r->peak_all[f] = c;
}

static inline void fall(const stat_rows *r, int f, int64_t v)
{
    r->cur[f] -= v;
}

static inline void bump(const stat_rows *r, int f, int64_t v)
{
    if (v > 0)
        rise(r, f, v);
    else
        fall(r, f, -v);
}

void fs_stats_apply(fs_dev *d, const fs_delta *dl)
{
    fs_delta v = *dl; /* a copy: the stores below cannot alias it */
    stat_rows r = rows_of(&d->st, v.kind);
    fs_spin_lock(&d->stats_lock);
    bump(&r, FS_ST_ALLOCATION, v.allocation);
    bump(&r, FS_ST_ALLOCATED_BYTES, v.allocated_bytes);
    bump(&r, FS_ST_REQUESTED_BYTES, v.requested_bytes);
    bump(&r, FS_ST_ACTIVE, v.active);
    bump(&r, FS_ST_ACTIVE_BYTES, v.active_bytes);
    bump(&r, FS_ST_INACTIVE_SPLIT, v.inactive_split);
    bump(&r, FS_ST_INACTIVE_SPLIT_BYTES, v.inactive_split_bytes);
    bump(&r, FS_ST_SEGMENT, v.segment);
    bump(&r, FS_ST_RESERVED_BYTES, v.reserved_bytes);
    d->st.pending_frees += v.pending;
    d->st.pending_free_bytes += v.pending_bytes;
    fs_spin_unlock(&d->stats_lock);
}

/* The two changes of a cached alloc+free pair: the five fields that always
 * move go one way only, so neither tests signs. */
static void assert_handout(const fs_delta *dl, int sign)
{
    (void)dl;
    (void)sign;
    assert(sign * dl->allocation == 1 && sign * dl->active == 1);
    assert(sign * dl->allocated_bytes > 0 && sign * dl->active_bytes > 0);
    assert(!dl->segment && !dl->reserved_bytes && !dl->pending && !dl->pending_bytes);
}

void fs_stats_handout(fs_dev *d, const fs_delta *dl)
{
    assert_handout(dl, 1);
    fs_delta v = *dl;
    stat_rows r = rows_of(&d->st, v.kind);
    fs_spin_lock(&d->stats_lock);
    rise(&r, FS_ST_ALLOCATION, 1);
    rise(&r, FS_ST_ALLOCATED_BYTES, v.allocated_bytes);
    rise(&r, FS_ST_REQUESTED_BYTES, v.requested_bytes);
    rise(&r, FS_ST_ACTIVE, 1);
    rise(&r, FS_ST_ACTIVE_BYTES, v.active_bytes);
    bump(&r, FS_ST_INACTIVE_SPLIT, v.inactive_split);
    bump(&r, FS_ST_INACTIVE_SPLIT_BYTES, v.inactive_split_bytes);
    fs_spin_unlock(&d->stats_lock);
}

void fs_stats_putback(fs_dev *d, const fs_delta *dl)
{
    assert_handout(dl, -1);
    fs_delta v = *dl;
    stat_rows r = rows_of(&d->st, v.kind);
    fs_spin_lock(&d->stats_lock);
    fall(&r, FS_ST_ALLOCATION, 1);
    fall(&r, FS_ST_ALLOCATED_BYTES, -v.allocated_bytes);
    fall(&r, FS_ST_REQUESTED_BYTES, -v.requested_bytes);
    fall(&r, FS_ST_ACTIVE, 1);
    fall(&r, FS_ST_ACTIVE_BYTES, -v.active_bytes);
    bump(&r, FS_ST_INACTIVE_SPLIT, v.inactive_split);
    bump(&r, FS_ST_INACTIVE_SPLIT_BYTES, v.inactive_split_bytes);
    fs_spin_unlock(&d->stats_lock);
}

void fs_stats_count(fs_dev *d, int64_t *field, int64_t by)
{
    fs_spin_lock(&d->stats_lock);
    *field += by;
    fs_spin_unlock(&d->stats_lock);
}

/* One field of the public form, from the kind-major counters. */
static void export_field(const fs_dev_stats *s, int f, fs_stat out[FS_POOL_KINDS])
{
    memset(out, 0, FS_POOL_KINDS * sizeof *out);
    for (int k = 0; k < FS_KINDS; k++) {
        fs_stat *o = &out[k + 1];
        o->current = s->cur[k][f];
        o->allocated = s->total[k][f];
        o->freed = o->allocated - o->current;
        o->peak = s->peak[k + 1][f];
        out[FS_POOL_ALL].current += o->current;
        out[FS_POOL_ALL].allocated += o->allocated;
        out[FS_POOL_ALL].freed += o->freed;
    }
    out[FS_POOL_ALL].peak = s->peak[FS_POOL_ALL][f];
}

void fs_stats_read(fs_dev *d, fs_alloc_stats *out)
{
    fs_dev_stats s;
    fs_spin_lock(&d->stats_lock);
    s = d->st;
    fs_spin_unlock(&d->stats_lock);
    memset(out, 0, sizeof *out);
    export_field(&s, FS_ST_ALLOCATION, out->allocation);
    export_field(&s, FS_ST_SEGMENT, out->segment);
    export_field(&s, FS_ST_ACTIVE, out->active);
    export_field(&s, FS_ST_INACTIVE_SPLIT, out->inactive_split);
    export_field(&s, FS_ST_ALLOCATED_BYTES, out->allocated_bytes);
    export_field(&s, FS_ST_RESERVED_BYTES, out->reserved_bytes);
    export_field(&s, FS_ST_ACTIVE_BYTES, out->active_bytes);
    export_field(&s, FS_ST_INACTIVE_SPLIT_BYTES, out->inactive_split_bytes);
    export_field(&s, FS_ST_REQUESTED_BYTES, out->requested_bytes);
    out->num_alloc_retries = s.num_alloc_retries;
    out->num_ooms = s.num_ooms;
    out->num_sync_all_streams = s.num_sync_all_streams;
    out->num_device_alloc = s.num_device_alloc;
    out->num_device_free = s.num_device_free;
    out->pending_frees = s.pending_frees;
    out->pending_free_bytes = s.pending_free_bytes;
}

static int64_t largest_free(fs_dev *d)
{
    size_t best = 0;
    pthread_mutex_lock(&d->lock);
    for (int i = 0; i < d->npools; i++) {
        fs_pool *p = d->pools[i];
        fs_pool_lock(p);
        for (int k = 0; k < FS_SETS; k++) {
            fs_block *m = fs_bins_max(&p->free[k]);
            if (m && m->size > best) best = m->size;
        }
        fs_pool_unlock(p);
    }
    pthread_mutex_unlock(&d->lock);
    return (int64_t)best;
}

size_t fs_stats_free_elsewhere(fs_dev *d, fs_stream_t stream)
{
    size_t bytes = 0;
    pthread_mutex_lock(&d->lock);
    for (int i = 0; i < d->npools; i++) {
        fs_pool *p = d->pools[i];
        if (p->stream == stream) continue;
        fs_pool_lock(p);
        for (int k = 0; k < FS_SETS; k++)
            bytes += p->free_bytes[k];
        fs_pool_unlock(p);
    }
    pthread_mutex_unlock(&d->lock);
    return bytes;
}

size_t fs_alloc_stream_free(fs_allocator *a, int device, fs_stream_free *out, size_t max,
                            size_t *total)
{
    size_t n = 0, kept = 0, sum = 0;

    *total = 0;
    if (device < 0 || device >= a->ndev) return 0;
    fs_dev *d = &a->devs[device];
    pthread_mutex_lock(&d->lock);
    for (int i = 0; i < d->npools; i++) {
        fs_pool *p = d->pools[i];
        fs_stream_free f = {.stream = p->stream};
        fs_pool_lock(p);
        for (int k = 0; k < FS_SETS; k++)
            f.bytes += p->free_bytes[k];
        fs_pool_unlock(p);
        if (!f.bytes) continue;
        f.retired = atomic_load_explicit(&p->retired, memory_order_relaxed);
        n++;
        sum += f.bytes;
        /* insertion into the kept ones, largest first */
        size_t j = kept < max ? kept++ : max;
        while (j > 0 && out[j - 1].bytes < f.bytes) {
            if (j < max) out[j] = out[j - 1];
            j--;
        }
        if (j < max) out[j] = f;
    }
    pthread_mutex_unlock(&d->lock);
    *total = sum;
    return n;
}

static void add_stat(fs_stat *to, const fs_stat *from)
{
    to->current += from->current;
    to->peak += from->peak;
    to->allocated += from->allocated;
    to->freed += from->freed;
}

static void add_all(fs_alloc_stats *to, const fs_alloc_stats *from)
{
    for (int k = 0; k < FS_POOL_KINDS; k++) {
        add_stat(&to->allocation[k], &from->allocation[k]);
        add_stat(&to->segment[k], &from->segment[k]);
        add_stat(&to->active[k], &from->active[k]);
        add_stat(&to->inactive_split[k], &from->inactive_split[k]);
        add_stat(&to->allocated_bytes[k], &from->allocated_bytes[k]);
        add_stat(&to->reserved_bytes[k], &from->reserved_bytes[k]);
        add_stat(&to->active_bytes[k], &from->active_bytes[k]);
        add_stat(&to->inactive_split_bytes[k], &from->inactive_split_bytes[k]);
        add_stat(&to->requested_bytes[k], &from->requested_bytes[k]);
    }
    to->num_alloc_retries += from->num_alloc_retries;
    to->num_ooms += from->num_ooms;
    to->num_sync_all_streams += from->num_sync_all_streams;
    to->num_device_alloc += from->num_device_alloc;
    to->num_device_free += from->num_device_free;
    to->pending_frees += from->pending_frees;
    to->pending_free_bytes += from->pending_free_bytes;
}

/* Summing devices adds their peaks: an upper bound of the process's peak. */
void fs_alloc_get_stats(fs_allocator *a, int device, fs_alloc_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < a->ndev; i++) {
        if (device >= 0 && i != device) continue;
        fs_dev *d = &a->devs[i];
        fs_alloc_stats snap;
        fs_stats_read(d, &snap);
        add_all(out, &snap);
        int64_t lf = largest_free(d);
        if (lf > out->largest_free_block) out->largest_free_block = lf;
    }
}

void fs_alloc_reset_peak(fs_allocator *a, int device)
{
    for (int i = 0; i < a->ndev; i++) {
        if (device >= 0 && i != device) continue;
        fs_dev_stats *s = &a->devs[i].st;
        fs_spin_lock(&a->devs[i].stats_lock);
        for (int f = 0; f < FS_ST_FIELDS; f++) {
            s->peak[FS_POOL_ALL][f] = 0;
            for (int k = 0; k < FS_KINDS; k++) {
                s->peak[k + 1][f] = s->cur[k][f];
                s->peak[FS_POOL_ALL][f] += s->cur[k][f];
            }
        }
        fs_spin_unlock(&a->devs[i].stats_lock);
    }
}
