/* traced.c - the trace-only functions of the hook table (hooks.h): what the
 * loaded objects' slots hold, and what driver lookups hand out, while
 * `fsdpshim attach` traces through the slots (got.c).
 *
 * Each calls the real function (the table's, never a slot's old value,
 * which under lazy binding is a PLT stub that would rebind the slot) and
 * writes what succeeded through passive.c; a free takes its block out of the
 * live ones before the call (passive.h) and puts it back if the call fails.
 * Nothing is served: the memory is
 * the program's runtime's, driver's or NCCL's. A function handed out stays
 * with the program after the detach; the trace is closed then, and it only
 * passes the call on. */
#include "../core/hooks.h"
#include "../core/trace_glue.h"
#include "passive.h"

/* The legacy stream is 0 in traces, as in the CUDA API. */
static uint64_t stream_value(const void *s)
{
    return s == (const void *)cudaStreamLegacy ? 0 : (uint64_t)(uintptr_t)s;
}

/* The runtime's current device: the shim's own per-thread cache is kept
 * by entry points that are not in effect here. */
static int runtime_device(void)
{
    __typeof__(&cudaGetDevice) get =
        (__typeof__(&cudaGetDevice))fs_hook_real(FS_HOOK_CUDA_GET_DEVICE);
    int d = -1;

    if (!get || get(&d) != cudaSuccess) return -1;
    return d;
}

/* The device of the calling thread's current context, where the driver's
 * memory calls work. */
static int context_device(void)
{
    __typeof__(&cuCtxGetDevice) get =
        (__typeof__(&cuCtxGetDevice))fs_hook_real(FS_HOOK_CU_CTX_GET_DEVICE);
    CUdevice d = -1;

    if (!get || get(&d) != CUDA_SUCCESS) return -1;
    return d;
}

/* ---- the runtime ---------------------------------------------------------- */

static cudaError_t fs_traced_cuda_malloc(void **p, size_t size)
{
    __typeof__(&cudaMalloc) real = (__typeof__(&cudaMalloc))fs_hook_real(FS_HOOK_CUDA_MALLOC);

    fs_passive_enter();
    cudaError_t e = real(p, size);
    if (e == cudaSuccess && p) fs_passive_alloc(runtime_device(), 0, (uintptr_t)*p, size, false);
    return e;
}
FS_HOOK_FN(FS_HOOK_CUDA_MALLOC, NULL, fs_traced_cuda_malloc);

static cudaError_t fs_traced_cuda_free(void *p)
{
    __typeof__(&cudaFree) real = (__typeof__(&cudaFree))fs_hook_real(FS_HOOK_CUDA_FREE);

    fs_passive_free_enter((uintptr_t)p);
    cudaError_t e = real(p);
    if (e == cudaSuccess && p)
        fs_passive_free(runtime_device(), 0, (uintptr_t)p, false);
    else
        fs_passive_free_failed();
    return e;
}
FS_HOOK_FN(FS_HOOK_CUDA_FREE, NULL, fs_traced_cuda_free);

static cudaError_t malloc_async(enum fs_hook_id id, void **p, size_t size, cudaStream_t s)
{
    __typeof__(&cudaMallocAsync) real = (__typeof__(&cudaMallocAsync))fs_hook_real(id);

    fs_passive_enter();
    cudaError_t e = real(p, size, s);
    if (e == cudaSuccess && p)
        fs_passive_alloc(runtime_device(), stream_value(s), (uintptr_t)*p, size, true);
    return e;
}

static cudaError_t fs_traced_cuda_malloc_async(void **p, size_t size, cudaStream_t s)
{
    return malloc_async(FS_HOOK_CUDA_MALLOC_ASYNC, p, size, s);
}
FS_HOOK_FN(FS_HOOK_CUDA_MALLOC_ASYNC, NULL, fs_traced_cuda_malloc_async);

static cudaError_t fs_traced_cuda_malloc_async_ptsz(void **p, size_t size, cudaStream_t s)
{
    return malloc_async(FS_HOOK_CUDA_MALLOC_ASYNC_PTSZ, p, size, s);
}
FS_HOOK_FN(FS_HOOK_CUDA_MALLOC_ASYNC_PTSZ, NULL, fs_traced_cuda_malloc_async_ptsz);

static cudaError_t fs_traced_cuda_malloc_from_pool(void **p, size_t size, cudaMemPool_t pool,
                                                   cudaStream_t s)
{
    __typeof__(&cudaMallocFromPoolAsync) real =
        (__typeof__(&cudaMallocFromPoolAsync))fs_hook_real(FS_HOOK_CUDA_MALLOC_FROM_POOL);

    fs_passive_enter();
    cudaError_t e = real(p, size, pool, s);
    if (e == cudaSuccess && p)
        fs_passive_alloc(runtime_device(), stream_value(s), (uintptr_t)*p, size, true);
    return e;
}
FS_HOOK_FN(FS_HOOK_CUDA_MALLOC_FROM_POOL, NULL, fs_traced_cuda_malloc_from_pool);

