/* checkpoint.c - a private pool's layout taken and put back: PyTorch's
 * checkpoint state, with which CUDA graph trees (torch.compile's
 * mode="reduce-overhead") return a graph pool to the memory a recorded
 * graph left live, after replays and other recordings changed it.
 *
 * A checkpoint lists each segment of the pool (base, size, the stream its
 * pool serves) with its blocks in address order, each live or free.
 * Putting it back first frees every live block of the pool (as a free on
 * the block's own stream: reusable at once), which coalesces each segment
 * into free blocks, then cuts each listed segment into the listed blocks
 * and makes the live ones live again, at the same addresses, each with its
 * size as its request. Segments made since stay, free, in the pool. The
 * caller learns which addresses were freed and which are live again: the
 * same address may be in both.
 *
 * What would make the layout impossible to put back is refused before
 * anything changes (a segment given back since, a free still waiting for
 * its streams, an expandable segment, whose mapped part changes): the
 * pool is then as it was. PyTorch refuses the same cases, with an
 * assertion. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fs_checkpoint {
    int device;
    uint64_t priv;
    size_t nsegs, nblocks;
    fs_checkpoint_segment *segs;
    fs_checkpoint_block *blocks;
};

/* fmt names one address, addr. */
static fs_status ckpt_refuse(char *why, size_t len, const char *fmt, uintptr_t addr)
{
    if (why && len) snprintf(why, len, fmt, (void *)addr);
    return FS_ERR_INVALID;
}

static fs_status ckpt_refuse_plain(char *why, size_t len, const char *msg)
{
    if (why && len) snprintf(why, len, "%s", msg);
    return FS_ERR_INVALID;
}

/* Why the pool's block b (p->lock held) cannot be in a checkpoint, or
 * NULL. */
static const char *ckpt_unsteady(const fs_segment *s, const fs_block *b)
{
    if (s->expandable) return "an expandable segment (at %p) cannot be checkpointed";
    if (b->state == FS_BLOCK_PENDING || b->state == FS_BLOCK_UNFENCED)
        return "a free (at %p) still waits for its streams: synchronise first";
    return NULL;
}

static bool ckpt_grow(void **arr, size_t *cap, size_t need, size_t each)
{
    if (need <= *cap) return true;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *p = realloc(*arr, n * each);
    if (!p) return false;
    *arr = p;
    *cap = n;
    return true;
}

/* Appends pool p's segments and blocks to c (p->lock held). */
static fs_status ckpt_take_pool(fs_stream_cache *p, fs_checkpoint *c, size_t caps[2], char *why,
                                size_t len)
{
    for (fs_segment *s = p->segs; s; s = s->next) {
        if (!s->size) continue;
        if (!ckpt_grow((void **)&c->segs, &caps[0], c->nsegs + 1, sizeof *c->segs))
            return FS_ERR_OOM;
        fs_checkpoint_segment *cs = &c->segs[c->nsegs++];
        *cs = (fs_checkpoint_segment){
            .base = s->base, .size = s->size, .stream = p->stream, .first = c->nblocks};
        for (fs_block *b = s->head; b; b = b->next) {
            const char *bad = ckpt_unsteady(s, b);
            if (bad) return ckpt_refuse(why, len, bad, b->addr);
            if (!ckpt_grow((void **)&c->blocks, &caps[1], c->nblocks + 1, sizeof *c->blocks))
                return FS_ERR_OOM;
            c->blocks[c->nblocks++] = (fs_checkpoint_block){
                .addr = b->addr, .size = b->size, .live = b->state == FS_BLOCK_LIVE};
            cs->nblocks++;
        }
    }
    return FS_OK;
}

