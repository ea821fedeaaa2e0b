/* driver_work.c - the driver's calls that put work on a stream or wait for
 * it, for a process with no CUDA runtime the shim can see: the allocator
 * must hear of them there as it hears of the runtime's (runtime/
 * cuda_streams.c), or it hands a block out again while another stream
 * still reads it.
 *
 * A program built with nvcc's default link carries the runtime inside it:
 * its cudaMemcpyAsync, its kernel launches and its cudaStreamSynchronize
 * are driver calls the shim sees only by lookup (cuda_driver.c). Seen on an
 * H200: without these hooks, a block freed on an idle stream while a copy
 * on another stream still read it was handed out again on the idle stream
 * and overwritten (tests/integration/trace/static_gpu.sh, integrity
 * memcpy). So, as for the runtime's calls:
 * - copies and sets record a use of the shim's blocks they touch on their
 *   stream (record-stream), and mark the stream busy;
 * - kernel launches, host functions, graph launches and event waits mark
 *   the stream busy for the frees' fences (their memory is not known);
 * - host synchronisation lets the allocator retire deferred frees;
 * - a new stream is made known at once, before any work is put on it: it
 *   must wait for what every stream was made to wait for (a cuMemAlloc
 *   that took a block whose free was still pending).
 * Each is the real call, then the note; a call that failed is not noted.
 *
 * The lookups hand these out only while no CUDA runtime is loaded (core/hooks.c,
 * FS_HOOK_NO_RUNTIME): where one is, the runtime's own entry points tell
 * the allocator, and the driver calls other libraries make (a kernel
 * launcher's cuLaunchKernel) go to the driver as before. The _ptsz
 * variants take stream 0 as the calling thread's per-thread stream. */
#include "../core/hooks.h"
#include "../core/shim.h"

#define REAL(id, type) ((type)fs_hook_real(id))
#define DEVPTR(p)      ((const void *)(uintptr_t)(p))

/* ---- copies and sets: the stream, and the memory it touches ---- */

/* The device memory one side of a 2-D or 3-D copy names (NULL: host memory
 * or an array, which are not the shim's). */
static const void *copy_side(CUmemorytype type, CUdeviceptr device)
{
    return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED ? DEVPTR(device) : NULL;
}

static CUresult copy(CUresult r, const void *dst, const void *src, CUstream s, bool pt)
{
    if (r == CUDA_SUCCESS) fs_stream_record_uses(dst, src, (cudaStream_t)s, pt);
    return r;
}

typedef CUresult (*memcpy_fn)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t, CUstream);
typedef CUresult (*peer_fn)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
typedef CUresult (*memcpy_2d_fn)(const CUDA_MEMCPY2D *, CUstream);
typedef CUresult (*memcpy_3d_fn)(const CUDA_MEMCPY3D *, CUstream);
typedef CUresult (*memset8_fn)(CUdeviceptr, unsigned char, size_t, CUstream);
typedef CUresult (*memset16_fn)(CUdeviceptr, unsigned short, size_t, CUstream);
typedef CUresult (*memset32_fn)(CUdeviceptr, unsigned int, size_t, CUstream);
typedef CUresult (*memset2d8_fn)(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream);
typedef CUresult (*memset2d16_fn)(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream);
typedef CUresult (*memset2d32_fn)(CUdeviceptr, size_t, unsigned int, size_t, size_t, CUstream);

