/* shim.c - the shim's process-wide state: the allocator and its lifetime,
 * the per-thread reentrancy guard and current stream, the free hook the
 * rate limiter uses, the OOM message, and a clean start after fork.
 *
 * The allocator is created on first use rather than in a constructor: the
 * CUDA runtime may not be loaded yet when the shim is (Python dlopens it
 * much later), and a program that never touches CUDA must not pay for it. */
#include "real.h"
#include "runtime.h"

#include <pthread.h>
#include <time.h>

static fs_allocator *allocator;
static int device_count;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static const fs_shim_free_hook *free_hook;

static __thread int in_shim __attribute__((tls_model("initial-exec")));
static __thread cudaStream_t thread_stream __attribute__((tls_model("initial-exec")));

bool fs_shim_enter(void)
{
    if (in_shim) return false;
    in_shim = 1;
    return true;
}

void fs_shim_leave(void)
{
    in_shim = 0;
}

cudaStream_t fs_thread_stream(void)
{
    return thread_stream;
}

void fs_thread_stream_set(cudaStream_t s)
{
    thread_stream = s;
}

void fs_shim_set_free_hook(const fs_shim_free_hook *hook)
{
    __atomic_store_n(&free_hook, hook, __ATOMIC_RELEASE);
}

const fs_shim_free_hook *fs_free_hook(void)
{
    return __atomic_load_n(&free_hook, __ATOMIC_ACQUIRE);
}

/* The OOM line, at most once per second: PyTorch's cacheInfo probes device
 * memory by allocating until it fails, and such handled OOMs must stay quiet. */
static void on_oom(void *ctx, const fs_oom_info *info)
{
    static int64_t last_ns;
    struct timespec now;
    int64_t ns, prev;

    (void)ctx;
    clock_gettime(CLOCK_MONOTONIC, &now);
    ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    prev = __atomic_load_n(&last_ns, __ATOMIC_RELAXED);
    if (prev && ns - prev < 1000000000) return;
    if (!__atomic_compare_exchange_n(&last_ns, &prev, ns, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return;
    fs_log(FS_LOG_WARN,
           "out of memory on device %d: requested %zu bytes, allocated %zu, "
           "reserved but free %zu, largest free block %zu (reserved %zu)",
           info->device, info->requested, info->allocated, info->reserved_free, info->largest_free,
           info->reserved);
}

static const fs_alloc_observer observer = {.on_oom = on_oom};

static void create_allocator(void)
{
    __typeof__(&cudaGetDeviceCount) get_count = FS_REAL(cudaGetDeviceCount);
    const fs_shim_config *cfg = fs_shim_config_get();
    fs_internal_call c;
    fs_allocator *a;
    int n = 0;
    cudaError_t e;

    if (!get_count) return; /* the runtime is not loaded yet: try again on the next call */
    fs_err_save(&c.err);
    e = get_count(&n);
    fs_err_restore(&c.err);
    if (e != cudaSuccess || n <= 0) {
        fs_log(FS_LOG_INFO, "no CUDA device (%d); the shim stays out of the way", (int)e);
        return;
    }
    a = fs_allocator_create(&cfg->alloc, fs_cuda_device_ops(cfg->alloc.expandable_segments), n);
    if (!a) {
        fs_log(FS_LOG_ERROR, "cannot create the allocator; passing calls through");
        return;
    }
    fs_alloc_set_observer(a, &observer);
    device_count = n;
    __atomic_store_n(&allocator, a, __ATOMIC_RELEASE);
    fs_log(FS_LOG_INFO, "active on %d device(s)", n);
}

fs_allocator *fs_shim_allocator(void)
{
    fs_allocator *a = __atomic_load_n(&allocator, __ATOMIC_ACQUIRE);

    if (fs_likely(a != NULL)) return a;
    pthread_mutex_lock(&create_lock);
    if (!allocator) create_allocator();
    a = allocator;
    pthread_mutex_unlock(&create_lock);
    return a;
}

fs_allocator *fs_shim_allocator_peek(void)
{
    return __atomic_load_n(&allocator, __ATOMIC_ACQUIRE);
}

int fs_shim_device_count(void)
{
    return __atomic_load_n(&device_count, __ATOMIC_ACQUIRE);
}

/* The child of a fork starts clean (SPEC 11): the parent's device memory,
 * streams and events mean nothing there, and other threads may have held
 * the allocator's locks at the fork. The old allocator is abandoned, not
 * destroyed: destroying it would call into a runtime the child cannot use. */
static void atfork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

    create_lock = fresh;
    allocator = NULL;
    device_count = 0;
    thread_stream = NULL;
    fs_streams_reset(-1);
    fs_pool_reset(-1);
    fs_cuda_device_reset(-1);
    fs_capture_reset();
}

__attribute__((constructor)) static void shim_init(void)
{
    pthread_atfork(NULL, NULL, atfork_child);
}

/* At exit, with FSDPSHIM_LOG=info or more: one line per device the program
 * used, so a run shows what the cache did without a trace. */
__attribute__((destructor)) static void report_at_exit(void)
{
    fs_allocator *a = fs_shim_allocator_peek();
    fs_alloc_stats st;
    const double mib = 1024.0 * 1024.0;

    if (!a || !fs_log_enabled(FS_LOG_INFO)) return;
    for (int d = 0; d < fs_shim_device_count(); d++) {
        fs_alloc_get_stats(a, d, &st);
        if (st.allocation[FS_POOL_ALL].allocated == 0) continue;
        fs_log(FS_LOG_INFO,
               "device %d: %lld allocations served by %lld device allocations; peak allocated "
               "%.1f MiB, peak reserved %.1f MiB; %lld retries, %lld OOMs",
               d, (long long)st.allocation[FS_POOL_ALL].allocated, (long long)st.num_device_alloc,
               st.allocated_bytes[FS_POOL_ALL].peak / mib,
               st.reserved_bytes[FS_POOL_ALL].peak / mib, (long long)st.num_alloc_retries,
               (long long)st.num_ooms);
    }
}
