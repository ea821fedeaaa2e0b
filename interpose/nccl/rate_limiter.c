/* rate_limiter.c - the all-gather rate limiter (SPEC section 7).
 *
 * FSDP prefetches the next layers' parameters with all-gathers; without a
 * limit the CPU runs ahead of the GPU and every prefetched layer is resident
 * at once. FSDP1's limit_all_gathers bounds that from Python; this file does
 * the same from below, for any program. Three pieces:
 *
 *  - marks: the blocks that hold an all-gather output, keyed by block start
 *    with the block's size. The free hook of shim.h asks wants_fence() on
 *    every free of a shim block, so that lookup is sharded and skipped
 *    entirely while nothing is marked.
 *  - one queue per device of freed outputs whose free fence has not yet
 *    completed: memory still in use on the GPU that the next all-gather's
 *    output would add to.
 *  - the wait before an all-gather: completed fences are dropped without
 *    waiting; then, while the queue holds ag_limit fences or more than
 *    ag_limit_mb bytes, the thread waits on the oldest fence's events.
 *
 * Per device, not per communicator: the limit exists for device memory, and
 * every communicator on a device (HSDP's shard and replicate groups, say)
 * draws from the same memory.
 *
 * Groups: NCCL enqueues grouped calls at ncclGroupEnd, so when an all-gather
 * inside a group waits here, nothing of its group is on any stream yet.
 * Every queued fence was recorded before the wait, behind work that is
 * already enqueued, so it cannot depend on the group's own work and the
 * wait cannot deadlock inside a group any more than outside one. (A fence
 * could only depend on the group if the program freed a buffer that the
 * group has yet to use: a use-after-free with or without the shim.)
 *
 * A waiting thread takes its fence out of the queue but still counts it
 * (waiting, waiting_bytes): other threads issuing all-gathers on the device
 * meanwhile see the same total and wait on the next fence, or on the
 * condition variable when every fence is being waited on. The queue lock is
 * never held across a wait, so frees are never held up by one. */
#include "rate_limiter.h"
#include "../core/lifetime.h"
#include "../core/trace_glue.h"

#include "nccl_ptrmap.h"
#include "../core/shim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

/* Devices with a queue; more than any node has. */
#define RL_MAX_DEVICES 64
/* Mark shards: frees on many threads rarely meet on one lock. */
#define RL_SHARDS 16

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool fs_ratelimit_enabled(void)
{
    const fs_shim_config *cfg = fs_shim_config_get();
    return cfg->ag_limit || cfg->ag_limit_bytes;
}

/* ---- marks ------------------------------------------------------------ */

static struct rl_shard {
    pthread_mutex_t lock;
    fs_ptrmap blocks; /* block start -> block size */
} shards[RL_SHARDS];

/* Blocks marked across all shards: the free hook's fast "no". */
static atomic_size_t marked;

static pthread_once_t hook_once = PTHREAD_ONCE_INIT;

static struct rl_shard *shard_of(const void *block)
{
    return &shards[((uint64_t)(uintptr_t)block * 0x9E3779B97F4A7C15ull) >> 60];
}

/* The mark the calling thread's free took last: its size travels from
 * wants_fence to on_fence, which the runtime glue calls in turn for one free. */
static FS_TLS struct {
    void *block;
    size_t bytes;
} taken;

/* The free hook's question, for every free of a shim block: is it a marked
 * output? The mark is taken now, whether or not a fence follows (a free
 * that needs none, or fails, must not leave a mark behind for the next
 * block at that address). */
static bool hook_wants_fence(void *ptr)
{
    if (atomic_load_explicit(&marked, memory_order_relaxed) == 0) return false;
    struct rl_shard *s = shard_of(ptr);
    uintptr_t bytes;
    pthread_mutex_lock(&s->lock);
    bool found = fs_ptrmap_remove(&s->blocks, (uintptr_t)ptr, &bytes);
    pthread_mutex_unlock(&s->lock);
    if (found) {
        atomic_fetch_sub_explicit(&marked, 1, memory_order_relaxed);
        taken.block = ptr;
        taken.bytes = bytes;
    }
    return found;
}

/* ---- per-device queues of freed outputs -------------------------------- */

