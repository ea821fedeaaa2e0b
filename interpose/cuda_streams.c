/* cuda_streams.c - the runtime's stream calls as the allocator needs to see
 * them.
 *
 * Stream creation and destruction go through the stream pools; work issued
 * on a stream (kernel launches, host functions, async copies and sets, graph
 * launches, event waits) marks the stream busy for the allocator's free
 * fences, and the async copies and sets also record a use of the shim blocks
 * they touch (record-stream); host synchronisation lets the allocator retire
 * deferred frees; capture calls keep the capture list.
 *
 * Each entry point with a per-thread-default-stream variant (_ptsz, _ptds)
 * is defined twice: stream 0 means the legacy stream in the plain one and
 * the calling thread's per-thread stream in the variant. */
#include "real.h"
#include "runtime.h"

/* ---- what the allocator is told ---- */

/* Work was issued on `s`: frees must fence it. Called after the real call
 * has put the work on the stream: a fence taken between a note and the
 * work would clear the note and miss the work. */
static void note_work(cudaStream_t s, bool pt)
{
    fs_allocator *a = fs_shim_allocator_peek();
    fs_stream_t key;
    int dev;

    if (!a || !fs_shim_enter()) return;
    if (!fs_shim_stream_capturing(s, pt)) {
        key = fs_shim_stream_key(s, pt, &dev);
        if (dev >= 0) fs_alloc_stream_note_work(a, dev, key);
    }
    fs_shim_leave();
}

/* `s` works on the memory at `p`, `q`: record the use on the blocks the
 * shim owns (others are not its business). */
static void record_uses(const void *p, const void *q, cudaStream_t s, bool pt)
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
static void host_synced(int device)
{
    fs_allocator *a = fs_shim_allocator_peek();

    if (!a || !fs_shim_enter()) return;
    fs_alloc_note_host_sync(a, device);
    fs_shim_leave();
}

/* A pooled stream the program destroyed still exists in the runtime: every
 * call on it the shim sees fails as on a destroyed stream. */
static bool stream_parked(cudaStream_t s)
{
    return fs_unlikely(fs_stream_is_destroyed(s));
}

static cudaError_t destroyed_stream_error(void)
{
    return fs_shim_return_error(cudaErrorInvalidResourceHandle);
}

/* A copy or set that runs past the end of a shim block: the runtime would
 * refuse it (the block is its own allocation there), but it cannot see the
 * block's end inside a segment. */
static bool past_block_end(const void *p, size_t n)
{
    fs_allocator *a = fs_shim_allocator_peek();
    fs_block_info info;
    bool bad = false;

    if (!a || !p || !fs_shim_enter()) return false;
    if (fs_alloc_block_info(a, p, &info) == FS_OK)
        bad = n > info.requested ||
              (size_t)((const char *)p - (const char *)info.block) > info.requested - n;
    fs_shim_leave();
    return bad;
}

static cudaError_t range_error(void)
{
    return fs_shim_return_error(cudaErrorInvalidValue);
}

/* ---- creation and destruction: the stream pools ---- */

FS_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    if (!FS_REAL(cudaStreamCreateWithPriority)) return cudaErrorInitializationError;
    return fs_pool_stream_create(pStream, cudaStreamDefault, 0);
}

FS_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    if (!FS_REAL(cudaStreamCreateWithPriority)) return cudaErrorInitializationError;
    return fs_pool_stream_create(pStream, flags, 0);
}

FS_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags,
                                                   int priority)
{
    if (!FS_REAL(cudaStreamCreateWithPriority)) return cudaErrorInitializationError;
    return fs_pool_stream_create(pStream, flags, priority);
}

FS_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (!FS_REAL(cudaStreamDestroy)) return cudaErrorInitializationError;
    return fs_pool_stream_destroy(stream);
}