fs_status fs_alloc_checkpoint(fs_allocator *a, int device, uint64_t priv, fs_checkpoint **out,
                              char *why, size_t len)
{
    fs_dev *d = fs_dev_of(a, device);
    *out = NULL;
    if (!d || !priv) return ckpt_refuse_plain(why, len, "no such device or private pool");
    fs_checkpoint *c = calloc(1, sizeof *c);
    if (!c) return FS_ERR_OOM;
    c->device = device;
    c->priv = priv;
    size_t caps[2] = {0, 0};
    fs_status st = FS_OK;
    pthread_mutex_lock(&d->lock);
    fs_dev_retire_all(d, false); /* frees whose streams have passed them */
    for (int i = 0; i < d->npools && st == FS_OK; i++) {
        fs_stream_cache *p = d->pools[i];
        if (p->priv != priv) continue;
        fs_cache_lock(p);
        st = ckpt_take_pool(p, c, caps, why, len);
        fs_cache_unlock(p);
    }
    pthread_mutex_unlock(&d->lock);
    if (st != FS_OK) {
        if (st == FS_ERR_OOM && why && len) snprintf(why, len, "out of host memory");
        fs_checkpoint_free(c);
        return st;
    }
    *out = c;
    return FS_OK;
}

void fs_checkpoint_free(fs_checkpoint *c)
{
    if (!c) return;
    free(c->segs);
    free(c->blocks);
    free(c);
}

size_t fs_checkpoint_segments(const fs_checkpoint *c, const fs_checkpoint_segment **segs,
                              const fs_checkpoint_block **blocks)
{
    *segs = c->segs;
    *blocks = c->blocks;
    return c->nsegs;
}

/* ---- putting it back ---- */

/* The pool of `priv` holding the segment at base, and the segment; NULL
 * when it is no longer there. d->lock held. */
static fs_segment *ckpt_find_segment(fs_dev *d, uint64_t priv, uintptr_t base,
                                     fs_stream_cache **pool)
{
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        if (p->priv != priv) continue;
        for (fs_segment *s = p->segs; s; s = s->next)
            if (s->base == base) {
                *pool = p;
                return s;
            }
    }
    return NULL;
}

/* Whether c can be put back, before anything changes. d->lock held. */
static fs_status ckpt_check_restore(fs_dev *d, const fs_checkpoint *c, char *why, size_t len)
{
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        if (p->priv != c->priv) continue;
        const char *bad = NULL;
        uintptr_t at = 0;
        fs_cache_lock(p);
        for (fs_segment *s = p->segs; s && !bad; s = s->next)
            for (fs_block *b = s->head; b && !bad; b = b->next)
                if ((bad = ckpt_unsteady(s, b))) at = b->addr;
        fs_cache_unlock(p);
        if (bad) return ckpt_refuse(why, len, bad, at);
    }
    for (size_t i = 0; i < c->nsegs; i++) {
        const fs_checkpoint_segment *cs = &c->segs[i];
        fs_stream_cache *p = NULL;
        fs_segment *s = ckpt_find_segment(d, c->priv, cs->base, &p);
        if (!s || s->size != cs->size || p->stream != cs->stream)
            return ckpt_refuse(why, len, "the checkpoint's segment at %p is no longer the pool's",
                               cs->base);
    }
    return FS_OK;
}

/* Collected addresses, for the caller. */
typedef struct ckpt_addrs {
    uintptr_t *v;
    size_t n, cap;
    bool failed;
} ckpt_addrs;

static void ckpt_note(ckpt_addrs *l, uintptr_t addr)
{
    if (!ckpt_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v)) {
        l->failed = true;
        return;
    }
    l->v[l->n++] = addr;
}

/* Every live block of p freed and coalesced (p->lock held). */
static void ckpt_free_live(fs_allocator *a, fs_stream_cache *p, fs_delta dl[FS_KINDS],
                           ckpt_addrs *freed)
{
    for (fs_segment *s = p->segs; s; s = s->next)
        for (fs_block *b = s->head; b; b = b->next) {
            if (b->state != FS_BLOCK_LIVE) continue;
            ckpt_note(freed, b->addr);
            fs_live_drop(a, p, b, dl); /* b absorbs free neighbours and stays: b->next holds */
        }
}

