/* streams.c - program streams as the allocator sees them.
 *
 * Each program stream gets an allocator key (an opaque fs_stream_t) and is
 * registered with the allocator, with its kind, the first time the shim
 * sees it. Keys:
 *   1 (cudaStreamLegacy) the legacy default stream (of each device)
 *   2 * serial + 1       the calling thread's per-thread default stream
 *   the handle itself    every other stream
 * No key is 0, which the allocator may take for "no stream". Handles are
 * pointers to runtime objects and so never odd; serials start at 1 and are
 * never reused, so the low bit tells per-thread keys apart and a thread's
 * per-thread stream is never mistaken for an exited thread's (whose queued
 * work a new thread's stream is not ordered after).
 *
 * The table holds what the shim knows about each explicit stream (device,
 * flags, pooled, destroyed) in sharded buckets; the hot path asks a one-entry
 * per-thread cache first, invalidated by a global generation count whenever
 * a stream goes away. */
#include "lifetime.h"
#include "real.h"
#include "devices.h"

#include <pthread.h>
#include <stdlib.h>

#define SHARDS      64
#define LEGACY_KEY  ((fs_stream_t)cudaStreamLegacy)
#define MAX_DEVICES 64

struct stream_entry {
    struct stream_entry *next;
    cudaStream_t handle;
    int device;
    unsigned flags;
    int priority;
    bool pooled;    /* created through a stream pool: goes back when destroyed */
    bool destroyed; /* the program destroyed it; it waits in its pool */
    unsigned epoch; /* registration epoch in which the allocator learned of it */
};

static struct shard {
    pthread_mutex_t lock;
    struct stream_entry *head;
} shards[SHARDS];

/* Bumped whenever a stream is dropped: per-thread caches then miss. */
static unsigned table_gen;
/* Streams the program destroyed that wait in a pool: while there are none,
 * no call needs to look them up. */
static unsigned n_parked;
/* Bumped when the allocator forgets streams (cudaDeviceReset, fork). */
static unsigned reg_epoch = 1;
static unsigned legacy_epoch[MAX_DEVICES];

static FS_TLS struct {
    cudaStream_t handle;
    fs_stream_t key;
    int device;
    unsigned gen;
} cache;
static FS_TLS uint64_t pt_serial;
static uint64_t pt_serials;
static FS_TLS unsigned pt_epoch[MAX_DEVICES];
static FS_TLS int current_device; /* device + 1 */

static pthread_key_t pt_exit_key;
static pthread_once_t pt_exit_once = PTHREAD_ONCE_INIT;

static void streams_init(void)
{
    for (int i = 0; i < SHARDS; i++)
        pthread_mutex_init(&shards[i].lock, NULL);
}

static struct shard *shard_of(cudaStream_t s)
{
    uintptr_t h = (uintptr_t)s;
    return &shards[((h >> 4) ^ (h >> 12)) % SHARDS];
}

static struct stream_entry **find(struct shard *sh, cudaStream_t s)
{
    struct stream_entry **pp = &sh->head;
    while (*pp && (*pp)->handle != s)
        pp = &(*pp)->next;
    return pp;
}

static fs_stream_t pt_key(void)
{
    if (fs_unlikely(!pt_serial)) pt_serial = __atomic_add_fetch(&pt_serials, 1, __ATOMIC_RELAXED);
    return (fs_stream_t)(pt_serial << 1 | 1);
}

cudaStream_t fs_stream_handle(fs_stream_t key)
{
    if (key == LEGACY_KEY) return cudaStreamLegacy;
    if (key & 1) return key == pt_key() ? cudaStreamPerThread : cudaStreamLegacy;
    return (cudaStream_t)key;
}

int fs_shim_current_device(void)
{
    int d = current_device - 1;
    __typeof__(&cudaGetDevice) get;
    fs_err_state st;

    if (fs_likely(d >= 0)) return d;
    get = FS_REAL(cudaGetDevice);
    if (!get) return -1;
    fs_err_save(&st);
    if (get(&d) != cudaSuccess) d = -1;
    fs_err_restore(&st);
    if (d >= 0) current_device = d + 1;
    return d;
}

void fs_current_device_set(int device)
{
    current_device = device + 1;
}

/* A thread's per-thread stream dies with the thread, in the runtime's own
 * thread-exit destructor, before or after this one: nothing may be recorded
 * on it here (fs_alloc_stream_exit says what is done instead). A per-thread
 * stream the thread uses after this (from a later destructor) is a new
 * stream to the allocator, under a new key. */
