/* hooks.h - the one table of the entry points that the shim hands out in
 * place of the real ones, by lookup or by slot (hooks.c), and the functions
 * the table names, grouped by the file that owns them. */
#ifndef FS_HOOKS_H
#define FS_HOOKS_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdbool.h>

/* The API an entry point belongs to: where its real function is found. */
enum fs_api {
    FS_API_DRIVER,  /* libcuda, adopted once (driver/cuda_driver.c) */
    FS_API_RUNTIME, /* libcudart, through real.c */
    FS_API_NCCL,    /* libnccl, through real.c */
    FS_API_LOADER,  /* the C library's dlsym and dlvsym (driver/dlsym.c) */
};

/* The driver's entries come first, so that its lookups (hook_for in
 * driver/cuda_driver.c) search only them. */
enum fs_hook_id {
    FS_HOOK_CU_MEM_ALLOC,
    FS_HOOK_CU_MEM_FREE,
    FS_HOOK_CU_MEM_ALLOC_ASYNC,
    FS_HOOK_CU_MEM_ALLOC_ASYNC_PTSZ,
    FS_HOOK_CU_MEM_FREE_ASYNC,
    FS_HOOK_CU_MEM_FREE_ASYNC_PTSZ,
    FS_HOOK_CU_MEM_GET_INFO,
    FS_HOOK_CU_MEM_CREATE,
    FS_HOOK_CU_MEM_RELEASE,
    FS_HOOK_CU_MEM_MAP,
    FS_HOOK_CU_MEM_UNMAP,
    FS_HOOK_CU_MEM_ADDRESS_RESERVE,
    FS_HOOK_CU_MEM_ADDRESS_FREE,
    FS_HOOK_CU_GET_PROC_ADDRESS,
    FS_HOOK_CU_GET_PROC_ADDRESS_V2,
    FS_HOOK_CU_CTX_GET_DEVICE,
    /* work on streams and waits for it (driver/driver_work.c) */
    FS_HOOK_CU_MEMCPY_ASYNC,
    FS_HOOK_CU_MEMCPY_ASYNC_PTSZ,
    FS_HOOK_CU_MEMCPY_HTOD_ASYNC,
    FS_HOOK_CU_MEMCPY_HTOD_ASYNC_PTSZ,
    FS_HOOK_CU_MEMCPY_DTOH_ASYNC,
    FS_HOOK_CU_MEMCPY_DTOH_ASYNC_PTSZ,
    FS_HOOK_CU_MEMCPY_DTOD_ASYNC,
    FS_HOOK_CU_MEMCPY_DTOD_ASYNC_PTSZ,
    FS_HOOK_CU_MEMCPY_PEER_ASYNC,
    FS_HOOK_CU_MEMCPY_PEER_ASYNC_PTSZ,
    FS_HOOK_CU_MEMCPY_2D_ASYNC,
    FS_HOOK_CU_MEMCPY_2D_ASYNC_PTSZ,
    FS_HOOK_CU_MEMCPY_3D_ASYNC,
    FS_HOOK_CU_MEMCPY_3D_ASYNC_PTSZ,
    FS_HOOK_CU_MEMSET_D8_ASYNC,
    FS_HOOK_CU_MEMSET_D8_ASYNC_PTSZ,
    FS_HOOK_CU_MEMSET_D16_ASYNC,
    FS_HOOK_CU_MEMSET_D16_ASYNC_PTSZ,
    FS_HOOK_CU_MEMSET_D32_ASYNC,
    FS_HOOK_CU_MEMSET_D32_ASYNC_PTSZ,
    FS_HOOK_CU_MEMSET_D2D8_ASYNC,
    FS_HOOK_CU_MEMSET_D2D8_ASYNC_PTSZ,
    FS_HOOK_CU_MEMSET_D2D16_ASYNC,
    FS_HOOK_CU_MEMSET_D2D16_ASYNC_PTSZ,
    FS_HOOK_CU_MEMSET_D2D32_ASYNC,
    FS_HOOK_CU_MEMSET_D2D32_ASYNC_PTSZ,
    FS_HOOK_CU_LAUNCH_KERNEL,
    FS_HOOK_CU_LAUNCH_KERNEL_PTSZ,
    FS_HOOK_CU_LAUNCH_KERNEL_EX,
    FS_HOOK_CU_LAUNCH_KERNEL_EX_PTSZ,
    FS_HOOK_CU_LAUNCH_COOPERATIVE_KERNEL,
    FS_HOOK_CU_LAUNCH_COOPERATIVE_KERNEL_PTSZ,
    FS_HOOK_CU_LAUNCH_HOST_FUNC,
    FS_HOOK_CU_LAUNCH_HOST_FUNC_PTSZ,
    FS_HOOK_CU_GRAPH_LAUNCH,
    FS_HOOK_CU_GRAPH_LAUNCH_PTSZ,
    FS_HOOK_CU_STREAM_WAIT_EVENT,
    FS_HOOK_CU_STREAM_WAIT_EVENT_PTSZ,
    FS_HOOK_CU_STREAM_SYNCHRONIZE,
    FS_HOOK_CU_STREAM_SYNCHRONIZE_PTSZ,
    FS_HOOK_CU_EVENT_SYNCHRONIZE,
    FS_HOOK_CU_CTX_SYNCHRONIZE,
    FS_HOOK_CU_STREAM_CREATE,
    FS_HOOK_CU_STREAM_CREATE_WITH_PRIORITY,
    FS_HOOK_DRIVER_END, /* one past the driver's */
    FS_HOOK_CUDA_MALLOC = FS_HOOK_DRIVER_END,
    FS_HOOK_CUDA_FREE,
    FS_HOOK_CUDA_MALLOC_ASYNC,
    FS_HOOK_CUDA_MALLOC_ASYNC_PTSZ,
    FS_HOOK_CUDA_FREE_ASYNC,
    FS_HOOK_CUDA_FREE_ASYNC_PTSZ,
    FS_HOOK_CUDA_MALLOC_FROM_POOL,
    FS_HOOK_CUDA_STREAM_CREATE,
    FS_HOOK_CUDA_STREAM_CREATE_WITH_FLAGS,
    FS_HOOK_CUDA_STREAM_CREATE_WITH_PRIORITY,
    FS_HOOK_CUDA_STREAM_DESTROY,
    FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT,
    FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_PTSZ,
    FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_BY_VERSION,
    FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_BY_VERSION_PTSZ,
    FS_HOOK_CUDA_GET_DEVICE,
    FS_HOOK_NCCL_MEM_ALLOC,
    FS_HOOK_NCCL_MEM_FREE,
    FS_HOOK_DLSYM,
    FS_HOOK_DLVSYM,
    FS_HOOK_COUNT
};

