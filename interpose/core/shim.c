/* shim.c - the shim's process-wide state: the allocator and its lifetime,
 * the per-thread reentrancy guard and current streams, the free hook the
 * rate limiter uses, the OOM message, and a clean start after fork.
 *
 * The allocator is created on first use rather than in a constructor: the
 * CUDA runtime may not be loaded yet when the shim is (Python dlopens it
 * much later), and a program that never touches CUDA must not pay for it.
 * It is never created while the program's CUDA calls do not reach the shim
 * (linked rather than preloaded): the shim then stays inactive.
 *
 * Its device table is the program's CUDA runtime (core/cuda_device.c)
 * wherever one is loaded. A process whose program carries the runtime
 * statically (nvcc's default) has none the shim can call: its calls reach
 * the shim only as driver calls, by lookup (driver/cuda_driver.c), and the
 * first one served creates the allocator over the driver instead
 * (core/driver_device.c), once the program has initialised it.
 *
 * Creating it looks symbols up and may load libraries, which takes glibc's
 * loader lock; glibc holds that lock while it runs a library's constructors,
 * and a constructor may call cudaMalloc. So no thread holds create_lock
 * while it asks the loader anything it can ask first, and no thread waits
 * for create_lock for ever (create_lock_take). */
#include "lifetime.h"
#include "real.h"
#include "devices.h"
#include "trace_glue.h"

#include "../../route/torch_route.h"
#include "../../trace/snapshot.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEVICES 64

static fs_allocator *allocator;
static bool over_driver; /* the allocator runs over the driver; set before it is published */
static int device_count;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static bool create_stalled; /* a thread gave up waiting for the current creator */
static const fs_shim_free_hook *free_hook;

static FS_TLS int in_shim;

/* The thread's current stream of each device (docs/api.md), allocated when
 * the thread first sets one: a table in static TLS would cost every thread
 * of every program the shim is loaded into MAX_DEVICES pointers. */
static FS_TLS cudaStream_t *thread_streams;
static pthread_key_t thread_streams_key;
static pthread_once_t thread_streams_once = PTHREAD_ONCE_INIT;

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

bool fs_shim_inside(void)
{
    return in_shim != 0;
}

cudaStream_t fs_thread_stream(int device)
{
    cudaStream_t *t = thread_streams;

    return t && device >= 0 && device < MAX_DEVICES ? t[device] : NULL;
}

/* At thread exit; later destructors that reach cudaMalloc see no table. */
static void thread_streams_free(void *table)
{
    thread_streams = NULL;
    free(table);
}

static void thread_streams_init(void)
{
    pthread_key_create(&thread_streams_key, thread_streams_free);
}

bool fs_thread_stream_set(int device, cudaStream_t s)
{
    cudaStream_t *t = thread_streams;

    if (device < 0 || device >= MAX_DEVICES) return false;
    if (!t) {
        if (!s) return true; /* the legacy stream already */
        pthread_once(&thread_streams_once, thread_streams_init);
        if (!(t = calloc(MAX_DEVICES, sizeof *t))) return false;
        if (pthread_setspecific(thread_streams_key, t) != 0) {
            free(t);
            return false;
        }
        thread_streams = t;
    }
    t[device] = s;
    return true;
}

void fs_shim_set_free_hook(const fs_shim_free_hook *hook)
{
    __atomic_store_n(&free_hook, hook, __ATOMIC_RELEASE);
}

const fs_shim_free_hook *fs_free_hook(void)
{
    return __atomic_load_n(&free_hook, __ATOMIC_ACQUIRE);
}

#define MAX_OOM_SNAPSHOTS 8

/* The OOM line, at most once per second: PyTorch's cacheInfo probes device
 * memory by allocating until it fails, and such handled OOMs must stay quiet. */
