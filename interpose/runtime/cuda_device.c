/* cuda_device.c - the allocator's device table over the program's own CUDA
 * runtime (plain segments from cudaMalloc, stream-ordered ones from a memory
 * pool of the shim's own and, for expandable segments, the driver's
 * virtual-memory API).
 *
 * Every entry is an internal call: it must not re-enter the shim (the real
 * entry points are called directly), must not disturb the program's
 * last-error state, and must not invalidate a graph capture under way in
 * another thread (relaxed capture mode while any capture is active). Driver
 * entry points come through cudaGetDriverEntryPointByVersion, as PyTorch
 * gets them, so the shim never links libcuda either. */
#include "../driver/vmm.h"
#include "../real.h"
#include "runtime.h"

#include <cuda.h>
#include <pthread.h>
#include <string.h>

void fs_internal_begin(fs_internal_call *c, int device)
{
    fs_err_save(&c->err);
    c->relaxed = fs_capture_active() > 0;
    if (c->relaxed) {
        c->mode = cudaStreamCaptureModeRelaxed;
        FS_REAL(cudaThreadExchangeStreamCaptureMode)(&c->mode);
    }
    c->prev_device = -1;
    if (device >= 0) {
        int cur = fs_shim_current_device();
        if (cur != device && FS_REAL(cudaSetDevice)(device) == cudaSuccess) c->prev_device = cur;
    }
}

void fs_internal_end(fs_internal_call *c)
{
    if (c->prev_device >= 0) FS_REAL(cudaSetDevice)(c->prev_device);
    if (c->relaxed) FS_REAL(cudaThreadExchangeStreamCaptureMode)(&c->mode);
    fs_err_restore(&c->err);
}

static fs_dev_status status_of(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return FS_DEV_OK;
    case cudaErrorNotReady:
        return FS_DEV_NOT_READY;
    case cudaErrorMemoryAllocation:
        return FS_DEV_OUT_OF_MEMORY;
    default:
        return FS_DEV_ERROR;
    }
}

/* ---- segments ---- */

/* Stream-ordered segments come from a memory pool of the shim's own on each
 * device: cudaDeviceReset keeps such memory, as it keeps the program's
 * cudaMallocAsync allocations, and the default pool's figures stay the
 * program's. They are allocated on a stream of the shim's own that nothing
 * else uses, and waited for there, so that every stream may use one as soon
 * as segment_alloc returns. A reset destroys that stream (not the pool). */
#define MAX_ORDERED_DEVICES 64
static struct {
    cudaMemPool_t pool;
    cudaStream_t stream;
    /* what the program granted peers on the device's default pool */
    enum cudaMemAccessFlags granted[MAX_ORDERED_DEVICES];
    /* the most memory the pool held, read after each segment it gave */
    uint64_t reserved_peak;
} ordered[MAX_ORDERED_DEVICES];
static pthread_mutex_t ordered_lock = PTHREAD_MUTEX_INITIALIZER;

/* Sets `pool`'s access for the peers in descs; ordered_lock held, inside
 * fs_internal_begin. */
static void set_peers(int device, cudaMemPool_t pool, const struct cudaMemAccessDesc *descs,
                      size_t n)
{
    __typeof__(&cudaMemPoolSetAccess) set = FS_REAL(cudaMemPoolSetAccess);

    if (n && (!set || set(pool, descs, n) != cudaSuccess))
        fs_log(FS_LOG_WARN,
               "device %d: peer access to the shim's memory pool could not be "
               "set as on the default pool",
               device);
}

/* Grants a new pool what the program granted on the default pool. */
static void grant_peers(int device, cudaMemPool_t pool)
{
    struct cudaMemAccessDesc descs[MAX_ORDERED_DEVICES];
    size_t n = 0;

    for (int peer = 0; peer < MAX_ORDERED_DEVICES; peer++)
        if (peer != device && ordered[device].granted[peer] != cudaMemAccessFlagsProtNone)
            descs[n++] = (struct cudaMemAccessDesc){.location = {cudaMemLocationTypeDevice, peer},
                                                    .flags = ordered[device].granted[peer]};
    set_peers(device, pool, descs, n);
}

