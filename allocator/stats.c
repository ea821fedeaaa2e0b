/* stats.c - the statistics PyTorch users know ({current, peak, allocated,
 * freed} per pool kind), kept per device.
 *
 * Every change an operation makes (often five or six counters for two pool
 * kinds) is applied at once under a short lock of its own: two atomic
 * operations instead of a dozen atomic adds, peaks exact, and a reader sees
 * a snapshot in which allocated + cached + pending == reserved always holds. */
#include "internal.h"

#include <assert.h>
#include <string.h>

/* One field for all pools and for the block's kind. `freed` is not kept
 * here: it is allocated - current, filled in by readers. Most deltas leave
 * most fields untouched, and frees only lower them: no peak to check. */
static inline void bump(fs_stat *all, fs_stat *kind, int64_t v)
{
    if (!v) return;
    int64_t ca = all->current + v, ck = kind->current + v;
    all->current = ca;
    kind->current = ck;
    if (v < 0) return;
    all->allocated += v;
    kind->allocated += v;
    if (ca > all->peak) all->peak = ca;
    if (ck > kind->peak) kind->peak = ck;
}

#define BUMP(field) bump(&s->field[FS_POOL_ALL], &s->field[k], dl->field)

void fs_stats_apply(fs_dev *d, const fs_delta *dl)
{
    fs_alloc_stats *s = &d->st.s;
    size_t k = (size_t)dl->kind + 1;
    fs_spin_lock(&d->stats_lock);
    BUMP(allocation);
    BUMP(allocated_bytes);
    BUMP(requested_bytes);
    BUMP(active);
    BUMP(active_bytes);
    BUMP(inactive_split);
    BUMP(inactive_split_bytes);
    BUMP(segment);
    BUMP(reserved_bytes);
    s->pending_frees += dl->pending;
    s->pending_free_bytes += dl->pending_bytes;
    fs_spin_unlock(&d->stats_lock);
}

/* The two changes of a cached alloc+free pair, written out: a rise can
 * only raise, a fall only lower, so neither tests signs or zeros. */
static inline void rise(fs_stat *all, fs_stat *kind, int64_t v)
{
    int64_t ca = all->current + v, ck = kind->current + v;
    all->current = ca;
    kind->current = ck;
    all->allocated += v;
    kind->allocated += v;
    if (ca > all->peak) all->peak = ca;
    if (ck > kind->peak) kind->peak = ck;
}

static inline void fall(fs_stat *all, fs_stat *kind, int64_t v)
{
    all->current -= v;
    kind->current -= v;
}

#define RISE(field) rise(&s->field[FS_POOL_ALL], &s->field[k], dl->field)
#define FALL(field) fall(&s->field[FS_POOL_ALL], &s->field[k], -dl->field)

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
    fs_alloc_stats *s = &d->st.s;
    size_t k = (size_t)dl->kind + 1;
    assert_handout(dl, 1);
    fs_spin_lock(&d->stats_lock);
    RISE(allocation);
    RISE(allocated_bytes);
    RISE(requested_bytes);
    RISE(active);
    RISE(active_bytes);
    BUMP(inactive_split);
    BUMP(inactive_split_bytes);
    fs_spin_unlock(&d->stats_lock);
}

void fs_stats_putback(fs_dev *d, const fs_delta *dl)
{
    fs_alloc_stats *s = &d->st.s;
    size_t k = (size_t)dl->kind + 1;
    assert_handout(dl, -1);
    fs_spin_lock(&d->stats_lock);
    FALL(allocation);
    FALL(allocated_bytes);
    FALL(requested_bytes);
    FALL(active);
    FALL(active_bytes);
    BUMP(inactive_split);
    BUMP(inactive_split_bytes);
    fs_spin_unlock(&d->stats_lock);
}

void fs_stats_count(fs_dev *d, int64_t *field, int64_t by)
{
    fs_spin_lock(&d->stats_lock);
    *field += by;
    fs_spin_unlock(&d->stats_lock);
}

static int64_t largest_free(fs_dev *d)
{
    size_t best = 0;
    pthread_mutex_lock(&d->lock);
    for (int i = 0; i < d->npools; i++) {
        fs_pool *p = d->pools[i];
        fs_spin_lock(&p->lock);
        for (int k = 0; k < FS_KINDS; k++) {
            fs_block *m = fs_bins_max(&p->free[k]);
            if (m && m->size > best) best = m->size;
        }
        fs_spin_unlock(&p->lock);
    }
    pthread_mutex_unlock(&d->lock);
    return (int64_t)best;
}

static void add_stat(fs_stat *to, const fs_stat *from)
{
    to->current += from->current;
    to->peak += from->peak;
    to->allocated += from->allocated;
    to->freed += from->allocated - from->current;
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
        fs_spin_lock(&d->stats_lock);
        snap = d->st.s;
        fs_spin_unlock(&d->stats_lock);
        add_all(out, &snap);
        int64_t lf = largest_free(d);
        if (lf > out->largest_free_block) out->largest_free_block = lf;
    }
}

static void reset(fs_stat *st, int n)
{
    for (int k = 0; k < n; k++)
        st[k].peak = st[k].current;
}

void fs_alloc_reset_peak(fs_allocator *a, int device)
{
    for (int i = 0; i < a->ndev; i++) {
        if (device >= 0 && i != device) continue;
        fs_dev *d = &a->devs[i];
        fs_alloc_stats *s = &d->st.s;
        fs_spin_lock(&d->stats_lock);
        reset(s->allocation, FS_POOL_KINDS);
        reset(s->segment, FS_POOL_KINDS);
        reset(s->active, FS_POOL_KINDS);
        reset(s->inactive_split, FS_POOL_KINDS);
        reset(s->allocated_bytes, FS_POOL_KINDS);
        reset(s->reserved_bytes, FS_POOL_KINDS);
        reset(s->active_bytes, FS_POOL_KINDS);
        reset(s->inactive_split_bytes, FS_POOL_KINDS);
        reset(s->requested_bytes, FS_POOL_KINDS);
        fs_spin_unlock(&d->stats_lock);
    }
}
