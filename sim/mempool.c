/* mempool.c - the memory pools of each device (its default pool and those
 * made by cudaMemPoolCreate): cudaMallocAsync, cudaMallocFromPoolAsync,
 * cudaFreeAsync, the pool attributes and trimming.
 *
 * A pool block is one device allocation (rounded up to SIM_ALLOC_GRANULE). Freed
 * blocks stay reserved in the pool: a cudaFreeAsync block is reusable at
 * once by later allocations on the stream that freed it (stream order makes
 * that safe), and by any stream once the stream has reached the free, if
 * cudaMemPoolReuseAllowOpportunistic is set (the default). The other two
 * reuse attributes are stored and reported but change nothing: the sim has
 * no event dependencies to follow. Cached blocks are released at host
 * synchronisation down to the release threshold (default 0), by
 * cudaMemPoolTrimTo, and when an allocation would otherwise fail. */
#include <stdlib.h>

#include "api_callback.h"
#include "internal.h"

#include <cupti.h> /* the callback ids and params structs */

#define POOL_PEERS 64 /* devices whose access a pool records */

struct pool_block {
    struct pool_block *next;
    uintptr_t base;
    size_t size;
    struct fs_stream *stream; /* the stream that freed it */
    int ready;                /* the stream has reached the free */
    uint64_t token;
};

struct fs_pool {
    struct fs_device *dev;
    pthread_mutex_t mu;
    uint64_t threshold;
    int reuse_follow, reuse_opportunistic, reuse_internal;
    uint64_t reserved, reserved_high, used, used_high;
    struct pool_block *cached;
    uint64_t next_token;
    /* On a default pool: the device's created pools, linked through their
     * own `created` (under created_mu). */
    struct fs_pool *created;
    int destroyed; /* by cudaMemPoolDestroy with blocks still out: no handle */
    enum cudaMemAccessFlags access[POOL_PEERS]; /* recorded, not enforced */
};

/* Guards every device's list of created pools. */
static pthread_mutex_t created_mu = PTHREAD_MUTEX_INITIALIZER;

static struct fs_pool *pool_alloc_struct(struct fs_device *dev)
{
    struct fs_pool *pool = calloc(1, sizeof *pool);
    if (!pool) abort();
    pool->dev = dev;
    pthread_mutex_init(&pool->mu, NULL);
    pool->reuse_follow = pool->reuse_opportunistic = pool->reuse_internal = 1;
    if (dev->ordinal < POOL_PEERS) pool->access[dev->ordinal] = cudaMemAccessFlagsProtReadWrite;
    return pool;
}

struct fs_pool *fs_pool_new(struct fs_device *dev)
{
    return pool_alloc_struct(dev);
}

static struct fs_pool *pool_check(cudaMemPool_t h)
{
    struct fs_pool *found = NULL;
    pthread_mutex_lock(&created_mu);
    for (int d = 0; d < fs_cfg.ndevices && !found; d++)
        for (struct fs_pool *p = fs_dev(d)->pool; p && !found; p = p->created)
            if ((struct fs_pool *)h == p && !p->destroyed) found = p;
    pthread_mutex_unlock(&created_mu);
    return found;
}

/* Calls fn on each pool of the device whose default pool is `def` (the
 * default pool first). The list is copied under created_mu and walked
 * without it, so fn may take a pool's mu (created_mu comes first, as in
 * fs_pool_fork). */
static void each_device_pool(struct fs_pool *def, void (*fn)(struct fs_pool *))
{
    pthread_mutex_lock(&created_mu);
    size_t n = 0;
    for (struct fs_pool *p = def; p; p = p->created)
        n++;
    struct fs_pool **all = malloc(n * sizeof *all);
    if (!all) abort();
    n = 0;
    for (struct fs_pool *p = def; p; p = p->created)
        all[n++] = p;
    pthread_mutex_unlock(&created_mu);
    for (size_t i = 0; i < n; i++)
        fn(all[i]);
    free(all);
}

