/* hooks.c - the one table of hooked entry points (hooks.h): every entry
 * point that the shim hands out in place of the real one, whether by a
 * lookup (dlsym, cuGetProcAddress, cudaGetDriverEntryPoint: driver/) or
 * by a slot (`fsdpshim attach`'s GOT patching: attach/got.c), listed once
 * with its name, its API and the slot that holds the real function. The
 * shim's function for each way in is declared beside its definition
 * (FS_HOOK_FN: driver/cuda_driver.c, driver/driver_work.c, driver/dlsym.c,
 * attach/traced.c) and gathered here, so that the core names no file
 * above it.
 *
 * - The driver's lookups search the driver's entries by the function the
 *   driver answered with, and hand out `served` when the shim is preloaded,
 *   `traced` while attach traces through the slots.
 * - attach/got.c points every slot that names an entry with a `traced`
 *   function at it, and puts the old value back at detach.
 * - Each function finds its real one in `real`: the driver's adopted from
 *   its symbol table (real_driver.c), the C library's dlsym and dlvsym read
 *   by real_loader.c's lock-free walk, the runtime's and NCCL's through
 *   real.c.
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
 * Names, APIs and flags are constant; `served` and `traced` are copied from
 * the rows at the first lookup and `real` is set once found, both with
 * atomics: lookups read the table without a lock. */
#include "hooks.h"

#include "real.h"

#define ENTRY(name_, api_, flags_)                                                                 \
    {                                                                                              \
        .name = name_, .api = api_, .flags = flags_                                                \
    }
