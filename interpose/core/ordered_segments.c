/* ordered_segments.c - the memory of the allocator's stream-ordered segments
 * over the program's runtime (cuda_device.c's segment_alloc and
 * segment_free for FS_SEG_ORDERED memory).
 *
 * That memory must outlive cudaDeviceReset, as the program's cudaMallocAsync
 * memory does (docs/allocator.md, "Device reset"); be usable by every stream
 * once made; be reachable from the peers the program granted on its default
 * pool; and cost the device what the segment holds, nothing more. A memory
 * pool does not: a GPU's pool reserves in steps of 32 MiB and places blocks
 * inside them, and an H100 showed the shim's pool holding 412 MiB above its
 * segments in a PyTorch FSDP2 job, the whole of the shim's peak over
 * PyTorch's own allocator (docs/gpu-results.md, run 5; the sim models the
 * steps since). So each segment is a mapping of its own through the
 * driver's virtual-memory API, as PyTorch's expandable segments are: an
 * address reservation of the segment's size in the device's granules
 * (2 MiB, as cudaMalloc takes them), physical memory mapped into it, and
 * access for the device and the peers granted. A mapping survives a reset
 * as pool memory does. Where that API cannot be reached, the shim's own
 * memory pool serves instead, and what it held beyond the segments is
 * reported at exit (shim.c).
 *
 * Every function runs inside fs_internal_begin, with the device current. */
#include "vmm.h"
#include "lifetime.h"
#include "real.h"
#include "devices.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ORDERED_DEVICES 64

/* One segment's mapping: its reservation's base and size. */
typedef struct mapping {
    uintptr_t base;
    size_t size;
    struct mapping *next;
} mapping;

static struct {
    mapping *maps; /* the device's segment mappings */
    /* the fallback: the shim's own pool, and its stream for allocating */
    cudaMemPool_t pool;
    cudaStream_t stream;
    /* what the program granted peers on the device's default pool */
    enum cudaMemAccessFlags granted[MAX_ORDERED_DEVICES];
    /* the most memory the fallback pool held, read after each segment */
    uint64_t reserved_peak;
} ordered[MAX_ORDERED_DEVICES];
static pthread_mutex_t ordered_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- peers ---------------------------------------------------------------- */

/* The peers granted on `device`, as the driver's access descriptors; ordered_lock held. */
static size_t granted_peers(int device, CUmemAccessDesc *out)
{
    size_t n = 0;

    for (int peer = 0; peer < MAX_ORDERED_DEVICES; peer++)
        if (peer != device && ordered[device].granted[peer] != cudaMemAccessFlagsProtNone)
            out[n++] = (CUmemAccessDesc){.location = {CU_MEM_LOCATION_TYPE_DEVICE, peer},
                                         .flags = (CUmemAccess_flags)ordered[device].granted[peer]};
    return n;
}

static void peers_not_set(int device, const char *what)
{
    fs_log(FS_LOG_WARN,
           "device %d: peer access to the shim's %s could not be set as on the default pool",
           device, what);
}

/* Sets peer access to one mapping, the device's own read-write access
 * named first: the driver sets only the locations listed, and one that took
 * the list as the whole of the mapping's access (as the sim, whose memory
 * has one protection for every device, does) must not lose the device's
 * own. ordered_lock held. */
