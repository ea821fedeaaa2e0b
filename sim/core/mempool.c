/* mempool.c - the memory pools: each device's default pool, the pools
 * cudaMemPoolCreate makes (of a device's memory, or of pinned host memory),
 * and each device's graph memory; what cudaMallocAsync,
 * cudaMallocFromPoolAsync and cudaFreeAsync do, the current pool, and
 * trimming (the runtime's entry points are in
 * sim/cudart/stream_ordered_allocator.c).
 *
 * A pool's memory is whole chunks of 32 MiB with its blocks placed in them
 * (chunks.c). A freed block's space is reusable at once by later
 * allocations on the stream that freed it (stream order makes that safe),
 * and by any stream once the stream has reached the free, if
 * cudaMemPoolReuseAllowOpportunistic is set (the default). The other two
 * reuse attributes are stored and reported but change nothing: the sim has
 * no event dependencies to follow. Chunks that hold nothing go back at host
 * synchronisation down to the release threshold (default 0), by
 * cudaMemPoolTrimTo, and when an allocation would otherwise fail.
 *
 * A pinned host memory pool (cudaMemLocationTypeHost, ...HostNuma) holds
 * real host memory that the host may read and write, in a dry run too,
 * charged to no device. A stream capture's allocations come from the
 * device's graph memory instead of the pool, whose chunks are charged (and
 * count as used, mapped by a graph) when a graph that needs them is first
 * launched and stay until cudaDeviceGraphMemTrim (sim/cudart/graphmem.c). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sim.h"

#include <cupti.h> /* the callback ids and params structs */

/* Guards every device's list of created pools, and the host pools. */
static pthread_mutex_t created_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_mempool *host_pools; /* under created_mu */

static struct sim_mempool *pool_alloc_struct(struct sim_device *dev, enum sim_chunk_memory memory)
{
    struct sim_mempool *pool = calloc(1, sizeof *pool);
    if (!pool) abort();
    pool->dev = dev;
    pthread_mutex_init(&pool->mu, NULL);
    pool->reuse_follow = pool->reuse_opportunistic = pool->reuse_internal = 1;
    pool->mem.dev = dev;
    pool->mem.memory = memory;
    /* A device pool is its device's to read and write; a host pool the
     * host's, and no device's until cudaMemPoolSetAccess grants it. */
    if (dev && dev->ordinal < SIM_MEMPOOL_PEERS)
        pool->access[dev->ordinal] = cudaMemAccessFlagsProtReadWrite;
    return pool;
}

struct sim_mempool *sim_mempool_new(struct sim_device *dev)
{
    return pool_alloc_struct(dev, SIM_CHUNK_DEVICE);
}

struct sim_mempool *sim_mempool_new_graph(struct sim_device *dev)
{
    struct sim_mempool *pool = pool_alloc_struct(dev, SIM_CHUNK_GRAPH);
    pool->graph = 1;
    return pool;
}

struct sim_mempool *sim_mempool_create(struct sim_device *dev)
{
    struct sim_mempool *pool = pool_alloc_struct(dev, dev ? SIM_CHUNK_DEVICE : SIM_CHUNK_HOST);
    pthread_mutex_lock(&created_mu);
    struct sim_mempool **list = dev ? &dev->mempool->created : &host_pools;
    pool->created = *list;
    *list = pool;
    pthread_mutex_unlock(&created_mu);
    return pool;
}

struct sim_mempool *sim_mempool_check(cudaMemPool_t h)
{
    struct sim_mempool *found = NULL;
    pthread_mutex_lock(&created_mu);
    for (int d = 0; d < sim_cfg.ndevices && !found; d++)
        for (struct sim_mempool *p = sim_dev(d)->mempool; p && !found; p = p->created)
            if ((struct sim_mempool *)h == p && !p->destroyed) found = p;
    for (struct sim_mempool *p = host_pools; p && !found; p = p->created)
        if ((struct sim_mempool *)h == p && !p->destroyed) found = p;
    pthread_mutex_unlock(&created_mu);
    return found;
}

/* Calls fn on each pool of the device whose default pool is `def` (the
 * default pool first), or of every device when def is NULL; with
 * `and_more`, also on the graph memory of those devices and on every host
 * pool. The list is copied under created_mu and walked without it, so fn
 * may take a pool's mu (created_mu comes first, as in sim_mempools_fork). */
