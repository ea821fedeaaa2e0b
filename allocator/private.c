/* private.c - private pools: memory that only the allocations made into
 * it use (PyTorch's MemPool and the pools of CUDA graph captures).
 *
 * A private pool is named by a number the caller chooses (not 0, which is
 * the shared cache) and is made of one fs_stream_cache per (device, stream), as the
 * shared cache is, so that everything a pool does (best fit, split and
 * coalesce, stream-ordered and deferred frees, statistics) works unchanged
 * inside it. What makes it private is what the rest of the allocator leaves
 * alone:
 *   - its pools are not in the stream registry: only fs_malloc_private
 *     finds them, and a free goes back to the pool its block came from (the
 *     segment's), as every free does;
 *   - a request of another pool never takes its blocks, pending or free,
 *     nor adopts its segments (fs_cache_may_serve), and its own requests
 *     never take the shared cache's;
 *   - while it is held, no release gives its memory back to make room for
 *     others: not garbage collection, not the high-water give-back, not
 *     empty_cache or the release-and-retry before out of memory
 *     (fs_cache_releasable). Let go (fs_alloc_private_configure with held false),
 *     its free memory goes at the next empty_cache or release-and-retry,
 *     its live blocks come back to it when freed and go the same way, and
 *     once it holds no memory its pools are forgotten.
 * This is PyTorch's rule for its private pools (a pool whose use count
 * has dropped to zero is freed by the next emptyCache or out-of-memory
 * retry), and what a CUDA graph needs: the addresses a captured graph
 * reads and writes stay its own between replays, whatever else the
 * program allocates. */
#include "internal.h"

#include <stdlib.h>

bool fs_cache_releasable(const fs_stream_cache *p, fs_release_mode mode)
{
    if (!p->priv) return true;
    if (mode == FS_RELEASE_EVERYTHING) return !p->pconf.segment_alloc;
    return mode == FS_RELEASE_LARGEST && !p->pconf.held;
}

/* ---- configurations ---- */

static fs_private_entry *entry_of(fs_dev *d, uint64_t priv)
{
    for (int i = 0; i < d->nprivs; i++)
        if (d->privs[i].priv == priv) return &d->privs[i];
    return NULL;
}

/* The entry of priv, made held with the defaults when new; NULL when out
 * of memory. Caller holds dev->lock. */
