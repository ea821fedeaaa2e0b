/* driver.h - what the shim's dlsym (dlsym.c), its driver glue
 * (cuda_driver.c) and its device table over the driver (driver_device.c)
 * share with each other and with the shim's state (shim.c, the stream
 * table): the real dlsym and dlvsym, the lookups of driver entry points
 * whose answers the shim replaces with its hooks, and the driver as the
 * allocator's device (docs/interpose.md, "The driver API"). */
#ifndef FS_DRIVER_H
#define FS_DRIVER_H

#include "../../allocator/device.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>

struct link_map;

/* ---- runtime/served_lookup.c ---- */
/* The answer to the program's dlsym(handle, name) or dlvsym(handle, name,
 * version) for a name that may be a runtime or NCCL entry point: the real
 * answer, replaced by the shim's own definition of `name` when the real one
 * is libcudart's or libnccl's, the shim serves (is preloaded), and `caller`
 * is neither in the shim nor in the runtime. Never called with RTLD_NEXT or
 * RTLD_DEFAULT. */
void *fs_served_dlsym(void *handle, const char *name, const char *version, const void *caller);

/* ---- cuda_driver.c ---- */
/* The answer to the program's dlsym(handle, name) (version NULL) or
 * dlvsym(handle, name, version) for a name that may be a hooked driver
 * entry point: the real answer, replaced by the shim's hook when it is the
 * driver's own function for that entry point and `caller` (the return
 * address of the lookup) is not in the CUDA runtime. Never called with
 * RTLD_NEXT, whose answer depends on the caller's object. */
void *fs_driver_dlsym(void *handle, const char *name, const char *version, const void *caller);
/* ---- the functions handed out for the table's entries (core/hooks.h) ---- */

/* ---- cuda_driver.c ---- */
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

/* ---- driver_work.c ---- */
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

/* ---- dlsym.c ---- */
/* The shim's dlsym and dlvsym (exported under those names). */
void *fs_dlsym(void *handle, const char *name);
void *fs_dlvsym(void *handle, const char *name, const char *version);

#endif /* FS_DRIVER_H */
