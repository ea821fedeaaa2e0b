/* torch_api.c - the table of C calls the PyTorch adapter makes
 * (torch_api.h): each one enters the shim, asks the allocator as the
 * runtime's entry points do (runtime/cuda_memory.c), and leaves. No policy
 * here: what PyTorch's allocator does on its own (stream-ordered reuse,
 * recorded streams, statistics with its names) the allocator already does.
 *
 * Segment events for PyTorch's trace trackers (NCCL's buffer registration)
 * happen under the allocator's locks, where nothing may call back into
 * CUDA: the hook only queues them for the calling thread, and the table's
 * call hands them to the adapter once it has left the allocator. Only
 * events of the table's own calls are queued: the segments PyTorch's
 * allocations made, as PyTorch's own allocator reports its own. */
#include "torch_api.h"

#include "../../include/fsdpshim/fsdpshim.h"
#include "../core/real.h"
#include "../core/devices.h"
#include "../core/trace_glue.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- segment events ---- */

typedef struct seg_event {
    int action, device;
    uintptr_t addr;
    size_t size;
    void *stream;
} seg_event;

static fs_torch_segment_fn segment_fn;
static void *segment_ctx;

/* The calling thread's queue, while one of the table's calls runs. */
static FS_TLS struct {
    bool in_call;
    seg_event *ev;
    int n, cap;
} queue;

static void *stream_of_key(fs_stream_t key);

static void on_segment(const fs_alloc_event *ev)
{
    if (!queue.in_call) return;
    if (queue.n == queue.cap) {
        int cap = queue.cap ? 2 * queue.cap : 16;
        seg_event *grown = realloc(queue.ev, (size_t)cap * sizeof *grown);
        if (!grown) return; /* the tracker misses one; the memory is fine */
        queue.ev = grown;
        queue.cap = cap;
    }
    queue.ev[queue.n++] = (seg_event){
        .action = ev->kind == FS_EV_SEGMENT_ALLOC   ? FS_TORCH_SEGMENT_ALLOC
                  : ev->kind == FS_EV_SEGMENT_FREE  ? FS_TORCH_SEGMENT_FREE
                  : ev->kind == FS_EV_SEGMENT_MAP   ? FS_TORCH_SEGMENT_MAP
                  : ev->kind == FS_EV_SEGMENT_UNMAP ? FS_TORCH_SEGMENT_UNMAP
                                                    : FS_TORCH_FREE_COMPLETED,
        .device = ev->device,
        .addr = ev->addr,
        .size = ev->size,
        .stream = stream_of_key(ev->stream),
    };
}

/* Around a call into the allocator: queue its segment events, then hand
 * them on, outside the shim. */
static void call_begin(void)
{
    queue.in_call = true;
}

static void call_end(void)
{
    fs_torch_segment_fn fn = __atomic_load_n(&segment_fn, __ATOMIC_ACQUIRE);

    queue.in_call = false;
    for (int i = 0; fn && i < queue.n; i++)
        fn(segment_ctx, queue.ev[i].action, queue.ev[i].device, queue.ev[i].addr, queue.ev[i].size,
           queue.ev[i].stream);
    queue.n = 0;
}

static void api_segment_hook(fs_torch_segment_fn fn, void *ctx)
{
    segment_ctx = ctx;
    __atomic_store_n(&segment_fn, fn, __ATOMIC_RELEASE);
    fs_shim_segment_hook(on_segment);
}

/* ---- the calls ---- */

static void fill_oom(fs_allocator *a, int device, size_t size, fs_torch_oom *oom)
{
    fs_alloc_stats st;
    size_t free = 0, total = 0;

    memset(oom, 0, sizeof *oom);
    fs_alloc_get_stats(a, device, &st);
    fs_cuda_mem_info(device, &free, &total);
    oom->requested = size;
    oom->allocated = (size_t)st.allocated_bytes[FS_SIZE_ALL].current;
    oom->reserved = (size_t)st.reserved_bytes[FS_SIZE_ALL].current;
    oom->device_free = free;
    oom->device_total = total;
    snprintf(oom->why, sizeof oom->why,
             "fsdpshim: %zu bytes reserved by the shim's cache, of which %zu allocated, "
             "%lld bytes in %lld frees still pending on the GPU, largest free block %lld bytes",
             oom->reserved, oom->allocated, (long long)st.pending_free_bytes,
             (long long)st.pending_frees, (long long)st.largest_free_block);
}

