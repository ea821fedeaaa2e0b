/* cuda_device.c - the allocator's device table over the program's own CUDA
 * runtime (plain segments from cudaMalloc, stream-ordered ones from
 * ordered_segments.c and, for expandable segments, the driver's
 * virtual-memory API).
 *
 * Every entry is an internal call: it must not re-enter the shim (the real
 * entry points are called directly), must not disturb the program's
 * last-error state, and must not invalidate a graph capture under way in
 * another thread (relaxed capture mode while any capture is active). Driver
 * entry points come through cudaGetDriverEntryPointByVersion, as PyTorch
 * gets them, so the shim never links libcuda either. */
#include "vmm.h"
#include "real.h"
#include "devices.h"

#include <cuda.h>
#include <pthread.h>
#include <string.h>

void fs_internal_begin(fs_internal_call *c, int device)
{
    fs_err_save(&c->err);
    c->relaxed = fs_capture_active() > 0;
    if (c->relaxed) {
        c->mode = cudaStreamCaptureModeRelaxed;
        FS_REAL(cudaThreadExchangeStreamCaptureMode)(&c->mode);
    }
    c->prev_device = -1;
    if (device >= 0) {
        int cur = fs_shim_current_device();
        if (cur != device && FS_REAL(cudaSetDevice)(device) == cudaSuccess) c->prev_device = cur;
    }
}

void fs_internal_end(fs_internal_call *c)
{
    if (c->prev_device >= 0) FS_REAL(cudaSetDevice)(c->prev_device);
    if (c->relaxed) FS_REAL(cudaThreadExchangeStreamCaptureMode)(&c->mode);
    fs_err_restore(&c->err);
}

static fs_dev_status status_of(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return FS_DEV_OK;
    case cudaErrorNotReady:
        return FS_DEV_NOT_READY;
    case cudaErrorMemoryAllocation:
        return FS_DEV_OUT_OF_MEMORY;
    default:
        return FS_DEV_ERROR;
    }
}

/* ---- segments ---- */

/* Stream-ordered segments are ordered_segments.c's: mappings of their own
 * through the driver's virtual-memory API, or a memory pool's blocks where
 * that cannot be reached. */
static fs_dev_status segment_alloc(void *ctx, int device, fs_seg_memory mem, size_t size,
                                   void **out)
{
    fs_internal_call c;
    fs_dev_status st;

    (void)ctx;
    fs_internal_begin(&c, device);
    st = mem == FS_SEG_ORDERED ? fs_ordered_alloc(device, size, out)
                               : status_of(FS_REAL(cudaMalloc)(out, size));
    fs_internal_end(&c);
    return st;
}

static fs_dev_status segment_free(void *ctx, int device, fs_seg_memory mem, void *ptr)
{
    fs_internal_call c;
    fs_dev_status st;

    (void)ctx;
    fs_internal_begin(&c, device);
    st = mem == FS_SEG_ORDERED ? fs_ordered_free(device, ptr) : status_of(FS_REAL(cudaFree)(ptr));
    fs_internal_end(&c);
    return st;
}

static fs_dev_status event_create(void *ctx, int device, fs_event_t *out)
{
    fs_internal_call c;
    cudaEvent_t ev = NULL;
    cudaError_t e;

    (void)ctx;
    fs_internal_begin(&c, device);
    e = FS_REAL(cudaEventCreateWithFlags)(&ev, cudaEventDisableTiming);
    fs_internal_end(&c);
    *out = (fs_event_t)ev;
    return status_of(e);
}

static void event_destroy(void *ctx, int device, fs_event_t event)
{
    fs_internal_call c;

    (void)ctx;
    fs_internal_begin(&c, device);
    FS_REAL(cudaEventDestroy)((cudaEvent_t)event);
    fs_internal_end(&c);
}

static fs_dev_status event_record(void *ctx, int device, fs_event_t event, fs_stream_t stream)
{
    fs_internal_call c;
    cudaError_t e;

    (void)ctx;
    fs_internal_begin(&c, device);
    e = FS_REAL(cudaEventRecord)((cudaEvent_t)event, fs_stream_handle(stream));
    fs_internal_end(&c);
    return status_of(e);
}

static fs_dev_status event_query(void *ctx, int device, fs_event_t event)
{
    fs_internal_call c;
    cudaError_t e;

    (void)ctx;
    (void)device;
    fs_internal_begin(&c, -1);
    e = FS_REAL(cudaEventQuery)((cudaEvent_t)event);
    fs_internal_end(&c);
    return status_of(e);
}

static fs_dev_status event_synchronize(void *ctx, int device, fs_event_t event)
{
    fs_internal_call c;
    cudaError_t e;

    (void)ctx;
    (void)device;
    fs_internal_begin(&c, -1);
    e = FS_REAL(cudaEventSynchronize)((cudaEvent_t)event);
    fs_internal_end(&c);
    return status_of(e);
}

static fs_dev_status stream_wait_event(void *ctx, int device, fs_stream_t stream, fs_event_t event)
{
    fs_internal_call c;
    cudaError_t e;

    (void)ctx;
    (void)device;
    fs_internal_begin(&c, -1);
    e = FS_REAL(cudaStreamWaitEvent)(fs_stream_handle(stream), (cudaEvent_t)event, 0);
    fs_internal_end(&c);
    return status_of(e);
}