/* Each copy or set twice: the plain entry point and its _ptsz variant. */
#define COPY_PAIR(name, id, params, args, dst, src, fn_type)                                       \
    static CUresult fs_drv_##name params                                                           \
    {                                                                                              \
        return copy(REAL(id, fn_type) args, dst, src, s, false);                                   \
    }                                                                                              \
    FS_HOOK_FN(id, fs_drv_##name, NULL);                                                           \
    static CUresult fs_drv_##name##_ptsz params                                                    \
    {                                                                                              \
        return copy(REAL(id##_PTSZ, fn_type) args, dst, src, s, true);                             \
    }                                                                                              \
    FS_HOOK_FN(id##_PTSZ, fs_drv_##name##_ptsz, NULL);

COPY_PAIR(memcpy_async, FS_HOOK_CU_MEMCPY_ASYNC,
          (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s), DEVPTR(dst),
          DEVPTR(src), memcpy_fn)
COPY_PAIR(memcpy_htod_async, FS_HOOK_CU_MEMCPY_HTOD_ASYNC,
          (CUdeviceptr dst, const void *src, size_t n, CUstream s), (dst, src, n, s), DEVPTR(dst),
          NULL, htod_fn)
COPY_PAIR(memcpy_dtoh_async, FS_HOOK_CU_MEMCPY_DTOH_ASYNC,
          (void *dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s), NULL, DEVPTR(src),
          dtoh_fn)
COPY_PAIR(memcpy_dtod_async, FS_HOOK_CU_MEMCPY_DTOD_ASYNC,
          (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), (dst, src, n, s), DEVPTR(dst),
          DEVPTR(src), memcpy_fn)
COPY_PAIR(memcpy_peer_async, FS_HOOK_CU_MEMCPY_PEER_ASYNC,
          (CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t n,
           CUstream s),
          (dst, dst_ctx, src, src_ctx, n, s), DEVPTR(dst), DEVPTR(src), peer_fn)
COPY_PAIR(memcpy_2d_async, FS_HOOK_CU_MEMCPY_2D_ASYNC, (const CUDA_MEMCPY2D *c, CUstream s), (c, s),
          c ? copy_side(c->dstMemoryType, c->dstDevice) : NULL,
          c ? copy_side(c->srcMemoryType, c->srcDevice) : NULL, memcpy_2d_fn)
COPY_PAIR(memcpy_3d_async, FS_HOOK_CU_MEMCPY_3D_ASYNC, (const CUDA_MEMCPY3D *c, CUstream s), (c, s),
          c ? copy_side(c->dstMemoryType, c->dstDevice) : NULL,
          c ? copy_side(c->srcMemoryType, c->srcDevice) : NULL, memcpy_3d_fn)
COPY_PAIR(memset_d8_async, FS_HOOK_CU_MEMSET_D8_ASYNC,
          (CUdeviceptr dst, unsigned char v, size_t n, CUstream s), (dst, v, n, s), DEVPTR(dst),
          NULL, memset8_fn)
COPY_PAIR(memset_d16_async, FS_HOOK_CU_MEMSET_D16_ASYNC,
          (CUdeviceptr dst, unsigned short v, size_t n, CUstream s), (dst, v, n, s), DEVPTR(dst),
          NULL, memset16_fn)
COPY_PAIR(memset_d32_async, FS_HOOK_CU_MEMSET_D32_ASYNC,
          (CUdeviceptr dst, unsigned int v, size_t n, CUstream s), (dst, v, n, s), DEVPTR(dst),
          NULL, memset32_fn)
COPY_PAIR(memset_d2d8_async, FS_HOOK_CU_MEMSET_D2D8_ASYNC,
          (CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s),
          (dst, pitch, v, w, h, s), DEVPTR(dst), NULL, memset2d8_fn)
COPY_PAIR(memset_d2d16_async, FS_HOOK_CU_MEMSET_D2D16_ASYNC,
          (CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s),
          (dst, pitch, v, w, h, s), DEVPTR(dst), NULL, memset2d16_fn)
COPY_PAIR(memset_d2d32_async, FS_HOOK_CU_MEMSET_D2D32_ASYNC,
          (CUdeviceptr dst, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s),
          (dst, pitch, v, w, h, s), DEVPTR(dst), NULL, memset2d32_fn)

/* ---- other work: the stream only ---- */

static CUresult work(CUresult r, CUstream s, bool pt)
{
    if (r == CUDA_SUCCESS) fs_stream_note_work((cudaStream_t)s, pt);
    return r;
}

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*launch_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*launch_coop_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, CUstream, void **);
typedef CUresult (*host_fn)(CUstream, CUhostFn, void *);
typedef CUresult (*graph_launch_fn)(CUgraphExec, CUstream);
typedef CUresult (*wait_event_fn)(CUstream, CUevent, unsigned);

#define WORK_PAIR(name, id, params, args, stream, fn_type)                                         \
    static CUresult fs_drv_##name params                                                           \
    {                                                                                              \
        return work(REAL(id, fn_type) args, stream, false);                                        \
    }                                                                                              \
    FS_HOOK_FN(id, fs_drv_##name, NULL);                                                           \
    static CUresult fs_drv_##name##_ptsz params                                                    \
    {                                                                                              \
        return work(REAL(id##_PTSZ, fn_type) args, stream, true);                                  \
    }                                                                                              \
    FS_HOOK_FN(id##_PTSZ, fs_drv_##name##_ptsz, NULL);

WORK_PAIR(launch_kernel, FS_HOOK_CU_LAUNCH_KERNEL,
          (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
           unsigned bz, unsigned shared, CUstream s, void **params, void **extra),
          (f, gx, gy, gz, bx, by, bz, shared, s, params, extra), s, launch_fn)
WORK_PAIR(launch_kernel_ex, FS_HOOK_CU_LAUNCH_KERNEL_EX,
          (const CUlaunchConfig *config, CUfunction f, void **params, void **extra),
          (config, f, params, extra), config ? config->hStream : NULL, launch_ex_fn)
WORK_PAIR(launch_cooperative_kernel, FS_HOOK_CU_LAUNCH_COOPERATIVE_KERNEL,
          (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
           unsigned bz, unsigned shared, CUstream s, void **params),
          (f, gx, gy, gz, bx, by, bz, shared, s, params), s, launch_coop_fn)
WORK_PAIR(launch_host_func, FS_HOOK_CU_LAUNCH_HOST_FUNC, (CUstream s, CUhostFn fn, void *user),
          (s, fn, user), s, host_fn)
WORK_PAIR(graph_launch, FS_HOOK_CU_GRAPH_LAUNCH, (CUgraphExec g, CUstream s), (g, s), s,
          graph_launch_fn)
WORK_PAIR(stream_wait_event, FS_HOOK_CU_STREAM_WAIT_EVENT,
          (CUstream s, CUevent event, unsigned flags), (s, event, flags), s, wait_event_fn)

/* ---- host synchronisation: deferred frees may have completed ---- */

static CUresult synced(CUresult r)
{
    if (r == CUDA_SUCCESS) fs_host_synced(-1);
    return r;
}

static CUresult fs_drv_stream_synchronize(CUstream s)
{
    return synced(REAL(FS_HOOK_CU_STREAM_SYNCHRONIZE, CUresult(*)(CUstream))(s));
}
FS_HOOK_FN(FS_HOOK_CU_STREAM_SYNCHRONIZE, fs_drv_stream_synchronize, NULL);

static CUresult fs_drv_stream_synchronize_ptsz(CUstream s)
{
    return synced(REAL(FS_HOOK_CU_STREAM_SYNCHRONIZE_PTSZ, CUresult(*)(CUstream))(s));
}
FS_HOOK_FN(FS_HOOK_CU_STREAM_SYNCHRONIZE_PTSZ, fs_drv_stream_synchronize_ptsz, NULL);

static CUresult fs_drv_event_synchronize(CUevent event)
{
    return synced(REAL(FS_HOOK_CU_EVENT_SYNCHRONIZE, CUresult(*)(CUevent))(event));
}
FS_HOOK_FN(FS_HOOK_CU_EVENT_SYNCHRONIZE, fs_drv_event_synchronize, NULL);

static CUresult fs_drv_ctx_synchronize(void)
{
    return synced(REAL(FS_HOOK_CU_CTX_SYNCHRONIZE, CUresult(*)(void))());
}
FS_HOOK_FN(FS_HOOK_CU_CTX_SYNCHRONIZE, fs_drv_ctx_synchronize, NULL);

/* ---- new streams ---- */

static CUresult created(CUresult r, CUstream *s)
{
    if (r == CUDA_SUCCESS && fs_shim_enter()) {
        fs_stream_learn((cudaStream_t)*s);
        fs_shim_leave();
    }
    return r;
}

static CUresult fs_drv_stream_create(CUstream *s, unsigned flags)
{
    return created(REAL(FS_HOOK_CU_STREAM_CREATE, CUresult(*)(CUstream *, unsigned))(s, flags), s);
}
FS_HOOK_FN(FS_HOOK_CU_STREAM_CREATE, fs_drv_stream_create, NULL);

static CUresult fs_drv_stream_create_with_priority(CUstream *s, unsigned flags, int priority)
{
    return created(REAL(FS_HOOK_CU_STREAM_CREATE_WITH_PRIORITY,
                        CUresult(*)(CUstream *, unsigned, int))(s, flags, priority),
                   s);
}
FS_HOOK_FN(FS_HOOK_CU_STREAM_CREATE_WITH_PRIORITY, fs_drv_stream_create_with_priority, NULL);
