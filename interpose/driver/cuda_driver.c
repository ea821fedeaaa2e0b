/* cuda_driver.c - the driver API's memory calls, reached by lookup: the hooks
 * the shim hands out for them, and the lookups that hand them out.
 *
 * A program may reach the driver without any symbol the loader binds:
 * dlopen("libcuda.so.1") and dlsym (NCCL, nvcc's static runtime; dlsym.c),
 * cuGetProcAddress (the static runtime, NCCL) or the runtime's
 * cudaGetDriverEntryPoint[ByVersion] (PyTorch's c10). Each of them answers
 * with the shim's hook where the real answer is the driver's own function for
 * one of the driver entry points of the table (core/hooks.c), and passes any other
 * answer on unchanged:
 * unknown and future names, other ABIs and per-thread variants of a name, a
 * version or flags that select another function, failures. A hook is
 * recognised by the function the driver answered with, never by the name
 * asked for, so a future ABI of cuMemAlloc is not mistaken for the one the
 * hook implements.
 *
 * The hooks handed out are the table's `served` ones when the shim is
 * preloaded, its `traced` ones (attach/traced.c) while `fsdpshim attach`
 * traces through the slots, which then point the program's lookups here
 * (attach/got.c). The served ones, defined below:
 * - Served like their runtime counterparts, through the same allocator paths
 *   (runtime/cuda_memory.c): cuMemAlloc_v2 and cuMemFree_v2 as cudaMalloc and
 *   cudaFree, cuMemAllocAsync and cuMemFreeAsync (and their _ptsz variants)
 *   as cudaMallocAsync and cudaFreeAsync, cuMemGetInfo_v2 as cudaMemGetInfo;
 *   on the device of the calling thread's current context when that is the
 *   device's primary context (any other context's calls pass through),
 *   with the driver's codes, never touching the runtime's last error. In a
 *   process without the runtime (nvcc's static runtime) the first of them
 *   creates the allocator over the driver (driver_device.c).
 * - Passed through, traced (an FS_REC_VMM event for each call that
 *   succeeded) and logged at FSDPSHIM_LOG=debug: cuMemCreate, cuMemRelease,
 *   cuMemMap, cuMemUnmap, cuMemAddressReserve and cuMemAddressFree. NCCL
 *   exports such memory to its peers, and PyTorch's expandable segments map
 *   it piece by piece: never served from the cache.
 * - cuGetProcAddress and cuGetProcAddress_v2, so that what they answer is
 *   replaced in turn.
 * Not served: cuMemAllocPitch (its pitch is the device's to choose, and
 * cudaMallocPitch goes to the runtime too), cuMemAllocManaged, host memory,
 * cuMemAllocFromPoolAsync; the legacy 32-bit ABIs (cuMemAlloc, cuMemFree).
 *
 * The driver is adopted by the first lookup that answers with one of its
 * functions (core/real_driver.c). Lookups the CUDA runtime makes itself get
 * the real functions: its driver calls implement runtime calls that the
 * shim interposes already, and would otherwise be served twice. */
#include "driver.h"
#include "../../common/path.h"
#include "../core/devices.h"
#include "../core/hooks.h"
#include "../core/real.h"
#include "../core/shim.h"
#include "../core/trace_glue.h"

#include <cuda.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <string.h>

/* cuGetProcAddress before CUDA 12.0: no symbol status. */
typedef CUresult (*get_proc_address_v1_fn)(const char *, void **, int, cuuint64_t);

/* The real function of a driver entry. A hook is handed out only once the
 * driver is adopted, so it always finds its own. */
static void *real_of(enum fs_hook_id id)
{
    return fs_hook_real(id);
}

/* The shim's hook in place of the driver function `fn`, or `fn` itself:
 * the served one while the shim serves, the traced one while `fsdpshim
 * attach` traces through the slots (hooks.h). */