static bool stream_is_capturing(void *ctx, int device, fs_stream_t stream)
{
    (void)ctx;
    (void)device;
    return fs_capture_active() > 0 && fs_capture_key_capturing(stream);
}

static bool capture_underway(void *ctx)
{
    (void)ctx;
    return fs_capture_global_underway();
}

static fs_dev_status device_synchronize(void *ctx, int device)
{
    fs_internal_call c;
    cudaError_t e;

    (void)ctx;
    fs_internal_begin(&c, device);
    e = FS_REAL(cudaDeviceSynchronize)();
    fs_internal_end(&c);
    return status_of(e);
}

bool fs_cuda_mem_info(int device, size_t *free, size_t *total)
{
    fs_internal_call c;
    cudaError_t e;

    *free = *total = 0;
    fs_internal_begin(&c, device);
    e = FS_REAL(cudaMemGetInfo)(free, total);
    fs_internal_end(&c);
    return e == cudaSuccess;
}

static size_t mem_capacity(void *ctx, int device)
{
    size_t free, total;

    (void)ctx;
    return fs_cuda_mem_info(device, &free, &total) ? total : 0;
}

/* ---- expandable segments: the driver's virtual-memory API (core/vmm.c) ---- */

static fs_vmm drv;

static bool driver_entry(const char *name, void **out)
{
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    __typeof__(&cudaGetDriverEntryPointByVersion) get = FS_REAL(cudaGetDriverEntryPointByVersion);
    fs_internal_call c;
    cudaError_t e;

    if (!get) return false;
    fs_internal_begin(&c, -1);
    e = get(name, out, 12000, cudaEnableDefault, &q);
    fs_internal_end(&c);
    return e == cudaSuccess && q == cudaDriverEntryPointSuccess && *out;
}

static bool drv_loaded;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void driver_vm_load(void)
{
    drv_loaded = driver_entry("cuMemGetAllocationGranularity", (void **)&drv.granularity) &&
                 driver_entry("cuMemAddressReserve", (void **)&drv.reserve) &&
                 driver_entry("cuMemAddressFree", (void **)&drv.release) &&
                 driver_entry("cuMemCreate", (void **)&drv.create) &&
                 driver_entry("cuMemMap", (void **)&drv.map) &&
                 driver_entry("cuMemSetAccess", (void **)&drv.set_access) &&
                 driver_entry("cuMemRelease", (void **)&drv.handle_release) &&
                 driver_entry("cuMemUnmap", (void **)&drv.unmap);
    /* sharing pages with other processes: optional */
    if (!driver_entry("cuMemRetainAllocationHandle", (void **)&drv.retain) ||
        !driver_entry("cuMemExportToShareableHandle", (void **)&drv.export_handle))
        drv.retain = NULL, drv.export_handle = NULL;
}

const fs_vmm *fs_cuda_vmm(void)
{
    pthread_once(&drv_once, driver_vm_load);
    return drv_loaded ? &drv : NULL;
}

static size_t vm_granularity(void *ctx, int device)
{
    (void)ctx;
    return fs_vmm_granularity(&drv, device);
}

static fs_dev_status vm_reserve(void *ctx, int device, size_t size, void **out)
{
    fs_internal_call c;
    fs_dev_status st;

    (void)ctx;
    fs_internal_begin(&c, device);
    st = fs_vmm_reserve(&drv, size, out);
    fs_internal_end(&c);
    return st;
}

static fs_dev_status vm_release(void *ctx, int device, void *base, size_t size)
{
    fs_internal_call c;
    fs_dev_status st;

    (void)ctx;
    fs_internal_begin(&c, device);
    st = fs_vmm_release(&drv, base, size);
    fs_internal_end(&c);
    return st;
}

static fs_dev_status vm_map(void *ctx, int device, void *addr, size_t size)
{
    fs_internal_call c;
    fs_dev_status st;

    (void)ctx;
    fs_internal_begin(&c, device);
    st = fs_vmm_map(&drv, device, addr, size);
    fs_internal_end(&c);
    return st;
}

static fs_dev_status vm_unmap(void *ctx, int device, void *addr, size_t size)
{
    fs_internal_call c;
    fs_dev_status st;

    (void)ctx;
    fs_internal_begin(&c, device);
    st = fs_vmm_unmap(&drv, addr, size);
    fs_internal_end(&c);
    return st;
}

fs_dev_status fs_cuda_vm_export(int device, void *page, int *fd)
{
    fs_internal_call c;
    fs_dev_status st;

    if (!fs_cuda_vmm()) return FS_DEV_ERROR;
    fs_internal_begin(&c, device);
    st = fs_vmm_export(&drv, page, fd);
    fs_internal_end(&c);
    return st;
}

static fs_device_ops cuda_ops = {
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

const fs_device_ops *fs_cuda_device_ops(bool want_vm)
{
    if (want_vm && !cuda_ops.vm_map) {
        if (fs_cuda_vmm()) {
            cuda_ops.vm_granularity = vm_granularity;
            cuda_ops.vm_reserve = vm_reserve;
            cuda_ops.vm_release = vm_release;
            cuda_ops.vm_map = vm_map;
            cuda_ops.vm_unmap = vm_unmap;
        }
    }
    return &cuda_ops;
}
