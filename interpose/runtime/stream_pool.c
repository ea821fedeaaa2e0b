/* stream_pool.c - streams handed out from per-(device, flags, priority)
 * pools (SPEC 6).
 *
 * Programs that create and destroy streams every step pay the creation cost
 * each time and, with a caching allocator, lose their per-stream caches:
 * the new stream has none. With pools, a destroyed stream is parked with an
 * event recorded on it and handed out again once that event has completed,
 * so its cached blocks are still there for the next user. Reusing a stream's
 * blocks on the same stream is safe by stream order. A pool keeps at most
 * stream_pool_size streams; beyond that (and with stream_pool:false) streams
 * are created and destroyed for real, and the allocator retires the
 * destroyed stream's blocks. Pools are keyed by the exact flags and clamped
 * priority, so cudaStreamGetFlags/GetPriority answer as requested. */
#include "../core/real.h"
#include "../core/lifetime.h"
#include "runtime.h"
#include "../core/trace_glue.h"

#include <pthread.h>
#include <stdlib.h>

struct parked {
    cudaStream_t stream;
    cudaEvent_t done; /* NULL once known complete */
};

struct pool {
    int device;
    unsigned flags;
    int priority;
    unsigned n; /* parked streams */
    struct parked *slots;
};

static struct pool *pools;
static unsigned n_pools;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static struct pool *pool_find(int device, unsigned flags, int priority, bool create)
{
    unsigned cap = fs_shim_config_get()->stream_pool_size;
    struct pool *p;

    for (unsigned i = 0; i < n_pools; i++)
        if (pools[i].device == device && pools[i].flags == flags && pools[i].priority == priority)
            return &pools[i];
    if (!create || !(p = realloc(pools, (n_pools + 1) * sizeof *pools))) return NULL;
    pools = p;
    p = &pools[n_pools];
    p->slots = calloc(cap ? cap : 1, sizeof *p->slots);
    if (!p->slots) return NULL;
    p->device = device;
    p->flags = flags;
    p->priority = priority;
    p->n = 0;
    n_pools++;
    return p;
}

/* Takes a parked stream whose work has completed, if any. Called under
 * pool_lock, within an internal call bracket. */
static cudaStream_t pool_take(struct pool *p)
{
    for (unsigned i = 0; i < p->n; i++) {
        struct parked *k = &p->slots[i];
        cudaStream_t s;

        if (k->done && FS_REAL(cudaEventQuery)(k->done) != cudaSuccess) continue;
        if (k->done) FS_REAL(cudaEventDestroy)(k->done);
        s = k->stream;
        p->slots[i] = p->slots[--p->n];
        return s;
    }
    return NULL;
}

static int clamp_priority(int priority)
{
    int least = 0, greatest = 0;

    if (FS_REAL(cudaDeviceGetStreamPriorityRange)(&least, &greatest) != cudaSuccess)
        return priority;
    if (priority < greatest) return greatest;
    if (priority > least) return least;
    return priority;
}

static cudaError_t pool_create(cudaStream_t *out, unsigned flags, int priority)
{
    const fs_shim_config *cfg = fs_shim_config_get();
    int device = fs_shim_current_device();
    cudaStream_t s = NULL;
    fs_internal_call c;
    struct pool *p;
    cudaError_t e;
    bool reused;

    /* anything the pool cannot key (bad flags, null out) goes to the runtime,
     * which answers with its own error */
    if (!out || (flags & ~(unsigned)cudaStreamNonBlocking) || device < 0 || !fs_shim_allocator())
        return FS_REAL(cudaStreamCreateWithPriority)(out, flags, priority);
    fs_internal_begin(&c, -1);
    priority = clamp_priority(priority);
    if (cfg->stream_pool && cfg->stream_pool_size) {
        pthread_mutex_lock(&pool_lock);
        p = pool_find(device, flags, priority, false);
        if (p) s = pool_take(p);
        pthread_mutex_unlock(&pool_lock);
    }
    fs_internal_end(&c);
    reused = s != NULL;
    if (s) {
        fs_log(FS_LOG_DEBUG, "stream %p re-issued from the pool", (void *)s);
    } else {
        e = FS_REAL(cudaStreamCreateWithPriority)(&s, flags, priority);
        if (e != cudaSuccess) return e;
    }
    fs_stream_adopt(s, device, flags, priority, cfg->stream_pool && cfg->stream_pool_size);
    fs_stream_learn(s);
    fs_trace_stream(true, device, s, flags, priority, reused);
    *out = s;
    return cudaSuccess;
}