FS_EXPORT cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
    __typeof__(&cudaStreamGetFlags) real = FS_REAL(cudaStreamGetFlags);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(hStream)) return destroyed_stream_error();
    return real(hStream, flags);
}

FS_EXPORT cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int *flags)
{
    __typeof__(&cudaStreamGetFlags) real =
        FS_REAL_AS(cudaStreamGetFlags, "cudaStreamGetFlags_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(hStream)) return destroyed_stream_error();
    return real(hStream, flags);
}

FS_EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
    __typeof__(&cudaStreamGetPriority) real = FS_REAL(cudaStreamGetPriority);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(hStream)) return destroyed_stream_error();
    return real(hStream, priority);
}

FS_EXPORT cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t hStream, int *priority)
{
    __typeof__(&cudaStreamGetPriority) real =
        FS_REAL_AS(cudaStreamGetPriority, "cudaStreamGetPriority_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(hStream)) return destroyed_stream_error();
    return real(hStream, priority);
}

/* ---- work on streams ---- */

FS_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                          unsigned int flags)
{
    __typeof__(&cudaStreamWaitEvent) real = FS_REAL(cudaStreamWaitEvent);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(stream, event, flags);
    note_work(stream, false);
    return e;
}

FS_EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
                                               unsigned int flags)
{
    __typeof__(&cudaStreamWaitEvent) real =
        FS_REAL_AS(cudaStreamWaitEvent, "cudaStreamWaitEvent_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(stream, event, flags);
    note_work(stream, true);
    return e;
}

FS_EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                       size_t sharedMem, cudaStream_t stream)
{
    __typeof__(&cudaLaunchKernel) real = FS_REAL(cudaLaunchKernel);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(func, gridDim, blockDim, args, sharedMem, stream);
    note_work(stream, false);
    return e;
}

FS_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
                                            void **args, size_t sharedMem, cudaStream_t stream)
{
    __typeof__(&cudaLaunchKernel) real = FS_REAL_AS(cudaLaunchKernel, "cudaLaunchKernel_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(func, gridDim, blockDim, args, sharedMem, stream);
    note_work(stream, true);
    return e;
}

FS_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
                                          void **args)
{
    __typeof__(&cudaLaunchKernelExC) real = FS_REAL(cudaLaunchKernelExC);
    if (!real) return cudaErrorInitializationError;
    if (config && stream_parked(config->stream)) return destroyed_stream_error();
    cudaError_t e = real(config, func, args);
    if (config) note_work(config->stream, false);
    return e;
}

FS_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func,
                                               void **args)
{
    __typeof__(&cudaLaunchKernelExC) real =
        FS_REAL_AS(cudaLaunchKernelExC, "cudaLaunchKernelExC_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (config && stream_parked(config->stream)) return destroyed_stream_error();
    cudaError_t e = real(config, func, args);
    if (config) note_work(config->stream, true);
    return e;
}

FS_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    __typeof__(&cudaLaunchHostFunc) real = FS_REAL(cudaLaunchHostFunc);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(stream, fn, userData);
    note_work(stream, false);
    return e;
}

FS_EXPORT cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    __typeof__(&cudaLaunchHostFunc) real =
        FS_REAL_AS(cudaLaunchHostFunc, "cudaLaunchHostFunc_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(stream, fn, userData);
    note_work(stream, true);
    return e;
}

FS_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    __typeof__(&cudaGraphLaunch) real = FS_REAL(cudaGraphLaunch);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(graphExec, stream);
    note_work(stream, false);
    return e;
}

FS_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    __typeof__(&cudaGraphLaunch) real = FS_REAL_AS(cudaGraphLaunch, "cudaGraphLaunch_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(graphExec, stream);
    note_work(stream, true);
    return e;
}

FS_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                      enum cudaMemcpyKind kind, cudaStream_t stream)
{
    __typeof__(&cudaMemcpyAsync) real = FS_REAL(cudaMemcpyAsync);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    if (past_block_end(dst, count)) return range_error();
    if (past_block_end(src, count)) return range_error();
    cudaError_t e = real(dst, src, count, kind, stream);
    record_uses(dst, src, stream, false);
    return e;
}