void fs_cuda_ordered_access(int device, const struct cudaMemAccessDesc *descs, size_t count)
{
    struct cudaMemAccessDesc peers[MAX_ORDERED_DEVICES];
    fs_internal_call c;
    size_t n = 0;

    if (device < 0 || device >= MAX_ORDERED_DEVICES) return;
    pthread_mutex_lock(&ordered_lock);
    /* the runtime accepted them all: only the peers' entries matter here */
    for (size_t i = 0; i < count; i++) {
        int peer = descs[i].location.id;
        if (descs[i].location.type != cudaMemLocationTypeDevice || peer < 0 ||
            peer >= MAX_ORDERED_DEVICES || peer == device)
            continue;
        ordered[device].granted[peer] = descs[i].flags;
        if (n < MAX_ORDERED_DEVICES) peers[n++] = descs[i];
    }
    if (ordered[device].pool) {
        fs_internal_begin(&c, device);
        set_peers(device, ordered[device].pool, peers, n);
        fs_internal_end(&c);
    }
    pthread_mutex_unlock(&ordered_lock);
}

/* The device's pool and stream, made on first use; false if they cannot
 * be. Inside fs_internal_begin with `device` current. */
static bool ordered_get(int device, cudaMemPool_t *pool, cudaStream_t *stream)
{
    struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                     .location = {cudaMemLocationTypeDevice, device}};
    __typeof__(&cudaMemPoolCreate) create = FS_REAL(cudaMemPoolCreate);
    __typeof__(&cudaStreamCreateWithFlags) stream_create = FS_REAL(cudaStreamCreateWithFlags);
    bool ok;

    if (device < 0 || device >= MAX_ORDERED_DEVICES) return false;
    pthread_mutex_lock(&ordered_lock);
    if (!ordered[device].pool && create) {
        if (create(&ordered[device].pool, &props) == cudaSuccess)
            grant_peers(device, ordered[device].pool);
        else
            ordered[device].pool = NULL;
    }
    if (!ordered[device].stream && stream_create &&
        stream_create(&ordered[device].stream, cudaStreamNonBlocking) != cudaSuccess)
        ordered[device].stream = NULL;
    *pool = ordered[device].pool;
    *stream = ordered[device].stream;
    ok = *pool && *stream;
    pthread_mutex_unlock(&ordered_lock);
    return ok;
}

void fs_cuda_device_reset(int device)
{
    if (device < 0) {
        /* fork child: only this thread runs; the lock may be stale */
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        ordered_lock = fresh;
    }
    pthread_mutex_lock(&ordered_lock);
    for (int d = 0; d < MAX_ORDERED_DEVICES; d++) {
        if (device >= 0 && d != device) continue;
        ordered[d].stream = NULL;
        if (device < 0) memset(&ordered[d], 0, sizeof ordered[d]);
    }
    pthread_mutex_unlock(&ordered_lock);
}

static void note_pool_reserved(int device, cudaMemPool_t pool);

static cudaError_t ordered_alloc(int device, size_t size, void **out)
{
    __typeof__(&cudaMallocFromPoolAsync) alloc = FS_REAL(cudaMallocFromPoolAsync);
    __typeof__(&cudaStreamSynchronize) sync = FS_REAL(cudaStreamSynchronize);
    __typeof__(&cudaFree) release = FS_REAL(cudaFree);
    cudaMemPool_t pool;
    cudaStream_t stream;
    cudaError_t e;

    if (!alloc || !sync || !ordered_get(device, &pool, &stream)) return cudaErrorNotSupported;
    e = alloc(out, size, pool, stream);
    if (e == cudaSuccess && (e = sync(stream)) != cudaSuccess) release(*out);
    if (e == cudaSuccess) note_pool_reserved(device, pool);
    return e;
}

/* The pool may hold more device memory than the segments it gave (its own
 * granules): what it holds is read after each segment, rarely enough to
 * cost nothing, and reported at exit (shim.c) beside the shim's reserve. */