/* Releases cached blocks until the pool holds at most `keep` bytes. */
static void pool_trim(struct fs_pool *pool, size_t keep)
{
    struct pool_block *victims = NULL;
    pthread_mutex_lock(&pool->mu);
    for (struct pool_block **pp = &pool->cached; *pp && pool->reserved > keep;) {
        struct pool_block *b = *pp;
        if (!b->ready) {
            pp = &b->next;
            continue;
        }
        *pp = b->next;
        pool->reserved -= b->size;
        b->next = victims;
        victims = b;
    }
    pthread_mutex_unlock(&pool->mu);
    while (victims) {
        struct pool_block *b = victims;
        victims = b->next;
        struct fs_range r = {b->base, b->size, FS_RANGE_POOL, pool->dev->ordinal, 0, pool, 0};
        fs_devmem_release(&r);
        free(b);
    }
}

static void trim_to_threshold(struct fs_pool *pool)
{
    pthread_mutex_lock(&pool->mu);
    uint64_t keep = pool->threshold;
    pthread_mutex_unlock(&pool->mu);
    pool_trim(pool, keep);
}

void fs_pool_trim_threshold(struct fs_pool *def)
{
    each_device_pool(def, trim_to_threshold);
}

/* Every cached block is reached and free for any stream: the streams that
 * freed them are gone (under pool->mu). */
static void forget_streams_locked(struct fs_pool *pool)
{
    for (struct pool_block *b = pool->cached; b; b = b->next) {
        b->ready = 1;
        b->stream = NULL;
    }
}

static void forget_streams(struct fs_pool *pool)
{
    pthread_mutex_lock(&pool->mu);
    forget_streams_locked(pool);
    pthread_mutex_unlock(&pool->mu);
}

void fs_pool_forget_streams(struct fs_pool *def)
{
    each_device_pool(def, forget_streams);
}

static void count_use(struct fs_pool *pool, size_t size)
{
    pool->used += size;
    if (pool->used > pool->used_high) pool->used_high = pool->used;
}

/* A cached block for `need` bytes on stream s: the smallest that fits and
 * wastes at most half of itself. */
static struct pool_block *take_cached(struct fs_pool *pool, size_t need, struct fs_stream *s)
{
    struct pool_block **best = NULL;
    for (struct pool_block **pp = &pool->cached; *pp; pp = &(*pp)->next) {
        struct pool_block *b = *pp;
        int usable = b->stream == s || (b->ready && pool->reuse_opportunistic);
        if (usable && b->size >= need && b->size / 2 <= need && (!best || b->size < (*best)->size))
            best = pp;
    }
    if (!best) return NULL;
    struct pool_block *b = *best;
    *best = b->next;
    return b;
}

static cudaError_t pool_alloc(struct fs_pool *pool, size_t size, struct fs_stream *s, void **out)
{
    if (size > fs_cfg.capacity)
        return fs_capacity_refused(pool->dev, size, cudaErrorMemoryAllocation);
    size_t need = (size + SIM_ALLOC_GRANULE - 1) & ~(size_t)(SIM_ALLOC_GRANULE - 1);

    pthread_mutex_lock(&pool->mu);
    struct pool_block *b = take_cached(pool, need, s);
    if (b) {
        count_use(pool, b->size);
        fs_registry_set_extent(b->base, size);
        fs_registry_set_live(b->base, 0, 1);
        pthread_mutex_unlock(&pool->mu);
        *out = (void *)b->base;
        free(b);
        return cudaSuccess;
    }
    pthread_mutex_unlock(&pool->mu);

    void *p;
    cudaError_t err = fs_devmem_alloc(pool->dev, need, FS_RANGE_POOL, pool, &p);
    if (err == cudaErrorMemoryAllocation) {
        /* Give back what the pool caches, as the driver does, and retry. */
        pool_trim(pool, 0);
        err = fs_devmem_alloc(pool->dev, need, FS_RANGE_POOL, pool, &p);
    }
    if (err) return fs_capacity_refused(pool->dev, size, err);
    fs_registry_set_extent((uintptr_t)p, size);
    pthread_mutex_lock(&pool->mu);
    pool->reserved += need;
    if (pool->reserved > pool->reserved_high) pool->reserved_high = pool->reserved;
    count_use(pool, need);
    pthread_mutex_unlock(&pool->mu);
    *out = p;
    return cudaSuccess;
}