static int api_malloc(int device, void *stream, uint64_t pool, size_t size, void **out,
                      fs_torch_oom *oom)
{
    fs_allocator *a = fs_shim_enter_active();
    fs_status st;
    fs_stream_t key;
    int dev = -1;

    if (!a) return FS_TORCH_ERROR;
    key = fs_shim_stream_key((cudaStream_t)stream, false, &dev);
    /* PyTorch's semantics: a block freed with streams recorded on it comes
     * back once their work has completed, never behind a wait of the
     * requesting stream on theirs, which PyTorch never adds. Plain
     * (cudaMalloc'd) segments, as PyTorch's own: what a graph capture, an
     * IPC handle and NCCL's registration of PyTorch's segments expect. */
    call_begin();
    fs_trace_alloc_begin();
    st = dev >= 0 ? fs_malloc_private(a, dev, key, pool, size, FS_ALLOC_NO_GPU_WAIT, out)
                  : FS_ERR_DEVICE;
    fs_trace_alloc_end();
    if (st == FS_ERR_OOM && oom) fill_oom(a, dev >= 0 ? dev : device, size, oom);
    fs_shim_leave();
    call_end();
    return st == FS_OK ? FS_TORCH_OK : st == FS_ERR_OOM ? FS_TORCH_OOM : FS_TORCH_ERROR;
}

/* PyTorch frees a block on the stream it was allocated for. */
static int api_free(void *ptr)
{
    fs_allocator *a = fs_shim_enter_active();
    fs_block_info info;
    fs_status st;

    if (!a) return FS_TORCH_ERROR;
    call_begin();
    st = fs_alloc_block_info(a, ptr, &info);
    if (st == FS_OK) st = fs_mem_free(a, ptr, true, info.stream);
    fs_shim_leave();
    call_end();
    return st == FS_OK ? FS_TORCH_OK : st == FS_ERR_NOT_OWNED ? FS_TORCH_NOT_OWNED : FS_TORCH_ERROR;
}

/* The public API's (api.c), in this table's terms. */
static int from_public(int rc)
{
    return rc == FSDPSHIM_OK              ? FS_TORCH_OK
           : rc == FSDPSHIM_ERR_NOT_OWNED ? FS_TORCH_NOT_OWNED
                                          : FS_TORCH_ERROR;
}

static int api_record_stream(void *ptr, void *stream)
{
    return from_public(fsdpshim_record_stream(ptr, stream));
}

static int api_empty_cache(int device)
{
    int rc;

    call_begin();
    rc = from_public(fsdpshim_empty_cache(device));
    call_end();
    return rc;
}

static fs_torch_stat torch_stat(fs_stat in)
{
    return (fs_torch_stat){in.current, in.peak, in.allocated, in.freed};
}

static void copy_stats(fs_torch_stat out[3], const fs_stat in[FS_SIZE_CLASSES])
{
    for (int i = 0; i < 3; i++)
        out[i] = torch_stat(in[i]);
}

static void api_stats(int device, fs_torch_stats *out)
{
    fs_allocator *a = fs_shim_enter_active();
    fs_alloc_config cfg;
    fs_alloc_stats st;

    memset(out, 0, sizeof *out);
    if (!a) return;
    fs_alloc_get_stats(a, device, &st);
    fs_alloc_config_get(a, &cfg);
    fs_shim_leave();
    copy_stats(out->allocation, st.allocation);
    copy_stats(out->segment, st.segment);
    copy_stats(out->active, st.active);
    copy_stats(out->inactive_split, st.inactive_split);
    copy_stats(out->allocated_bytes, st.allocated_bytes);
    copy_stats(out->reserved_bytes, st.reserved_bytes);
    copy_stats(out->active_bytes, st.active_bytes);
    copy_stats(out->inactive_split_bytes, st.inactive_split_bytes);
    copy_stats(out->requested_bytes, st.requested_bytes);
    out->oversize_allocations = torch_stat(st.oversize_allocations);
    out->oversize_segments = torch_stat(st.oversize_segments);
    out->num_alloc_retries = st.num_alloc_retries;
    out->num_ooms = st.num_ooms;
    out->num_sync_all_streams = st.num_sync_all_streams;
    out->num_device_alloc = st.num_device_alloc;
    out->num_device_free = st.num_device_free;
    out->largest_free_block = st.largest_free_block;
    out->max_split_size = cfg.max_split_size == SIZE_MAX ? 0 : (int64_t)cfg.max_split_size;
}

