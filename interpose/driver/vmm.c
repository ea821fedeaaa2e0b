/* vmm.c - expandable segments' memory through the driver's virtual-memory
 * API (vmm.h): reservations, and mappings of physical memory made and taken
 * back whole. The caller has made the device current. */
#include "vmm.h"

#include "../shim.h"

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

    r = v->create(&h, size, &prop, 0);
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
    return fs_vmm_status(v->unmap((CUdeviceptr)(uintptr_t)addr, size));
}
