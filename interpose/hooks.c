/* hooks.c - the one table of hooked entry points (hooks.h): every entry
 * point that the shim hands out in place of the real one, whether by a
 * lookup (dlsym, cuGetProcAddress, cudaGetDriverEntryPoint: driver/) or
 * by a slot (`fsdpshim attach`'s GOT patching: attach/got.c), listed once
 * with its name, its API, the shim's function for each way in, and the
 * slot that holds the real function.
 *
 * - The driver's lookups search the driver's entries by the function the
 *   driver answered with, and hand out `served` when the shim is preloaded,
 *   `traced` while attach traces through the slots.
 * - attach/got.c points every slot that names an entry with a `traced`
 *   function at it, and puts the old value back at detach.
 * - Each function finds its real one in `real`: the driver's adopted from
 *   its symbol table (driver/cuda_driver.c), the C library's dlsym and
 *   dlvsym read by driver/dlsym.c's lock-free walk, the runtime's and NCCL's
 *   through real.c.
 *
 * What is not in the table, and why:
 * - The CUDA runtime and NCCL entry points the preloaded shim defines
 *   (runtime/, nccl/): the loader binds the program's references to them,
 *   no lookup or slot hands them out, and each call site finds its real
 *   function through a typed FS_REAL slot of its own (real.h), a hundred of
 *   them; a table row each would add an indirection and lose the types.
 * - NVTX (nvtx/) and CUPTI (cupti/): both call the shim through callback
 *   tables they are given, not through an entry point of the program's.
 *
 * The table is written once, before any function in it can run, except
 * `real`, which is set with atomics: lookups read it without a lock. */
#include "hooks.h"

#include "shim.h"

#define ENTRY(name_, api_, flags_, served_, traced_)                                               \
    {                                                                                              \
        .name = name_, .api = api_, .flags = flags_, .served = (void *)(served_),                  \
        .traced = (void *)(traced_)                                                                \
    }
