/* driver_device.c - the allocator's device table over the CUDA driver API,
 * for a process whose CUDA calls reach the shim only through the driver: a
 * program that carries NVIDIA's static runtime (nvcc's default link) loads
 * no libcudart.so, and its runtime reaches libcuda.so.1 by dlopen, dlsym and
 * cuGetProcAddress, which the shim hooks (cuda_driver.c). The table over
 * the runtime (core/cuda_device.c) has nothing to call there.
 *
 * Every call runs in the device's primary context, the one the static
 * runtime works in (and the only one whose allocations the shim serves:
 * fs_driver_served_device): made current for the call when the thread has
 * another (or none), and the thread's own put back after it. Each device's
 * primary context is retained once, the first time the shim needs it, and
 * kept for the life of the process, as the runtime keeps it.
 *
 * The functions are the adopted driver's own (cuda_driver.c), read from its
 * symbol table, never the shim's hooks. CUstream and cudaStream_t are the
 * same handles, the legacy and per-thread ones included, so the stream
 * handles of the allocator's keys (core/streams.c) serve as they are.
 *
 * Both kinds of segment are plain driver allocations (cuMemAlloc_v2): the
 * runtime table keeps its stream-ordered segments in a memory pool of its
 * own only so that they survive cudaDeviceReset as the program's
 * cudaMallocAsync memory does, and a process without the runtime has no
 * cudaDeviceReset; cuDevicePrimaryCtxReset takes every kind of memory. */
#include "hooks.h"
#include "real.h"
#include "lifetime.h"
#include "devices.h"
#include "vmm.h"

#include <sched.h>
#include <string.h>

#define MAX_DEVICES 64

struct driver_fns {
    __typeof__(&cuDeviceGetCount) device_count;
    __typeof__(&cuDeviceTotalMem_v2) total_mem;
    __typeof__(&cuDevicePrimaryCtxGetState) primary_state;
    __typeof__(&cuDevicePrimaryCtxRetain) primary_retain;
    __typeof__(&cuDevicePrimaryCtxRelease_v2) primary_release;
    __typeof__(&cuCtxGetCurrent) ctx_current;
    __typeof__(&cuCtxGetDevice) ctx_device;
    __typeof__(&cuCtxPushCurrent_v2) ctx_push;
    __typeof__(&cuCtxPopCurrent_v2) ctx_pop;
    __typeof__(&cuCtxSynchronize) ctx_sync;
    __typeof__(&cuMemAlloc_v2) mem_alloc;
    __typeof__(&cuMemFree_v2) mem_free;
    __typeof__(&cuEventCreate) event_create;
    __typeof__(&cuEventRecord) event_record;
    __typeof__(&cuEventQuery) event_query;
    __typeof__(&cuEventSynchronize) event_sync;
    __typeof__(&cuEventDestroy_v2) event_destroy;
    __typeof__(&cuStreamWaitEvent) stream_wait;
    __typeof__(&cuStreamIsCapturing) stream_capturing;
    __typeof__(&cuStreamGetFlags) stream_flags;
    __typeof__(&cuStreamGetCtx) stream_ctx;
};
static const char *const fn_names[] = {
    "cuDeviceGetCount",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxGetState",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetCurrent",
    "cuCtxGetDevice",
    "cuCtxPushCurrent_v2",
    "cuCtxPopCurrent_v2",
    "cuCtxSynchronize",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuEventDestroy_v2",
    "cuStreamWaitEvent",
    "cuStreamIsCapturing",
    "cuStreamGetFlags",
    "cuStreamGetCtx",
};
_Static_assert(sizeof fn_names / sizeof fn_names[0] ==
                   sizeof(struct driver_fns) / sizeof(void (*)(void)),
               "one name per function");

static struct driver_fns cu;
/* FILLED once `cu` holds every function; MISSING when the driver lacks one */
enum { NOT_YET, FILLING, FILLED, MISSING };
static int loaded;
static fs_vmm vmm;
static bool vmm_found;

static CUcontext primary[MAX_DEVICES];