/* Returns a freed block to the cache; ready says whether its stream has
 * already passed the free. */
static uint64_t cache_block(struct fs_pool *pool, const struct fs_range *r, struct fs_stream *s,
                            int ready)
{
    struct pool_block *b = malloc(sizeof *b);
    if (!b) abort();
    pthread_mutex_lock(&pool->mu);
    *b = (struct pool_block){pool->cached, r->base, r->size, s, ready, ++pool->next_token};
    pool->cached = b;
    pool->used -= r->size;
    uint64_t token = b->token;
    pthread_mutex_unlock(&pool->mu);
    return token;
}

void fs_pool_free_now(struct fs_pool *pool, uintptr_t base)
{
    struct fs_range r;
    if (fs_registry_find(base, &r)) cache_block(pool, &r, NULL, 1);
}

struct free_point {
    struct fs_pool *pool;
    uint64_t token;
};

/* Runs when the stream reaches a cudaFreeAsync. The block may already have
 * been reused by its own stream, in which case there is nothing to mark. */
static void reach_free(void *p)
{
    struct free_point *fp = p;
    pthread_mutex_lock(&fp->pool->mu);
    for (struct pool_block *b = fp->pool->cached; b; b = b->next)
        if (b->token == fp->token) b->ready = 1;
    pthread_mutex_unlock(&fp->pool->mu);
    free(fp);
}

/* cudaFreeAsync of cudaMalloc memory: released when the stream gets there. */
static void release_range(void *p)
{
    fs_devmem_release(p);
    free(p);
}

/* The work of cudaMallocAsync without the last error, which the runtime's
 * entry points record and the driver's (cuMemAllocAsync) leave alone. */
static cudaError_t malloc_async(void **ptr, size_t size, struct fs_pool *pool, cudaStream_t sh,
                                int pt)
{
    fs_init();
    if (!ptr) return cudaErrorInvalidValue;
    struct fs_stream *s;
    cudaError_t err = fs_stream_resolve(sh, pt, &s);
    if (err) return err;
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    if (!pool) pool = s->dev->pool;
    err = pool_alloc(pool, size, s, ptr);
    if (err || !fs_capture_active(s)) return err;
    /* Captured: a memory allocation node. The block is the graph's memory
     * at a fixed address from now on; a launch has nothing to do for it. */
    uint64_t seq;
    err = fs_stream_enqueue(s, &(struct fs_work){.type = cudaGraphNodeTypeMemAlloc}, NULL, &seq);
    if (err) fs_pool_free_now(pool, (uintptr_t)*ptr);
    return err;
}

/* A block freed in a capture: it stays the graph's until the graph goes. */
static void release_graph_block(void *p)
{
    struct fs_range *r = p;
    if (r->kind == FS_RANGE_POOL)
        fs_pool_free_now(r->pool, r->base);
    else
        fs_devmem_release(r);
    free(r);
}

/* What CUPTI is told of a stream-ordered allocation (api_callback.h): the
 * params structs of the four entry points have one layout. */
static cudaError_t malloc_async_call(void **ptr, size_t size, struct fs_pool *pool, cudaStream_t s,
                                     int pt, unsigned cbid, const char *name, const void *params)
{
    cudaError_t ret;
    FS_SIM_API_CALL(2, cbid, name, params, ret, fs_ret(malloc_async(ptr, size, pool, s, pt)));
    return ret;
}

FS_API cudaError_t cudaMallocAsync(void **ptr, size_t size, cudaStream_t s)
{
    cudaMallocAsync_v11020_params p = {ptr, size, s};
    return malloc_async_call(ptr, size, NULL, s, 0, CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
                             "cudaMallocAsync", &p);
}

FS_API cudaError_t cudaMallocAsync_ptsz(void **ptr, size_t size, cudaStream_t s)
{
    cudaMallocAsync_ptsz_v11020_params p = {ptr, size, s};
    return malloc_async_call(ptr, size, NULL, s, 1,
                             CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020,
                             "cudaMallocAsync_ptsz", &p);
}