static void pt_exit(void *unused)
{
    fs_allocator *a = fs_shim_allocator_peek();
    unsigned epoch = __atomic_load_n(&reg_epoch, __ATOMIC_ACQUIRE);

    (void)unused;
    for (int d = 0; d < MAX_DEVICES; d++) {
        if (a && pt_epoch[d] == epoch) fs_alloc_stream_exit(a, d, pt_key());
        pt_epoch[d] = 0;
    }
    pt_serial = 0;
}

static void pt_exit_init(void)
{
    pthread_key_create(&pt_exit_key, pt_exit);
}

static void register_implicit(fs_allocator *a, int device, bool per_thread)
{
    unsigned epoch = __atomic_load_n(&reg_epoch, __ATOMIC_ACQUIRE);

    if (device < 0 || device >= MAX_DEVICES) return;
    if (per_thread) {
        if (pt_epoch[device] == epoch) return;
        fs_alloc_stream_register(a, device, pt_key(), FS_STREAM_BLOCKING);
        pthread_once(&pt_exit_once, pt_exit_init);
        pthread_setspecific(pt_exit_key, &pt_serial); /* any value but NULL */
        pt_epoch[device] = epoch;
    } else if (__atomic_load_n(&legacy_epoch[device], __ATOMIC_ACQUIRE) != epoch) {
        fs_alloc_stream_register(a, device, LEGACY_KEY, FS_STREAM_LEGACY);
        __atomic_store_n(&legacy_epoch[device], epoch, __ATOMIC_RELEASE);
    }
}

/* Asks the runtime about a stream the shim has not seen being created, or
 * the driver in a process without a runtime (core/driver_device.c). */
static bool probe(cudaStream_t s, int *device, unsigned *flags)
{
    __typeof__(&cudaStreamGetDevice) get_device = FS_REAL(cudaStreamGetDevice);
    __typeof__(&cudaStreamGetFlags) get_flags = FS_REAL(cudaStreamGetFlags);
    fs_internal_call c;
    cudaError_t e;

    if (!get_flags) return fs_driver_stream_probe((CUstream)s, device, flags);
    fs_internal_begin(&c, -1);
    e = get_flags(s, flags);
    if (e == cudaSuccess && (!get_device || get_device(s, device) != cudaSuccess))
        *device = fs_shim_current_device();
    fs_internal_end(&c);
    return e == cudaSuccess;
}

/* Looks up (or learns) an explicit stream and makes sure the allocator
 * knows it. Returns its device, -1 for a bad or destroyed handle. */
static int explicit_stream(fs_allocator *a, cudaStream_t s)
{
    unsigned epoch = __atomic_load_n(&reg_epoch, __ATOMIC_ACQUIRE);
    struct shard *sh = shard_of(s);
    struct stream_entry *e;
    int device = -1;
    unsigned flags = 0;

    pthread_mutex_lock(&sh->lock);
    e = *find(sh, s);
    if (!e) {
        pthread_mutex_unlock(&sh->lock);
        if (!probe(s, &device, &flags)) return -1;
        pthread_mutex_lock(&sh->lock);
        e = *find(sh, s);
        if (!e && (e = calloc(1, sizeof *e))) {
            e->handle = s;
            e->device = device;
            e->flags = flags;
            e->next = sh->head;
            sh->head = e;
        }
        if (!e) {
            pthread_mutex_unlock(&sh->lock);
            return -1;
        }
    }
    device = e->destroyed ? -1 : e->device;
    if (device >= 0 && e->epoch != epoch) {
        fs_alloc_stream_register(a, device, (fs_stream_t)s,
                                 (e->flags & cudaStreamNonBlocking) ? FS_STREAM_NONBLOCKING
                                                                    : FS_STREAM_BLOCKING);
        e->epoch = epoch;
    }
    pthread_mutex_unlock(&sh->lock);
    return device;
}

