/* hooks.h - the one table of the entry points that the shim hands out in
 * place of the real ones, by lookup or by slot (hooks.c): their names, the
 * API each belongs to and its real function; the functions handed out for
 * them are declared by the files that define them (FS_HOOK_FN). */
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
     * the shim serves (preloaded); NULL: the real function. From the
     * FS_HOOK_FN rows (fs_hook_handed_out). */
    void *served;
    /* The trace-only function: what a driver lookup hands out, and what
     * every slot of the entry point holds, while `fsdpshim attach` traces
     * through the slots (attach/got.c); NULL: the entry point is left alone
     * then. From the FS_HOOK_FN rows (fs_hook_handed_out). */
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
/* What the shim hands out for entry `id`: its served function (tracing
 * false) or its traced one; NULL where it has none (the real function goes
 * out, or, traced, the entry point is left alone). */
void *fs_hook_handed_out(enum fs_hook_id id, bool tracing);

/* ---- the functions handed out ----
 * A file that defines a function the shim hands out for entry `id` says so
 * beside it, with the way it goes out (either may be NULL):
 *
 *     FS_HOOK_FN(FS_HOOK_CU_MEM_ALLOC, drv_mem_alloc, NULL);
 *
 * The rows are gathered from a section of the library (as the lifetime
 * hooks are, lifetime.h), so that the table names no file above the core
 * and the functions can stay static to their files. */
typedef struct fs_hook_fn {
    int id; /* enum fs_hook_id */
    void *served, *traced;
} fs_hook_fn;

#define FS_HOOK_CAT_(a, b) a##b
#define FS_HOOK_CAT(a, b)  FS_HOOK_CAT_(a, b)
#define FS_HOOK_FN(id_, served_, traced_)                                                          \
    __attribute__((used, section("fs_hook_fns"), aligned(sizeof(void *)))) static const fs_hook_fn \
    FS_HOOK_CAT(fs_hook_fn_, __COUNTER__) = {                                                      \
        .id = (id_), .served = (void *)(served_), .traced = (void *)(traced_)}

#endif /* FS_HOOKS_H */