static void api_reset_peak(int device)
{
    fs_allocator *a = fs_shim_enter_active();

    if (!a) return;
    fs_alloc_reset_peak(a, device);
    fs_shim_leave();
}

static void api_reset_accumulated(int device)
{
    fs_allocator *a = fs_shim_enter_active();

    if (!a) return;
    fs_alloc_reset_accumulated(a, device);
    fs_shim_leave();
}

/* The live block containing ptr, as the table's status. */
static int block_info(const void *ptr, fs_block_info *info)
{
    fs_allocator *a = fs_shim_enter_active();
    fs_status st;

    if (!a) return FS_TORCH_ERROR;
    st = fs_alloc_block_info(a, ptr, info);
    fs_shim_leave();
    return st == FS_OK ? FS_TORCH_OK : FS_TORCH_NOT_OWNED;
}

static int api_block_of(const void *ptr, fs_torch_block *out)
{
    fs_block_info info;
    int st = block_info(ptr, &info);

    if (st != FS_TORCH_OK) return st;
    *out = (fs_torch_block){
        .device = info.device,
        .stream = stream_of_key(info.stream),
        .addr = (uintptr_t)info.block,
        .size = info.block_size,
        .requested = info.requested,
    };
    return FS_TORCH_OK;
}

/* ---- private pools ---- */

/* A pool's own segment source, as the allocator calls it. Kept for the
 * life of the process (the allocator may free one of the pool's segments
 * at any later empty_cache), one per source however often its pool is
 * configured. */
typedef struct pool_source {
    int (*alloc)(void *ctx, int device, size_t size, void **out);
    void (*free)(void *ctx, int device, void *ptr, size_t size);
    void *ctx;
    struct pool_source *next;
} pool_source;

static pool_source *sources;
static pthread_mutex_t sources_lock = PTHREAD_MUTEX_INITIALIZER;

static pool_source *source_of(const fs_torch_pool_conf *conf)
{
    pool_source *src;

    pthread_mutex_lock(&sources_lock);
    for (src = sources; src; src = src->next)
        if (src->alloc == conf->segment_alloc && src->free == conf->segment_free &&
            src->ctx == conf->segment_ctx)
            break;
    if (!src && (src = malloc(sizeof *src))) {
        *src = (pool_source){conf->segment_alloc, conf->segment_free, conf->segment_ctx, sources};
        sources = src;
    }
    pthread_mutex_unlock(&sources_lock);
    return src;
}

static fs_dev_status source_alloc(void *ctx, int device, size_t size, void **out)
{
    const pool_source *src = ctx;
    return src->alloc(src->ctx, device, size, out) == 0 && *out ? FS_DEV_OK : FS_DEV_OUT_OF_MEMORY;
}

static void source_free(void *ctx, int device, void *ptr, size_t size)
{
    const pool_source *src = ctx;
    src->free(src->ctx, device, ptr, size);
}

static void api_pool_configure(int device, uint64_t pool, const fs_torch_pool_conf *conf)
{
    fs_private_conf c = {
        .held = conf->held != 0,
        .lend_on_oom = conf->lend_on_oom != 0,
        .no_split = conf->no_split != 0,
    };
    fs_allocator *a;

    if (conf->segment_alloc && conf->segment_free) {
        pool_source *src = source_of(conf);
        if (!src) return;
        c.segment_alloc = source_alloc;
        c.segment_free = source_free;
        c.segment_ctx = src;
    }
    if (!(a = fs_shim_enter_active())) return;
    call_begin();
    fs_alloc_private_configure(a, device, pool, &c);
    fs_shim_leave();
    call_end();
}