/* Segment s of pool p, wholly free now, cut into the checkpoint's blocks
 * (p->lock held). */
static fs_status ckpt_cut(fs_allocator *a, fs_stream_cache *p, fs_segment *s,
                          const fs_checkpoint_block *cb, size_t n, fs_delta *dl, ckpt_addrs *made)
{
    fs_block *cur = s->head;
    fs_free_take(p, cur, dl);
    for (size_t i = 0; i < n && cur; i++) {
        fs_block *rest = NULL;
        if (i + 1 < n && !(rest = fs_block_split(p, cur, cb[i].size))) {
            fs_free_insert(p, cur, dl);
            return FS_ERR_OOM;
        }
        if (cb[i].live) {
            cur->state = FS_BLOCK_LIVE;
            cur->stream = p->stream;
            cur->requested = cur->size;
            cur->free_seq = 0;
            fs_live_insert(&p->live, cur);
            dl->allocation++;
            dl->allocated_bytes += (int64_t)cur->size;
            dl->requested_bytes += (int64_t)cur->size;
            dl->oversize += fs_oversize(p, cur->size);
            dl->active++;
            dl->active_bytes += (int64_t)cur->size;
            fs_observe(a, FS_EV_ALLOC, p->dev->id, p->stream, cur->addr, cur->size, cur->requested,
                       false);
            ckpt_note(made, cur->addr);
        } else {
            /* its neighbours are live or not binned yet: nothing to merge */
            cur->free_seq = 0;
            fs_free_insert_rest(p, cur, dl);
        }
        cur = rest;
    }
    return FS_OK;
}

fs_status fs_alloc_restore(fs_allocator *a, const fs_checkpoint *c, uintptr_t **freed,
                           size_t *nfreed, uintptr_t **made, size_t *nmade, char *why, size_t len)
{
    fs_dev *d = fs_dev_of(a, c->device);
    ckpt_addrs f = {0}, m = {0};
    *freed = *made = NULL;
    *nfreed = *nmade = 0;
    if (!d) return ckpt_refuse_plain(why, len, "no such device");
    pthread_mutex_lock(&d->lock);
    fs_dev_retire_all(d, false);
    fs_status st = ckpt_check_restore(d, c, why, len);
    for (int i = 0; i < d->npools && st == FS_OK; i++) {
        fs_stream_cache *p = d->pools[i];
        if (p->priv != c->priv) continue;
        fs_delta dl[FS_KINDS] = {{.kind = FS_KIND_SMALL}, {.kind = FS_KIND_LARGE}};
        fs_cache_lock(p);
        ckpt_free_live(a, p, dl, &f);
        fs_stats_apply(p, &dl[FS_KIND_SMALL]);
        fs_stats_apply(p, &dl[FS_KIND_LARGE]);
        fs_cache_unlock(p);
    }
    for (size_t i = 0; i < c->nsegs && st == FS_OK; i++) {
        const fs_checkpoint_segment *cs = &c->segs[i];
        fs_stream_cache *p = NULL;
        fs_segment *s = ckpt_find_segment(d, c->priv, cs->base, &p);
        fs_delta dl = {.kind = s->kind};
        fs_cache_lock(p);
        st = ckpt_cut(a, p, s, c->blocks + cs->first, cs->nblocks, &dl, &m);
        fs_stats_apply(p, &dl);
        fs_cache_unlock(p);
    }
    pthread_mutex_unlock(&d->lock);
    if (st == FS_ERR_OOM && why && len) snprintf(why, len, "out of host memory");
    if (f.failed || m.failed) {
        if (why && len) snprintf(why, len, "out of host memory for the addresses");
        st = st == FS_OK ? FS_ERR_OOM : st;
    }
    *freed = f.v;
    *nfreed = f.n;
    *made = m.v;
    *nmade = m.n;
    return st;
}
