/* cuda_streams.c - the runtime's stream calls as the allocator needs to see
 * them.
 *
 * Stream creation and destruction go through the stream pools; work issued
 * on a stream (kernel launches, host functions, async copies and sets, graph
 * launches, event waits) marks the stream busy for the allocator's free
 * fences, and the async copies and sets also record a use of the shim blocks
 * they touch (record-stream); host synchronisation lets the allocator retire
 * deferred frees; capture calls keep the capture list. Calls on a pooled
 * stream the program destroyed, and copies and sets past a shim block's
 * extent, are refused here, after the runtime's own checks (below; the
 * stream queries and the synchronous 2-D and peer copies are interposed for
 * that alone).
 *
 * Each entry point with a per-thread-default-stream variant (_ptsz, _ptds)
 * is defined twice: stream 0 means the legacy stream in the plain one and
 * the calling thread's per-thread stream in the variant. */
#include "../core/real.h"
#include "runtime.h"

/* ---- the checks the shim makes itself (docs/interpose.md, "Error codes") ----
 *
 * The runtime cannot see two things: a pooled stream the program destroyed
 * is alive to it, and a shim block ends inside a segment. The shim refuses
 * such calls itself, but only after every check the runtime makes first, so
 * that the code and the last-error state are the runtime's own:
 *   - a copy or set is made again with nothing to move (zero bytes, or zero
 *     rows for the 2D forms, whose pitches are checked here as the runtime
 *     checks them): the runtime judges the rest of the call (direction,
 *     devices, the stream) and does nothing; its error is the answer;
 *   - any other call on a parked stream goes to the runtime when an argument
 *     the runtime checks before the stream is bad (written out at each call).
 * A stream the shim parked is checked before the memory, as the runtime
 * checks a stream before the memory. */

/* A pooled stream the program destroyed: it waits in a stream pool. */
static bool stream_parked(cudaStream_t s)
{
    return fs_unlikely(fs_stream_is_destroyed(s));
}

static cudaError_t destroyed_stream_error(void)
{
    return fs_shim_return_error(cudaErrorInvalidResourceHandle);
}

/* How far from a shim block's start a copy or set may reach: as far as in
 * an allocation of the requested size, whose end the runtime checks copies
 * and sets against to the byte (seen on a GPU, driver 580: after
 * cudaMalloc(&p, 1000) a 1001-byte cudaMemcpy to p is cudaErrorInvalidValue;
 * docs/sim.md, "Allocation granule"), never past the block. */
static size_t block_extent(const fs_block_info *info)
{
    return info->requested < info->block_size ? info->requested : info->block_size;
}

/* [p, p + n) starts in a shim block and runs past its extent. */
static bool past_block_extent(const void *p, size_t n)
{
    fs_allocator *a = fs_shim_allocator_peek();
    fs_block_info info;
    size_t offset, extent;
    bool bad = false;

    if (!a || !p || !n || !fs_shim_enter()) return false;
    if (fs_alloc_block_info(a, p, &info) == FS_OK) {
        offset = (size_t)((const char *)p - (const char *)info.block);
        extent = block_extent(&info);
        bad = offset >= extent || n > extent - offset;
    }
    fs_shim_leave();
    return bad;
}

/* The bytes a 2D copy or set spans from its first one (SIZE_MAX when that
 * overflows, which no block holds). */
static size_t span_2d(size_t pitch, size_t width, size_t height)
{
    size_t span;

    if (!width || !height) return 0;
    if (__builtin_mul_overflow(pitch, height - 1, &span) ||
        __builtin_add_overflow(span, width, &span))
        return SIZE_MAX;
    return span;
}

/* Rows wider than their pitch: the runtime refuses the call
 * (cudaErrorInvalidPitchValue) before it looks at the stream or the memory,
 * so it gets the call itself. */
static bool bad_pitch(size_t width, size_t height, size_t pitch)
{
    return height > 1 && width > pitch;
}