static void *hook_for(void *fn)
{
    bool tracing;

    if (!fn || !fs_driver_adopt(fn)) return fn;
    tracing = fs_hooks_tracing();
    for (int i = 0; i < FS_HOOK_DRIVER_END; i++) {
        void *hook = fs_hook_handed_out((enum fs_hook_id)i, tracing);
        if (!hook || real_of((enum fs_hook_id)i) != fn) continue;
        return (fs_hooks[i].flags & FS_HOOK_NO_RUNTIME) && fs_runtime_loaded() ? fn : hook;
    }
    return fn;
}

/* Whether `caller` is code of the CUDA runtime (libcudart.so*). */
static bool from_runtime(const void *caller)
{
    Dl_info info;

    return dladdr(caller, &info) && info.dli_fname &&
           strncmp(fs_base_name(info.dli_fname), "libcudart.so", 12) == 0;
}

void *fs_driver_dlsym(void *handle, const char *name, const char *version, const void *caller)
{
    void *fn = version ? fs_real_dlvsym(handle, name, version) : fs_real_dlsym(handle, name);

    if (!fn || from_runtime(caller)) return fn;
    return hook_for(fn);
}

/* ---- the lookups ---- */

/* At FSDPSHIM_LOG=debug, each answer of cuGetProcAddress: the name asked
 * for, and whether the shim's hook went out or the driver's function, with
 * the symbol that function is in the driver's table (a function the table
 * does not name is one the hooks cannot match). A program with nvcc's
 * static runtime reaches the driver only this way: the log says which of
 * its calls the shim sees (tests/integration/trace/static_gpu.sh). */
static void *looked_up(const char *symbol, int version, cuuint64_t flags, void *fn)
{
    void *hook = hook_for(fn);
    Dl_info info;

    if (fn && fs_log_enabled(FS_LOG_DEBUG))
        fs_log(FS_LOG_DEBUG, "lookup %s (version %d, flags %#llx): %s (%s)", symbol, version,
               (unsigned long long)flags, hook != fn ? "the shim's hook" : "the driver's",
               dladdr(fn, &info) && info.dli_sname ? info.dli_sname : "no symbol");
    return hook;
}

static CUresult fs_drv_get_proc_address(const char *symbol, void **pfn, int version,
                                        cuuint64_t flags)
{
    get_proc_address_v1_fn real = (get_proc_address_v1_fn)real_of(FS_HOOK_CU_GET_PROC_ADDRESS);
    CUresult r = real(symbol, pfn, version, flags);

    if (r == CUDA_SUCCESS && pfn) *pfn = looked_up(symbol, version, flags, *pfn);
    return r;
}
FS_HOOK_FN(FS_HOOK_CU_GET_PROC_ADDRESS, fs_drv_get_proc_address, fs_drv_get_proc_address);

static CUresult fs_drv_get_proc_address_v2(const char *symbol, void **pfn, int version,
                                           cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    __typeof__(&cuGetProcAddress_v2) real =
        (__typeof__(&cuGetProcAddress_v2))real_of(FS_HOOK_CU_GET_PROC_ADDRESS_V2);
    CUresult r = real(symbol, pfn, version, flags, status);

    if (r == CUDA_SUCCESS && pfn) *pfn = looked_up(symbol, version, flags, *pfn);
    return r;
}
FS_HOOK_FN(FS_HOOK_CU_GET_PROC_ADDRESS_V2, fs_drv_get_proc_address_v2, fs_drv_get_proc_address_v2);

/* The runtime's lookups; cudaGetDriverEntryPoint is deprecated in the
 * headers, hence types of their own. */
typedef cudaError_t (*entry_point_fn)(const char *, void **, unsigned long long,
                                      enum cudaDriverEntryPointQueryResult *);
typedef cudaError_t (*entry_point_by_version_fn)(const char *, void **, unsigned int,
                                                 unsigned long long,
                                                 enum cudaDriverEntryPointQueryResult *);