struct rl_entry {
    fs_fence *fence;
    size_t bytes;
};

struct rl_queue {
    pthread_mutex_t lock;
    pthread_cond_t done; /* a waiter finished: the in-flight totals fell */
    struct rl_entry *entries;
    size_t len, cap; /* entries[0] is the oldest */
    size_t bytes;    /* bytes of the queued entries */
    size_t waiting;  /* entries taken out by waiting threads, still in flight */
    size_t waiting_bytes;
};

static _Atomic(struct rl_queue *) queues[RL_MAX_DEVICES];

/* The queue of `device`, created on first use when `create` is set. */
static struct rl_queue *queue_of(int device, bool create)
{
    if (device < 0 || device >= RL_MAX_DEVICES) return NULL;
    struct rl_queue *q = atomic_load_explicit(&queues[device], memory_order_acquire);
    if (q || !create) return q;
    struct rl_queue *fresh = calloc(1, sizeof(*fresh));
    if (!fresh) return NULL;
    pthread_mutex_init(&fresh->lock, NULL);
    pthread_cond_init(&fresh->done, NULL);
    if (!atomic_compare_exchange_strong_explicit(&queues[device], &q, fresh, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        /* Another thread installed one first: q now holds it. */
        pthread_cond_destroy(&fresh->done);
        pthread_mutex_destroy(&fresh->lock);
        free(fresh);
        return q;
    }
    return fresh;
}

/* Drops every queued fence whose events have completed (a fence that can no
 * longer be queried, e.g. after cudaDeviceReset, counts as completed: there
 * is nothing left to wait for). Caller holds q->lock. */
static void queue_drop_completed(struct rl_queue *q, fs_allocator *a)
{
    size_t kept = 0;
    for (size_t i = 0; i < q->len; i++) {
        struct rl_entry e = q->entries[i];
        if (fs_fence_query(a, e.fence) == FS_DEV_NOT_READY) {
            q->entries[kept++] = e;
        } else {
            fs_fence_release(a, e.fence);
            q->bytes -= e.bytes;
        }
    }
    q->len = kept;
}

static bool queue_push(struct rl_queue *q, struct rl_entry e)
{
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 8;
        struct rl_entry *grown = realloc(q->entries, cap * sizeof(*grown));
        if (!grown) return false;
        q->entries = grown;
        q->cap = cap;
    }
    q->entries[q->len++] = e;
    q->bytes += e.bytes;
    return true;
}

static struct rl_entry queue_pop_oldest(struct rl_queue *q)
{
    struct rl_entry e = q->entries[0];
    q->len--;
    for (size_t i = 0; i < q->len; i++)
        q->entries[i] = q->entries[i + 1];
    q->bytes -= e.bytes;
    return e;
}

static bool over_limit(const struct rl_queue *q, const fs_shim_config *cfg)
{
    size_t fences = q->len + q->waiting;
    size_t bytes = q->bytes + q->waiting_bytes;
    return (cfg->ag_limit && fences >= cfg->ag_limit) ||
           (cfg->ag_limit_bytes && bytes > cfg->ag_limit_bytes);
}

/* The free hook's answer: the marked block asked about was freed with
 * `fence`, which joins its device's queue. */
static void hook_on_fence(int device, void *ptr, fs_fence *fence)
{
    fs_allocator *a = fs_shim_allocator();
    size_t bytes = taken.block == ptr ? taken.bytes : 0;
    taken.block = NULL;
    if (!fence) return;
    struct rl_queue *q = queue_of(device, true);
    if (!q) {
        fs_fence_release(a, fence);
        return;
    }
    pthread_mutex_lock(&q->lock);
    /* Keep the queue short even when no all-gather comes to drain it. */
    queue_drop_completed(q, a);
    if (!queue_push(q, (struct rl_entry){fence, bytes})) {
        fs_log(FS_LOG_WARN, "rate limiter: out of memory, an all-gather output goes unlimited");
        fs_fence_release(a, fence);
    }
    pthread_mutex_unlock(&q->lock);
}

static void hook_install(void)
{
    static const fs_shim_free_hook hook = {hook_wants_fence, hook_on_fence};
    fs_shim_set_free_hook(&hook);
}