/* A kind that is none of cudaMemcpyKind's: the runtime refuses the call
 * (cudaErrorInvalidMemcpyDirection) before it looks at the stream or the
 * memory, even on a destroyed stream (seen on a GPU, driver 580), and a copy
 * of 0 bytes does not check it, so the call itself goes to the runtime. */
static bool bad_kind(enum cudaMemcpyKind kind)
{
    return (unsigned)kind > (unsigned)cudaMemcpyDefault;
}

/* The answer to a copy or set the shim refuses, on a parked stream or past
 * a block's extent, given the runtime's answer to it with nothing to move. */
static cudaError_t refused(cudaError_t empty_call, bool parked)
{
    if (empty_call != cudaSuccess) return empty_call;
    return parked ? destroyed_stream_error() : fs_shim_return_error(cudaErrorInvalidValue);
}

/* ---- creation and destruction: the stream pools ---- */

FS_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    if (!FS_REAL(cudaStreamCreateWithPriority)) return cudaErrorInitializationError;
    return fs_stream_pool_create(pStream, cudaStreamDefault, 0);
}

FS_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    if (!FS_REAL(cudaStreamCreateWithPriority)) return cudaErrorInitializationError;
    return fs_stream_pool_create(pStream, flags, 0);
}

FS_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags,
                                                   int priority)
{
    if (!FS_REAL(cudaStreamCreateWithPriority)) return cudaErrorInitializationError;
    return fs_stream_pool_create(pStream, flags, priority);
}

FS_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (!FS_REAL(cudaStreamDestroy)) return cudaErrorInitializationError;
    return fs_stream_pool_destroy(stream);
}

/* ---- questions about a stream: the out-pointer is checked first ---- */

static cudaError_t get_flags(cudaStream_t s, unsigned *flags, __typeof__(&cudaStreamGetFlags) real)
{
    if (!real) return cudaErrorInitializationError;
    if (flags && stream_parked(s)) return destroyed_stream_error();
    return real(s, flags);
}

FS_EXPORT cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
    return get_flags(hStream, flags, FS_REAL(cudaStreamGetFlags));
}

FS_EXPORT cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t hStream, unsigned int *flags)
{
    return get_flags(hStream, flags, FS_REAL_AS(cudaStreamGetFlags, "cudaStreamGetFlags_ptsz"));
}

static cudaError_t get_priority(cudaStream_t s, int *priority,
                                __typeof__(&cudaStreamGetPriority) real)
{
    if (!real) return cudaErrorInitializationError;
    if (priority && stream_parked(s)) return destroyed_stream_error();
    return real(s, priority);
}

FS_EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
    return get_priority(hStream, priority, FS_REAL(cudaStreamGetPriority));
}

FS_EXPORT cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t hStream, int *priority)
{
    return get_priority(hStream, priority,
                        FS_REAL_AS(cudaStreamGetPriority, "cudaStreamGetPriority_ptsz"));
}

static cudaError_t get_device(cudaStream_t s, int *device, __typeof__(&cudaStreamGetDevice) real)
{
    if (!real) return cudaErrorInitializationError;
    if (device && stream_parked(s)) return destroyed_stream_error();
    return real(s, device);
}

FS_EXPORT cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int *device)
{
    return get_device(hStream, device, FS_REAL(cudaStreamGetDevice));
}

FS_EXPORT cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t hStream, int *device)
{
    return get_device(hStream, device, FS_REAL_AS(cudaStreamGetDevice, "cudaStreamGetDevice_ptsz"));
}

static cudaError_t get_id(cudaStream_t s, unsigned long long *id, __typeof__(&cudaStreamGetId) real)
{
    if (!real) return cudaErrorInitializationError;
    if (id && stream_parked(s)) return destroyed_stream_error();
    return real(s, id);
}

FS_EXPORT cudaError_t cudaStreamGetId(cudaStream_t hStream, unsigned long long *streamId)
{
    return get_id(hStream, streamId, FS_REAL(cudaStreamGetId));
}

FS_EXPORT cudaError_t cudaStreamGetId_ptsz(cudaStream_t hStream, unsigned long long *streamId)
{
    return get_id(hStream, streamId, FS_REAL_AS(cudaStreamGetId, "cudaStreamGetId_ptsz"));
}