static cudaError_t entry_point(enum fs_hook_id id, const char *symbol, void **fn,
                               unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *status)
{
    entry_point_fn real =
        (entry_point_fn)fs_real_cached(&fs_hooks[id].real, FS_LIB_CUDART, fs_hooks[id].name);
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    e = real(symbol, fn, flags, status);
    if (e == cudaSuccess && fn) *fn = hook_for(*fn);
    return e;
}

static cudaError_t entry_point_by_version(enum fs_hook_id id, const char *symbol, void **fn,
                                          unsigned int version, unsigned long long flags,
                                          enum cudaDriverEntryPointQueryResult *status)
{
    entry_point_by_version_fn real = (entry_point_by_version_fn)fs_real_cached(
        &fs_hooks[id].real, FS_LIB_CUDART, fs_hooks[id].name);
    cudaError_t e;

    if (!real) return cudaErrorInitializationError;
    e = real(symbol, fn, version, flags, status);
    if (e == cudaSuccess && fn) *fn = hook_for(*fn);
    return e;
}

static cudaError_t fs_get_driver_entry_point(const char *symbol, void **fn,
                                             unsigned long long flags,
                                             enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT, symbol, fn, flags, status);
}
FS_HOOK_FN(FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT, NULL, fs_get_driver_entry_point);

static cudaError_t fs_get_driver_entry_point_ptsz(const char *symbol, void **fn,
                                                  unsigned long long flags,
                                                  enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point(FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_PTSZ, symbol, fn, flags, status);
}
FS_HOOK_FN(FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_PTSZ, NULL, fs_get_driver_entry_point_ptsz);

static cudaError_t
fs_get_driver_entry_point_by_version(const char *symbol, void **fn, unsigned int version,
                                     unsigned long long flags,
                                     enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point_by_version(FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_BY_VERSION, symbol, fn,
                                  version, flags, status);
}
FS_HOOK_FN(FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_BY_VERSION, NULL,
           fs_get_driver_entry_point_by_version);

static cudaError_t
fs_get_driver_entry_point_by_version_ptsz(const char *symbol, void **fn, unsigned int version,
                                          unsigned long long flags,
                                          enum cudaDriverEntryPointQueryResult *status)
{
    return entry_point_by_version(FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_BY_VERSION_PTSZ, symbol, fn,
                                  version, flags, status);
}
FS_HOOK_FN(FS_HOOK_CUDA_GET_DRIVER_ENTRY_POINT_BY_VERSION_PTSZ, NULL,
           fs_get_driver_entry_point_by_version_ptsz);

/* Exported under the runtime's names for the preloaded shim; the functions
 * above are what the table names, since a reference to an exported name
 * from inside the shim would bind to the runtime's where the shim is not
 * first in the global scope (`fsdpshim attach`). */
FS_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
                                              unsigned long long flags,
                                              enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return fs_get_driver_entry_point(symbol, funcPtr, flags, driverStatus);
}

FS_EXPORT cudaError_t
cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                             enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return fs_get_driver_entry_point_ptsz(symbol, funcPtr, flags, driverStatus);
}

FS_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return fs_get_driver_entry_point_by_version(symbol, funcPtr, cudaVersion, flags, driverStatus);
}

FS_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return fs_get_driver_entry_point_by_version_ptsz(symbol, funcPtr, cudaVersion, flags,
                                                     driverStatus);
}

/* ---- served: memory ---- */

/* The device of the calling thread's current context, where the driver's
 * memory calls work, when that context is the device's primary one (the
 * runtime's, static or not); -1 without a context (or before cuInit), when
 * the real call says what is wrong, and with any other context, whose
 * memory is not the shim's to serve: those calls pass through. The shim's
 * idea of the thread's current device follows it: the program may have
 * changed contexts through the driver, which the shim does not see. */
static int context_device(void)
{
    int dev = fs_driver_served_device();

    if (dev >= 0) fs_current_device_set(dev);
    return dev;
}

/* The code of an error the shim makes itself (freeing inside one of its
 * segments what does not start a live block, as cudaFree does). */