/* FS_HOOK_LOOKUP: an entry point that hands out others. Its slots are
 * redirected in NCCL too, which reaches the driver only that way. */
#define FS_HOOK_LOOKUP 1u
/* FS_HOOK_NO_RUNTIME: `served` is handed out only while no CUDA runtime is
 * loaded (driver/driver_work.c says why). */
#define FS_HOOK_NO_RUNTIME 2u

struct fs_hook {
    const char *name; /* the exported ABI name */
    enum fs_api api;
    unsigned flags;
    /* What a driver lookup hands out in place of the real function while
     * the shim serves (preloaded); NULL: the real function. */
    void *served;
    /* The trace-only function: what a driver lookup hands out, and what
     * every slot of the entry point holds, while `fsdpshim attach` traces
     * through the slots (attach/got.c); NULL: the entry point is left alone
     * then. */
    void *traced;
    /* The real function once found, NULL before (and where the library has
     * none); set once, read without a lock. */
    void *real;
};

extern struct fs_hook fs_hooks[FS_HOOK_COUNT];

static inline void *fs_hook_real(enum fs_hook_id id)
{
    return __atomic_load_n(&fs_hooks[id].real, __ATOMIC_ACQUIRE);
}

/* ---- hooks.c ---- */
/* Finds the real functions of the entries of `api` that have none yet, among
 * the loaded objects (never loading one); returns how many have one. Takes
 * the loader's lock: not for a lookup path. */