static cudaError_t is_capturing(cudaStream_t s, enum cudaStreamCaptureStatus *status,
                                __typeof__(&cudaStreamIsCapturing) real)
{
    if (!real) return cudaErrorInitializationError;
    if (status && stream_parked(s)) return destroyed_stream_error();
    return real(s, status);
}

FS_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream,
                                            enum cudaStreamCaptureStatus *pCaptureStatus)
{
    return is_capturing(stream, pCaptureStatus, FS_REAL(cudaStreamIsCapturing));
}

FS_EXPORT cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                                 enum cudaStreamCaptureStatus *pCaptureStatus)
{
    return is_capturing(stream, pCaptureStatus,
                        FS_REAL_AS(cudaStreamIsCapturing, "cudaStreamIsCapturing_ptsz"));
}

static cudaError_t capture_info(cudaStream_t s, enum cudaStreamCaptureStatus *status,
                                unsigned long long *id, cudaGraph_t *graph,
                                const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                size_t *ndeps, __typeof__(&cudaStreamGetCaptureInfo) real)
{
    if (!real) return cudaErrorInitializationError;
    if (status && stream_parked(s)) return destroyed_stream_error();
    return real(s, status, id, graph, deps, edges, ndeps);
}

FS_EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream,
                                               enum cudaStreamCaptureStatus *captureStatus_out,
                                               unsigned long long *id_out, cudaGraph_t *graph_out,
                                               const cudaGraphNode_t **dependencies_out,
                                               const cudaGraphEdgeData **edgeData_out,
                                               size_t *numDependencies_out)
{
    return capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out, FS_REAL(cudaStreamGetCaptureInfo));
}

FS_EXPORT cudaError_t cudaStreamGetCaptureInfo_ptsz(
    cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
    unsigned long long *id_out, cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
    const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return capture_info(stream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out,
                        FS_REAL_AS(cudaStreamGetCaptureInfo, "cudaStreamGetCaptureInfo_ptsz"));
}

/* ---- work on streams ---- */

static cudaError_t wait_event(cudaStream_t s, cudaEvent_t event, unsigned flags, bool pt,
                              __typeof__(&cudaStreamWaitEvent) real)
{
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    if (!(flags & ~(unsigned)cudaEventWaitExternal) && stream_parked(s))
        return destroyed_stream_error();
    e = real(s, event, flags);
    if (e == cudaSuccess) fs_stream_note_work(s, pt);
    return e;
}

FS_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                          unsigned int flags)
{
    return wait_event(stream, event, flags, false, FS_REAL(cudaStreamWaitEvent));
}

FS_EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
                                               unsigned int flags)
{
    return wait_event(stream, event, flags, true,
                      FS_REAL_AS(cudaStreamWaitEvent, "cudaStreamWaitEvent_ptsz"));
}

/* No kernel runs without a function: the runtime's own error comes first. */
static cudaError_t launch_kernel(const void *func, dim3 grid, dim3 block, void **args,
                                 size_t shared, cudaStream_t s, bool pt,
                                 __typeof__(&cudaLaunchKernel) real)
{
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    if (func && stream_parked(s)) return destroyed_stream_error();
    e = real(func, grid, block, args, shared, s);
    if (e == cudaSuccess) fs_stream_note_work(s, pt);
    return e;
}

FS_EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                       size_t sharedMem, cudaStream_t stream)
{
    return launch_kernel(func, gridDim, blockDim, args, sharedMem, stream, false,
                         FS_REAL(cudaLaunchKernel));
}

FS_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
                                            void **args, size_t sharedMem, cudaStream_t stream)
{
    return launch_kernel(func, gridDim, blockDim, args, sharedMem, stream, true,
                         FS_REAL_AS(cudaLaunchKernel, "cudaLaunchKernel_ptsz"));
}