FS_SEAM cudaError_t fs_pool_malloc_async(void **ptr, size_t size, cudaStream_t s, int pt)
{
    return malloc_async(ptr, size, NULL, s, pt);
}

static cudaError_t from_pool(void **ptr, size_t size, cudaMemPool_t h, cudaStream_t s, int pt)
{
    fs_init();
    struct fs_pool *pool = pool_check(h);
    return pool ? fs_ret(malloc_async(ptr, size, pool, s, pt)) : fs_ret(cudaErrorInvalidValue);
}

static cudaError_t malloc_from_pool(void **ptr, size_t size, cudaMemPool_t h, cudaStream_t s,
                                    int pt, unsigned cbid, const char *name)
{
    cudaMallocFromPoolAsync_v11020_params p = {ptr, size, h, s};
    cudaError_t ret;
    FS_SIM_API_CALL(2, cbid, name, &p, ret, from_pool(ptr, size, h, s, pt));
    return ret;
}

FS_API cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool,
                                           cudaStream_t s)
{
    return malloc_from_pool(ptr, size, pool, s, 0,
                            CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
                            "cudaMallocFromPoolAsync");
}

FS_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                                cudaStream_t s)
{
    return malloc_from_pool(ptr, size, pool, s, 1,
                            CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020,
                            "cudaMallocFromPoolAsync_ptsz");
}

/* A heap copy of r, for the stream work that releases it. */
static struct fs_range *range_copy(const struct fs_range *r)
{
    struct fs_range *copy = malloc(sizeof *copy);
    if (!copy) abort();
    *copy = *r;
    return copy;
}

/* The work of cudaFreeAsync without the last error, as malloc_async. */
static cudaError_t free_async(void *ptr, cudaStream_t sh, int pt)
{
    fs_init();
    struct fs_stream *s;
    cudaError_t err = fs_stream_resolve(sh, pt, &s);
    if (err) return err;
    if (!ptr) return cudaSuccess;
    struct fs_range r;
    err = fs_claim_device_block(ptr, &r);
    if (err) return err;
    uint64_t seq;
    if (fs_capture_active(s)) {
        /* A memory free node: the graph may still use the block at every
         * launch until the node, so it is released with the graph. */
        struct fs_range *copy = range_copy(&r);
        err = fs_stream_enqueue(
            s, &(struct fs_work){cudaGraphNodeTypeMemFree, NULL, release_graph_block, copy, 0},
            NULL, &seq);
        if (err) {
            free(copy);
            fs_registry_set_live(r.base, 0, 1);
        }
        return err;
    }
    if (r.kind == FS_RANGE_MALLOC) {
        struct fs_range *copy = range_copy(&r);
        seq = fs_stream_submit(s, release_range, copy, 0, NULL);
        if (!seq) free(copy);
    } else {
        struct fs_pool *pool = r.pool;
        struct free_point *fp = malloc(sizeof *fp);
        if (!fp) abort();
        *fp = (struct free_point){pool, cache_block(pool, &r, s, 0)};
        seq = fs_stream_submit(s, reach_free, fp, 0, NULL);
        if (!seq) free(fp);
    }
    return seq ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

static cudaError_t free_async_call(void *ptr, cudaStream_t s, int pt, unsigned cbid,
                                   const char *name)
{
    cudaFreeAsync_v11020_params p = {ptr, s};
    cudaError_t ret;
    FS_SIM_API_CALL(2, cbid, name, &p, ret, fs_ret(free_async(ptr, s, pt)));
    return ret;
}

FS_API cudaError_t cudaFreeAsync(void *ptr, cudaStream_t s)
{
    return free_async_call(ptr, s, 0, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
                           "cudaFreeAsync");
}

FS_API cudaError_t cudaFreeAsync_ptsz(void *ptr, cudaStream_t s)
{
    return free_async_call(ptr, s, 1, CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020,
                           "cudaFreeAsync_ptsz");
}

FS_SEAM cudaError_t fs_pool_free_async(void *ptr, cudaStream_t s, int pt)
{
    return free_async(ptr, s, pt);
}

FS_API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    if (!pool) return fs_ret(cudaErrorInvalidValue);
    struct fs_device *dev = fs_dev(device);
    if (!dev) return fs_ret(cudaErrorInvalidDevice);
    *pool = (cudaMemPool_t)dev->pool;
    return cudaSuccess;
}