int fs_hooks_resolve(enum fs_api api);
/* Whether driver lookups hand out the traced functions rather than the
 * served ones: set while `fsdpshim attach` traces through the slots. */
bool fs_hooks_tracing(void);
void fs_hooks_set_tracing(bool on);

/* ---- driver/cuda_driver.c ---- */
/* Adopts the loaded driver (libcuda.so*), if any and none is adopted yet:
 * the real functions of the driver's entries. */
void fs_driver_adopt_loaded(void);
/* Served: the driver's memory calls as their runtime counterparts. */
CUresult fs_drv_mem_alloc(CUdeviceptr *dptr, size_t size);
CUresult fs_drv_mem_free(CUdeviceptr dptr);
CUresult fs_drv_mem_alloc_async(CUdeviceptr *dptr, size_t size, CUstream stream);
CUresult fs_drv_mem_alloc_async_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream);
CUresult fs_drv_mem_free_async(CUdeviceptr dptr, CUstream stream);
CUresult fs_drv_mem_free_async_ptsz(CUdeviceptr dptr, CUstream stream);
CUresult fs_drv_mem_get_info(size_t *free, size_t *total);
/* Passed through and traced, served and traced alike: virtual memory. */
CUresult fs_drv_mem_create(CUmemGenericAllocationHandle *handle, size_t size,
                           const CUmemAllocationProp *prop, unsigned long long flags);
CUresult fs_drv_mem_release(CUmemGenericAllocationHandle handle);
CUresult fs_drv_mem_map(CUdeviceptr ptr, size_t size, size_t offset,
                        CUmemGenericAllocationHandle handle, unsigned long long flags);
CUresult fs_drv_mem_unmap(CUdeviceptr ptr, size_t size);
CUresult fs_drv_address_reserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                unsigned long long flags);
CUresult fs_drv_address_free(CUdeviceptr ptr, size_t size);
/* The lookups, whose answers are replaced in turn. */
CUresult fs_drv_get_proc_address(const char *symbol, void **pfn, int version, cuuint64_t flags);
CUresult fs_drv_get_proc_address_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status);
cudaError_t fs_get_driver_entry_point(const char *symbol, void **fn, unsigned long long flags,
                                      enum cudaDriverEntryPointQueryResult *status);
cudaError_t fs_get_driver_entry_point_ptsz(const char *symbol, void **fn, unsigned long long flags,
                                           enum cudaDriverEntryPointQueryResult *status);
cudaError_t fs_get_driver_entry_point_by_version(const char *symbol, void **fn,
                                                 unsigned int version, unsigned long long flags,
                                                 enum cudaDriverEntryPointQueryResult *status);
cudaError_t fs_get_driver_entry_point_by_version_ptsz(const char *symbol, void **fn,
                                                      unsigned int version,
                                                      unsigned long long flags,
                                                      enum cudaDriverEntryPointQueryResult *status);

/* ---- driver/driver_work.c ---- */
/* Served where no CUDA runtime is loaded: the driver's work on streams and
 * waits for it, told to the allocator as the runtime's are. */
#define FS_DRV_PAIR(name, params)                                                                  \
    CUresult fs_drv_##name params;                                                                 \
    CUresult fs_drv_##name##_ptsz params;
FS_DRV_PAIR(memcpy_async, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s))
FS_DRV_PAIR(memcpy_htod_async, (CUdeviceptr dst, const void *src, size_t n, CUstream s))
FS_DRV_PAIR(memcpy_dtoh_async, (void *dst, CUdeviceptr src, size_t n, CUstream s))
FS_DRV_PAIR(memcpy_dtod_async, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s))
FS_DRV_PAIR(memcpy_peer_async, (CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                CUcontext src_ctx, size_t n, CUstream s))
FS_DRV_PAIR(memcpy_2d_async, (const CUDA_MEMCPY2D *c, CUstream s))
FS_DRV_PAIR(memcpy_3d_async, (const CUDA_MEMCPY3D *c, CUstream s))
FS_DRV_PAIR(memset_d8_async, (CUdeviceptr dst, unsigned char v, size_t n, CUstream s))
FS_DRV_PAIR(memset_d16_async, (CUdeviceptr dst, unsigned short v, size_t n, CUstream s))
FS_DRV_PAIR(memset_d32_async, (CUdeviceptr dst, unsigned int v, size_t n, CUstream s))
FS_DRV_PAIR(memset_d2d8_async,
            (CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s))