static cudaError_t launch_kernel_ex(const cudaLaunchConfig_t *config, const void *func, void **args,
                                    bool pt, __typeof__(&cudaLaunchKernelExC) real)
{
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    if (config && func && stream_parked(config->stream)) return destroyed_stream_error();
    e = real(config, func, args);
    if (e == cudaSuccess && config) fs_stream_note_work(config->stream, pt);
    return e;
}

FS_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
                                          void **args)
{
    return launch_kernel_ex(config, func, args, false, FS_REAL(cudaLaunchKernelExC));
}

FS_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func,
                                               void **args)
{
    return launch_kernel_ex(config, func, args, true,
                            FS_REAL_AS(cudaLaunchKernelExC, "cudaLaunchKernelExC_ptsz"));
}

static cudaError_t launch_host_func(cudaStream_t s, cudaHostFn_t fn, void *user, bool pt,
                                    __typeof__(&cudaLaunchHostFunc) real)
{
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    if (fn && stream_parked(s)) return destroyed_stream_error();
    e = real(s, fn, user);
    if (e == cudaSuccess) fs_stream_note_work(s, pt);
    return e;
}

FS_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    return launch_host_func(stream, fn, userData, false, FS_REAL(cudaLaunchHostFunc));
}

FS_EXPORT cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    return launch_host_func(stream, fn, userData, true,
                            FS_REAL_AS(cudaLaunchHostFunc, "cudaLaunchHostFunc_ptsz"));
}

static cudaError_t graph_launch(cudaGraphExec_t exec, cudaStream_t s, bool pt,
                                __typeof__(&cudaGraphLaunch) real)
{
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    if (exec && stream_parked(s)) return destroyed_stream_error();
    e = real(exec, s);
    if (e == cudaSuccess) fs_stream_note_work(s, pt);
    return e;
}

FS_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return graph_launch(graphExec, stream, false, FS_REAL(cudaGraphLaunch));
}

FS_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return graph_launch(graphExec, stream, true,
                        FS_REAL_AS(cudaGraphLaunch, "cudaGraphLaunch_ptsz"));
}

static cudaError_t add_callback(cudaStream_t s, cudaStreamCallback_t fn, void *user, unsigned flags,
                                bool pt, __typeof__(&cudaStreamAddCallback) real)
{
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    if (fn && !flags && stream_parked(s)) return destroyed_stream_error();
    e = real(s, fn, user, flags);
    if (e == cudaSuccess) fs_stream_note_work(s, pt);
    return e;
}

FS_EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                            void *userData, unsigned int flags)
{
    return add_callback(stream, callback, userData, flags, false, FS_REAL(cudaStreamAddCallback));
}

FS_EXPORT cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback,
                                                 void *userData, unsigned int flags)
{
    return add_callback(stream, callback, userData, flags, true,
                        FS_REAL_AS(cudaStreamAddCallback, "cudaStreamAddCallback_ptsz"));
}

/* ---- copies and sets: the stream, then the memory (see above) ---- */

static cudaError_t memcpy_async(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                cudaStream_t s, bool pt, __typeof__(&cudaMemcpyAsync) real)
{
    bool parked;
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    if (fs_unlikely(bad_kind(kind))) return real(dst, src, count, kind, s);
    parked = stream_parked(s);
    if (fs_unlikely(parked || past_block_extent(dst, count) || past_block_extent(src, count)))
        return refused(real(dst, src, 0, kind, s), parked);
    e = real(dst, src, count, kind, s);
    if (e == cudaSuccess) fs_stream_record_uses(dst, src, s, pt);
    return e;
}

FS_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                      enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return memcpy_async(dst, src, count, kind, stream, false, FS_REAL(cudaMemcpyAsync));
}

FS_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                           enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return memcpy_async(dst, src, count, kind, stream, true,
                        FS_REAL_AS(cudaMemcpyAsync, "cudaMemcpyAsync_ptsz"));
}