static void map_peers(const fs_vmm *v, int device, const mapping *m, const CUmemAccessDesc *descs,
                      size_t n)
{
    CUmemAccessDesc all[MAX_ORDERED_DEVICES + 1];

    if (!n) return;
    all[0] = (CUmemAccessDesc){.location = {CU_MEM_LOCATION_TYPE_DEVICE, device},
                               .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    memcpy(all + 1, descs, n * sizeof *descs);
    if (v->set_access((CUdeviceptr)m->base, m->size, all, n + 1) != CUDA_SUCCESS)
        peers_not_set(device, "segments");
}

/* Sets the fallback pool's peer access; ordered_lock held. */
static void pool_peers(int device, const CUmemAccessDesc *descs, size_t n)
{
    __typeof__(&cudaMemPoolSetAccess) set = FS_REAL(cudaMemPoolSetAccess);
    struct cudaMemAccessDesc rt[MAX_ORDERED_DEVICES];

    for (size_t i = 0; i < n; i++)
        rt[i] = (struct cudaMemAccessDesc){
            .location = {cudaMemLocationTypeDevice, descs[i].location.id},
            .flags = (enum cudaMemAccessFlags)descs[i].flags};
    if (n && (!set || set(ordered[device].pool, rt, n) != cudaSuccess))
        peers_not_set(device, "memory pool");
}

void fs_cuda_ordered_access(int device, const struct cudaMemAccessDesc *descs, size_t count)
{
    CUmemAccessDesc peers[MAX_ORDERED_DEVICES];
    const fs_vmm *v = fs_cuda_vmm();
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
        if (n < MAX_ORDERED_DEVICES)
            peers[n++] = (CUmemAccessDesc){.location = {CU_MEM_LOCATION_TYPE_DEVICE, peer},
                                           .flags = (CUmemAccess_flags)descs[i].flags};
    }
    if (n && (ordered[device].maps || ordered[device].pool)) {
        fs_internal_begin(&c, device);
        for (const mapping *m = ordered[device].maps; m && v; m = m->next)
            map_peers(v, device, m, peers, n);
        if (ordered[device].pool) pool_peers(device, peers, n);
        fs_internal_end(&c);
    }
    pthread_mutex_unlock(&ordered_lock);
}

/* ---- mappings ------------------------------------------------------------- */

static fs_dev_status map_segment(const fs_vmm *v, int device, size_t size, void **out)
{
    CUmemAccessDesc peers[MAX_ORDERED_DEVICES];
    size_t page = fs_vmm_granularity(v, device), n;
    mapping *m = malloc(sizeof *m);
    fs_dev_status st;
    void *p = NULL;

    if (!m || !page) {
        free(m);
        return FS_DEV_ERROR;
    }
    size = (size + page - 1) / page * page;
    if ((st = fs_vmm_reserve(v, size, &p)) != FS_DEV_OK) {
        free(m);
        return st;
    }
    if ((st = fs_vmm_map(v, device, p, size)) != FS_DEV_OK) {
        fs_vmm_release(v, p, size);
        free(m);
        return st;
    }
    *m = (mapping){.base = (uintptr_t)p, .size = size};
    pthread_mutex_lock(&ordered_lock);
    n = granted_peers(device, peers);
    map_peers(v, device, m, peers, n);
    m->next = ordered[device].maps;
    ordered[device].maps = m;
    pthread_mutex_unlock(&ordered_lock);
    *out = p;
    return FS_DEV_OK;
}

/* The mapping whose base is `ptr`, taken out of the device's list; NULL
 * when the segment is not a mapping (the fallback pool's). */
static mapping *take_mapping(int device, void *ptr)
{
    mapping *m = NULL;

    pthread_mutex_lock(&ordered_lock);
    for (mapping **link = &ordered[device].maps; *link; link = &(*link)->next)
        if ((*link)->base == (uintptr_t)ptr) {
            m = *link;
            *link = m->next;
            break;
        }
    pthread_mutex_unlock(&ordered_lock);
    return m;
}

/* Unmapping is not stream-ordered: the device must have finished with the
 * segment first, as cudaFree would wait for it (a stream may still be
 * using its last blocks). When it cannot wait (a capture is under way),
 * the segment stays the allocator's. */
static fs_dev_status unmap_segment(const fs_vmm *v, int device, mapping *m)
{
    fs_dev_status st = FS_DEV_ERROR;

    if (FS_REAL(cudaDeviceSynchronize)() == cudaSuccess &&
        (st = fs_vmm_unmap(v, (void *)m->base, m->size)) == FS_DEV_OK) {
        fs_vmm_release(v, (void *)m->base, m->size);
        free(m);
        return FS_DEV_OK;
    }
    pthread_mutex_lock(&ordered_lock);
    m->next = ordered[device].maps;
    ordered[device].maps = m;
    pthread_mutex_unlock(&ordered_lock);
    return st;
}

/* ---- the fallback: a memory pool of the shim's own -------------------------- */