static void destroy_for_real(cudaStream_t s, int device)
{
    fs_allocator *a = fs_shim_allocator_peek();

    /* fenced while it still exists: an event recorded on a destroyed
     * handle would fail, or on a GPU land on whatever reused the handle */
    if (a) fs_alloc_stream_retire(a, device, (fs_stream_t)s);
    FS_REAL(cudaStreamDestroy)(s);
    fs_stream_forget(s);
}

static cudaError_t pool_destroy(cudaStream_t s)
{
    unsigned flags = 0, cap = fs_shim_config_get()->stream_pool_size;
    fs_allocator *a = fs_shim_allocator_peek();
    int device = -1, priority = 0;
    fs_internal_call c;
    struct pool *p;
    cudaEvent_t done = NULL;

    if (s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread)
        return FS_REAL(cudaStreamDestroy)(s);
    if (fs_stream_is_destroyed(s)) return fs_shim_return_error(cudaErrorInvalidResourceHandle);
    bool pooled = fs_stream_release(s, &device, &flags, &priority);
    fs_trace_stream(false, device, s, flags, priority, false);
    if (!pooled) {
        /* not pooled: fenced while it still exists, as in destroy_for_real */
        if (a && device >= 0) fs_alloc_stream_retire(a, device, (fs_stream_t)s);
        return FS_REAL(cudaStreamDestroy)(s);
    }
    /* pooled: park it behind an event that marks the end of its work */
    fs_internal_begin(&c, device);
    if (FS_REAL(cudaEventCreateWithFlags)(&done, cudaEventDisableTiming) != cudaSuccess ||
        FS_REAL(cudaEventRecord)(done, s) != cudaSuccess) {
        if (done) FS_REAL(cudaEventDestroy)(done);
        destroy_for_real(s, device);
        fs_internal_end(&c);
        return cudaSuccess;
    }
    pthread_mutex_lock(&pool_lock);
    p = pool_find(device, flags, priority, true);
    if (p && p->n < cap) {
        p->slots[p->n].stream = s;
        p->slots[p->n].done = done;
        p->n++;
        done = NULL;
        s = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    if (s) {
        FS_REAL(cudaEventDestroy)(done);
        destroy_for_real(s, device);
    }
    fs_internal_end(&c);
    return cudaSuccess;
}

/* The entry points: a runtime that creates streams for itself while the
 * shim is calling it gets plain streams. */
cudaError_t fs_stream_pool_create(cudaStream_t *out, unsigned flags, int priority)
{
    cudaError_t e;

    if (!fs_shim_enter()) return FS_REAL(cudaStreamCreateWithPriority)(out, flags, priority);
    e = pool_create(out, flags, priority);
    fs_shim_leave();
    return e;
}

cudaError_t fs_stream_pool_destroy(cudaStream_t s)
{
    cudaError_t e;

    if (!fs_shim_enter()) return FS_REAL(cudaStreamDestroy)(s);
    e = pool_destroy(s);
    fs_shim_leave();
    return e;
}

void fs_stream_pool_reset(int device)
{
    if (device < 0) {
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        pool_lock = fresh;
    }
    pthread_mutex_lock(&pool_lock);
    for (unsigned i = 0; i < n_pools;) {
        if (device < 0 || pools[i].device == device) {
            free(pools[i].slots);
            pools[i] = pools[--n_pools];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&pool_lock);
}

static void stream_pool_after_fork(void)
{
    fs_stream_pool_reset(-1);
}

FS_LIFETIME(stream_pool) = {.order = FS_ORDER_STREAM_POOL, .fork_child = stream_pool_after_fork};