static cudaError_t free_async(enum fs_hook_id id, void *p, cudaStream_t s)
{
    __typeof__(&cudaFreeAsync) real = (__typeof__(&cudaFreeAsync))fs_hook_real(id);

    fs_passive_free_enter((uintptr_t)p);
    cudaError_t e = real(p, s);
    if (e == cudaSuccess && p)
        fs_passive_free(runtime_device(), stream_value(s), (uintptr_t)p, true);
    else
        fs_passive_free_failed();
    return e;
}

static cudaError_t fs_traced_cuda_free_async(void *p, cudaStream_t s)
{
    return free_async(FS_HOOK_CUDA_FREE_ASYNC, p, s);
}
FS_HOOK_FN(FS_HOOK_CUDA_FREE_ASYNC, NULL, fs_traced_cuda_free_async);

static cudaError_t fs_traced_cuda_free_async_ptsz(void *p, cudaStream_t s)
{
    return free_async(FS_HOOK_CUDA_FREE_ASYNC_PTSZ, p, s);
}
FS_HOOK_FN(FS_HOOK_CUDA_FREE_ASYNC_PTSZ, NULL, fs_traced_cuda_free_async_ptsz);

static cudaError_t stream_created(cudaError_t e, cudaStream_t *s, unsigned flags, int priority)
{
    if (e == cudaSuccess && s) fs_trace_stream(true, runtime_device(), *s, flags, priority, false);
    return e;
}

static cudaError_t fs_traced_cuda_stream_create(cudaStream_t *s)
{
    __typeof__(&cudaStreamCreate) real =
        (__typeof__(&cudaStreamCreate))fs_hook_real(FS_HOOK_CUDA_STREAM_CREATE);

    return stream_created(real(s), s, 0, 0);
}
FS_HOOK_FN(FS_HOOK_CUDA_STREAM_CREATE, NULL, fs_traced_cuda_stream_create);

static cudaError_t fs_traced_cuda_stream_create_with_flags(cudaStream_t *s, unsigned flags)
{
    __typeof__(&cudaStreamCreateWithFlags) real =
        (__typeof__(&cudaStreamCreateWithFlags))fs_hook_real(FS_HOOK_CUDA_STREAM_CREATE_WITH_FLAGS);

    return stream_created(real(s, flags), s, flags, 0);
}
FS_HOOK_FN(FS_HOOK_CUDA_STREAM_CREATE_WITH_FLAGS, NULL, fs_traced_cuda_stream_create_with_flags);

static cudaError_t fs_traced_cuda_stream_create_with_priority(cudaStream_t *s, unsigned flags,
                                                              int priority)
{
    __typeof__(&cudaStreamCreateWithPriority) real =
        (__typeof__(&cudaStreamCreateWithPriority))fs_hook_real(
            FS_HOOK_CUDA_STREAM_CREATE_WITH_PRIORITY);

    return stream_created(real(s, flags, priority), s, flags, priority);
}
FS_HOOK_FN(FS_HOOK_CUDA_STREAM_CREATE_WITH_PRIORITY, NULL,
           fs_traced_cuda_stream_create_with_priority);

static cudaError_t fs_traced_cuda_stream_destroy(cudaStream_t s)
{
    __typeof__(&cudaStreamDestroy) real =
        (__typeof__(&cudaStreamDestroy))fs_hook_real(FS_HOOK_CUDA_STREAM_DESTROY);

    cudaError_t e = real(s);
    if (e == cudaSuccess) fs_trace_stream(false, runtime_device(), s, 0, 0, false);
    return e;
}
FS_HOOK_FN(FS_HOOK_CUDA_STREAM_DESTROY, NULL, fs_traced_cuda_stream_destroy);

/* ---- the driver (reached by lookup, or by symbol with -lcuda) ---------------- */

static CUresult fs_traced_cu_mem_alloc(CUdeviceptr *dptr, size_t size)
{
    __typeof__(&cuMemAlloc_v2) real =
        (__typeof__(&cuMemAlloc_v2))fs_hook_real(FS_HOOK_CU_MEM_ALLOC);

    fs_passive_enter();
    CUresult r = real(dptr, size);
    if (r == CUDA_SUCCESS && dptr) fs_passive_alloc(context_device(), 0, *dptr, size, false);
    return r;
}
FS_HOOK_FN(FS_HOOK_CU_MEM_ALLOC, NULL, fs_traced_cu_mem_alloc);