/* The device's pool and stream, made on first use; false if they cannot be. */
static bool pool_get(int device, cudaMemPool_t *pool, cudaStream_t *stream)
{
    struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                     .location = {cudaMemLocationTypeDevice, device}};
    __typeof__(&cudaMemPoolCreate) create = FS_REAL(cudaMemPoolCreate);
    __typeof__(&cudaStreamCreateWithFlags) stream_create = FS_REAL(cudaStreamCreateWithFlags);
    CUmemAccessDesc peers[MAX_ORDERED_DEVICES];
    bool ok;

    pthread_mutex_lock(&ordered_lock);
    if (!ordered[device].pool && create) {
        if (create(&ordered[device].pool, &props) == cudaSuccess)
            pool_peers(device, peers, granted_peers(device, peers));
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

/* What the pool holds may exceed the segments it gave (its own steps): read
 * after each segment, rarely enough to cost nothing. */
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

/* Allocated on the pool's own stream and waited for there, so that every
 * stream may use the segment at once. */
static cudaError_t pool_alloc(int device, size_t size, void **out)
{
    __typeof__(&cudaMallocFromPoolAsync) alloc = FS_REAL(cudaMallocFromPoolAsync);
    __typeof__(&cudaStreamSynchronize) sync = FS_REAL(cudaStreamSynchronize);
    cudaMemPool_t pool;
    cudaStream_t stream;
    cudaError_t e;

    if (!alloc || !sync || !pool_get(device, &pool, &stream)) return cudaErrorNotSupported;
    e = alloc(out, size, pool, stream);
    if (e == cudaSuccess && (e = sync(stream)) != cudaSuccess) FS_REAL(cudaFree)(*out);
    if (e == cudaSuccess) note_pool_reserved(device, pool);
    return e;
}

/* cudaFree of pool memory waits for the whole device, as for cudaMalloc
 * memory; the trim then gives the memory back to the device. */
static cudaError_t pool_free(int device, void *ptr)
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

/* ---- the table's side ------------------------------------------------------- */

static fs_dev_status status_of(cudaError_t e)
{
    return e == cudaSuccess                 ? FS_DEV_OK
           : e == cudaErrorMemoryAllocation ? FS_DEV_OUT_OF_MEMORY
                                            : FS_DEV_ERROR;
}

fs_dev_status fs_ordered_alloc(int device, size_t size, void **out)
{
    const fs_vmm *v = fs_cuda_vmm();

    if (device < 0 || device >= MAX_ORDERED_DEVICES) return FS_DEV_ERROR;
    if (v && fs_vmm_granularity(v, device)) return map_segment(v, device, size, out);
    return status_of(pool_alloc(device, size, out));
}

fs_dev_status fs_ordered_free(int device, void *ptr)
{
    const fs_vmm *v = fs_cuda_vmm();
    mapping *m;

    if (device < 0 || device >= MAX_ORDERED_DEVICES) return FS_DEV_ERROR;
    if (v && (m = take_mapping(device, ptr))) return unmap_segment(v, device, m);
    return status_of(pool_free(device, ptr));
}

uint64_t fs_cuda_ordered_reserved_peak(int device)
{
    if (device < 0 || device >= MAX_ORDERED_DEVICES) return 0;
    return __atomic_load_n(&ordered[device].reserved_peak, __ATOMIC_RELAXED);
}

void fs_cuda_device_reset(int device)
{
    if (device < 0) {
        /* fork child: only this thread runs; the lock may be stale. The
         * parent's mappings and pool are the child's memory too, but no
         * segment of the child's allocator names them: forgotten. */
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        ordered_lock = fresh;
    }
    pthread_mutex_lock(&ordered_lock);
    for (int d = 0; d < MAX_ORDERED_DEVICES; d++) {
        if (device >= 0 && d != device) continue;
        /* the reset destroyed the stream; the pool and the mappings stay */
        ordered[d].stream = NULL;
        if (device < 0) memset(&ordered[d], 0, sizeof ordered[d]);
    }
    pthread_mutex_unlock(&ordered_lock);
}

static void ordered_after_fork(void)
{
    fs_cuda_device_reset(-1);
}

FS_LIFETIME(ordered) = {.order = FS_ORDER_ORDERED, .fork_child = ordered_after_fork};