static CUresult driver_error(fs_status st)
{
    switch (st) {
    case FS_OK:
        return CUDA_SUCCESS;
    case FS_ERR_OOM:
        return CUDA_ERROR_OUT_OF_MEMORY;
    case FS_ERR_INVALID:
    case FS_ERR_NOT_OWNED:
        return CUDA_ERROR_INVALID_VALUE;
    case FS_ERR_DEVICE:
        break;
    }
    return CUDA_ERROR_UNKNOWN;
}

/* As cudaMalloc: the thread's stream of the context's device. Size 0 and a
 * null out-pointer go to the driver, as does a request the cache cannot
 * serve (the driver then fails with its own out-of-memory, or succeeds, and
 * the pointer passes through on free). */
static CUresult fs_drv_mem_alloc(CUdeviceptr *dptr, size_t size)
{
    __typeof__(&cuMemAlloc_v2) real = (__typeof__(&cuMemAlloc_v2))real_of(FS_HOOK_CU_MEM_ALLOC);
    fs_status st = FS_ERR_NOT_OWNED;
    fs_allocator *a;
    void *p;
    int dev;

    if (fs_unlikely(!dptr || !size) || !fs_shim_enter()) return real(dptr, size);
    if ((dev = context_device()) >= 0 && (a = fs_shim_driver_allocator()))
        st = fs_mem_alloc(a, dev, size, &p);
    fs_shim_leave();
    if (fs_likely(st == FS_OK)) {
        *dptr = (CUdeviceptr)(uintptr_t)p;
        return CUDA_SUCCESS;
    }
    return real(dptr, size);
}
FS_HOOK_FN(FS_HOOK_CU_MEM_ALLOC, fs_drv_mem_alloc, NULL);

static CUresult fs_drv_mem_free(CUdeviceptr dptr)
{
    __typeof__(&cuMemFree_v2) real = (__typeof__(&cuMemFree_v2))real_of(FS_HOOK_CU_MEM_FREE);
    fs_allocator *a;
    fs_status st;

    if (!dptr || !fs_shim_enter()) return real(dptr);
    a = fs_shim_allocator_peek();
    st = a ? fs_mem_free(a, (void *)(uintptr_t)dptr, false, 0) : FS_ERR_NOT_OWNED;
    fs_shim_leave();
    if (fs_likely(st == FS_OK)) return CUDA_SUCCESS;
    if (st == FS_ERR_NOT_OWNED) return real(dptr);
    return driver_error(st);
}
FS_HOOK_FN(FS_HOOK_CU_MEM_FREE, fs_drv_mem_free, NULL);