void fs_ratelimit_mark_output(const void *recvbuff)
{
    fs_allocator *a = fs_shim_allocator();
    fs_block_info info;
    if (!a || fs_alloc_block_info(a, recvbuff, &info) != FS_OK) return;
    pthread_once(&hook_once, hook_install);
    struct rl_shard *s = shard_of(info.block);
    pthread_mutex_lock(&s->lock);
    size_t before = s->blocks.count;
    bool ok = fs_ptrmap_put(&s->blocks, (uintptr_t)info.block, info.block_size);
    size_t added = s->blocks.count - before;
    pthread_mutex_unlock(&s->lock);
    if (added) atomic_fetch_add_explicit(&marked, added, memory_order_relaxed);
    if (!ok)
        fs_log(FS_LOG_WARN, "rate limiter: out of memory, an all-gather output goes unlimited");
}

/* ---- lifetime -------------------------------------------------------------
 * The child of a fork starts clean, like the allocator it inherited, which
 * shim.c abandons there: the parent's marks and fences mean nothing in the
 * child, and another thread may have held one of these locks at the fork.
 * The fences themselves belong to the abandoned allocator and are left. */
static void atfork_child(void)
{
    for (int i = 0; i < RL_SHARDS; i++) {
        pthread_mutex_init(&shards[i].lock, NULL);
        free(shards[i].blocks.slots);
        shards[i].blocks = (fs_ptrmap){0};
    }
    atomic_store_explicit(&marked, 0, memory_order_relaxed);
    for (int d = 0; d < RL_MAX_DEVICES; d++) {
        struct rl_queue *q = atomic_exchange_explicit(&queues[d], NULL, memory_order_acq_rel);
        if (q) {
            free(q->entries);
            free(q);
        }
    }
}

static void ratelimit_init(void)
{
    for (int i = 0; i < RL_SHARDS; i++)
        pthread_mutex_init(&shards[i].lock, NULL);
}

/* ---- statistics --------------------------------------------------------
 * The gap from the end of a wait to the all-gather's launch, in 100 ns
 * buckets up to 1 ms (the target is 20 us; FSDP1 leaves ~235 us). Lock-free
 * so that measuring costs the launch nothing worth measuring. */
#define GAP_BUCKET_NS 100u
#define GAP_BUCKETS   10000u

static atomic_uint_fast64_t gap_hist[GAP_BUCKETS + 1]; /* last: 1 ms or more */
static atomic_uint_fast64_t gap_max_ns;
/* per device, for the live statistics page (fs_ratelimit_figures) */
static atomic_uint_fast64_t waits[RL_MAX_DEVICES], wait_total_ns[RL_MAX_DEVICES];

void fs_ratelimit_launched(uint64_t wait_end)
{
    if (!wait_end) return;
    uint64_t gap = now_ns() - wait_end;
    uint64_t bucket = gap / GAP_BUCKET_NS;
    atomic_fetch_add_explicit(&gap_hist[bucket < GAP_BUCKETS ? bucket : GAP_BUCKETS], 1,
                              memory_order_relaxed);
    uint_fast64_t max = atomic_load_explicit(&gap_max_ns, memory_order_relaxed);
    while (gap > max && !atomic_compare_exchange_weak_explicit(
                            &gap_max_ns, &max, gap, memory_order_relaxed, memory_order_relaxed))
        ;
}

/* The upper edge of the bucket holding the q-th quantile, in us. */
static double gap_quantile_us(uint64_t n, double quantile)
{
    uint64_t rank = (uint64_t)(quantile * (double)(n - 1)) + 1, seen = 0;
    for (unsigned b = 0; b <= GAP_BUCKETS; b++) {
        seen += atomic_load_explicit(&gap_hist[b], memory_order_relaxed);
        if (seen >= rank) return (double)(b + 1) * GAP_BUCKET_NS / 1000.0;
    }
    return (double)atomic_load_explicit(&gap_max_ns, memory_order_relaxed) / 1000.0;
}