static void each_pool(struct sim_mempool *def, int and_more,
                      void (*fn)(struct sim_mempool *, void *), void *arg)
{
    pthread_mutex_lock(&created_mu);
    size_t n = 0, cap = 16;
    struct sim_mempool **all = malloc(cap * sizeof *all);
    for (int d = 0; all && d < sim_cfg.ndevices; d++) {
        struct sim_device *dev = sim_dev(d);
        if (def && dev->mempool != def) continue;
        for (struct sim_mempool *p = dev->mempool; all && p; p = p->created) {
            if (n + 2 > cap) all = realloc(all, (cap *= 2) * sizeof *all);
            if (all) all[n++] = p;
        }
        if (all && and_more) all[n++] = dev->graph_mempool;
    }
    for (struct sim_mempool *p = and_more ? host_pools : NULL; all && p; p = p->created) {
        if (n + 1 > cap) all = realloc(all, (cap *= 2) * sizeof *all);
        if (all) all[n++] = p;
    }
    pthread_mutex_unlock(&created_mu);
    if (!all) abort();
    for (size_t i = 0; i < n; i++)
        fn(all[i], arg);
    free(all);
}

/* What UsedMemCurrent answers, under pool->mu: the bytes of the blocks as
 * asked, with those cudaFree left counted. Graph memory's
 * (cudaGraphMemAttrUsedMemCurrent) is "the physical memory currently
 * mapped by at least one graph" (CUDA Programming Guide, Graph Memory
 * Nodes, "Physical Memory Footprint"): a launch maps the chunks its blocks
 * are in when it charges them, and only a trim unmaps them, not the
 * graph's destruction, so it is every charged chunk. An H200 (driver 580,
 * run 7) answered used 32 MiB after the graph of a 1 MiB block was
 * destroyed, and 0 after cudaDeviceGraphMemTrim. */
uint64_t sim_mempool_used_now(const struct sim_mempool *pool)
{
    return pool->graph ? pool->mem.reserved : pool->mem.used + pool->used_stale;
}

/* Raises the high-water marks to the current amounts (under pool->mu). */
static void note_highs(struct sim_mempool *pool)
{
    uint64_t used = sim_mempool_used_now(pool);
    if (pool->mem.reserved > pool->reserved_high) pool->reserved_high = pool->mem.reserved;
    if (used > pool->used_high) pool->used_high = used;
}

/* Gives back chunks that hold nothing until the pool holds at most `keep`
 * bytes (graph memory: every such chunk). */
void sim_mempool_trim(struct sim_mempool *pool, uint64_t keep)
{
    pthread_mutex_lock(&pool->mu);
    struct sim_chunk *victims = sim_chunks_trim(&pool->mem, keep);
    pthread_mutex_unlock(&pool->mu);
    sim_chunks_unmap(&pool->mem, victims);
}

static void trim_to_threshold(struct sim_mempool *pool, void *unused)
{
    (void)unused;
    if (pool->graph) return; /* graph memory waits for cudaDeviceGraphMemTrim */
    pthread_mutex_lock(&pool->mu);
    uint64_t keep = pool->threshold;
    pthread_mutex_unlock(&pool->mu);
    sim_mempool_trim(pool, keep);
}

void sim_mempool_trim_threshold(struct sim_mempool *def)
{
    each_pool(def, 1, trim_to_threshold, NULL);
}

/* Every free on a stream of `dev` (every stream, when NULL) is reached:
 * those streams are gone. */
static void forget_streams(struct sim_mempool *pool, void *dev)
{
    pthread_mutex_lock(&pool->mu);
    sim_chunks_forget_streams(&pool->mem, dev);
    pthread_mutex_unlock(&pool->mu);
}

void sim_mempool_forget_streams(struct sim_mempool *def)
{
    each_pool(NULL, 1, forget_streams, def->dev);
}

/* The block at base, placed for `size` bytes on stream s (NULL: none) in
 * pool, registered as a live block of the pool. */