static cudaError_t memcpy_2d_async(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind,
                                   cudaStream_t s, bool pt, __typeof__(&cudaMemcpy2DAsync) real)
{
    bool parked;
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    if (bad_pitch(width, height, dpitch) || bad_pitch(width, height, spitch) || bad_kind(kind))
        return real(dst, dpitch, src, spitch, width, height, kind, s);
    parked = stream_parked(s);
    if (fs_unlikely(parked || past_block_extent(dst, span_2d(dpitch, width, height)) ||
                    past_block_extent(src, span_2d(spitch, width, height))))
        return refused(real(dst, dpitch, src, spitch, width, 0, kind, s), parked);
    e = real(dst, dpitch, src, spitch, width, height, kind, s);
    if (e == cudaSuccess) fs_stream_record_uses(dst, src, s, pt);
    return e;
}

FS_EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                        size_t width, size_t height, enum cudaMemcpyKind kind,
                                        cudaStream_t stream)
{
    return memcpy_2d_async(dst, dpitch, src, spitch, width, height, kind, stream, false,
                           FS_REAL(cudaMemcpy2DAsync));
}

FS_EXPORT cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src,
                                             size_t spitch, size_t width, size_t height,
                                             enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return memcpy_2d_async(dst, dpitch, src, spitch, width, height, kind, stream, true,
                           FS_REAL_AS(cudaMemcpy2DAsync, "cudaMemcpy2DAsync_ptsz"));
}

/* A device the peer copies name that the process does not have: the
 * runtime refuses such a copy before its memory (cudaErrorInvalidDevice),
 * but a copy of 0 bytes checks no device (seen on a GPU, driver 580), so
 * the call itself goes to the runtime. */
static bool bad_peer(int dst_device, int src_device)
{
    int n = fs_shim_device_count();

    return dst_device < 0 || dst_device >= n || src_device < 0 || src_device >= n;
}

/* There is no _ptsz variant of the peer copies. */
FS_EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                          size_t count, cudaStream_t stream)
{
    __typeof__(&cudaMemcpyPeerAsync) real = FS_REAL(cudaMemcpyPeerAsync);
    bool parked;
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    if (fs_unlikely(bad_peer(dstDevice, srcDevice)))
        return real(dst, dstDevice, src, srcDevice, count, stream);
    parked = stream_parked(stream);
    if (fs_unlikely(parked || past_block_extent(dst, count) || past_block_extent(src, count)))
        return refused(real(dst, dstDevice, src, srcDevice, 0, stream), parked);
    e = real(dst, dstDevice, src, srcDevice, count, stream);
    if (e == cudaSuccess) fs_stream_record_uses(dst, src, stream, false);
    return e;
}

static cudaError_t memset_async(void *p, int value, size_t count, cudaStream_t s, bool pt,
                                __typeof__(&cudaMemsetAsync) real)
{
    bool parked;
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    parked = stream_parked(s);
    if (fs_unlikely(parked || past_block_extent(p, count)))
        return refused(real(p, value, 0, s), parked);
    e = real(p, value, count, s);
    if (e == cudaSuccess) fs_stream_record_uses(p, NULL, s, pt);
    return e;
}

FS_EXPORT cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return memset_async(devPtr, value, count, stream, false, FS_REAL(cudaMemsetAsync));
}

FS_EXPORT cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count,
                                           cudaStream_t stream)
{
    return memset_async(devPtr, value, count, stream, true,
                        FS_REAL_AS(cudaMemsetAsync, "cudaMemsetAsync_ptsz"));
}

static cudaError_t memset_2d_async(void *p, size_t pitch, int value, size_t width, size_t height,
                                   cudaStream_t s, bool pt, __typeof__(&cudaMemset2DAsync) real)
{
    bool parked;
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    if (bad_pitch(width, height, pitch)) return real(p, pitch, value, width, height, s);
    parked = stream_parked(s);
    if (fs_unlikely(parked || past_block_extent(p, span_2d(pitch, width, height))))
        return refused(real(p, pitch, value, width, 0, s), parked);
    e = real(p, pitch, value, width, height, s);
    if (e == cudaSuccess) fs_stream_record_uses(p, NULL, s, pt);
    return e;
}

FS_EXPORT cudaError_t cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width,
                                        size_t height, cudaStream_t stream)
{
    return memset_2d_async(devPtr, pitch, value, width, height, stream, false,
                           FS_REAL(cudaMemset2DAsync));
}

