/* vmm.c - expandable segments' memory through the driver's virtual-memory
 * API (vmm.h): reservations, and mappings of physical memory made and taken
 * back whole. The caller has made the device current.
 *
 * Sharing. Each mapping's memory is created exportable as a POSIX file
 * descriptor, as PyTorch creates its expandable segments' (its
 * TORCH_CUDA_EXPANDABLE_SEGMENTS_IPC=0 turns that off for both; a driver
 * that refuses the handle type gets memory without it, once and for all).
 * A page's descriptor, once exported, stays open until the page is
 * unmapped: the process that receives it takes it from this one
 * (pidfd_getfd) whenever it opens the handle. */
#include "vmm.h"

#include "shim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

fs_dev_status fs_vmm_status(CUresult r)
{
    return r == CUDA_SUCCESS               ? FS_DEV_OK
           : r == CUDA_ERROR_OUT_OF_MEMORY ? FS_DEV_OUT_OF_MEMORY
                                           : FS_DEV_ERROR;
}

static CUmemAllocationProp device_prop(int device)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
}

/* ---- sharing ---- */

static int shareable = -1; /* -1: not decided yet; 0: pages made without a handle type */

static bool pages_shareable(void)
{
    int s = __atomic_load_n(&shareable, __ATOMIC_RELAXED);
    if (s < 0) {
        const char *e = getenv("TORCH_CUDA_EXPANDABLE_SEGMENTS_IPC");
        s = !(e && (strcmp(e, "0") == 0 || strcmp(e, "false") == 0 || strcmp(e, "False") == 0));
        __atomic_store_n(&shareable, s, __ATOMIC_RELAXED);
    }
    return s != 0;
}

typedef struct exported {
    uintptr_t page;
    int fd;
} exported;

static pthread_mutex_t exports_lock = PTHREAD_MUTEX_INITIALIZER;
static exported *exports;
static size_t nexports, exports_cap;
static bool any_exported; /* read unlocked by every unmap */

fs_dev_status fs_vmm_export(const fs_vmm *v, void *page, int *fd)
{
    CUmemGenericAllocationHandle h;
    fs_dev_status st = FS_DEV_OK;
    int out = -1;

    if (!v->retain || !v->export_handle || !pages_shareable()) return FS_DEV_ERROR;
    pthread_mutex_lock(&exports_lock);
    for (size_t i = 0; i < nexports; i++) {
        if (exports[i].page == (uintptr_t)page) {
            *fd = exports[i].fd;
            pthread_mutex_unlock(&exports_lock);
            return FS_DEV_OK;
        }
    }
    if (nexports == exports_cap) {
        size_t cap = exports_cap ? 2 * exports_cap : 16;
        exported *grown = realloc(exports, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&exports_lock);
            return FS_DEV_ERROR;
        }
        exports = grown;
        exports_cap = cap;
    }
    /* the retained handle is one more reference, given back at once: the
     * descriptor holds the memory on its own */
    st = fs_vmm_status(v->retain(&h, page));
    if (st == FS_DEV_OK) {
        st = fs_vmm_status(v->export_handle(&out, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        (void)v->handle_release(h);
    }
    if (st == FS_DEV_OK) {
        exports[nexports++] = (exported){(uintptr_t)page, out};
        __atomic_store_n(&any_exported, true, __ATOMIC_RELEASE);
        *fd = out;
    }
    pthread_mutex_unlock(&exports_lock);
    return st == FS_DEV_OK ? FS_DEV_OK : FS_DEV_ERROR;
}

/* The descriptors of pages in [addr, addr + size), closed as they go. */
static void unexport(uintptr_t addr, size_t size)
{
    if (!__atomic_load_n(&any_exported, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&exports_lock);
    for (size_t i = 0; i < nexports;) {
        if (exports[i].page >= addr && exports[i].page < addr + size) {
            close(exports[i].fd);
            exports[i] = exports[--nexports];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&exports_lock);
}

/* 0 (no expandable segments) when the driver cannot say. */
size_t fs_vmm_granularity(const fs_vmm *v, int device)
{
    CUmemAllocationProp prop = device_prop(device);
    size_t g = 0;

    if (v->granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) g = 0;
    return g;
}

fs_dev_status fs_vmm_reserve(const fs_vmm *v, size_t size, void **out)
{
    CUdeviceptr p = 0;
    CUresult r = v->reserve(&p, size, 0, 0, 0);

    *out = r == CUDA_SUCCESS ? (void *)(uintptr_t)p : NULL;
    return fs_vmm_status(r);
}

fs_dev_status fs_vmm_release(const fs_vmm *v, void *base, size_t size)
{
    return fs_vmm_status(v->release((CUdeviceptr)(uintptr_t)base, size));
}

/* Undoing a step of fs_vmm_map: when even that fails, the range stays
 * mapped (or the handle allocated) behind the allocator's back; say so. */
static void undo_failed(const char *what, CUresult r, CUdeviceptr p, size_t size)
{
    fs_log(FS_LOG_WARN,
           "expandable_segments: %s failed (%d) while undoing a mapping of %zu bytes "
           "at %p: that memory stays held",
           what, (int)r, size, (void *)(uintptr_t)p);
}

/* Creates physical memory, maps it and grants the device access: one
 * mapping, which fs_vmm_unmap takes back whole. The allocation handle is
 * released once mapped, so the mapping alone keeps the memory and
 * fs_vmm_unmap frees it. All or nothing: a step that fails undoes the
 * others. */
fs_dev_status fs_vmm_map(const fs_vmm *v, int device, void *addr, size_t size)
{
    CUmemAllocationProp prop = device_prop(device);
    CUmemAccessDesc access = {.location = prop.location,
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)addr;
    CUmemGenericAllocationHandle h;
    CUresult r, u;
    bool mapped = false;

    if (pages_shareable()) {
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        r = v->create(&h, size, &prop, 0);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY) {
            fs_log(FS_LOG_INFO,
                   "expandable_segments: the driver cannot make shareable memory (%d): "
                   "its pages are not shared with other processes",
                   (int)r);
            __atomic_store_n(&shareable, 0, __ATOMIC_RELAXED);
            prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
            r = v->create(&h, size, &prop, 0);
        }
    } else {
        r = v->create(&h, size, &prop, 0);
    }
    if (r != CUDA_SUCCESS) return fs_vmm_status(r);
    r = v->map(p, size, 0, h, 0);
    mapped = r == CUDA_SUCCESS;
    if (mapped) r = v->set_access(p, size, &access, 1);
    if (r != CUDA_SUCCESS && mapped && (u = v->unmap(p, size)) != CUDA_SUCCESS)
        undo_failed("cuMemUnmap", u, p, size);
    u = v->handle_release(h);
    if (u != CUDA_SUCCESS) {
        if (r == CUDA_SUCCESS) {
            /* the memory would outlive the mapping: take the mapping back */
            r = u;
            if ((u = v->unmap(p, size)) != CUDA_SUCCESS) undo_failed("cuMemUnmap", u, p, size);
        } else {
            undo_failed("cuMemRelease", u, p, size);
        }
    }
    return fs_vmm_status(r);
}

/* Takes back one whole mapping made by fs_vmm_map, and with it the memory. */
fs_dev_status fs_vmm_unmap(const fs_vmm *v, void *addr, size_t size)
{
    unexport((uintptr_t)addr, size);
    return fs_vmm_status(v->unmap((CUdeviceptr)(uintptr_t)addr, size));
}