/* The sim has only default pools, so the current pool is always it. */
FS_API cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *pool, int device)
{
    return cudaDeviceGetDefaultMemPool(pool, device);
}

FS_API cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool)
{
    struct fs_device *dev = fs_dev(device);
    if (!dev) return fs_ret(cudaErrorInvalidDevice);
    if ((struct fs_pool *)pool != dev->pool) return fs_ret(cudaErrorInvalidValue);
    return cudaSuccess;
}

/* Only what the sim can hold: pinned device memory of one device. */
FS_API cudaError_t cudaMemPoolCreate(cudaMemPool_t *h, const struct cudaMemPoolProps *props)
{
    fs_init();
    if (!h || !props || props->allocType != cudaMemAllocationTypePinned ||
        props->location.type != cudaMemLocationTypeDevice)
        return fs_ret(cudaErrorInvalidValue);
    struct fs_device *dev = fs_dev(props->location.id);
    if (!dev) return fs_ret(cudaErrorInvalidValue);
    struct fs_pool *pool = pool_alloc_struct(dev);
    pthread_mutex_lock(&created_mu);
    pool->created = dev->pool->created;
    dev->pool->created = pool;
    pthread_mutex_unlock(&created_mu);
    *h = (cudaMemPool_t)pool;
    return cudaSuccess;
}

/* The pool's cached memory goes back at once. Blocks still allocated from
 * it stay valid and freeable (the runtime releases the pool's resources
 * once they are freed): the pool then stays on its device's list, without
 * a handle, and gives their memory back at the next synchronisation. */
FS_API cudaError_t cudaMemPoolDestroy(cudaMemPool_t h)
{
    fs_init();
    struct fs_pool *pool = pool_check(h);
    if (!pool || pool == pool->dev->pool) return fs_ret(cudaErrorInvalidValue);
    pool_trim(pool, 0);
    pthread_mutex_lock(&created_mu);
    pthread_mutex_lock(&pool->mu);
    int idle = pool->used == 0 && !pool->cached;
    pool->destroyed = 1;
    pool->threshold = 0;
    pthread_mutex_unlock(&pool->mu);
    if (idle) {
        struct fs_pool **at = &pool->dev->pool->created;
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

/* A device whose access a pool records. */
static int peer_location(const struct cudaMemLocation *loc)
{
    return loc->type == cudaMemLocationTypeDevice && fs_dev(loc->id) && loc->id < POOL_PEERS;
}

/* A device (the sim's peers can always reach each other's memory, so the
 * access is recorded only); the owning device keeps read-write access. */
static int access_valid(const struct fs_pool *pool, const struct cudaMemAccessDesc *d)
{
    if (!peer_location(&d->location)) return 0;
    if (d->flags != cudaMemAccessFlagsProtNone && d->flags != cudaMemAccessFlagsProtRead &&
        d->flags != cudaMemAccessFlagsProtReadWrite)
        return 0;
    return d->location.id != pool->dev->ordinal || d->flags == cudaMemAccessFlagsProtReadWrite;
}

FS_API cudaError_t cudaMemPoolSetAccess(cudaMemPool_t h, const struct cudaMemAccessDesc *descs,
                                        size_t count)
{
    fs_init();
    struct fs_pool *pool = pool_check(h);
    if (!pool || (count && !descs)) return fs_ret(cudaErrorInvalidValue);
    for (size_t i = 0; i < count; i++)
        if (!access_valid(pool, &descs[i])) return fs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool->mu);
    for (size_t i = 0; i < count; i++)
        pool->access[descs[i].location.id] = descs[i].flags;
    pthread_mutex_unlock(&pool->mu);
    return cudaSuccess;
}

FS_API cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags *flags, cudaMemPool_t h,
                                        struct cudaMemLocation *location)
{
    fs_init();
    struct fs_pool *pool = pool_check(h);
    if (!pool || !flags || !location || !peer_location(location))
        return fs_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool->mu);
    *flags = pool->access[location->id];
    pthread_mutex_unlock(&pool->mu);
    return cudaSuccess;
}