FS_DRV_PAIR(memset_d2d16_async,
            (CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s))
FS_DRV_PAIR(memset_d2d32_async,
            (CUdeviceptr dst, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s))
FS_DRV_PAIR(launch_kernel,
            (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
             unsigned bz, unsigned shared, CUstream s, void **params, void **extra))
FS_DRV_PAIR(launch_kernel_ex,
            (const CUlaunchConfig *config, CUfunction f, void **params, void **extra))
FS_DRV_PAIR(launch_cooperative_kernel,
            (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
             unsigned bz, unsigned shared, CUstream s, void **params))
FS_DRV_PAIR(launch_host_func, (CUstream s, CUhostFn fn, void *user))
FS_DRV_PAIR(graph_launch, (CUgraphExec g, CUstream s))
FS_DRV_PAIR(stream_wait_event, (CUstream s, CUevent event, unsigned flags))
FS_DRV_PAIR(stream_synchronize, (CUstream s))
#undef FS_DRV_PAIR
CUresult fs_drv_event_synchronize(CUevent event);
CUresult fs_drv_ctx_synchronize(void);
CUresult fs_drv_stream_create(CUstream *s, unsigned flags);
CUresult fs_drv_stream_create_with_priority(CUstream *s, unsigned flags, int priority);

/* ---- driver/dlsym.c ---- */
/* The shim's dlsym and dlvsym (exported under those names). */
void *fs_dlsym(void *handle, const char *name);
void *fs_dlvsym(void *handle, const char *name, const char *version);

/* ---- attach/traced.c ---- */
/* Trace-only: call the real function, write what succeeded (passive.h). */
cudaError_t fs_traced_cuda_malloc(void **p, size_t size);
cudaError_t fs_traced_cuda_free(void *p);
cudaError_t fs_traced_cuda_malloc_async(void **p, size_t size, cudaStream_t s);
cudaError_t fs_traced_cuda_malloc_async_ptsz(void **p, size_t size, cudaStream_t s);
cudaError_t fs_traced_cuda_free_async(void *p, cudaStream_t s);
cudaError_t fs_traced_cuda_free_async_ptsz(void *p, cudaStream_t s);
cudaError_t fs_traced_cuda_malloc_from_pool(void **p, size_t size, cudaMemPool_t pool,
                                            cudaStream_t s);
cudaError_t fs_traced_cuda_stream_create(cudaStream_t *s);
cudaError_t fs_traced_cuda_stream_create_with_flags(cudaStream_t *s, unsigned flags);
cudaError_t fs_traced_cuda_stream_create_with_priority(cudaStream_t *s, unsigned flags,
                                                       int priority);
cudaError_t fs_traced_cuda_stream_destroy(cudaStream_t s);
CUresult fs_traced_cu_mem_alloc(CUdeviceptr *dptr, size_t size);
CUresult fs_traced_cu_mem_free(CUdeviceptr dptr);
CUresult fs_traced_cu_mem_alloc_async(CUdeviceptr *dptr, size_t size, CUstream s);
CUresult fs_traced_cu_mem_alloc_async_ptsz(CUdeviceptr *dptr, size_t size, CUstream s);
CUresult fs_traced_cu_mem_free_async(CUdeviceptr dptr, CUstream s);
CUresult fs_traced_cu_mem_free_async_ptsz(CUdeviceptr dptr, CUstream s);
ncclResult_t fs_traced_nccl_mem_alloc(void **p, size_t size);
ncclResult_t fs_traced_nccl_mem_free(void *p);

#endif /* FS_HOOKS_H */
