/* serve.c - the allocator's side of the calls every API family makes
 * (shim.h, "serving"): allocations and frees on behalf of the runtime's
 * memory calls (runtime/cuda_memory.c), the driver's (driver/cuda_driver.c)
 * and the PyTorch adapter's (pytorch/torch_api.c); and what the allocator
 * is told of the work the runtime and the driver put on streams
 * (runtime/cuda_streams.c, driver/driver_work.c). One place, so that a
 * block is served, freed and fenced the same way whichever way the program
 * came in. */
#include "shim.h"
#include "trace_glue.h"

/* ---- allocation ---- */

/* For the stream the thread set for `dev` (docs/api.md), else its legacy
 * stream. */
fs_status fs_mem_alloc(fs_allocator *a, int dev, size_t size, void **out)
{
    cudaStream_t s = fs_thread_stream(dev);
    fs_stream_t key;
    fs_status st;
    int stream_dev;

    if (fs_shim_stream_capturing(s, false)) return FS_ERR_NOT_OWNED;
    key = fs_shim_stream_key(s, false, &stream_dev);
    if (fs_unlikely(stream_dev != dev)) /* the stream is gone, or its handle reused */
        key = fs_shim_stream_key(NULL, false, &stream_dev);
    fs_trace_alloc_begin();
    st = dev >= 0 && stream_dev == dev ? fs_malloc(a, dev, key, size, 0, out) : FS_ERR_NOT_OWNED;
    fs_trace_alloc_end();
    return st;
}

fs_status fs_mem_alloc_async(fs_allocator *a, cudaStream_t s, bool pt, size_t size, void **out,
                             int *dev)
{
    return fs_mem_alloc_ordered(a, s, pt, size, 0, out, dev);
}

fs_status fs_mem_alloc_ordered(fs_allocator *a, cudaStream_t s, bool pt, size_t size,
                               unsigned flags, void **out, int *dev)
{
    fs_stream_t key = fs_shim_stream_key(s, pt, dev);
    fs_status st;

    fs_trace_alloc_begin();
    st = *dev >= 0 ? fs_malloc(a, *dev, key, size, FS_ALLOC_STREAM_ORDERED | flags, out)
                   : FS_ERR_NOT_OWNED;
    fs_trace_alloc_end();
    return st;
}

/* The runtime checks the out-pointer, then the stream, then the size. */
/* ---- free ---- */

/* Hands the block's fence to the rate limiter when it asks for it. */
fs_status fs_mem_free(fs_allocator *a, void *ptr, bool ordered, fs_stream_t key)
{
    const fs_shim_free_hook *hook = fs_free_hook();
    fs_fence *fence = NULL, **want = NULL;
    fs_block_info info;
    fs_status st;

    if (hook && hook->wants_fence(ptr) && fs_alloc_block_info(a, ptr, &info) == FS_OK)
        want = &fence;
    st = ordered ? fs_free_async(a, ptr, key, want) : fs_free(a, ptr, want);
    if (st == FS_OK && fence) hook->on_fence(info.device, ptr, fence);
    return st;
}

/* Memory the cache holds but no block uses counts as free: the program gets
 * it back from the shim, without the device, whenever it allocates. Free
 * plus what the program holds through the shim (UsedMemCurrent) therefore
 * stays within the total, as PyTorch's cacheInfo asserts. */
size_t fs_mem_cached_free(fs_allocator *a, int dev)
{
    fs_alloc_stats st;

    if (dev < 0 || dev >= fs_shim_device_count()) return 0;
    fs_alloc_get_stats(a, dev, &st);
    if (st.reserved_bytes[FS_SIZE_ALL].current <= st.allocated_bytes[FS_SIZE_ALL].current) return 0;
    return (size_t)(st.reserved_bytes[FS_SIZE_ALL].current -
                    st.allocated_bytes[FS_SIZE_ALL].current);
}

/* ---- work on streams: what the allocator is told ---- */

/* Work was issued on `s`: frees must fence it. Called after the real call
 * has put the work on the stream: a fence taken between a note and the
 * work would clear the note and miss the work. A call that failed issued
 * nothing, and is not followed by internal calls that could disturb the
 * last error it left. */
void fs_stream_note_work(cudaStream_t s, bool pt)
{
    fs_stream_record_uses(NULL, NULL, s, pt);
}

void fs_stream_learn(cudaStream_t s)
{
    int dev;

    if (fs_shim_allocator_peek()) (void)fs_shim_stream_key(s, false, &dev);
}

/* `s` works on the memory at `p`, `q`: record the use on the blocks the
 * shim owns (others are not its business); the work is noted either way. */
void fs_stream_record_uses(const void *p, const void *q, cudaStream_t s, bool pt)
{
    fs_allocator *a = fs_shim_allocator_peek();
    fs_stream_t key;
    int dev;

    if (!a || !fs_shim_enter()) return;
    if (!fs_shim_stream_capturing(s, pt)) {
        key = fs_shim_stream_key(s, pt, &dev);
        if (dev >= 0) {
            fs_alloc_stream_note_work(a, dev, key);
            if (p) fs_record_stream(a, (void *)p, key);
            if (q) fs_record_stream(a, (void *)q, key);
        }
    }
    fs_shim_leave();
}

/* The host has waited for work on `device` (-1: unknown, any). */
void fs_host_synced(int device)
{
    fs_allocator *a = fs_shim_allocator_peek();

    if (!a || !fs_shim_enter()) return;
    fs_alloc_note_host_sync(a, device);
    fs_shim_leave();
}