static fs_private_entry *entry_made(fs_dev *d, uint64_t priv)
{
    fs_private_entry *e = entry_of(d, priv);
    if (e) return e;
    if (d->nprivs == d->capprivs) {
        int cap = d->capprivs ? 2 * d->capprivs : 8;
        fs_private_entry *n = realloc(d->privs, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        d->privs = n;
        d->capprivs = cap;
    }
    e = &d->privs[d->nprivs++];
    *e = (fs_private_entry){.priv = priv, .conf = {.held = true}};
    return e;
}

static void apply(fs_stream_cache *p, const fs_private_conf *conf)
{
    p->pconf = *conf;
    atomic_store_explicit(&p->no_split, conf->no_split, memory_order_relaxed);
}

void fs_alloc_private_configure(fs_allocator *a, int device, uint64_t priv,
                                const fs_private_conf *conf)
{
    fs_dev *d = fs_dev_of(a, device);
    if (!d || !priv || !conf) return;
    pthread_mutex_lock(&d->lock);
    fs_private_entry *e = entry_made(d, priv);
    if (e) {
        e->conf = *conf;
        for (int i = 0; i < d->npools; i++)
            if (d->pools[i]->priv == priv) apply(d->pools[i], conf);
    }
    if (!conf->held) fs_private_forget_spent(d);
    pthread_mutex_unlock(&d->lock);
}

/* ---- finding a private pool ---- */

/* The private pool the calling thread allocated from last. */
static FS_TLS struct {
    unsigned serial, gen;
    int device;
    fs_stream_t s;
    uint64_t priv;
    fs_stream_cache *p;
} last_private;

FS_SLOW_PATH static fs_stream_cache *private_lookup(fs_allocator *a, int device, fs_stream_t s,
                                                    uint64_t priv)
{
    fs_dev *d = &a->devs[device];
    fs_stream_cache *p = NULL;
    pthread_mutex_lock(&d->lock);
    for (int i = 0; i < d->npools && !p; i++) {
        fs_stream_cache *q = d->pools[i];
        if (q->priv == priv && q->stream == s &&
            !atomic_load_explicit(&q->retired, memory_order_relaxed))
            p = q;
    }
    fs_private_entry *e = p ? NULL : entry_made(d, priv);
    if (e && (p = fs_cache_new(d, s, fs_stream_kind_locked(d, s), priv))) apply(p, &e->conf);
    unsigned gen = atomic_load_explicit(&d->gen, memory_order_acquire);
    pthread_mutex_unlock(&d->lock);
    if (p) {
        last_private.serial = a->serial;
        last_private.gen = gen;
        last_private.device = device;
        last_private.s = s;
        last_private.priv = priv;
        last_private.p = p;
    }
    return p;
}

fs_stream_cache *fs_private_get(fs_allocator *a, int device, fs_stream_t s, uint64_t priv)
{
    if (last_private.serial == a->serial && last_private.device == device && last_private.s == s &&
        last_private.priv == priv &&
        last_private.gen == atomic_load_explicit(&a->devs[device].gen, memory_order_acquire))
        return last_private.p;
    return private_lookup(a, device, s, priv);
}

/* ---- lending on out of memory ---- */

fs_block *fs_private_lend(fs_allocator *a, fs_dev *d, int set, size_t rounded, size_t req,
                          fs_stream_t stream)
{
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *q = d->pools[i];
        if (!q->priv || !q->pconf.lend_on_oom || q->stream != stream ||
            atomic_load_explicit(&q->retired, memory_order_relaxed))
            continue;
        fs_block *b = fs_cache_take_free(a, q, set, rounded, req, stream);
        if (b) return b;
    }
    return NULL;
}

/* ---- letting go ---- */

/* Whether p is a private pool let go with no memory left. */
static bool spent(fs_stream_cache *p)
{
    return p->priv && !p->pconf.held && !p->segs;
}

static bool keep(fs_stream_cache *p)
{
    return !spent(p);
}

static void forget(fs_stream_cache *p)
{
    fs_fence_put(p->dev, p->mark);
    p->mark = NULL;
    fs_cache_drop(p);
}

void fs_private_forget_spent(fs_dev *d)
{
    /* configurations of pools let go that have no pool with memory left */
    int kept = 0;
    for (int i = 0; i < d->nprivs; i++) {
        fs_private_entry *e = &d->privs[i];
        bool gone = !e->conf.held;
        for (int j = 0; gone && j < d->npools; j++)
            gone = !(d->pools[j]->priv == e->priv && d->pools[j]->segs);
        if (!gone) d->privs[kept++] = *e;
    }
    d->nprivs = kept;
    bool any = false;
    for (int i = 0; i < d->npools && !any; i++)
        any = spent(d->pools[i]);
    if (!any) return;
    /* before any pool goes: no thread's cached lookup may still name it */
    atomic_fetch_add_explicit(&d->gen, 1, memory_order_acq_rel);
    fs_stats_pools_keep(d, keep, forget);
}

void fs_private_fini(fs_dev *d)
{
    free(d->privs);
    d->privs = NULL;
    d->nprivs = d->capprivs = 0;
}

fs_status fs_alloc_private_empty(fs_allocator *a, int device, uint64_t priv)
{
    fs_dev *d = fs_dev_of(a, device);
    if (!d || !priv) return FS_ERR_INVALID;
    pthread_mutex_lock(&d->lock);
    fs_private_entry *e = entry_of(d, priv);
    if (e && !e->conf.held) {
        fs_dev_retire_all(d, true);
        fs_segments_release_private(a, d, priv);
        fs_private_forget_spent(d);
    }
    pthread_mutex_unlock(&d->lock);
    return FS_OK;
}