static cudaError_t pool_alloc(struct sim_mempool *pool, size_t size, struct sim_stream *s,
                              void **out)
{
    struct sim_device *dev = pool->dev;
    if ((dev && size > sim_cfg.capacity) || size > SIZE_MAX / 2)
        return sim_capacity_refused(dev, size, cudaErrorMemoryAllocation);

    pthread_mutex_lock(&pool->mu);
    int opportunistic = pool->reuse_opportunistic;
    uintptr_t base = sim_chunks_place(&pool->mem, size, s, opportunistic);
    cudaError_t err = cudaSuccess;
    if (!base) {
        err = sim_chunks_grow(&pool->mem, size, 0);
        if (err && pool->mem.memory == SIM_CHUNK_DEVICE) {
            /* Give back what the pool caches, as the driver does, and
             * retry; then with a chunk of the block's own size, where
             * whole chunks no longer fit (an assumption: docs/sim.md). */
            pthread_mutex_unlock(&pool->mu);
            sim_mempool_trim(pool, 0);
            pthread_mutex_lock(&pool->mu);
            base = sim_chunks_place(&pool->mem, size, s, opportunistic);
            if (!base && (err = sim_chunks_grow(&pool->mem, size, 0)))
                err = sim_chunks_grow(&pool->mem, size, 1);
        } else if (err && pool->mem.memory == SIM_CHUNK_GRAPH) {
            /* Graph memory is charged at a launch, so growing fails here
             * only where whole chunks exceed the device: a chunk of the
             * block's own size may still be charged then. */
            err = sim_chunks_grow(&pool->mem, size, 1);
        }
        if (!err && !base) base = sim_chunks_place(&pool->mem, size, s, opportunistic);
    }
    if (base) note_highs(pool);
    pthread_mutex_unlock(&pool->mu);
    if (!base) return sim_capacity_refused(dev, size, err ? err : cudaErrorMemoryAllocation);

    struct sim_range r = {base,
                          size,
                          dev ? SIM_RANGE_MEMPOOL : SIM_RANGE_HOST_MEMPOOL,
                          dev ? dev->ordinal : sim_cur_device(),
                          1,
                          pool,
                          0,
                          0};
    sim_registry_add(&r);
    *out = (void *)base;
    return cudaSuccess;
}

/* Gives the block at base back to its pool, reached by every stream (its
 * registry entry already gone); returns the size it was asked for. */
static size_t unplace(struct sim_mempool *pool, uintptr_t base)
{
    pthread_mutex_lock(&pool->mu);
    size_t size = sim_chunks_free(&pool->mem, base, NULL, 1, NULL);
    pthread_mutex_unlock(&pool->mu);
    return size;
}

void sim_mempool_cuda_free(struct sim_mempool *pool, uintptr_t base)
{
    sim_registry_remove(base);
    size_t size = unplace(pool, base);
    if (pool->graph) return;
    pthread_mutex_lock(&pool->mu);
    pool->used_stale += size;
    pthread_mutex_unlock(&pool->mu);
    /* Its memory goes back at once, as after a synchronisation (the
     * device was synchronised): with threshold 0, reserved drops to 0. */
    trim_to_threshold(pool, NULL);
}

struct free_point {
    struct sim_mempool *mempool;
    uint64_t token;
};

/* Runs when the stream reaches a cudaFreeAsync. */
static void reach_free(void *p)
{
    struct free_point *fp = p;
    pthread_mutex_lock(&fp->mempool->mu);
    sim_chunks_reach(&fp->mempool->mem, fp->token);
    pthread_mutex_unlock(&fp->mempool->mu);
    free(fp);
}

/* cudaFreeAsync of cudaMalloc memory: released when the stream gets there. */
static void release_range(void *p)
{
    sim_devmem_release(p);
    free(p);
}

/* What a graph's memory allocation node holds: the block, which a launch
 * needs charged. */
struct graph_alloc {
    struct sim_mempool *mempool;
    uintptr_t base;
};

cudaError_t sim_graph_alloc_map(void *arg)
{
    struct graph_alloc *ga = arg;
    struct sim_mempool *gp = ga->mempool;
    pthread_mutex_lock(&gp->mu);
    cudaError_t err = sim_chunks_charge(&gp->mem, ga->base);
    pthread_mutex_unlock(&gp->mu);
    if (err) {
        /* Chunks no graph uses go first, as cudaDeviceGraphMemTrim would. */
        sim_mempool_trim(gp, 0);
        pthread_mutex_lock(&gp->mu);
        err = sim_chunks_charge(&gp->mem, ga->base);
        pthread_mutex_unlock(&gp->mu);
    }
    pthread_mutex_lock(&gp->mu);
    note_highs(gp);
    pthread_mutex_unlock(&gp->mu);
    return sim_capacity_refused(gp->dev, SIM_POOL_CHUNK, err);
}

void sim_graph_mempool_amounts(struct sim_mempool *gp, uint64_t *reserved, uint64_t *used,
                               uint64_t *reserved_high, uint64_t *used_high)
{
    pthread_mutex_lock(&gp->mu);
    *reserved = gp->mem.reserved;
    *used = sim_mempool_used_now(gp);
    *reserved_high = gp->reserved_high;
    *used_high = gp->used_high;
    pthread_mutex_unlock(&gp->mu);
}

