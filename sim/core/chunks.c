/* chunks.c - the memory behind a memory pool: the chunks it reserved and
 * the blocks placed in them.
 *
 * A pool reserves memory in chunks of SIM_POOL_CHUNK (32 MiB), and a block
 * larger than that gets a chunk of its size rounded up to whole 32 MiB
 * chunks; it places its blocks in them at SIM_ALLOC_GRANULE. So an H100
 * (driver 580) answered a first 4 KiB or 1 MiB block with 32 MiB reserved
 * and 64 blocks of 1 MiB with exactly 64 MiB, and an H200 (driver 580, run
 * 7) a block of 33 MiB with 64 MiB, of 64 MiB + 1 with 96 MiB and of
 * 100 MiB with 128 MiB (docs/sim.md, "Memory pools"). Only where whole
 * chunks no longer fit on the device is a chunk of the block's own size in
 * pages tried. A chunk goes back only when it holds no block and every
 * free in it has been reached, by a trim (the release threshold at
 * synchronisation, cudaMemPoolTrimTo, an allocation that would otherwise
 * fail).
 *
 * The pool's used count is the bytes asked for, not the space the blocks
 * take (an H200 counted a 1000-byte block as 1000 bytes used), so each
 * block remembers its size as asked.
 *
 * A chunk is a list of extents in address order that covers it: blocks,
 * and free space, which remembers the stream that freed it and whether
 * that stream has reached the free (stream-ordered reuse: the freeing
 * stream may take the space at once, the others once the free is reached,
 * if the pool allows opportunistic reuse). Neighbouring free extents that
 * are both reached merge. A block is placed in the smallest run of
 * neighbouring free extents the stream may take that is large enough, at
 * its lowest address; the extent it ends in keeps its remainder, with that
 * extent's stream and state. Each chunk is one mapping: sim/core/arena.c for
 * device memory (charged when made, or, for graph memory, at the first
 * launch that needs it), anonymous read-write memory for a pinned host
 * pool, real in a dry run too. */
#include <stdlib.h>
#include <sys/mman.h>

#include "sim.h"

struct extent {
    struct extent *prev, *next;
    size_t off, size;
    size_t asked;              /* a block: the size it was asked for (UsedMemCurrent) */
    int block;                 /* a block placed here, else free space */
    struct sim_stream *stream; /* free space: the stream that freed it, NULL: none */
    int reached;               /* free space: every stream may take it */
    uint64_t token;            /* free space not yet reached: which free */
};

struct sim_chunk {
    struct sim_chunk *next;
    uintptr_t base;
    size_t size;
    int charged;      /* its device memory is charged to the device */
    size_t in_blocks; /* bytes of the blocks in it */
    struct extent *first;
};

static struct extent *extent_new(size_t off, size_t size)
{
    struct extent *e = calloc(1, sizeof *e);
    if (!e) abort();
    e->off = off;
    e->size = size;
    e->reached = 1;
    return e;
}

/* Whether extent e is free space stream s may take: space no stream freed
 * (never used, or merged from frees of several streams), space s freed, or
 * space another stream freed once reached, if the pool allows that. */
static int takable(const struct extent *e, struct sim_stream *s, int opportunistic)
{
    if (e->block) return 0;
    if (!e->stream) return e->reached;
    return e->stream == s || (e->reached && opportunistic);
}

uintptr_t sim_chunks_place(struct sim_chunks *c, size_t size, struct sim_stream *s,
                           int opportunistic)
{
    size_t need = sim_round_up(size, SIM_ALLOC_GRANULE);
    struct sim_chunk *best_chunk = NULL;
    struct extent *best = NULL;
    size_t best_run = SIZE_MAX;
    for (struct sim_chunk *k = c->list; k; k = k->next) {
        if (k->size - k->in_blocks < need) continue;
        for (struct extent *e = k->first; e;) {
            if (!takable(e, s, opportunistic)) {
                e = e->next;
                continue;
            }
            struct extent *start = e;
            size_t run = 0;
            while (e && takable(e, s, opportunistic)) {
                run += e->size;
                e = e->next;
            }
            if (run >= need && run < best_run) {
                best_run = run;
                best = start;
                best_chunk = k;
            }
        }
    }
    if (!best) return 0;
    /* The block takes the run's first `need` bytes: a new extent before the
     * run, which swallows the extents it covers whole; the one it ends in
     * keeps what is left of it. */
    struct extent *b = extent_new(best->off, need);
    b->block = 1;
    b->asked = size;
    b->prev = best->prev;
    b->next = best;
    if (best->prev)
        best->prev->next = b;
    else
        best_chunk->first = b;
    best->prev = b;
    size_t left = need;
    for (struct extent *e = best; left;) {
        if (e->size > left) {
            e->off += left;
            e->size -= left;
            break;
        }
        left -= e->size;
        b->next = e->next;
        if (e->next) e->next->prev = b;
        free(e);
        e = b->next;
    }
    best_chunk->in_blocks += need;
    c->used += size;
    return best_chunk->base + b->off;
}

/* The chunk's device memory, charged to the device: cudaSuccess or
 * cudaErrorMemoryAllocation. */
static cudaError_t charge(struct sim_chunks *c, struct sim_chunk *k)
{
    if (k->charged || c->memory == SIM_CHUNK_HOST) return cudaSuccess;
    cudaError_t err = sim_capacity_take(c->dev, k->size);
    if (err) return err;
    sim_capacity_count(c->dev, 0);
    k->charged = 1;
    c->reserved += k->size;
    return cudaSuccess;
}