FS_API cudaError_t cudaMemPoolTrimTo(cudaMemPool_t h, size_t keep)
{
    fs_init();
    struct fs_pool *pool = pool_check(h);
    if (!pool) return fs_ret(cudaErrorInvalidValue);
    pool_trim(pool, keep);
    return cudaSuccess;
}

FS_API cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t h, enum cudaMemPoolAttr attr, void *value)
{
    fs_init();
    struct fs_pool *pool = pool_check(h);
    if (!pool || !value) return fs_ret(cudaErrorInvalidValue);
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&pool->mu);
    switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
        pool->reuse_follow = *(int *)value != 0;
        break;
    case cudaMemPoolReuseAllowOpportunistic:
        pool->reuse_opportunistic = *(int *)value != 0;
        break;
    case cudaMemPoolReuseAllowInternalDependencies:
        pool->reuse_internal = *(int *)value != 0;
        break;
    case cudaMemPoolAttrReleaseThreshold:
        pool->threshold = *(uint64_t *)value;
        break;
    /* The high-water marks can only be reset, by writing 0. */
    case cudaMemPoolAttrReservedMemHigh:
        if (*(uint64_t *)value)
            err = cudaErrorInvalidValue;
        else
            pool->reserved_high = pool->reserved;
        break;
    case cudaMemPoolAttrUsedMemHigh:
        if (*(uint64_t *)value)
            err = cudaErrorInvalidValue;
        else
            pool->used_high = pool->used;
        break;
    default:
        err = cudaErrorInvalidValue;
        break;
    }
    pthread_mutex_unlock(&pool->mu);
    return fs_ret(err);
}

FS_API cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t h, enum cudaMemPoolAttr attr, void *value)
{
    fs_init();
    struct fs_pool *pool = pool_check(h);
    if (!pool || !value) return fs_ret(cudaErrorInvalidValue);
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&pool->mu);
    switch (attr) {
    case cudaMemPoolReuseFollowEventDependencies:
        *(int *)value = pool->reuse_follow;
        break;
    case cudaMemPoolReuseAllowOpportunistic:
        *(int *)value = pool->reuse_opportunistic;
        break;
    case cudaMemPoolReuseAllowInternalDependencies:
        *(int *)value = pool->reuse_internal;
        break;
    case cudaMemPoolAttrReleaseThreshold:
        *(uint64_t *)value = pool->threshold;
        break;
    case cudaMemPoolAttrReservedMemCurrent:
        *(uint64_t *)value = pool->reserved;
        break;
    case cudaMemPoolAttrReservedMemHigh:
        *(uint64_t *)value = pool->reserved_high;
        break;
    case cudaMemPoolAttrUsedMemCurrent:
        *(uint64_t *)value = pool->used;
        break;
    case cudaMemPoolAttrUsedMemHigh:
        *(uint64_t *)value = pool->used_high;
        break;
    default:
        err = cudaErrorInvalidValue;
        break;
    }
    pthread_mutex_unlock(&pool->mu);
    return fs_ret(err);
}

/* Called for each device's default pool, devices in order before the fork
 * and in reverse after it, so created_mu is held from device 0's PREPARE
 * call to its PARENT or CHILD call. */
void fs_pool_fork(struct fs_pool *def, enum fs_fork_phase phase)
{
    if (phase == FS_FORK_PREPARE) {
        if (def == fs_dev(0)->pool) pthread_mutex_lock(&created_mu);
        for (struct fs_pool *p = def; p; p = p->created)
            pthread_mutex_lock(&p->mu);
        return;
    }
    for (struct fs_pool *p = def; p; p = p->created) {
        /* Frees still pending on the parent's streams can never be reached
         * in the child: they are complete as far as it knows. */
        if (phase == FS_FORK_CHILD) forget_streams_locked(p);
        pthread_mutex_unlock(&p->mu);
    }
    if (def == fs_dev(0)->pool) {
        if (phase == FS_FORK_CHILD)
            pthread_mutex_init(&created_mu, NULL);
        else
            pthread_mutex_unlock(&created_mu);
    }
}