static int api_pool_empty(int device, uint64_t pool)
{
    fs_allocator *a = fs_shim_enter_active();
    fs_status st;

    if (!a) return FS_TORCH_ERROR;
    call_begin();
    st = fs_alloc_private_empty(a, device, pool);
    fs_shim_leave();
    call_end();
    return st == FS_OK ? FS_TORCH_OK : FS_TORCH_ERROR;
}

static void api_set_limit(int device, size_t bytes)
{
    fs_allocator *a = fs_shim_enter_active();

    if (!a) return;
    fs_alloc_set_limit(a, device, bytes);
    fs_shim_leave();
}

static int api_base_allocation(const void *ptr, void **base, size_t *size)
{
    fs_block_info info;
    int st = block_info(ptr, &info);

    if (st != FS_TORCH_OK) return st;
    *base = info.segment;
    *size = info.segment_size;
    return FS_TORCH_OK;
}

static int api_share_pages(const void *ptr, size_t *page, uintptr_t *first, int *fds, int max,
                           int *n)
{
    fs_block_info info;
    int st = block_info(ptr, &info);
    uintptr_t base, block;
    size_t begin, end;

    *page = 0;
    *n = 0;
    if (st != FS_TORCH_OK) return st;
    if (!info.page) return FS_TORCH_ERROR;
    base = (uintptr_t)info.segment;
    block = (uintptr_t)info.block;
    begin = (block - base) / info.page;
    end = (block + info.block_size - base + info.page - 1) / info.page;
    *page = info.page;
    *first = base + begin * info.page;
    *n = (int)(end - begin);
    for (int i = 0; i < *n && i < max; i++)
        if (fs_cuda_vm_export(info.device, (void *)(*first + (size_t)i * info.page), &fds[i]) !=
            FS_DEV_OK)
            return FS_TORCH_ERROR;
    return FS_TORCH_OK;
}

static int api_device_of(const void *ptr)
{
    fs_block_info info;

    return block_info(ptr, &info) == FS_TORCH_OK ? info.device : -1;
}

/* The cudaStream_t behind an allocator key, as PyTorch names it: its
 * default stream is the legacy stream, which it calls NULL. */
static void *stream_of_key(fs_stream_t key)
{
    cudaStream_t s = fs_stream_handle(key);
    return s == cudaStreamLegacy ? NULL : (void *)s;
}

static size_t api_walk(int device, fs_torch_walk_entry *out, size_t max)
{
    fs_allocator *a = fs_shim_enter_active();
    fs_walk_entry *w = NULL;
    size_t n;

    if (!a) return 0;
    if (max && !(w = malloc(max * sizeof *w))) max = 0;
    n = fs_alloc_walk(a, device, w, max);
    fs_shim_leave();
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = (fs_torch_walk_entry){
            .state = w[i].state == FS_WALK_SEGMENT  ? FS_TORCH_SEGMENT
                     : w[i].state == FS_WALK_LIVE   ? FS_TORCH_LIVE
                     : w[i].state == FS_WALK_CACHED ? FS_TORCH_CACHED
                                                    : FS_TORCH_PENDING,
            .stream = stream_of_key(w[i].stream),
            .addr = w[i].addr,
            .size = w[i].size,
            .requested = w[i].requested,
            .large = w[i].large,
            .expandable = w[i].expandable,
            .pool = w[i].priv,
        };
    free(w);
    return n;
}

static int api_device_malloc(int device, size_t size, void **out)
{
    fs_internal_call c;
    cudaError_t e;

    fs_internal_begin(&c, device);
    e = FS_REAL(cudaMalloc)(out, size);
    fs_internal_end(&c);
    return e == cudaSuccess                 ? FS_TORCH_OK
           : e == cudaErrorMemoryAllocation ? FS_TORCH_OOM
                                            : FS_TORCH_ERROR;
}