FS_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                           enum cudaMemcpyKind kind, cudaStream_t stream)
{
    __typeof__(&cudaMemcpyAsync) real = FS_REAL_AS(cudaMemcpyAsync, "cudaMemcpyAsync_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    if (past_block_end(dst, count)) return range_error();
    if (past_block_end(src, count)) return range_error();
    cudaError_t e = real(dst, src, count, kind, stream);
    record_uses(dst, src, stream, true);
    return e;
}

FS_EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                        size_t width, size_t height, enum cudaMemcpyKind kind,
                                        cudaStream_t stream)
{
    __typeof__(&cudaMemcpy2DAsync) real = FS_REAL(cudaMemcpy2DAsync);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(dst, dpitch, src, spitch, width, height, kind, stream);
    record_uses(dst, src, stream, false);
    return e;
}

FS_EXPORT cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src,
                                             size_t spitch, size_t width, size_t height,
                                             enum cudaMemcpyKind kind, cudaStream_t stream)
{
    __typeof__(&cudaMemcpy2DAsync) real = FS_REAL_AS(cudaMemcpy2DAsync, "cudaMemcpy2DAsync_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(dst, dpitch, src, spitch, width, height, kind, stream);
    record_uses(dst, src, stream, true);
    return e;
}

FS_EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                          size_t count, cudaStream_t stream)
{
    __typeof__(&cudaMemcpyPeerAsync) real = FS_REAL(cudaMemcpyPeerAsync);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(dst, dstDevice, src, srcDevice, count, stream);
    record_uses(dst, src, stream, false);
    return e;
}

FS_EXPORT cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    __typeof__(&cudaMemsetAsync) real = FS_REAL(cudaMemsetAsync);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    if (past_block_end(devPtr, count)) return range_error();
    cudaError_t e = real(devPtr, value, count, stream);
    record_uses(devPtr, NULL, stream, false);
    return e;
}

FS_EXPORT cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count,
                                           cudaStream_t stream)
{
    __typeof__(&cudaMemsetAsync) real = FS_REAL_AS(cudaMemsetAsync, "cudaMemsetAsync_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    if (past_block_end(devPtr, count)) return range_error();
    cudaError_t e = real(devPtr, value, count, stream);
    record_uses(devPtr, NULL, stream, true);
    return e;
}

FS_EXPORT cudaError_t cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width,
                                        size_t height, cudaStream_t stream)
{
    __typeof__(&cudaMemset2DAsync) real = FS_REAL(cudaMemset2DAsync);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(devPtr, pitch, value, width, height, stream);
    record_uses(devPtr, NULL, stream, false);
    return e;
}

FS_EXPORT cudaError_t cudaMemset2DAsync_ptsz(void *devPtr, size_t pitch, int value, size_t width,
                                             size_t height, cudaStream_t stream)
{
    __typeof__(&cudaMemset2DAsync) real = FS_REAL_AS(cudaMemset2DAsync, "cudaMemset2DAsync_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(devPtr, pitch, value, width, height, stream);
    record_uses(devPtr, NULL, stream, true);
    return e;
}

/* Synchronous copies and sets run on the legacy (or per-thread) stream,
 * which every fence covers; only the block bounds need the shim. */
FS_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    __typeof__(&cudaMemcpy) real = FS_REAL(cudaMemcpy);
    if (!real) return cudaErrorInitializationError;
    if (past_block_end(dst, count)) return range_error();
    if (past_block_end(src, count)) return range_error();
    return real(dst, src, count, kind);
}

FS_EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count,
                                      enum cudaMemcpyKind kind)
{
    __typeof__(&cudaMemcpy) real = FS_REAL_AS(cudaMemcpy, "cudaMemcpy_ptds");
    if (!real) return cudaErrorInitializationError;
    if (past_block_end(dst, count)) return range_error();
    if (past_block_end(src, count)) return range_error();
    return real(dst, src, count, kind);
}