/* As cudaMallocAsync: the out-pointer, then the stream, then the size. A
 * stream the program destroyed that waits in a stream pool fails as a
 * destroyed stream does. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream s, bool pt,
                            __typeof__(&cuMemAllocAsync) real)
{
    fs_status st = FS_ERR_NOT_OWNED;
    fs_allocator *a;
    void *p;
    int dev = 0;

    if (fs_unlikely(!dptr)) return real(dptr, size, s);
    if (fs_unlikely(fs_stream_is_destroyed(s))) return CUDA_ERROR_INVALID_HANDLE;
    if (fs_unlikely(!size) || !fs_shim_enter()) return real(dptr, size, s);
    if (context_device() >= 0 && (a = fs_shim_driver_allocator()) &&
        !fs_shim_stream_capturing(s, pt))
        st = fs_mem_alloc_async(a, s, pt, size, &p, &dev);
    fs_shim_leave();
    if (fs_likely(st == FS_OK)) {
        *dptr = (CUdeviceptr)(uintptr_t)p;
        return CUDA_SUCCESS;
    }
    if (dev < 0 && fs_stream_is_destroyed(s)) return CUDA_ERROR_INVALID_HANDLE;
    return real(dptr, size, s);
}

static CUresult fs_drv_mem_alloc_async(CUdeviceptr *dptr, size_t size, CUstream stream)
{
    return alloc_async(dptr, size, stream, false,
                       (__typeof__(&cuMemAllocAsync))real_of(FS_HOOK_CU_MEM_ALLOC_ASYNC));
}
FS_HOOK_FN(FS_HOOK_CU_MEM_ALLOC_ASYNC, fs_drv_mem_alloc_async, NULL);

static CUresult fs_drv_mem_alloc_async_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream)
{
    return alloc_async(dptr, size, stream, true,
                       (__typeof__(&cuMemAllocAsync))real_of(FS_HOOK_CU_MEM_ALLOC_ASYNC_PTSZ));
}
FS_HOOK_FN(FS_HOOK_CU_MEM_ALLOC_ASYNC_PTSZ, fs_drv_mem_alloc_async_ptsz, NULL);

/* As cudaFreeAsync: the stream, then the pointer. */
static CUresult free_async(CUdeviceptr dptr, CUstream s, bool pt, __typeof__(&cuMemFreeAsync) real)
{
    fs_status st = FS_ERR_NOT_OWNED;
    fs_allocator *a;
    fs_stream_t key;
    int dev = 0;

    if (fs_unlikely(fs_stream_is_destroyed(s))) return CUDA_ERROR_INVALID_HANDLE;
    if (!dptr || !fs_shim_enter()) return real(dptr, s);
    a = fs_shim_allocator_peek();
    if (a) {
        context_device(); /* the legacy and per-thread streams are its device's */
        key = fs_shim_stream_key(s, pt, &dev);
        if (dev >= 0) st = fs_mem_free(a, (void *)(uintptr_t)dptr, true, key);
    }
    fs_shim_leave();
    if (fs_likely(st == FS_OK)) return CUDA_SUCCESS;
    if (dev < 0 && fs_stream_is_destroyed(s)) return CUDA_ERROR_INVALID_HANDLE;
    if (st == FS_ERR_NOT_OWNED) return real(dptr, s);
    return driver_error(st);
}

static CUresult fs_drv_mem_free_async(CUdeviceptr dptr, CUstream stream)
{
    return free_async(dptr, stream, false,
                      (__typeof__(&cuMemFreeAsync))real_of(FS_HOOK_CU_MEM_FREE_ASYNC));
}
FS_HOOK_FN(FS_HOOK_CU_MEM_FREE_ASYNC, fs_drv_mem_free_async, NULL);

static CUresult fs_drv_mem_free_async_ptsz(CUdeviceptr dptr, CUstream stream)
{
    return free_async(dptr, stream, true,
                      (__typeof__(&cuMemFreeAsync))real_of(FS_HOOK_CU_MEM_FREE_ASYNC_PTSZ));
}
FS_HOOK_FN(FS_HOOK_CU_MEM_FREE_ASYNC_PTSZ, fs_drv_mem_free_async_ptsz, NULL);

/* As cudaMemGetInfo: what the cache holds unused counts as free. */
static CUresult fs_drv_mem_get_info(size_t *free, size_t *total)
{
    __typeof__(&cuMemGetInfo_v2) real =
        (__typeof__(&cuMemGetInfo_v2))real_of(FS_HOOK_CU_MEM_GET_INFO);
    CUresult r = real(free, total);
    fs_allocator *a;
    int dev;

    if (r != CUDA_SUCCESS || !free || !fs_shim_enter()) return r;
    a = fs_shim_allocator_peek();
    if (a && (dev = context_device()) >= 0) *free += fs_mem_cached_free(a, dev);
    fs_shim_leave();
    return r;
}
FS_HOOK_FN(FS_HOOK_CU_MEM_GET_INFO, fs_drv_mem_get_info, NULL);

/* ---- passed through: virtual memory ---- */

/* A virtual-memory call made: logged at FSDPSHIM_LOG=debug and, when it
 * succeeded, traced (`ptr` and `handle` are read by the caller only then:
 * the outputs of cuMemAddressReserve and cuMemCreate). */