fs_stream_t fs_shim_stream_key(cudaStream_t stream, bool per_thread, int *device)
{
    fs_allocator *a = fs_shim_allocator();
    unsigned gen = __atomic_load_n(&table_gen, __ATOMIC_ACQUIRE);
    int dev;

    if (stream == cudaStreamLegacy || (stream == NULL && !per_thread)) {
        dev = fs_shim_current_device();
        if (a) register_implicit(a, dev, false);
        if (device) *device = dev;
        return LEGACY_KEY;
    }
    if (stream == cudaStreamPerThread || stream == NULL) {
        dev = fs_shim_current_device();
        if (a) register_implicit(a, dev, true);
        if (device) *device = dev;
        return pt_key();
    }
    if (fs_likely(cache.handle == stream && cache.gen == gen)) {
        if (device) *device = cache.device;
        return cache.key;
    }
    dev = a ? explicit_stream(a, stream) : -1;
    if (device) *device = dev;
    if (dev < 0) return LEGACY_KEY;
    cache.handle = stream;
    cache.key = (fs_stream_t)stream;
    cache.device = dev;
    cache.gen = gen;
    return cache.key;
}

bool fs_stream_is_destroyed(cudaStream_t s)
{
    struct shard *sh = shard_of(s);
    struct stream_entry *e;
    bool destroyed;

    if (fs_likely(__atomic_load_n(&n_parked, __ATOMIC_ACQUIRE) == 0) || s == NULL ||
        s == cudaStreamLegacy || s == cudaStreamPerThread)
        return false;
    pthread_mutex_lock(&sh->lock);
    e = *find(sh, s);
    destroyed = e && e->destroyed;
    pthread_mutex_unlock(&sh->lock);
    return destroyed;
}

void fs_stream_adopt(cudaStream_t s, int device, unsigned flags, int priority, bool pooled)
{
    struct shard *sh = shard_of(s);
    struct stream_entry *e;

    pthread_mutex_lock(&sh->lock);
    e = *find(sh, s);
    if (!e && (e = calloc(1, sizeof *e))) {
        e->handle = s;
        e->next = sh->head;
        sh->head = e;
    }
    if (e) {
        if (e->destroyed) __atomic_sub_fetch(&n_parked, 1, __ATOMIC_ACQ_REL);
        if (e->destroyed || e->device != device) e->epoch = 0;
        e->device = device;
        e->flags = flags;
        e->priority = priority;
        e->pooled = pooled;
        e->destroyed = false;
    }
    pthread_mutex_unlock(&sh->lock);
}

bool fs_stream_release(cudaStream_t s, int *device, unsigned *flags, int *priority)
{
    struct shard *sh = shard_of(s);
    struct stream_entry **pp, *e;
    bool pooled = false;

    pthread_mutex_lock(&sh->lock);
    pp = find(sh, s);
    e = *pp;
    if (e && e->pooled && !e->destroyed) {
        e->destroyed = true;
        __atomic_add_fetch(&n_parked, 1, __ATOMIC_ACQ_REL);
        *device = e->device;
        *flags = e->flags;
        *priority = e->priority;
        pooled = true;
    } else if (e && !e->destroyed) {
        *pp = e->next;
        *device = e->device;
        free(e);
    } else {
        *device = -1;
    }
    __atomic_add_fetch(&table_gen, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&sh->lock);
    return pooled;
}

void fs_stream_forget(cudaStream_t s)
{
    struct shard *sh = shard_of(s);
    struct stream_entry **pp, *e;

    pthread_mutex_lock(&sh->lock);
    pp = find(sh, s);
    if ((e = *pp)) {
        if (e->destroyed) __atomic_sub_fetch(&n_parked, 1, __ATOMIC_ACQ_REL);
        *pp = e->next;
        free(e);
    }
    __atomic_add_fetch(&table_gen, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&sh->lock);
}

void fs_streams_reset(int device)
{
    for (int i = 0; i < SHARDS; i++) {
        struct shard *sh = &shards[i];
        struct stream_entry **pp, *e;

        if (device < 0) {
            /* fork child: only this thread runs; locks may be stale */
            pthread_mutex_init(&sh->lock, NULL);
        }
        pthread_mutex_lock(&sh->lock);
        for (pp = &sh->head; (e = *pp);) {
            if (device < 0 || e->device == device) {
                if (e->destroyed) __atomic_sub_fetch(&n_parked, 1, __ATOMIC_ACQ_REL);
                *pp = e->next;
                free(e);
            } else {
                pp = &e->next;
            }
        }
        pthread_mutex_unlock(&sh->lock);
    }
    __atomic_add_fetch(&table_gen, 1, __ATOMIC_ACQ_REL);
    __atomic_add_fetch(&reg_epoch, 1, __ATOMIC_ACQ_REL);
}

static void streams_after_fork(void)
{
    fs_streams_reset(-1);
}

FS_LIFETIME(streams) = {
    .order = FS_ORDER_STREAMS, .init = streams_init, .fork_child = streams_after_fork};