void sim_graph_mempool_reset_high(struct sim_mempool *gp, int reserved)
{
    pthread_mutex_lock(&gp->mu);
    if (reserved)
        gp->reserved_high = gp->mem.reserved;
    else
        gp->used_high = sim_mempool_used_now(gp);
    pthread_mutex_unlock(&gp->mu);
}

void sim_graph_mempool_trim(struct sim_mempool *gp)
{
    sim_mempool_trim(gp, 0);
}

/* The current pool of dev (cudaDeviceSetMemPool). */
struct sim_mempool *sim_mempool_current(struct sim_device *dev)
{
    return __atomic_load_n(&dev->current_mempool, __ATOMIC_ACQUIRE);
}

/* The work of cudaMallocAsync without the last error, which the runtime's
 * entry points record and the driver's (cuMemAllocAsync) leave alone. */
cudaError_t sim_mempool_alloc(void **ptr, size_t size, struct sim_mempool *pool, cudaStream_t sh,
                              int pt)
{
    sim_init();
    if (!ptr) return cudaErrorInvalidValue;
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(sh, pt, &s);
    if (err) return err;
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    if (!pool) pool = sim_mempool_current(s->dev);
    if (!sim_capture_active(s)) return pool_alloc(pool, size, s, ptr);

    /* Captured: graph memory, the graph's from now on (the runtime
     * documents that the allocation is owned by the graph, not the pool), at
     * a fixed address; a launch has nothing to do for it but have its
     * memory charged. Graph memory of the host is not simulated. */
    if (!pool->dev) return cudaErrorNotSupported;
    struct sim_mempool *gp = pool->dev->graph_mempool;
    struct graph_alloc *ga = malloc(sizeof *ga);
    if (!ga) return cudaErrorMemoryAllocation;
    err = pool_alloc(gp, size, s, ptr);
    if (err) {
        free(ga);
        return err;
    }
    *ga = (struct graph_alloc){gp, (uintptr_t)*ptr};
    uint64_t seq;
    err = sim_stream_add_work(
        s, &(struct sim_work){.type = cudaGraphNodeTypeMemAlloc, .drop = free, .arg = ga}, NULL,
        &seq);
    if (err) {
        free(ga);
        sim_registry_remove((uintptr_t)*ptr);
        unplace(gp, (uintptr_t)*ptr);
    }
    return err;
}

/* A block freed in a capture: it stays the graph's until the graph goes. */
static void release_graph_block(void *p)
{
    struct sim_range *r = p;
    if (r->kind == SIM_RANGE_MEMPOOL || r->kind == SIM_RANGE_HOST_MEMPOOL) {
        sim_registry_remove(r->base);
        unplace(r->mempool, r->base);
    } else {
        sim_devmem_release(r);
    }
    free(r);
}

SIM_SEAM cudaError_t sim_mempool_malloc_async(void **ptr, size_t size, cudaStream_t s, int pt)
{
    return sim_mempool_alloc(ptr, size, NULL, s, pt);
}

cudaError_t sim_mempool_alloc_from(void **ptr, size_t size, cudaMemPool_t h, cudaStream_t s, int pt)
{
    sim_init();
    struct sim_mempool *pool = sim_mempool_check(h);
    return pool ? sim_record_error(sim_mempool_alloc(ptr, size, pool, s, pt))
                : sim_record_error(cudaErrorInvalidValue);
}

SIM_SEAM cudaError_t sim_mempool_malloc_from_pool_async(void **ptr, size_t size, cudaMemPool_t h,
                                                        cudaStream_t s, int pt)
{
    return SIM_QUIETLY(sim_mempool_alloc_from(ptr, size, h, s, pt));
}

/* A heap copy of r, for the stream work that releases it. */
static struct sim_range *range_copy(const struct sim_range *r)
{
    struct sim_range *copy = malloc(sizeof *copy);
    if (!copy) abort();
    *copy = *r;
    return copy;
}