#define DRIVER(name, served, traced)  ENTRY(name, FS_API_DRIVER, 0, served, traced)
#define RUNTIME(name, served, traced) ENTRY(name, FS_API_RUNTIME, 0, served, traced)
#define WORK(name, served)            ENTRY(name, FS_API_DRIVER, FS_HOOK_NO_RUNTIME, served, NULL)
/* an entry point and its _ptsz variant */
#define WORK_PAIR(id, name, served)                                                                \
    [FS_HOOK_CU_##id] = WORK(name, served),                                                        \
    [FS_HOOK_CU_##id##_PTSZ] = WORK(name "_ptsz", served##_ptsz)

struct fs_hook fs_hooks[FS_HOOK_COUNT] = {
    /* driver: served like their runtime counterparts, or traced */
    [FS_HOOK_CU_MEM_ALLOC] = DRIVER("cuMemAlloc_v2", fs_drv_mem_alloc, fs_traced_cu_mem_alloc),
    [FS_HOOK_CU_MEM_FREE] = DRIVER("cuMemFree_v2", fs_drv_mem_free, fs_traced_cu_mem_free),
    [FS_HOOK_CU_MEM_ALLOC_ASYNC] =
        DRIVER("cuMemAllocAsync", fs_drv_mem_alloc_async, fs_traced_cu_mem_alloc_async),
    [FS_HOOK_CU_MEM_ALLOC_ASYNC_PTSZ] = DRIVER("cuMemAllocAsync_ptsz", fs_drv_mem_alloc_async_ptsz,
                                               fs_traced_cu_mem_alloc_async_ptsz),
    [FS_HOOK_CU_MEM_FREE_ASYNC] =
        DRIVER("cuMemFreeAsync", fs_drv_mem_free_async, fs_traced_cu_mem_free_async),
    [FS_HOOK_CU_MEM_FREE_ASYNC_PTSZ] =
        DRIVER("cuMemFreeAsync_ptsz", fs_drv_mem_free_async_ptsz, fs_traced_cu_mem_free_async_ptsz),
    /* trace-only, there is nothing to write: the driver's own answer */
    [FS_HOOK_CU_MEM_GET_INFO] = DRIVER("cuMemGetInfo_v2", fs_drv_mem_get_info, NULL),
    /* virtual memory: passed through and traced either way */
    [FS_HOOK_CU_MEM_CREATE] = DRIVER("cuMemCreate", fs_drv_mem_create, fs_drv_mem_create),
    [FS_HOOK_CU_MEM_RELEASE] = DRIVER("cuMemRelease", fs_drv_mem_release, fs_drv_mem_release),
    [FS_HOOK_CU_MEM_MAP] = DRIVER("cuMemMap", fs_drv_mem_map, fs_drv_mem_map),
    [FS_HOOK_CU_MEM_UNMAP] = DRIVER("cuMemUnmap", fs_drv_mem_unmap, fs_drv_mem_unmap),
    [FS_HOOK_CU_MEM_ADDRESS_RESERVE] =
        DRIVER("cuMemAddressReserve", fs_drv_address_reserve, fs_drv_address_reserve),
    [FS_HOOK_CU_MEM_ADDRESS_FREE] =
        DRIVER("cuMemAddressFree", fs_drv_address_free, fs_drv_address_free),
    /* the driver's lookups, whose answers are replaced in turn */
    [FS_HOOK_CU_GET_PROC_ADDRESS] = ENTRY("cuGetProcAddress", FS_API_DRIVER, FS_HOOK_LOOKUP,
                                          fs_drv_get_proc_address, fs_drv_get_proc_address),
    [FS_HOOK_CU_GET_PROC_ADDRESS_V2] =
        ENTRY("cuGetProcAddress_v2", FS_API_DRIVER, FS_HOOK_LOOKUP, fs_drv_get_proc_address_v2,
              fs_drv_get_proc_address_v2),
    /* only called, by the hooks: the context's device */
    [FS_HOOK_CU_CTX_GET_DEVICE] = DRIVER("cuCtxGetDevice", NULL, NULL),
    /* work on streams and waits for it: served only without a runtime */
    WORK_PAIR(MEMCPY_ASYNC, "cuMemcpyAsync", fs_drv_memcpy_async),
    WORK_PAIR(MEMCPY_HTOD_ASYNC, "cuMemcpyHtoDAsync_v2", fs_drv_memcpy_htod_async),
    WORK_PAIR(MEMCPY_DTOH_ASYNC, "cuMemcpyDtoHAsync_v2", fs_drv_memcpy_dtoh_async),
    WORK_PAIR(MEMCPY_DTOD_ASYNC, "cuMemcpyDtoDAsync_v2", fs_drv_memcpy_dtod_async),
    WORK_PAIR(MEMCPY_PEER_ASYNC, "cuMemcpyPeerAsync", fs_drv_memcpy_peer_async),
    WORK_PAIR(MEMCPY_2D_ASYNC, "cuMemcpy2DAsync_v2", fs_drv_memcpy_2d_async),
    WORK_PAIR(MEMCPY_3D_ASYNC, "cuMemcpy3DAsync_v2", fs_drv_memcpy_3d_async),
    WORK_PAIR(MEMSET_D8_ASYNC, "cuMemsetD8Async", fs_drv_memset_d8_async),
    WORK_PAIR(MEMSET_D16_ASYNC, "cuMemsetD16Async", fs_drv_memset_d16_async),
    WORK_PAIR(MEMSET_D32_ASYNC, "cuMemsetD32Async", fs_drv_memset_d32_async),
    WORK_PAIR(MEMSET_D2D8_ASYNC, "cuMemsetD2D8Async", fs_drv_memset_d2d8_async),
    WORK_PAIR(MEMSET_D2D16_ASYNC, "cuMemsetD2D16Async", fs_drv_memset_d2d16_async),
    WORK_PAIR(MEMSET_D2D32_ASYNC, "cuMemsetD2D32Async", fs_drv_memset_d2d32_async),
    WORK_PAIR(LAUNCH_KERNEL, "cuLaunchKernel", fs_drv_launch_kernel),
    WORK_PAIR(LAUNCH_KERNEL_EX, "cuLaunchKernelEx", fs_drv_launch_kernel_ex),
    WORK_PAIR(LAUNCH_COOPERATIVE_KERNEL, "cuLaunchCooperativeKernel",
              fs_drv_launch_cooperative_kernel),
    WORK_PAIR(LAUNCH_HOST_FUNC, "cuLaunchHostFunc", fs_drv_launch_host_func),
    WORK_PAIR(GRAPH_LAUNCH, "cuGraphLaunch", fs_drv_graph_launch),
    WORK_PAIR(STREAM_WAIT_EVENT, "cuStreamWaitEvent", fs_drv_stream_wait_event),
    WORK_PAIR(STREAM_SYNCHRONIZE, "cuStreamSynchronize", fs_drv_stream_synchronize),
    [FS_HOOK_CU_EVENT_SYNCHRONIZE] = WORK("cuEventSynchronize", fs_drv_event_synchronize),
    [FS_HOOK_CU_CTX_SYNCHRONIZE] = WORK("cuCtxSynchronize", fs_drv_ctx_synchronize),
    [FS_HOOK_CU_STREAM_CREATE] = WORK("cuStreamCreate", fs_drv_stream_create),
    [FS_HOOK_CU_STREAM_CREATE_WITH_PRIORITY] =
        WORK("cuStreamCreateWithPriority", fs_drv_stream_create_with_priority),

    /* runtime: served by the loader's binding when preloaded, traced here */
    [FS_HOOK_CUDA_MALLOC] = RUNTIME("cudaMalloc", NULL, fs_traced_cuda_malloc),
    [FS_HOOK_CUDA_FREE] = RUNTIME("cudaFree", NULL, fs_traced_cuda_free),
    [FS_HOOK_CUDA_MALLOC_ASYNC] = RUNTIME("cudaMallocAsync", NULL, fs_traced_cuda_malloc_async),
    [FS_HOOK_CUDA_MALLOC_ASYNC_PTSZ] =
        RUNTIME("cudaMallocAsync_ptsz", NULL, fs_traced_cuda_malloc_async_ptsz),
    [FS_HOOK_CUDA_FREE_ASYNC] = RUNTIME("cudaFreeAsync", NULL, fs_traced_cuda_free_async),
    [FS_HOOK_CUDA_FREE_ASYNC_PTSZ] =
        RUNTIME("cudaFreeAsync_ptsz", NULL, fs_traced_cuda_free_async_ptsz),
    [FS_HOOK_CUDA_MALLOC_FROM_POOL] =
        RUNTIME("cudaMallocFromPoolAsync", NULL, fs_traced_cuda_malloc_from_pool),
    [FS_HOOK_CUDA_STREAM_CREATE] = RUNTIME("cudaStreamCreate", NULL, fs_traced_cuda_stream_create),
    [FS_HOOK_CUDA_STREAM_CREATE_WITH_FLAGS] =
        RUNTIME("cudaStreamCreateWithFlags", NULL, fs_traced_cuda_stream_create_with_flags),
    [FS_HOOK_CUDA_STREAM_CREATE_WITH_PRIORITY] =
        RUNTIME("cudaStreamCreateWithPriority", NULL, fs_traced_cuda_stream_create_with_priority),
    [FS_HOOK_CUDA_STREAM_DESTROY] =
        RUNTIME("cudaStreamDestroy", NULL, fs_traced_cuda_stream_destroy),
    /* the runtime's lookups of the driver: the shim's own when preloaded
     * (exported under these names), and in the slots when tracing */
    [FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT] = ENTRY("cudaGetDriverEntryPoint", FS_API_RUNTIME,
                                                  FS_HOOK_LOOKUP, NULL, fs_get_driver_entry_point),
    [FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_PTSZ] =
        ENTRY("cudaGetDriverEntryPoint_ptsz", FS_API_RUNTIME, FS_HOOK_LOOKUP, NULL,
              fs_get_driver_entry_point_ptsz),
    [FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_BY_VERSION] =
        ENTRY("cudaGetDriverEntryPointByVersion", FS_API_RUNTIME, FS_HOOK_LOOKUP, NULL,
              fs_get_driver_entry_point_by_version),
    [FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_BY_VERSION_PTSZ] =
        ENTRY("cudaGetDriverEntryPointByVersion_ptsz", FS_API_RUNTIME, FS_HOOK_LOOKUP, NULL,
              fs_get_driver_entry_point_by_version_ptsz),
    /* only called, by the traced functions */
    [FS_HOOK_CUDA_GET_DEVICE] = RUNTIME("cudaGetDevice", NULL, NULL),

    /* NCCL's memory (not interposed when preloaded: it is cudaMalloc or the
     * driver's virtual memory underneath, which the shim sees there) */
    [FS_HOOK_NCCL_MEM_ALLOC] =
        ENTRY("ncclMemAlloc", FS_API_NCCL, 0, NULL, fs_traced_nccl_mem_alloc),
    [FS_HOOK_NCCL_MEM_FREE] = ENTRY("ncclMemFree", FS_API_NCCL, 0, NULL, fs_traced_nccl_mem_free),

    /* the loader's lookups: the shim's own when preloaded (exported under
     * these names), and in the slots when tracing */
    [FS_HOOK_DLSYM] = ENTRY("dlsym", FS_API_LOADER, FS_HOOK_LOOKUP, NULL, fs_dlsym),
    [FS_HOOK_DLVSYM] = ENTRY("dlvsym", FS_API_LOADER, FS_HOOK_LOOKUP, NULL, fs_dlvsym),
};

static bool tracing;

bool fs_hooks_tracing(void)
{
    return __atomic_load_n(&tracing, __ATOMIC_ACQUIRE);
}

void fs_hooks_set_tracing(bool on)
{
    __atomic_store_n(&tracing, on, __ATOMIC_RELEASE);
}

int fs_hooks_resolve(enum fs_api api)
{
    bool inside = fs_shim_enter(); /* a library not loaded is no error here (real.c) */
    int found = 0;

    /* the loader's are found by dlsym.c's constructor, before anything runs */
    if (api == FS_API_DRIVER) fs_driver_adopt_loaded();
    for (int i = 0; i < FS_HOOK_COUNT; i++) {
        struct fs_hook *h = &fs_hooks[i];
        void *fn = fs_hook_real((enum fs_hook_id)i);

        if (h->api != api) continue;
        if (!fn && (api == FS_API_RUNTIME || api == FS_API_NCCL)) {
            fn = fs_real_symbol(api == FS_API_RUNTIME ? FS_LIB_CUDART : FS_LIB_NCCL, h->name);
            if (fn) __atomic_store_n(&h->real, fn, __ATOMIC_RELEASE);
        }
        found += fn != NULL;
    }
    if (inside) fs_shim_leave();
    return found;
}