static void on_oom(void *ctx, const fs_oom_info *info)
{
    static int64_t last_ns;
    struct timespec now;
    int64_t ns, prev;

    (void)ctx;
    fs_trace_glue_oom(info);
    clock_gettime(CLOCK_MONOTONIC, &now);
    ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    prev = __atomic_load_n(&last_ns, __ATOMIC_RELAXED);
    if (prev && ns - prev < 1000000000) return;
    if (!__atomic_compare_exchange_n(&last_ns, &prev, ns, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return;
    /* A snapshot of every segment and block with each OOM reported, up to
     * a few per process: a program that keeps probing gets the first ones. */
    static int snapshots;
    char snap[4200] = "";
    if (__atomic_fetch_add(&snapshots, 1, __ATOMIC_RELAXED) < MAX_OOM_SNAPSHOTS) {
        char path[4096];
        if (fs_trace_glue_snapshot("fsdpshim-oom", info, path, sizeof path))
            snprintf(snap, sizeof snap, "; snapshot: %s", path);
        else
            snprintf(snap, sizeof snap, "; no snapshot: %s", path);
    }
    fs_log(FS_LOG_WARN,
           "out of memory on device %d: requested %.1f MiB (%zu bytes), allocated %.1f MiB, "
           "reserved but free %.1f MiB, largest free block %.1f MiB (reserved %.1f MiB)%s",
           info->device, info->requested / 1048576.0, info->requested, info->allocated / 1048576.0,
           info->reserved_free / 1048576.0, info->largest_free / 1048576.0,
           info->reserved / 1048576.0, snap);
}

static fs_alloc_observer observer = {.on_oom = on_oom};

/* The observer in force serves the trace (observer.on_event, set by the
 * trace glue when something is traced) and, once the PyTorch adapter asks,
 * the segment hook: through dispatch, so that an untraced process without
 * the hook keeps paying nothing per event. */
static void (*segment_hook)(const fs_alloc_event *ev);
static pthread_mutex_t observer_lock = PTHREAD_MUTEX_INITIALIZER;

static void dispatch(void *ctx, const fs_alloc_event *ev)
{
    void (*hook)(const fs_alloc_event *) = __atomic_load_n(&segment_hook, __ATOMIC_ACQUIRE);

    if (observer.on_event) observer.on_event(ctx, ev);
    if (hook && (ev->kind == FS_EV_SEGMENT_ALLOC || ev->kind == FS_EV_SEGMENT_FREE ||
                 ev->kind == FS_EV_SEGMENT_MAP || ev->kind == FS_EV_SEGMENT_UNMAP ||
                 ev->kind == FS_EV_FREE_COMPLETED))
        hook(ev);
}

static void install_observer(fs_allocator *a)
{
    fs_alloc_observer o = observer;

    pthread_mutex_lock(&observer_lock);
    if (__atomic_load_n(&segment_hook, __ATOMIC_ACQUIRE)) o.on_event = dispatch;
    fs_alloc_set_observer(a, &o);
    pthread_mutex_unlock(&observer_lock);
}

void fs_shim_segment_hook(void (*hook)(const fs_alloc_event *ev))
{
    fs_allocator *a;

    if (!hook) return;
    if (!__atomic_exchange_n(&segment_hook, hook, __ATOMIC_ACQ_REL))
        fs_log(FS_LOG_INFO, "segment events go to PyTorch's allocator trace trackers too");
    if ((a = __atomic_load_n(&allocator, __ATOMIC_ACQUIRE))) install_observer(a);
}

/* The shim manages memory only when the program's references to the
 * runtime bind to its definitions, that is when the program's global scope
 * (dlopen(NULL): what the executable and the libraries it loads resolve
 * against) finds the shim's cudaMalloc first. A libfsdpshim.so linked after
 * libcudart, or dlopen'ed with RTLD_LOCAL (ctypes.CDLL), sees none of the
 * program's calls, and its API must not claim otherwise. The definitions are
 * compared by object: inside the shim, &cudaMalloc itself would resolve
 * through the same global scope. Settled on first use, outside create_lock
 * (dlopen, dlsym and dladdr take the loader lock): threads that get here
 * together each work it out, and agree, since the global scope only grows
 * at its end and the answer never changes. */
static int interposition; /* 1 the program's calls reach the shim, -1 not, 0 not yet known */

static bool program_calls_reach_shim(void)
{
    int known = __atomic_load_n(&interposition, __ATOMIC_ACQUIRE);
    Dl_info shim, found = {0};
    void *global, *sym = NULL;

    if (fs_likely(known != 0)) return known > 0;
    global = dlopen(NULL, RTLD_LAZY);
    if (global) {
        sym = dlsym(global, "cudaMalloc");
        dlclose(global);
    }
    if (sym && dladdr((void *)program_calls_reach_shim, &shim) && dladdr(sym, &found) &&
        shim.dli_fbase == found.dli_fbase) {
        __atomic_store_n(&interposition, 1, __ATOMIC_RELEASE);
        return true;
    }
    /* the warning once, from the thread that settles it */
    if (!__atomic_compare_exchange_n(&interposition, &known, -1, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return false;
    fs_log(FS_LOG_WARN,
           "libfsdpshim.so is linked or dlopen'ed, not preloaded: the program's cudaMalloc "
           "resolves to %s, so its CUDA calls never reach the shim; it manages nothing and its "
           "API answers FSDPSHIM_ERR_INACTIVE. Preload it (LD_PRELOAD or fsdpshim run) and reach "
           "the API through dlsym or include/fsdpshim/fsdpshim_loader.h (docs/api.md)",
           !sym                                  ? "nothing in its global scope"
           : found.dli_fname && *found.dli_fname ? found.dli_fname
                                                 : "the executable");
    return false;
}

bool fs_shim_preloaded(void)
{
    Dl_info self, found;
    void *sym = dlsym(RTLD_DEFAULT, "cudaMalloc");
    return sym && dladdr((void *)fs_shim_preloaded, &self) && dladdr(sym, &found) &&
           self.dli_fbase == found.dli_fbase;
}

/* Under create_lock, for a process with `n` devices: creates the allocator
 * and what lives as long as it (the live page, the trace), and publishes
 * it. Starting the live page's and the trace writer's threads, and any
 * first lookup on the way, may still take the loader lock (which of them
 * does depends on the C library), which is why create_lock_take gives up
 * in the end. */
static void create_allocator(int n, bool driver)
{
    const fs_shim_config *cfg = fs_shim_config_get();
    /* On the PyTorch adapter's route the program may switch expandable
     * segments on while it runs (_set_allocator_settings): the driver's
     * virtual-memory entry points are looked up now for that too. */
    const char *adapter = getenv(FS_ROUTE_ADAPTER_VAR);
    bool vm = cfg->alloc.expandable_segments || (adapter && *adapter);
    const fs_device_ops *ops = driver ? fs_driver_device_ops(vm) : fs_cuda_device_ops(vm);
    fs_allocator *a;

    if (cfg->alloc.expandable_segments && !ops->vm_map)
        fs_log(FS_LOG_WARN, "expandable_segments: the driver's virtual-memory API is not "
                            "reachable; using plain segments");

    a = fs_allocator_create(&cfg->alloc, ops, n);
    if (!a) {
        fs_log(FS_LOG_ERROR, "cannot create the allocator; passing calls through");
        return;
    }
    /* the live page, then the trace, then the GIL's hooks (core/lifetime.h) */
    fs_lifetime_started(a, n);
    fs_trace_glue_observe(&observer);
    fs_trace_glue_snapshot_signal();
    install_observer(a);
    device_count = n;
    __atomic_store_n(&over_driver, driver, __ATOMIC_RELEASE);
    __atomic_store_n(&allocator, a, __ATOMIC_RELEASE);
    /* a hook set while the allocator was being made found none to serve */
    if (__atomic_load_n(&segment_hook, __ATOMIC_ACQUIRE)) install_observer(a);
    fs_log(FS_LOG_INFO, "active on %d device(s)%s", n,
           driver ? ", over the driver (no CUDA runtime is loaded)" : "");
}

/* How long a thread waits for another that is creating the allocator. The
 * creation takes milliseconds, but the creator may be waiting for the
 * loader lock, and this thread may hold it: it may be running a library's
 * constructor for dlopen. Nothing tells the two cases apart, so after this
 * long the call is served as one the shim cannot serve, by the runtime
 * (docs/interpose.md, "Ground rules"), and the constructor can finish. */
#define CREATE_WAIT_NS (200 * 1000000LL)

static int64_t monotonic_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Takes create_lock, or returns false when another thread holds it past
 * CREATE_WAIT_NS or has published the allocator meanwhile. Once one thread
 * has given up on a creator, the others do not wait for it at all: a
 * constructor allocating in a loop would otherwise pay the wait each time.
 * A loop of try-locks rather than pthread_mutex_timedlock: the latter's
 * deadline is on the wall clock, which can jump. */
static bool create_lock_take(void)
{
    static const struct timespec nap = {0, 1000000};
    static int warned;
    int64_t deadline;

    if (pthread_mutex_trylock(&create_lock) == 0) return true;
    if (__atomic_load_n(&create_stalled, __ATOMIC_ACQUIRE)) return false;
    deadline = monotonic_ns() + CREATE_WAIT_NS;
    do {
        nanosleep(&nap, NULL);
        if (pthread_mutex_trylock(&create_lock) == 0) return true;
        if (__atomic_load_n(&allocator, __ATOMIC_ACQUIRE)) return false;
    } while (monotonic_ns() < deadline);
    __atomic_store_n(&create_stalled, true, __ATOMIC_RELEASE);
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        fs_log(FS_LOG_WARN,
               "another thread has been creating the allocator for %lld ms, perhaps waiting for "
               "a lock this thread holds (the loader's, in a library constructor): calls made "
               "meanwhile go to the runtime, unmanaged",
               CREATE_WAIT_NS / 1000000);
    return false;
}

/* Creates the allocator for `n` devices unless another thread has, or gives
 * up waiting for one that is (create_lock_take). */
static fs_allocator *create_once(int n, bool driver)
{
    fs_allocator *a;

    if (!create_lock_take()) return __atomic_load_n(&allocator, __ATOMIC_ACQUIRE);
    if (!allocator) create_allocator(n, driver);
    a = allocator;
    __atomic_store_n(&create_stalled, false, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&create_lock);
    return a;
}

/* The allocator, created on the first call that needs it; NULL while the
 * shim is inactive, while there is no runtime or device yet, and, for
 * calls that gave up waiting for another thread's creation, until that
 * creation is done. Callers treat NULL as "nothing is the shim's": no
 * pointer comes from an allocator before it is published. */
fs_allocator *fs_shim_allocator(void)
{
    fs_allocator *a = __atomic_load_n(&allocator, __ATOMIC_ACQUIRE);
    __typeof__(&cudaGetDeviceCount) get_count;
    fs_internal_call c;
    cudaError_t e;
    int n = 0;

    if (fs_likely(a != NULL)) return a;
    /* The checks that ask the loader, and the runtime's first call (which
     * may load the driver), before create_lock: every thread gets the same
     * answers, and one that waits here for the loader holds nothing. */
    if (!program_calls_reach_shim()) return NULL;
    get_count = FS_REAL(cudaGetDeviceCount);
    if (!get_count) return NULL; /* the runtime is not loaded yet: try again on the next call */
    fs_err_save(&c.err);
    e = get_count(&n);
    fs_err_restore(&c.err);
    if (e != cudaSuccess || n <= 0) {
        fs_log(FS_LOG_INFO, "no CUDA device (%d); the shim stays out of the way", (int)e);
        return NULL;
    }
    return create_once(n, false);
}

fs_allocator *fs_shim_enter_active(void)
{
    fs_allocator *a;

    if (!fs_shim_enter()) return NULL;
    a = fs_shim_allocator();
    if (!a) fs_shim_leave();
    return a;
}

fs_allocator *fs_shim_driver_allocator(void)
{
    fs_allocator *a = __atomic_load_n(&allocator, __ATOMIC_ACQUIRE);
    int n;

    if (fs_likely(a != NULL)) return a;
    if (fs_runtime_loaded()) return fs_shim_allocator();
    if (!program_calls_reach_shim()) return NULL;
    /* cuDeviceGetCount fails until the program's cuInit, which the shim
     * never makes for it: the call passes through until then */
    if ((n = fs_driver_device_count()) <= 0) return NULL;
    return create_once(n, true);
}

fs_allocator *fs_shim_allocator_peek(void)
{
    return __atomic_load_n(&allocator, __ATOMIC_ACQUIRE);
}

int fs_shim_device_count(void)
{
    return __atomic_load_n(&device_count, __ATOMIC_ACQUIRE);
}

bool fs_shim_mem_info(int device, size_t *free, size_t *total)
{
    return __atomic_load_n(&over_driver, __ATOMIC_ACQUIRE) ? fs_driver_mem_info(device, free, total)
                                                           : fs_cuda_mem_info(device, free, total);
}

/* The child of a fork starts clean (SPEC 11): the parent's device memory,
 * streams and events mean nothing there, and other threads may have held
 * the allocator's locks at the fork. The old allocator is abandoned, not
 * destroyed: destroying it would call into a runtime the child cannot use. */
static void atfork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

    create_lock = fresh;
    create_stalled = false;
    allocator = NULL;
    over_driver = false;
    device_count = 0;
    if (thread_streams) memset(thread_streams, 0, MAX_DEVICES * sizeof *thread_streams);
}

/* At exit, with FSDPSHIM_LOG=info or more: one line per device the program
 * used, so a run shows what the cache did without a trace. */
static void report_at_exit(void)
{
    fs_allocator *a = fs_shim_allocator_peek();
    fs_alloc_stats st;
    const double mib = 1024.0 * 1024.0;

    if (!a || !fs_log_enabled(FS_LOG_INFO)) return;
    for (int d = 0; d < fs_shim_device_count(); d++) {
        uint64_t pool = over_driver ? 0 : fs_cuda_ordered_reserved_peak(d);
        char pool_text[96] = "";

        fs_alloc_get_stats(a, d, &st);
        if (st.allocation[FS_SIZE_ALL].allocated == 0) continue;
        /* what CUDA's pool under the stream-ordered segments held: more than
         * the segments when its own granules round them up */
        if (pool)
            snprintf(pool_text, sizeof pool_text,
                     " (its CUDA pool for stream-ordered segments: peak %.1f MiB)", pool / mib);
        fs_log(FS_LOG_INFO,
               "device %d: %lld allocations served by %lld device allocations; peak allocated "
               "%.1f MiB, peak reserved %.1f MiB%s; %lld retries, %lld OOMs",
               d, (long long)st.allocation[FS_SIZE_ALL].allocated, (long long)st.num_device_alloc,
               st.allocated_bytes[FS_SIZE_ALL].peak / mib,
               st.reserved_bytes[FS_SIZE_ALL].peak / mib, pool_text,
               (long long)st.num_alloc_retries, (long long)st.num_ooms);
    }
}

/* The child's tables of streams, pools, captures and blocks are reset by
 * their own files' hooks, after this one (core/lifetime.h). */
FS_LIFETIME(shim) = {.order = FS_ORDER_SHIM, .fork_child = atfork_child, .exit = report_at_exit};