static void note_pool_reserved(int device, cudaMemPool_t pool)
{
    __typeof__(&cudaMemPoolGetAttribute) get = FS_REAL(cudaMemPoolGetAttribute);
    cuuint64_t held = 0;

    if (get && get(pool, cudaMemPoolAttrReservedMemCurrent, &held) == cudaSuccess) {
        uint64_t peak = __atomic_load_n(&ordered[device].reserved_peak, __ATOMIC_RELAXED);
        while (held > peak &&
               !__atomic_compare_exchange_n(&ordered[device].reserved_peak, &peak, held, true,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        }
    }
}

uint64_t fs_cuda_ordered_reserved_peak(int device)
{
    if (device < 0 || device >= MAX_ORDERED_DEVICES) return 0;
    return __atomic_load_n(&ordered[device].reserved_peak, __ATOMIC_RELAXED);
}

/* cudaFree of pool memory first waits for the whole device, as it does
 * for cudaMalloc memory (a stream may still be using the segment's last
 * blocks); the trim then gives the memory back to the device. */
static cudaError_t ordered_free(int device, void *ptr)
{
    __typeof__(&cudaMemPoolTrimTo) trim = FS_REAL(cudaMemPoolTrimTo);
    cudaError_t e = FS_REAL(cudaFree)(ptr);
    cudaMemPool_t pool;

    pthread_mutex_lock(&ordered_lock);
    pool = ordered[device].pool;
    pthread_mutex_unlock(&ordered_lock);
    if (e == cudaSuccess && trim && pool) trim(pool, 0);
    return e;
}

static fs_dev_status segment_alloc(void *ctx, int device, fs_seg_memory mem, size_t size,
                                   void **out)
{
    fs_internal_call c;
    cudaError_t e;

    (void)ctx;
    fs_internal_begin(&c, device);
    e = mem == FS_SEG_ORDERED ? ordered_alloc(device, size, out) : FS_REAL(cudaMalloc)(out, size);
    fs_internal_end(&c);
    return status_of(e);
}

static fs_dev_status segment_free(void *ctx, int device, fs_seg_memory mem, void *ptr)
{
    fs_internal_call c;
    cudaError_t e;

    (void)ctx;
    fs_internal_begin(&c, device);
    e = mem == FS_SEG_ORDERED ? ordered_free(device, ptr) : FS_REAL(cudaFree)(ptr);
    fs_internal_end(&c);
    return status_of(e);
}

static fs_dev_status event_create(void *ctx, int device, fs_event_t *out)
{
    fs_internal_call c;
    cudaEvent_t ev = NULL;
    cudaError_t e;

    (void)ctx;
    fs_internal_begin(&c, device);
    e = FS_REAL(cudaEventCreateWithFlags)(&ev, cudaEventDisableTiming);
    fs_internal_end(&c);
    *out = (fs_event_t)ev;
    return status_of(e);
}

static void event_destroy(void *ctx, int device, fs_event_t event)
{
    fs_internal_call c;

    (void)ctx;
    fs_internal_begin(&c, device);
    FS_REAL(cudaEventDestroy)((cudaEvent_t)event);
    fs_internal_end(&c);
}

static fs_dev_status event_record(void *ctx, int device, fs_event_t event, fs_stream_t stream)
{
    fs_internal_call c;
    cudaError_t e;

    (void)ctx;
    fs_internal_begin(&c, device);
    e = FS_REAL(cudaEventRecord)((cudaEvent_t)event, fs_stream_handle(stream));
    fs_internal_end(&c);
    return status_of(e);
}

static fs_dev_status event_query(void *ctx, int device, fs_event_t event)
{
    fs_internal_call c;
    cudaError_t e;

    (void)ctx;
    (void)device;
    fs_internal_begin(&c, -1);
    e = FS_REAL(cudaEventQuery)((cudaEvent_t)event);
    fs_internal_end(&c);
    return status_of(e);
}

static fs_dev_status event_synchronize(void *ctx, int device, fs_event_t event)
{
    fs_internal_call c;
    cudaError_t e;

    (void)ctx;
    (void)device;
    fs_internal_begin(&c, -1);
    e = FS_REAL(cudaEventSynchronize)((cudaEvent_t)event);
    fs_internal_end(&c);
    return status_of(e);
}

static fs_dev_status stream_wait_event(void *ctx, int device, fs_stream_t stream, fs_event_t event)
{
    fs_internal_call c;
    cudaError_t e;

    (void)ctx;
    (void)device;
    fs_internal_begin(&c, -1);
    e = FS_REAL(cudaStreamWaitEvent)(fs_stream_handle(stream), (cudaEvent_t)event, 0);
    fs_internal_end(&c);
    return status_of(e);
}

static bool stream_is_capturing(void *ctx, int device, fs_stream_t stream)
{
    (void)ctx;
    (void)device;
    return fs_capture_active() > 0 && fs_capture_key_capturing(stream);
}

static bool capture_underway(void *ctx)
{
    (void)ctx;
    return fs_capture_global_underway();
}

static fs_dev_status device_synchronize(void *ctx, int device)
{
    fs_internal_call c;
    cudaError_t e;

    (void)ctx;
    fs_internal_begin(&c, device);
    e = FS_REAL(cudaDeviceSynchronize)();
    fs_internal_end(&c);
    return status_of(e);
}

bool fs_cuda_mem_info(int device, size_t *free, size_t *total)
{
    fs_internal_call c;
    cudaError_t e;

    *free = *total = 0;
    fs_internal_begin(&c, device);
    e = FS_REAL(cudaMemGetInfo)(free, total);
    fs_internal_end(&c);
    return e == cudaSuccess;
}

static size_t mem_capacity(void *ctx, int device)
{
    size_t free, total;

    (void)ctx;
    return fs_cuda_mem_info(device, &free, &total) ? total : 0;
}

/* ---- expandable segments: the driver's virtual-memory API (driver/vmm.c) ---- */

static fs_vmm drv;

static bool driver_entry(const char *name, void **out)
{
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    __typeof__(&cudaGetDriverEntryPointByVersion) get = FS_REAL(cudaGetDriverEntryPointByVersion);
    fs_internal_call c;
    cudaError_t e;

    if (!get) return false;
    fs_internal_begin(&c, -1);
    e = get(name, out, 12000, cudaEnableDefault, &q);
    fs_internal_end(&c);
    return e == cudaSuccess && q == cudaDriverEntryPointSuccess && *out;
}

static bool driver_vm_load(void)
{
    return driver_entry("cuMemGetAllocationGranularity", (void **)&drv.granularity) &&
           driver_entry("cuMemAddressReserve", (void **)&drv.reserve) &&
           driver_entry("cuMemAddressFree", (void **)&drv.release) &&
           driver_entry("cuMemCreate", (void **)&drv.create) &&
           driver_entry("cuMemMap", (void **)&drv.map) &&
           driver_entry("cuMemSetAccess", (void **)&drv.set_access) &&
           driver_entry("cuMemRelease", (void **)&drv.handle_release) &&
           driver_entry("cuMemUnmap", (void **)&drv.unmap);
}

static size_t vm_granularity(void *ctx, int device)
{
    (void)ctx;
    return fs_vmm_granularity(&drv, device);
}

static fs_dev_status vm_reserve(void *ctx, int device, size_t size, void **out)
{
    fs_internal_call c;
    fs_dev_status st;

    (void)ctx;
    fs_internal_begin(&c, device);
    st = fs_vmm_reserve(&drv, size, out);
    fs_internal_end(&c);
    return st;
}

static fs_dev_status vm_release(void *ctx, int device, void *base, size_t size)
{
    fs_internal_call c;
    fs_dev_status st;

    (void)ctx;
    fs_internal_begin(&c, device);
    st = fs_vmm_release(&drv, base, size);
    fs_internal_end(&c);
    return st;
}

static fs_dev_status vm_map(void *ctx, int device, void *addr, size_t size)
{
    fs_internal_call c;
    fs_dev_status st;

    (void)ctx;
    fs_internal_begin(&c, device);
    st = fs_vmm_map(&drv, device, addr, size);
    fs_internal_end(&c);
    return st;
}

static fs_dev_status vm_unmap(void *ctx, int device, void *addr, size_t size)
{
    fs_internal_call c;
    fs_dev_status st;

    (void)ctx;
    fs_internal_begin(&c, device);
    st = fs_vmm_unmap(&drv, addr, size);
    fs_internal_end(&c);
    return st;
}

static fs_device_ops cuda_ops = {
    .segment_alloc = segment_alloc,
    .segment_free = segment_free,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_query = event_query,
    .event_synchronize = event_synchronize,
    .stream_wait_event = stream_wait_event,
    .stream_is_capturing = stream_is_capturing,
    .capture_underway = capture_underway,
    .device_synchronize = device_synchronize,
    .mem_capacity = mem_capacity,
};

const fs_device_ops *fs_cuda_device_ops(bool want_vm)
{
    if (want_vm && !cuda_ops.vm_map) {
        if (driver_vm_load()) {
            cuda_ops.vm_granularity = vm_granularity;
            cuda_ops.vm_reserve = vm_reserve;
            cuda_ops.vm_release = vm_release;
            cuda_ops.vm_map = vm_map;
            cuda_ops.vm_unmap = vm_unmap;
        } else {
            fs_log(FS_LOG_WARN, "expandable_segments: the driver's virtual-memory API is not "
                                "reachable; using plain segments");
        }
    }
    return &cuda_ops;
}