static CUresult fs_traced_cu_mem_free(CUdeviceptr dptr)
{
    __typeof__(&cuMemFree_v2) real = (__typeof__(&cuMemFree_v2))fs_hook_real(FS_HOOK_CU_MEM_FREE);

    fs_passive_free_enter(dptr);
    CUresult r = real(dptr);
    if (r == CUDA_SUCCESS && dptr)
        fs_passive_free(context_device(), 0, dptr, false);
    else
        fs_passive_free_failed();
    return r;
}
FS_HOOK_FN(FS_HOOK_CU_MEM_FREE, NULL, fs_traced_cu_mem_free);

static CUresult mem_alloc_async(enum fs_hook_id id, CUdeviceptr *dptr, size_t size, CUstream s)
{
    __typeof__(&cuMemAllocAsync) real = (__typeof__(&cuMemAllocAsync))fs_hook_real(id);

    fs_passive_enter();
    CUresult r = real(dptr, size, s);
    if (r == CUDA_SUCCESS && dptr)
        fs_passive_alloc(context_device(), stream_value(s), *dptr, size, true);
    return r;
}

static CUresult fs_traced_cu_mem_alloc_async(CUdeviceptr *dptr, size_t size, CUstream s)
{
    return mem_alloc_async(FS_HOOK_CU_MEM_ALLOC_ASYNC, dptr, size, s);
}
FS_HOOK_FN(FS_HOOK_CU_MEM_ALLOC_ASYNC, NULL, fs_traced_cu_mem_alloc_async);

static CUresult fs_traced_cu_mem_alloc_async_ptsz(CUdeviceptr *dptr, size_t size, CUstream s)
{
    return mem_alloc_async(FS_HOOK_CU_MEM_ALLOC_ASYNC_PTSZ, dptr, size, s);
}
FS_HOOK_FN(FS_HOOK_CU_MEM_ALLOC_ASYNC_PTSZ, NULL, fs_traced_cu_mem_alloc_async_ptsz);

static CUresult mem_free_async(enum fs_hook_id id, CUdeviceptr dptr, CUstream s)
{
    __typeof__(&cuMemFreeAsync) real = (__typeof__(&cuMemFreeAsync))fs_hook_real(id);

    fs_passive_free_enter(dptr);
    CUresult r = real(dptr, s);
    if (r == CUDA_SUCCESS && dptr)
        fs_passive_free(context_device(), stream_value(s), dptr, true);
    else
        fs_passive_free_failed();
    return r;
}

static CUresult fs_traced_cu_mem_free_async(CUdeviceptr dptr, CUstream s)
{
    return mem_free_async(FS_HOOK_CU_MEM_FREE_ASYNC, dptr, s);
}
FS_HOOK_FN(FS_HOOK_CU_MEM_FREE_ASYNC, NULL, fs_traced_cu_mem_free_async);

static CUresult fs_traced_cu_mem_free_async_ptsz(CUdeviceptr dptr, CUstream s)
{
    return mem_free_async(FS_HOOK_CU_MEM_FREE_ASYNC_PTSZ, dptr, s);
}
FS_HOOK_FN(FS_HOOK_CU_MEM_FREE_ASYNC_PTSZ, NULL, fs_traced_cu_mem_free_async_ptsz);

/* ---- NCCL ------------------------------------------------------------------ */

/* The buffers NCCL's user buffer registration wants; the device is the
 * runtime's current one, where ncclMemAlloc allocates. */
static ncclResult_t fs_traced_nccl_mem_alloc(void **p, size_t size)
{
    __typeof__(&ncclMemAlloc) real =
        (__typeof__(&ncclMemAlloc))fs_hook_real(FS_HOOK_NCCL_MEM_ALLOC);

    fs_passive_enter();
    ncclResult_t r = real(p, size);
    if (r == ncclSuccess && p) fs_passive_alloc(runtime_device(), 0, (uintptr_t)*p, size, false);
    return r;
}
FS_HOOK_FN(FS_HOOK_NCCL_MEM_ALLOC, NULL, fs_traced_nccl_mem_alloc);

static ncclResult_t fs_traced_nccl_mem_free(void *p)
{
    __typeof__(&ncclMemFree) real = (__typeof__(&ncclMemFree))fs_hook_real(FS_HOOK_NCCL_MEM_FREE);

    fs_passive_free_enter((uintptr_t)p);
    ncclResult_t r = real(p);
    if (r == ncclSuccess && p)
        fs_passive_free(runtime_device(), 0, (uintptr_t)p, false);
    else
        fs_passive_free_failed();
    return r;
}
FS_HOOK_FN(FS_HOOK_NCCL_MEM_FREE, NULL, fs_traced_nccl_mem_free);