static CUresult vmm_called(CUresult r, fs_fmt_vmm op, int device, CUdeviceptr ptr, size_t size,
                           CUmemGenericAllocationHandle handle)
{
    fs_log(FS_LOG_DEBUG, "%s(%#llx, %zu bytes, device %d, handle %#llx) = %d", fs_fmt_vmm_name(op),
           (unsigned long long)ptr, size, device, (unsigned long long)handle, (int)r);
    if (r == CUDA_SUCCESS) fs_trace_vmm(op, device, ptr, size, handle);
    return r;
}

static CUresult fs_drv_mem_create(CUmemGenericAllocationHandle *handle, size_t size,
                                  const CUmemAllocationProp *prop, unsigned long long flags)
{
    __typeof__(&cuMemCreate) real = (__typeof__(&cuMemCreate))real_of(FS_HOOK_CU_MEM_CREATE);
    CUresult r = real(handle, size, prop, flags);

    return vmm_called(r, FS_VMM_CREATE, prop ? prop->location.id : -1, 0, size,
                      r == CUDA_SUCCESS ? *handle : 0);
}
FS_HOOK_FN(FS_HOOK_CU_MEM_CREATE, fs_drv_mem_create, fs_drv_mem_create);

static CUresult fs_drv_mem_release(CUmemGenericAllocationHandle handle)
{
    __typeof__(&cuMemRelease) real = (__typeof__(&cuMemRelease))real_of(FS_HOOK_CU_MEM_RELEASE);

    return vmm_called(real(handle), FS_VMM_RELEASE, -1, 0, 0, handle);
}
FS_HOOK_FN(FS_HOOK_CU_MEM_RELEASE, fs_drv_mem_release, fs_drv_mem_release);

static CUresult fs_drv_mem_map(CUdeviceptr ptr, size_t size, size_t offset,
                               CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    __typeof__(&cuMemMap) real = (__typeof__(&cuMemMap))real_of(FS_HOOK_CU_MEM_MAP);

    return vmm_called(real(ptr, size, offset, handle, flags), FS_VMM_MAP, -1, ptr, size, handle);
}
FS_HOOK_FN(FS_HOOK_CU_MEM_MAP, fs_drv_mem_map, fs_drv_mem_map);

static CUresult fs_drv_mem_unmap(CUdeviceptr ptr, size_t size)
{
    __typeof__(&cuMemUnmap) real = (__typeof__(&cuMemUnmap))real_of(FS_HOOK_CU_MEM_UNMAP);

    return vmm_called(real(ptr, size), FS_VMM_UNMAP, -1, ptr, size, 0);
}
FS_HOOK_FN(FS_HOOK_CU_MEM_UNMAP, fs_drv_mem_unmap, fs_drv_mem_unmap);

static CUresult fs_drv_address_reserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                       CUdeviceptr addr, unsigned long long flags)
{
    __typeof__(&cuMemAddressReserve) real =
        (__typeof__(&cuMemAddressReserve))real_of(FS_HOOK_CU_MEM_ADDRESS_RESERVE);
    CUresult r = real(ptr, size, alignment, addr, flags);

    return vmm_called(r, FS_VMM_RESERVE, -1, r == CUDA_SUCCESS ? *ptr : 0, size, 0);
}
FS_HOOK_FN(FS_HOOK_CU_MEM_ADDRESS_RESERVE, fs_drv_address_reserve, fs_drv_address_reserve);

static CUresult fs_drv_address_free(CUdeviceptr ptr, size_t size)
{
    __typeof__(&cuMemAddressFree) real =
        (__typeof__(&cuMemAddressFree))real_of(FS_HOOK_CU_MEM_ADDRESS_FREE);

    return vmm_called(real(ptr, size), FS_VMM_ADDRESS_FREE, -1, ptr, size, 0);
}
FS_HOOK_FN(FS_HOOK_CU_MEM_ADDRESS_FREE, fs_drv_address_free, fs_drv_address_free);