#define DRIVER(name)  ENTRY(name, FS_API_DRIVER, 0)
#define RUNTIME(name) ENTRY(name, FS_API_RUNTIME, 0)
#define WORK(name)    ENTRY(name, FS_API_DRIVER, FS_HOOK_NO_RUNTIME)
/* an entry point and its _ptsz variant */
#define WORK_PAIR(id, name)                                                                        \
    [FS_HOOK_CU_##id] = WORK(name), [FS_HOOK_CU_##id##_PTSZ] = WORK(name "_ptsz")

struct fs_hook fs_hooks[FS_HOOK_COUNT] = {
    /* driver: served like their runtime counterparts, or traced */
    [FS_HOOK_CU_MEM_ALLOC] = DRIVER("cuMemAlloc_v2"),
    [FS_HOOK_CU_MEM_FREE] = DRIVER("cuMemFree_v2"),
    [FS_HOOK_CU_MEM_ALLOC_ASYNC] = DRIVER("cuMemAllocAsync"),
    [FS_HOOK_CU_MEM_ALLOC_ASYNC_PTSZ] = DRIVER("cuMemAllocAsync_ptsz"),
    [FS_HOOK_CU_MEM_FREE_ASYNC] = DRIVER("cuMemFreeAsync"),
    [FS_HOOK_CU_MEM_FREE_ASYNC_PTSZ] = DRIVER("cuMemFreeAsync_ptsz"),
    /* trace-only, there is nothing to write: the driver's own answer */
    [FS_HOOK_CU_MEM_GET_INFO] = DRIVER("cuMemGetInfo_v2"),
    /* virtual memory: passed through and traced either way */
    [FS_HOOK_CU_MEM_CREATE] = DRIVER("cuMemCreate"),
    [FS_HOOK_CU_MEM_RELEASE] = DRIVER("cuMemRelease"),
    [FS_HOOK_CU_MEM_MAP] = DRIVER("cuMemMap"),
    [FS_HOOK_CU_MEM_UNMAP] = DRIVER("cuMemUnmap"),
    [FS_HOOK_CU_MEM_ADDRESS_RESERVE] = DRIVER("cuMemAddressReserve"),
    [FS_HOOK_CU_MEM_ADDRESS_FREE] = DRIVER("cuMemAddressFree"),
    /* the driver's lookups, whose answers are replaced in turn */
    [FS_HOOK_CU_GET_PROC_ADDRESS] = ENTRY("cuGetProcAddress", FS_API_DRIVER, FS_HOOK_LOOKUP),
    [FS_HOOK_CU_GET_PROC_ADDRESS_V2] = ENTRY("cuGetProcAddress_v2", FS_API_DRIVER, FS_HOOK_LOOKUP),
    /* only called, by the hooks: the context's device */
    [FS_HOOK_CU_CTX_GET_DEVICE] = DRIVER("cuCtxGetDevice"),
    /* work on streams and waits for it: served only without a runtime */
    WORK_PAIR(MEMCPY_ASYNC, "cuMemcpyAsync"),
    WORK_PAIR(MEMCPY_HTOD_ASYNC, "cuMemcpyHtoDAsync_v2"),
    WORK_PAIR(MEMCPY_DTOH_ASYNC, "cuMemcpyDtoHAsync_v2"),
    WORK_PAIR(MEMCPY_DTOD_ASYNC, "cuMemcpyDtoDAsync_v2"),
    WORK_PAIR(MEMCPY_PEER_ASYNC, "cuMemcpyPeerAsync"),
    WORK_PAIR(MEMCPY_2D_ASYNC, "cuMemcpy2DAsync_v2"),
    WORK_PAIR(MEMCPY_3D_ASYNC, "cuMemcpy3DAsync_v2"),
    WORK_PAIR(MEMSET_D8_ASYNC, "cuMemsetD8Async"),
    WORK_PAIR(MEMSET_D16_ASYNC, "cuMemsetD16Async"),
    WORK_PAIR(MEMSET_D32_ASYNC, "cuMemsetD32Async"),
    WORK_PAIR(MEMSET_D2D8_ASYNC, "cuMemsetD2D8Async"),
    WORK_PAIR(MEMSET_D2D16_ASYNC, "cuMemsetD2D16Async"),
    WORK_PAIR(MEMSET_D2D32_ASYNC, "cuMemsetD2D32Async"),
    WORK_PAIR(LAUNCH_KERNEL, "cuLaunchKernel"),
    WORK_PAIR(LAUNCH_KERNEL_EX, "cuLaunchKernelEx"),
    WORK_PAIR(LAUNCH_COOPERATIVE_KERNEL, "cuLaunchCooperativeKernel"),
    WORK_PAIR(LAUNCH_HOST_FUNC, "cuLaunchHostFunc"),
    WORK_PAIR(GRAPH_LAUNCH, "cuGraphLaunch"),
    WORK_PAIR(STREAM_WAIT_EVENT, "cuStreamWaitEvent"),
    WORK_PAIR(STREAM_SYNCHRONIZE, "cuStreamSynchronize"),
    [FS_HOOK_CU_EVENT_SYNCHRONIZE] = WORK("cuEventSynchronize"),
    [FS_HOOK_CU_CTX_SYNCHRONIZE] = WORK("cuCtxSynchronize"),
    [FS_HOOK_CU_STREAM_CREATE] = WORK("cuStreamCreate"),
    [FS_HOOK_CU_STREAM_CREATE_WITH_PRIORITY] = WORK("cuStreamCreateWithPriority"),

    /* runtime: served by the loader's binding when preloaded, traced here */
    [FS_HOOK_CUDA_MALLOC] = RUNTIME("cudaMalloc"),
    [FS_HOOK_CUDA_FREE] = RUNTIME("cudaFree"),
    [FS_HOOK_CUDA_MALLOC_ASYNC] = RUNTIME("cudaMallocAsync"),
    [FS_HOOK_CUDA_MALLOC_ASYNC_PTSZ] = RUNTIME("cudaMallocAsync_ptsz"),
    [FS_HOOK_CUDA_FREE_ASYNC] = RUNTIME("cudaFreeAsync"),
    [FS_HOOK_CUDA_FREE_ASYNC_PTSZ] = RUNTIME("cudaFreeAsync_ptsz"),
    [FS_HOOK_CUDA_MALLOC_FROM_POOL] = RUNTIME("cudaMallocFromPoolAsync"),
    [FS_HOOK_CUDA_STREAM_CREATE] = RUNTIME("cudaStreamCreate"),
    [FS_HOOK_CUDA_STREAM_CREATE_WITH_FLAGS] = RUNTIME("cudaStreamCreateWithFlags"),
    [FS_HOOK_CUDA_STREAM_CREATE_WITH_PRIORITY] = RUNTIME("cudaStreamCreateWithPriority"),
    [FS_HOOK_CUDA_STREAM_DESTROY] = RUNTIME("cudaStreamDestroy"),
    /* the runtime's lookups of the driver: the shim's own when preloaded
     * (exported under these names), and in the slots when tracing */
    [FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT] =
        ENTRY("cudaGetDriverEntryPoint", FS_API_RUNTIME, FS_HOOK_LOOKUP),
    [FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_PTSZ] =
        ENTRY("cudaGetDriverEntryPoint_ptsz", FS_API_RUNTIME, FS_HOOK_LOOKUP),
    [FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_BY_VERSION] =
        ENTRY("cudaGetDriverEntryPointByVersion", FS_API_RUNTIME, FS_HOOK_LOOKUP),
    [FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_BY_VERSION_PTSZ] =
        ENTRY("cudaGetDriverEntryPointByVersion_ptsz", FS_API_RUNTIME, FS_HOOK_LOOKUP),
    /* only called, by the traced functions */
    [FS_HOOK_CUDA_GET_DEVICE] = RUNTIME("cudaGetDevice"),

    /* NCCL's memory (not interposed when preloaded: it is cudaMalloc or the
     * driver's virtual memory underneath, which the shim sees there) */
    [FS_HOOK_NCCL_MEM_ALLOC] = ENTRY("ncclMemAlloc", FS_API_NCCL, 0),
    [FS_HOOK_NCCL_MEM_FREE] = ENTRY("ncclMemFree", FS_API_NCCL, 0),

    /* the loader's lookups: the shim's own when preloaded (exported under
     * these names), and in the slots when tracing */
    [FS_HOOK_DLSYM] = ENTRY("dlsym", FS_API_LOADER, FS_HOOK_LOOKUP),
    [FS_HOOK_DLVSYM] = ENTRY("dlvsym", FS_API_LOADER, FS_HOOK_LOOKUP),
};

/* ---- what is handed out: the FS_HOOK_FN rows ---------------------------- */

/* the linker's bounds of the fs_hook_fns section of this library */
extern const fs_hook_fn __start_fs_hook_fns[] __attribute__((visibility("hidden")));
extern const fs_hook_fn __stop_fs_hook_fns[] __attribute__((visibility("hidden")));

static int gathered; /* 1 once the rows are in the table */

/* Copies the rows into the table, at the first lookup. Threads that race
 * store the same pointers. */
static void gather(void)
{
    for (const fs_hook_fn *r = __start_fs_hook_fns; r < __stop_fs_hook_fns; r++) {
        if (r->id < 0 || r->id >= FS_HOOK_COUNT) continue;
        if (r->served) __atomic_store_n(&fs_hooks[r->id].served, r->served, __ATOMIC_RELAXED);
        if (r->traced) __atomic_store_n(&fs_hooks[r->id].traced, r->traced, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&gathered, 1, __ATOMIC_RELEASE);
}

void *fs_hook_handed_out(enum fs_hook_id id, bool tracing)
{
    struct fs_hook *h = &fs_hooks[id];

    if (fs_unlikely(!__atomic_load_n(&gathered, __ATOMIC_ACQUIRE))) gather();
    return __atomic_load_n(tracing ? &h->traced : &h->served, __ATOMIC_RELAXED);
}

/* ---- tracing, and finding the real functions ------------------------------ */

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