/* Reads `cu` from the adopted driver (a served call comes after the
 * adoption), without a lock: threads that race each read the functions,
 * one publishes them, the others wait for that copy, which blocks on
 * nothing. */
static bool load(void)
{
    int known = __atomic_load_n(&loaded, __ATOMIC_ACQUIRE), none = NOT_YET;
    void *fns[sizeof fn_names / sizeof fn_names[0]];

    if (fs_likely(known == FILLED)) return true;
    if (known == MISSING) return false;
    for (size_t i = 0; i < sizeof fn_names / sizeof fn_names[0]; i++) {
        if ((fns[i] = fs_driver_function(fn_names[i]))) continue;
        /* nothing is found before a driver is adopted: try again later */
        if (fs_driver_function("cuInit") &&
            __atomic_exchange_n(&loaded, MISSING, __ATOMIC_ACQ_REL) != MISSING)
            fs_log(FS_LOG_WARN, "the driver has no %s: driver calls are not served", fn_names[i]);
        return false;
    }
    if (__atomic_compare_exchange_n(&loaded, &none, FILLING, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        memcpy(&cu, fns, sizeof cu);
        __atomic_store_n(&loaded, FILLED, __ATOMIC_RELEASE);
        return true;
    }
    while ((known = __atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) == FILLING)
        sched_yield();
    return known == FILLED;
}

int fs_driver_device_count(void)
{
    int n = 0;

    if (!load() || cu.device_count(&n) != CUDA_SUCCESS) return -1;
    return n;
}

/* The device's primary context, retained on first use; NULL while it is not
 * active: then no call of the program's was made in it, and retaining it
 * would create it. */
static CUcontext primary_of(int device)
{
    CUcontext ctx = __atomic_load_n(&primary[device], __ATOMIC_ACQUIRE), none = NULL;
    unsigned flags;
    int active = 0;

    if (fs_likely(ctx != NULL)) return ctx;
    if (cu.primary_state(device, &flags, &active) != CUDA_SUCCESS || !active ||
        cu.primary_retain(&ctx, device) != CUDA_SUCCESS)
        return NULL;
    if (!__atomic_compare_exchange_n(&primary[device], &none, ctx, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        cu.primary_release(device); /* another thread's retain is the one kept */
        return none;
    }
    return ctx;
}

int fs_driver_served_device(void)
{
    CUcontext cur = NULL;
    CUdevice dev;

    if (!load() || cu.ctx_current(&cur) != CUDA_SUCCESS || !cur ||
        cu.ctx_device(&dev) != CUDA_SUCCESS || dev < 0 || dev >= MAX_DEVICES)
        return -1;
    return primary_of(dev) == cur ? dev : -1;
}

void fs_driver_device_reset(void)
{
    memset(primary, 0, sizeof primary);
}

FS_LIFETIME(driver) = {.order = FS_ORDER_DRIVER, .fork_child = fs_driver_device_reset};

/* Makes `device`'s primary context current for a call; *pushed says whether
 * fs_ctx_leave has the thread's own to put back. */
static bool ctx_enter(int device, bool *pushed)
{
    CUcontext cur = NULL, p = device >= 0 && device < MAX_DEVICES ? primary_of(device) : NULL;

    *pushed = false;
    if (!p) return false;
    if (cu.ctx_current(&cur) == CUDA_SUCCESS && cur == p) return true;
    *pushed = cu.ctx_push(p) == CUDA_SUCCESS;
    return *pushed;
}

static void ctx_leave(bool pushed)
{
    CUcontext ctx;

    if (pushed) cu.ctx_pop(&ctx);
}

static fs_dev_status status_of(CUresult r)
{
    return r == CUDA_ERROR_NOT_READY ? FS_DEV_NOT_READY : fs_vmm_status(r);
}

bool fs_driver_stream_probe(CUstream s, int *device, unsigned *flags)
{
    CUcontext ctx = NULL;

    if (!load() || cu.stream_flags(s, flags) != CUDA_SUCCESS ||
        cu.stream_ctx(s, &ctx) != CUDA_SUCCESS)
        return false;
    /* a stream of the program's is its device's primary context's; one of
     * another context is not the shim's to order */
    for (int d = 0; d < MAX_DEVICES; d++)
        if (__atomic_load_n(&primary[d], __ATOMIC_ACQUIRE) == ctx) {
            *device = d;
            return true;
        }
    return false;
}

/* ---- the table ---- */

static fs_dev_status segment_alloc(void *ctx, int device, fs_seg_memory mem, size_t size,
                                   void **out)
{
    CUdeviceptr p = 0;
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    bool pushed;

    (void)ctx;
    (void)mem;
    if (ctx_enter(device, &pushed)) r = cu.mem_alloc(&p, size);
    ctx_leave(pushed);
    *out = (void *)(uintptr_t)p;
    return status_of(r);
}

static fs_dev_status segment_free(void *ctx, int device, fs_seg_memory mem, void *ptr)
{
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    bool pushed;

    (void)ctx;
    (void)mem;
    if (ctx_enter(device, &pushed)) r = cu.mem_free((CUdeviceptr)(uintptr_t)ptr);
    ctx_leave(pushed);
    return status_of(r);
}

static fs_dev_status event_create(void *ctx, int device, fs_event_t *out)
{
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    CUevent ev = NULL;
    bool pushed;

    (void)ctx;
    if (ctx_enter(device, &pushed)) r = cu.event_create(&ev, CU_EVENT_DISABLE_TIMING);
    ctx_leave(pushed);
    *out = (fs_event_t)ev;
    return status_of(r);
}

static void event_destroy(void *ctx, int device, fs_event_t event)
{
    bool pushed;

    (void)ctx;
    if (ctx_enter(device, &pushed)) cu.event_destroy((CUevent)event);
    ctx_leave(pushed);
}

/* The legacy and per-thread streams are the current context's: the
 * device's primary one, made current. */
static fs_dev_status event_record(void *ctx, int device, fs_event_t event, fs_stream_t stream)
{
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    bool pushed;

    (void)ctx;
    if (ctx_enter(device, &pushed))
        r = cu.event_record((CUevent)event, (CUstream)fs_stream_handle(stream));
    ctx_leave(pushed);
    return status_of(r);
}

static fs_dev_status event_query(void *ctx, int device, fs_event_t event)
{
    (void)ctx;
    (void)device;
    return status_of(cu.event_query((CUevent)event));
}

static fs_dev_status event_synchronize(void *ctx, int device, fs_event_t event)
{
    (void)ctx;
    (void)device;
    return status_of(cu.event_sync((CUevent)event));
}

static fs_dev_status stream_wait_event(void *ctx, int device, fs_stream_t stream, fs_event_t event)
{
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    bool pushed;

    (void)ctx;
    if (ctx_enter(device, &pushed))
        r = cu.stream_wait((CUstream)fs_stream_handle(stream), (CUevent)event, 0);
    ctx_leave(pushed);
    return status_of(r);
}

/* Asked of the driver: the program's captures (cuStreamBeginCapture) do not
 * pass through the shim. A stream the driver cannot answer for is taken to
 * be capturing, so that nothing is recorded on it. */
static bool stream_is_capturing(void *ctx, int device, fs_stream_t stream)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    bool pushed;

    (void)ctx;
    if (ctx_enter(device, &pushed))
        r = cu.stream_capturing((CUstream)fs_stream_handle(stream), &status);
    ctx_leave(pushed);
    return r != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* Unknown through the driver, which tells of one stream at a time: the
 * shim sees no capture begin. */
static bool capture_underway(void *ctx)
{
    (void)ctx;
    return false;
}

static fs_dev_status device_synchronize(void *ctx, int device)
{
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    bool pushed;

    (void)ctx;
    if (ctx_enter(device, &pushed)) r = cu.ctx_sync();
    ctx_leave(pushed);
    return status_of(r);
}

static size_t mem_capacity(void *ctx, int device)
{
    size_t total = 0;

    (void)ctx;
    return cu.total_mem(&total, device) == CUDA_SUCCESS ? total : 0;
}

/* The real cuMemGetInfo_v2, not the shim's hook, which adds the cache. */
bool fs_driver_mem_info(int device, size_t *free, size_t *total)
{
    __typeof__(&cuMemGetInfo_v2) get = fs_hook_real(FS_HOOK_CU_MEM_GET_INFO);
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    bool pushed;

    *free = *total = 0;
    if (get && load() && ctx_enter(device, &pushed)) {
        r = get(free, total);
        ctx_leave(pushed);
    }
    return r == CUDA_SUCCESS;
}

/* ---- expandable segments (vmm.c) ---- */

static size_t vm_granularity(void *ctx, int device)
{
    (void)ctx;
    return fs_vmm_granularity(&vmm, device);
}

static fs_dev_status vm_reserve(void *ctx, int device, size_t size, void **out)
{
    fs_dev_status st = FS_DEV_ERROR;
    bool pushed;

    (void)ctx;
    *out = NULL;
    if (ctx_enter(device, &pushed)) st = fs_vmm_reserve(&vmm, size, out);
    ctx_leave(pushed);
    return st;
}

static fs_dev_status vm_release(void *ctx, int device, void *base, size_t size)
{
    fs_dev_status st = FS_DEV_ERROR;
    bool pushed;

    (void)ctx;
    if (ctx_enter(device, &pushed)) st = fs_vmm_release(&vmm, base, size);
    ctx_leave(pushed);
    return st;
}

static fs_dev_status vm_map(void *ctx, int device, void *addr, size_t size)
{
    fs_dev_status st = FS_DEV_ERROR;
    bool pushed;

    (void)ctx;
    if (ctx_enter(device, &pushed)) st = fs_vmm_map(&vmm, device, addr, size);
    ctx_leave(pushed);
    return st;
}

static fs_dev_status vm_unmap(void *ctx, int device, void *addr, size_t size)
{
    fs_dev_status st = FS_DEV_ERROR;
    bool pushed;

    (void)ctx;
    if (ctx_enter(device, &pushed)) st = fs_vmm_unmap(&vmm, addr, size);
    ctx_leave(pushed);
    return st;
}

/* The real functions, never the shim's hooks for the same entry points. */
static bool vmm_load(void)
{
    vmm.granularity = fs_driver_function("cuMemGetAllocationGranularity");
    vmm.set_access = fs_driver_function("cuMemSetAccess");
    vmm.reserve = fs_hook_real(FS_HOOK_CU_MEM_ADDRESS_RESERVE);
    vmm.release = fs_hook_real(FS_HOOK_CU_MEM_ADDRESS_FREE);
    vmm.create = fs_hook_real(FS_HOOK_CU_MEM_CREATE);
    vmm.map = fs_hook_real(FS_HOOK_CU_MEM_MAP);
    vmm.handle_release = fs_hook_real(FS_HOOK_CU_MEM_RELEASE);
    vmm.unmap = fs_hook_real(FS_HOOK_CU_MEM_UNMAP);
    return vmm.granularity && vmm.set_access && vmm.reserve && vmm.release && vmm.create &&
           vmm.map && vmm.handle_release && vmm.unmap;
}

static fs_device_ops driver_ops = {
    .segment_alloc = segment_alloc,
    .segment_free = segment_free,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_query = event_query,
    .event_synchronize = event_synchronize,
    .stream_wait_event = stream_wait_event,
    .stream_is_capturing = stream_is_capturing,
    .capture_underway = capture_underway,
    .device_synchronize = device_synchronize,
    .mem_capacity = mem_capacity,
};

const fs_device_ops *fs_driver_device_ops(bool want_vm)
{
    if (want_vm && !vmm_found) {
        if ((vmm_found = vmm_load())) {
            driver_ops.vm_granularity = vm_granularity;
            driver_ops.vm_reserve = vm_reserve;
            driver_ops.vm_release = vm_release;
            driver_ops.vm_map = vm_map;
            driver_ops.vm_unmap = vm_unmap;
        }
    }
    return &driver_ops;
}