FS_EXPORT cudaError_t cudaMemset2DAsync_ptsz(void *devPtr, size_t pitch, int value, size_t width,
                                             size_t height, cudaStream_t stream)
{
    return memset_2d_async(devPtr, pitch, value, width, height, stream, true,
                           FS_REAL_AS(cudaMemset2DAsync, "cudaMemset2DAsync_ptsz"));
}

/* Synchronous copies and sets run on the legacy (or per-thread) stream,
 * which every fence covers; only the block extents need the shim. */

static cudaError_t copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                        __typeof__(&cudaMemcpy) real)
{
    if (!real) return cudaErrorInitializationError;
    if (fs_unlikely(!bad_kind(kind) &&
                    (past_block_extent(dst, count) || past_block_extent(src, count))))
        return refused(real(dst, src, 0, kind), false);
    return real(dst, src, count, kind);
}

FS_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return copy(dst, src, count, kind, FS_REAL(cudaMemcpy));
}

FS_EXPORT cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count,
                                      enum cudaMemcpyKind kind)
{
    return copy(dst, src, count, kind, FS_REAL_AS(cudaMemcpy, "cudaMemcpy_ptds"));
}

static cudaError_t copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t height, enum cudaMemcpyKind kind, __typeof__(&cudaMemcpy2D) real)
{
    if (!real) return cudaErrorInitializationError;
    if (!bad_pitch(width, height, dpitch) && !bad_pitch(width, height, spitch) && !bad_kind(kind) &&
        fs_unlikely(past_block_extent(dst, span_2d(dpitch, width, height)) ||
                    past_block_extent(src, span_2d(spitch, width, height))))
        return refused(real(dst, dpitch, src, spitch, width, 0, kind), false);
    return real(dst, dpitch, src, spitch, width, height, kind);
}

FS_EXPORT cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind, FS_REAL(cudaMemcpy2D));
}

FS_EXPORT cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
                                        size_t width, size_t height, enum cudaMemcpyKind kind)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind,
                   FS_REAL_AS(cudaMemcpy2D, "cudaMemcpy2D_ptds"));
}

FS_EXPORT cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice,
                                     size_t count)
{
    __typeof__(&cudaMemcpyPeer) real = FS_REAL(cudaMemcpyPeer);

    if (!real) return cudaErrorInitializationError;
    if (fs_unlikely(bad_peer(dstDevice, srcDevice)))
        return real(dst, dstDevice, src, srcDevice, count);
    if (fs_unlikely(past_block_extent(dst, count) || past_block_extent(src, count)))
        return refused(real(dst, dstDevice, src, srcDevice, 0), false);
    return real(dst, dstDevice, src, srcDevice, count);
}

static cudaError_t set(void *p, int value, size_t count, __typeof__(&cudaMemset) real)
{
    if (!real) return cudaErrorInitializationError;
    if (fs_unlikely(past_block_extent(p, count))) return refused(real(p, value, 0), false);
    return real(p, value, count);
}

FS_EXPORT cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    return set(devPtr, value, count, FS_REAL(cudaMemset));
}

FS_EXPORT cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    return set(devPtr, value, count, FS_REAL_AS(cudaMemset, "cudaMemset_ptds"));
}

static cudaError_t set_2d(void *p, size_t pitch, int value, size_t width, size_t height,
                          __typeof__(&cudaMemset2D) real)
{
    if (!real) return cudaErrorInitializationError;
    if (!bad_pitch(width, height, pitch) &&
        fs_unlikely(past_block_extent(p, span_2d(pitch, width, height))))
        return refused(real(p, pitch, value, width, 0), false);
    return real(p, pitch, value, width, height);
}

FS_EXPORT cudaError_t cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width,
                                   size_t height)
{
    return set_2d(devPtr, pitch, value, width, height, FS_REAL(cudaMemset2D));
}