/* The work of cudaFreeAsync without the last error, as sim_mempool_alloc. */
cudaError_t sim_mempool_free(void *ptr, cudaStream_t sh, int pt)
{
    sim_init();
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(sh, pt, &s);
    if (err) return err;
    if (!ptr) return cudaSuccess;
    struct sim_range r;
    err = sim_claim_device_block(ptr, &r);
    if (err) return err;
    uint64_t seq;
    if (sim_capture_active(s)) {
        /* A memory free node: the graph may still use the block at every
         * launch until the node, so it is released with the graph. */
        struct sim_range *copy = range_copy(&r);
        err = sim_stream_add_work(
            s, &(struct sim_work){cudaGraphNodeTypeMemFree, NULL, release_graph_block, copy, 0},
            NULL, &seq);
        if (err) {
            free(copy);
            sim_registry_set_live(r.base, 0, 1);
        }
        return err;
    }
    if (r.kind != SIM_RANGE_MEMPOOL && r.kind != SIM_RANGE_HOST_MEMPOOL) {
        struct sim_range *copy = range_copy(&r);
        seq = sim_stream_submit(s, release_range, copy, 0, NULL);
        if (!seq) free(copy);
        return seq ? cudaSuccess : cudaErrorInvalidResourceHandle;
    }
    struct sim_mempool *pool = r.mempool;
    struct free_point *fp = malloc(sizeof *fp);
    if (!fp) abort();
    sim_registry_remove(r.base);
    pthread_mutex_lock(&pool->mu);
    sim_chunks_free(&pool->mem, r.base, s, 0, &fp->token);
    pthread_mutex_unlock(&pool->mu);
    fp->mempool = pool;
    seq = sim_stream_submit(s, reach_free, fp, 0, NULL);
    if (!seq) reach_free(fp); /* the stream went: nothing will use the block */
    return seq ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

SIM_SEAM cudaError_t sim_mempool_free_async(void *ptr, cudaStream_t s, int pt)
{
    return sim_mempool_free(ptr, s, pt);
}

/* The pool's cached memory goes back at once. Blocks still allocated from
 * it stay valid and freeable (the runtime releases the pool's resources
 * once they are freed): the pool then stays on its list, without a handle,
 * and gives their memory back at the next synchronisation. A destroyed
 * current pool leaves its device with the default pool current, as
 * cuMemPoolDestroy documents. */
cudaError_t sim_mempool_destroy(cudaMemPool_t h)
{
    struct sim_mempool *pool = sim_mempool_check(h);
    if (!pool || (pool->dev && pool == pool->dev->mempool)) return cudaErrorInvalidValue;
    if (pool->dev) {
        struct sim_mempool *expect = pool;
        __atomic_compare_exchange_n(&pool->dev->current_mempool, &expect, pool->dev->mempool, 0,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    sim_mempool_trim(pool, 0);
    pthread_mutex_lock(&created_mu);
    pthread_mutex_lock(&pool->mu);
    int idle = pool->mem.used == 0 && !pool->mem.list;
    pool->destroyed = 1;
    pool->threshold = 0;
    pthread_mutex_unlock(&pool->mu);
    if (idle) {
        struct sim_mempool **at = pool->dev ? &pool->dev->mempool->created : &host_pools;
        while (*at != pool)
            at = &(*at)->created;
        *at = pool->created;
    }
    pthread_mutex_unlock(&created_mu);
    if (idle) {
        pthread_mutex_destroy(&pool->mu);
        free(pool);
    }
    return cudaSuccess;
}

/* Every pool is locked before a fork (after created_mu, and before the
 * arena, the devices and the registry, which a pool's lock is held over),
 * and unlocked after it; in the child, frees pending on the parent's
 * streams can never be reached: they are reached as far as it knows. */
static void pool_fork_one(struct sim_mempool *p, enum sim_fork_phase phase)
{
    if (phase == SIM_FORK_PREPARE) {
        pthread_mutex_lock(&p->mu);
        return;
    }
    if (phase == SIM_FORK_CHILD) sim_chunks_forget_streams(&p->mem, NULL);
    pthread_mutex_unlock(&p->mu);
}

void sim_mempools_fork(enum sim_fork_phase phase)
{
    if (phase == SIM_FORK_PREPARE) pthread_mutex_lock(&created_mu);
    for (int d = 0; d < sim_cfg.ndevices; d++) {
        struct sim_device *dev = sim_dev(d);
        for (struct sim_mempool *p = dev->mempool; p; p = p->created)
            pool_fork_one(p, phase);
        pool_fork_one(dev->graph_mempool, phase);
    }
    for (struct sim_mempool *p = host_pools; p; p = p->created)
        pool_fork_one(p, phase);
    if (phase == SIM_FORK_CHILD)
        pthread_mutex_init(&created_mu, NULL);
    else if (phase == SIM_FORK_PARENT)
        pthread_mutex_unlock(&created_mu);
}