/* At exit, with FSDPSHIM_LOG=info or more, one line on what the limiter did. */
static void report_at_exit(void)
{
    uint64_t n = 0, total_ns = 0;
    for (int d = 0; d < RL_MAX_DEVICES; d++) {
        n += atomic_load_explicit(&waits[d], memory_order_relaxed);
        total_ns += atomic_load_explicit(&wait_total_ns[d], memory_order_relaxed);
    }
    if (!n || !fs_log_enabled(FS_LOG_INFO)) return;
    uint64_t launched = 0;
    for (unsigned b = 0; b <= GAP_BUCKETS; b++)
        launched += atomic_load_explicit(&gap_hist[b], memory_order_relaxed);
    if (!launched) return;
    fs_log(FS_LOG_INFO,
           "rate limiter: %llu waits, %.3f ms waiting in total; gap from wait end to all-gather "
           "launch over %llu launches: median %.1f us, p99 %.1f us, max %.1f us",
           (unsigned long long)n, (double)total_ns / 1e6, (unsigned long long)launched,
           gap_quantile_us(launched, 0.5), gap_quantile_us(launched, 0.99),
           (double)atomic_load_explicit(&gap_max_ns, memory_order_relaxed) / 1000.0);
}

FS_LIFETIME(rate_limit) = {.order = FS_ORDER_RATE_LIMIT,
                           .init = ratelimit_init,
                           .fork_child = atfork_child,
                           .exit = report_at_exit};

/* ---- the wait ------------------------------------------------------------ */

uint64_t fs_ratelimit_wait(int device)
{
    const fs_shim_config *cfg = fs_shim_config_get();
    struct rl_queue *q = queue_of(device, false);
    fs_allocator *a = fs_shim_allocator();
    if (!q || !a || (!cfg->ag_limit && !cfg->ag_limit_bytes)) return 0;

    uint64_t wait_end = 0;
    fs_err_state err;
    fs_err_save(&err);
    pthread_mutex_lock(&q->lock);
    for (;;) {
        queue_drop_completed(q, a);
        if (!over_limit(q, cfg)) break;
        if (!q->len) {
            /* Everything in flight is being waited on by other threads. */
            pthread_cond_wait(&q->done, &q->lock);
            continue;
        }
        struct rl_entry e = queue_pop_oldest(q);
        q->waiting++;
        q->waiting_bytes += e.bytes;
        uint64_t in_flight = (uint64_t)q->len + (uint64_t)q->waiting; /* for the trace */
        pthread_mutex_unlock(&q->lock);

        uint64_t start = now_ns();
        fs_trace_rate_limit(true, device, in_flight, e.bytes, NULL);
        fs_dev_status st = fs_fence_wait(a, e.fence);
        fs_trace_rate_limit(false, device, 0, 0, e.fence);
        fs_fence_release(a, e.fence);
        wait_end = now_ns();
        atomic_fetch_add_explicit(&waits[device], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&wait_total_ns[device], wait_end - start, memory_order_relaxed);
        if (st != FS_DEV_OK)
            fs_log(FS_LOG_WARN, "rate limiter: waiting on a freed all-gather output failed (%d)",
                   (int)st);
        fs_log(FS_LOG_DEBUG, "rate limiter: all-gather on device %d waited %.1f us", device,
               (double)(wait_end - start) / 1000.0);

        pthread_mutex_lock(&q->lock);
        q->waiting--;
        q->waiting_bytes -= e.bytes;
        pthread_cond_broadcast(&q->done);
    }
    pthread_mutex_unlock(&q->lock);
    fs_err_restore(&err);
    return wait_end;
}

void fs_ratelimit_figures(int device, fs_ratelimit_live *out)
{
    *out = (fs_ratelimit_live){0};
    if (device < 0 || device >= RL_MAX_DEVICES) return;
    out->waits = atomic_load_explicit(&waits[device], memory_order_relaxed);
    out->wait_ns = atomic_load_explicit(&wait_total_ns[device], memory_order_relaxed);
    struct rl_queue *q = queue_of(device, false);
    if (!q) return;
    pthread_mutex_lock(&q->lock);
    out->in_flight = q->len + q->waiting;
    out->in_flight_bytes = q->bytes + q->waiting_bytes;
    pthread_mutex_unlock(&q->lock);
}