static int api_device_free(void *ptr)
{
    fs_internal_call c;
    cudaError_t e;

    fs_internal_begin(&c, -1);
    e = FS_REAL(cudaFree)(ptr);
    fs_internal_end(&c);
    return e == cudaSuccess ? FS_TORCH_OK : FS_TORCH_ERROR;
}

static void api_tune(const fs_torch_settings *s)
{
    fs_allocator *a = fs_shim_enter_active();
    fs_alloc_config cfg = fs_shim_config_get()->alloc; /* as at start */
    fs_alloc_config now;

    if (!a) return;
    fs_alloc_config_get(a, &now);
    if (s->named & FS_TORCH_SET_MAX_SPLIT) cfg.max_split_size = s->max_split_size;
    if (s->named & FS_TORCH_SET_ROUNDUP)
        for (int i = 0; i < FS_ROUNDUP_BUCKETS && i < 16; i++)
            cfg.roundup_divisions[i] = s->roundup_divisions[i];
    if (s->named & FS_TORCH_SET_GC)
        cfg.garbage_collection_threshold = s->garbage_collection_threshold;
    cfg.expandable_segments =
        s->named & FS_TORCH_SET_EXPANDABLE ? s->expandable_segments != 0 : now.expandable_segments;
    fs_alloc_tune(a, &cfg);
    fs_shim_leave();
}

static void *api_checkpoint(int device, uint64_t pool, char *why, size_t len)
{
    fs_allocator *a = fs_shim_enter_active();
    fs_checkpoint *c = NULL;

    if (!a) {
        snprintf(why, len, "the shim is not active");
        return NULL;
    }
    fs_alloc_checkpoint(a, device, pool, &c, why, len);
    fs_shim_leave();
    return c;
}

static int api_restore(void *checkpoint, void (*freed)(void *ctx, uintptr_t addr),
                       void (*made)(void *ctx, uintptr_t addr), void *ctx, char *why, size_t len)
{
    fs_allocator *a = fs_shim_enter_active();
    uintptr_t *f = NULL, *m = NULL;
    size_t nf = 0, nm = 0;
    fs_status st;

    if (!a) {
        snprintf(why, len, "the shim is not active");
        return FS_TORCH_ERROR;
    }
    st = fs_alloc_restore(a, checkpoint, &f, &nf, &m, &nm, why, len);
    fs_shim_leave();
    for (size_t i = 0; i < nf; i++)
        freed(ctx, f[i]);
    for (size_t i = 0; i < nm; i++)
        made(ctx, m[i]);
    free(f);
    free(m);
    return st == FS_OK ? FS_TORCH_OK : FS_TORCH_ERROR;
}

static void api_checkpoint_free(void *checkpoint)
{
    fs_checkpoint_free(checkpoint);
}

static int api_forget_uses(void *ptr)
{
    fs_allocator *a = fs_shim_enter_active();
    fs_status st;

    if (!a) return FS_TORCH_ERROR;
    st = fs_forget_uses(a, ptr);
    fs_shim_leave();
    return st == FS_OK ? FS_TORCH_OK : FS_TORCH_NOT_OWNED;
}

const fs_torch_api fs_torch_api_table = {
    .version = FS_TORCH_API_VERSION,
    .malloc = api_malloc,
    .free = api_free,
    .record_stream = api_record_stream,
    .empty_cache = api_empty_cache,
    .stats = api_stats,
    .reset_peak = api_reset_peak,
    .reset_accumulated = api_reset_accumulated,
    .base_allocation = api_base_allocation,
    .share_pages = api_share_pages,
    .device_of = api_device_of,
    .walk = api_walk,
    .segment_hook = api_segment_hook,
    .set_limit = api_set_limit,
    .block_of = api_block_of,
    .pool_configure = api_pool_configure,
    .pool_empty = api_pool_empty,
    .device_malloc = api_device_malloc,
    .device_free = api_device_free,
    .checkpoint = api_checkpoint,
    .restore = api_restore,
    .checkpoint_free = api_checkpoint_free,
    .forget_uses = api_forget_uses,
    .tune = api_tune,
};