FS_EXPORT cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    __typeof__(&cudaMemset) real = FS_REAL(cudaMemset);
    if (!real) return cudaErrorInitializationError;
    if (past_block_end(devPtr, count)) return range_error();
    return real(devPtr, value, count);
}

FS_EXPORT cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    __typeof__(&cudaMemset) real = FS_REAL_AS(cudaMemset, "cudaMemset_ptds");
    if (!real) return cudaErrorInitializationError;
    if (past_block_end(devPtr, count)) return range_error();
    return real(devPtr, value, count);
}

/* ---- other calls on a stream: parked streams fail as destroyed ones ---- */

FS_EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    __typeof__(&cudaStreamQuery) real = FS_REAL(cudaStreamQuery);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    return real(stream);
}

FS_EXPORT cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream)
{
    __typeof__(&cudaStreamQuery) real = FS_REAL_AS(cudaStreamQuery, "cudaStreamQuery_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    return real(stream);
}

FS_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    __typeof__(&cudaEventRecord) real = FS_REAL(cudaEventRecord);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    return real(event, stream);
}

FS_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    __typeof__(&cudaEventRecord) real = FS_REAL_AS(cudaEventRecord, "cudaEventRecord_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    return real(event, stream);
}

FS_EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                               unsigned int flags)
{
    __typeof__(&cudaEventRecordWithFlags) real = FS_REAL(cudaEventRecordWithFlags);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    return real(event, stream, flags);
}

FS_EXPORT cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
                                                    unsigned int flags)
{
    __typeof__(&cudaEventRecordWithFlags) real =
        FS_REAL_AS(cudaEventRecordWithFlags, "cudaEventRecordWithFlags_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    return real(event, stream, flags);
}

FS_EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                            void *userData, unsigned int flags)
{
    __typeof__(&cudaStreamAddCallback) real = FS_REAL(cudaStreamAddCallback);
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(stream, callback, userData, flags);
    note_work(stream, false);
    return e;
}

FS_EXPORT cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback,
                                                 void *userData, unsigned int flags)
{
    __typeof__(&cudaStreamAddCallback) real =
        FS_REAL_AS(cudaStreamAddCallback, "cudaStreamAddCallback_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(stream)) return destroyed_stream_error();
    cudaError_t e = real(stream, callback, userData, flags);
    note_work(stream, true);
    return e;
}

/* ---- host synchronisation: deferred frees may have completed ---- */

/* A device synchronisation waits for all work issued before it began, so
 * the device-ordered frees made before then are reusable, fenced or not
 * (torch.cuda.empty_cache is this, then cudaMemPoolTrimTo). The token is
 * taken first: frees other threads make during the wait are left alone. */
FS_EXPORT cudaError_t cudaDeviceSynchronize(void)
{
    __typeof__(&cudaDeviceSynchronize) real = FS_REAL(cudaDeviceSynchronize);
    if (!real) return cudaErrorInitializationError;
    fs_allocator *a = fs_shim_allocator_peek();
    int dev = fs_shim_current_device();
    uint64_t token = a && dev >= 0 ? fs_alloc_sync_begin(a, dev) : 0;
    cudaError_t e = real();

    if (e != cudaSuccess) return e;
    if (!a || dev < 0) {
        host_synced(dev); /* the allocator came up meanwhile, or no device known */
        return e;
    }
    if (fs_shim_enter()) {
        fs_alloc_note_host_sync_since(a, dev, token);
        fs_shim_leave();
    }
    return e;
}

static cudaError_t stream_synchronize(cudaStream_t s, bool pt,
                                      __typeof__(&cudaStreamSynchronize) real)
{
    cudaError_t e;
    int dev = -1;

    if (!real) return cudaErrorInitializationError;
    if (stream_parked(s)) return destroyed_stream_error();
    e = real(s);
    if (e == cudaSuccess && fs_shim_allocator_peek() && fs_shim_enter()) {
        fs_shim_stream_key(s, pt, &dev);
        fs_shim_leave();
        host_synced(dev);
    }
    return e;
}

FS_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    return stream_synchronize(stream, false, FS_REAL(cudaStreamSynchronize));
}