FS_EXPORT cudaError_t cudaMemset2D_ptds(void *devPtr, size_t pitch, int value, size_t width,
                                        size_t height)
{
    return set_2d(devPtr, pitch, value, width, height,
                  FS_REAL_AS(cudaMemset2D, "cudaMemset2D_ptds"));
}

/* ---- other calls on a stream ---- */

static cudaError_t query(cudaStream_t s, __typeof__(&cudaStreamQuery) real)
{
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(s)) return destroyed_stream_error();
    return real(s);
}

FS_EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    return query(stream, FS_REAL(cudaStreamQuery));
}

FS_EXPORT cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream)
{
    return query(stream, FS_REAL_AS(cudaStreamQuery, "cudaStreamQuery_ptsz"));
}

/* A destroyed event on a parked stream is cudaErrorInvalidResourceHandle
 * whichever the runtime looks at first. */
static cudaError_t event_record(cudaEvent_t event, cudaStream_t s,
                                __typeof__(&cudaEventRecord) real)
{
    if (!real) return cudaErrorInitializationError;
    if (stream_parked(s)) return destroyed_stream_error();
    return real(event, s);
}

FS_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    return event_record(event, stream, FS_REAL(cudaEventRecord));
}

FS_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    return event_record(event, stream, FS_REAL_AS(cudaEventRecord, "cudaEventRecord_ptsz"));
}

static cudaError_t event_record_with_flags(cudaEvent_t event, cudaStream_t s, unsigned flags,
                                           __typeof__(&cudaEventRecordWithFlags) real)
{
    if (!real) return cudaErrorInitializationError;
    if (!(flags & ~(unsigned)cudaEventRecordExternal) && stream_parked(s))
        return destroyed_stream_error();
    return real(event, s, flags);
}

FS_EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                               unsigned int flags)
{
    return event_record_with_flags(event, stream, flags, FS_REAL(cudaEventRecordWithFlags));
}

FS_EXPORT cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
                                                    unsigned int flags)
{
    return event_record_with_flags(
        event, stream, flags,
        FS_REAL_AS(cudaEventRecordWithFlags, "cudaEventRecordWithFlags_ptsz"));
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
        fs_host_synced(dev); /* the allocator came up meanwhile, or no device known */
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
        fs_host_synced(dev);
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
    if (e == cudaSuccess) fs_host_synced(-1);
    return e;
}

/* ---- graph capture ---- */

/* A capture of a parked stream fails as on a destroyed stream, after the
 * mode (or the graph's out-pointer) the runtime checks first. */
static bool capture_mode_valid(enum cudaStreamCaptureMode mode)
{
    return (unsigned)mode <= cudaStreamCaptureModeRelaxed;
}

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
    if (capture_mode_valid(mode) && stream_parked(stream)) return destroyed_stream_error();
    return begin_capture(stream, false, mode, real(stream, mode));
}

FS_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream,
                                                  enum cudaStreamCaptureMode mode)
{
    __typeof__(&cudaStreamBeginCapture) real =
        FS_REAL_AS(cudaStreamBeginCapture, "cudaStreamBeginCapture_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (capture_mode_valid(mode) && stream_parked(stream)) return destroyed_stream_error();
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
    if (capture_mode_valid(mode) && stream_parked(stream)) return destroyed_stream_error();
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
    if (capture_mode_valid(mode) && stream_parked(stream)) return destroyed_stream_error();
    return begin_capture(stream, true, mode,
                         real(stream, graph, dependencies, dependencyData, numDependencies, mode));
}

FS_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    __typeof__(&cudaStreamEndCapture) real = FS_REAL(cudaStreamEndCapture);
    if (!real) return cudaErrorInitializationError;
    if (pGraph && stream_parked(stream)) return destroyed_stream_error();
    return end_capture(stream, false, real(stream, pGraph));
}

FS_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    __typeof__(&cudaStreamEndCapture) real =
        FS_REAL_AS(cudaStreamEndCapture, "cudaStreamEndCapture_ptsz");
    if (!real) return cudaErrorInitializationError;
    if (pGraph && stream_parked(stream)) return destroyed_stream_error();
    return end_capture(stream, true, real(stream, pGraph));
}