cudaError_t sim_chunks_grow(struct sim_chunks *c, size_t need, int fallback)
{
    size_t size = sim_round_up(need, fallback ? SIM_PAGE_SIZE : SIM_POOL_CHUNK);
    if (c->dev && size > sim_cfg.capacity) return cudaErrorMemoryAllocation;
    struct sim_chunk *k = calloc(1, sizeof *k);
    if (!k) return cudaErrorMemoryAllocation;
    k->size = size;
    cudaError_t err = c->memory == SIM_CHUNK_DEVICE ? charge(c, k) : cudaSuccess;
    if (err) {
        free(k);
        return err;
    }
    void *p;
    if (c->memory == SIM_CHUNK_HOST) {
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
        p = p == MAP_FAILED ? NULL : p;
        if (p) c->reserved += size; /* host memory: reserved as soon as mapped */
    } else {
        p = sim_arena_map(c->dev, size);
    }
    if (!p) {
        if (k->charged) {
            sim_capacity_give(c->dev, size);
            sim_capacity_count(c->dev, 1);
            c->reserved -= size;
        }
        free(k);
        return cudaErrorMemoryAllocation;
    }
    k->base = (uintptr_t)p;
    k->first = extent_new(0, size);
    /* Newest last: placement prefers the older chunks on a tie, and a trim
     * gives back the newest first. */
    struct sim_chunk **tail = &c->list;
    while (*tail)
        tail = &(*tail)->next;
    *tail = k;
    return cudaSuccess;
}

/* A free extent whose space has been reached, which merges with another. */
static int mergeable(const struct extent *e)
{
    return e && !e->block && e->reached;
}

/* Folds the extent after keep into keep (the stream that freed the merged
 * space is kept only when both freed it). */
static void absorb_next(struct extent *keep)
{
    struct extent *gone = keep->next;
    keep->size += gone->size;
    if (keep->stream != gone->stream) keep->stream = NULL;
    keep->next = gone->next;
    if (gone->next) gone->next->prev = keep;
    free(gone);
}

/* Merges e with its free, reached neighbours; returns what e became. */
static struct extent *merge(struct extent *e)
{
    if (!mergeable(e)) return e;
    if (mergeable(e->prev)) {
        e = e->prev;
        absorb_next(e);
    }
    if (mergeable(e->next)) absorb_next(e);
    return e;
}

static struct sim_chunk *chunk_of(struct sim_chunks *c, uintptr_t addr)
{
    for (struct sim_chunk *k = c->list; k; k = k->next)
        if (addr >= k->base && addr < k->base + k->size) return k;
    return NULL;
}

size_t sim_chunks_free(struct sim_chunks *c, uintptr_t base, struct sim_stream *s, int reached,
                       uint64_t *token)
{
    struct sim_chunk *k = chunk_of(c, base);
    struct extent *e = k ? k->first : NULL;
    while (e && e->off != base - k->base)
        e = e->next;
    if (!e || !e->block) return 0;
    size_t size = e->size, asked = e->asked;
    e->block = 0;
    e->asked = 0;
    e->stream = s;
    e->reached = reached;
    e->token = reached ? 0 : ++c->next_token;
    if (token) *token = e->token;
    k->in_blocks -= size;
    c->used -= asked;
    merge(e);
    return asked;
}

void sim_chunks_reach(struct sim_chunks *c, uint64_t token)
{
    for (struct sim_chunk *k = c->list; k; k = k->next)
        for (struct extent *e = k->first; e; e = e->next)
            if (!e->block && !e->reached && e->token == token) {
                e->reached = 1;
                e->token = 0;
                merge(e);
                return;
            }
}

void sim_chunks_forget_streams(struct sim_chunks *c, const struct sim_device *dev)
{
    for (struct sim_chunk *k = c->list; k; k = k->next)
        for (struct extent *e = k->first; e; e = e->next) {
            if (e->block || !e->stream || (dev && e->stream->dev != dev)) continue;
            e->reached = 1;
            e->stream = NULL;
            e->token = 0;
            e = merge(e);
        }
}

/* Whether k holds nothing: no block, every free reached (then the frees
 * have merged into one extent). */
static int empty(const struct sim_chunk *k)
{
    return !k->first->block && k->first->reached && k->first->size == k->size;
}

struct sim_chunk *sim_chunks_trim(struct sim_chunks *c, uint64_t keep)
{
    struct sim_chunk *victims = NULL;
    int graph = c->memory == SIM_CHUNK_GRAPH;
    while (graph || c->reserved > keep) {
        struct sim_chunk **newest = NULL;
        for (struct sim_chunk **pp = &c->list; *pp; pp = &(*pp)->next)
            if (empty(*pp)) newest = pp;
        if (!newest) break;
        struct sim_chunk *k = *newest;
        *newest = k->next;
        if (k->charged || c->memory == SIM_CHUNK_HOST) c->reserved -= k->size;
        k->next = victims;
        victims = k;
    }
    return victims;
}

void sim_chunks_unmap(struct sim_chunks *c, struct sim_chunk *list)
{
    while (list) {
        struct sim_chunk *k = list;
        list = k->next;
        if (c->memory == SIM_CHUNK_HOST) {
            munmap((void *)k->base, k->size);
        } else {
            sim_arena_unmap((void *)k->base, k->size);
            if (k->charged) {
                sim_capacity_give(c->dev, k->size);
                sim_capacity_count(c->dev, 1);
            }
        }
        free(k->first);
        free(k);
    }
}

cudaError_t sim_chunks_charge(struct sim_chunks *c, uintptr_t base)
{
    struct sim_chunk *k = chunk_of(c, base);
    return k ? charge(c, k) : cudaSuccess;
}