FS_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    return stream_synchronize(stream, true,
                              FS_REAL_AS(cudaStreamSynchronize, "cudaStreamSynchronize_ptsz"));
}

FS_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    __typeof__(&cudaEventSynchronize) real = FS_REAL(cudaEventSynchronize);
    if (!real) return cudaErrorInitializationError;
    cudaError_t e = real(event);
    if (e == cudaSuccess) host_synced(-1);
    return e;
}

/* ---- graph capture ---- */

static cudaError_t begin_capture(cudaStream_t s, bool pt, enum cudaStreamCaptureMode mode,
                                 cudaError_t e)
{
    if (e == cudaSuccess && fs_shim_enter()) {
        fs_capture_begin(fs_shim_stream_key(s, pt, NULL), mode);
        fs_shim_leave();
    }
    return e;
}

static cudaError_t end_capture(cudaStream_t s, bool pt, cudaError_t e)
{
    /* the capture is over whatever the outcome (an invalidated capture
     * ends with an error too) */
    if (fs_shim_enter()) {
        fs_capture_end(fs_shim_stream_key(s, pt, NULL));
        fs_shim_leave();
    }
    return e;
}

FS_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    __typeof__(&cudaStreamBeginCapture) real = FS_REAL(cudaStreamBeginCapture);
    if (!real) return cudaErrorInitializationError;
    return begin_capture(stream, false, mode, real(stream, mode));
}

FS_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream,
                                                  enum cudaStreamCaptureMode mode)
{
    __typeof__(&cudaStreamBeginCapture) real =
        FS_REAL_AS(cudaStreamBeginCapture, "cudaStreamBeginCapture_ptsz");
    if (!real) return cudaErrorInitializationError;
    return begin_capture(stream, true, mode, real(stream, mode));
}

FS_EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                                    const cudaGraphNode_t *dependencies,
                                                    const cudaGraphEdgeData *dependencyData,
                                                    size_t numDependencies,
                                                    enum cudaStreamCaptureMode mode)
{
    __typeof__(&cudaStreamBeginCaptureToGraph) real = FS_REAL(cudaStreamBeginCaptureToGraph);
    if (!real) return cudaErrorInitializationError;
    return begin_capture(stream, false, mode,
                         real(stream, graph, dependencies, dependencyData, numDependencies, mode));
}

FS_EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                                         const cudaGraphNode_t *dependencies,
                                                         const cudaGraphEdgeData *dependencyData,
                                                         size_t numDependencies,
                                                         enum cudaStreamCaptureMode mode)
{
    __typeof__(&cudaStreamBeginCaptureToGraph) real =
        FS_REAL_AS(cudaStreamBeginCaptureToGraph, "cudaStreamBeginCaptureToGraph_ptsz");
    if (!real) return cudaErrorInitializationError;
    return begin_capture(stream, true, mode,
                         real(stream, graph, dependencies, dependencyData, numDependencies, mode));
}

FS_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    __typeof__(&cudaStreamEndCapture) real = FS_REAL(cudaStreamEndCapture);
    if (!real) return cudaErrorInitializationError;
    return end_capture(stream, false, real(stream, pGraph));
}

FS_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    __typeof__(&cudaStreamEndCapture) real =
        FS_REAL_AS(cudaStreamEndCapture, "cudaStreamEndCapture_ptsz");
    if (!real) return cudaErrorInitializationError;
    return end_capture(stream, true, real(stream, pGraph));
}
