/* vmm.c - the driver's virtual memory management API (libcuda.so.1),
 * implemented for real on the host's own virtual memory:
 *
 *   cuMemAddressReserve   a PROT_NONE, MAP_NORESERVE mapping
 *   cuMemCreate           a memfd of the size, charged to the device
 *   cuMemMap              the memfd mapped MAP_SHARED|MAP_FIXED into the
 *                         reservation (still PROT_NONE)
 *   cuMemSetAccess        mprotect (checked, but the mapping stays
 *                         PROT_NONE in a dry run, FSDPSHIM_SIM_DATA=0);
 *                         each mapping keeps what each device was granted,
 *                         which cuMemGetAccess answers
 *   cuMemUnmap            the range put back to PROT_NONE
 *   cuMemRelease          the memfd closed; its capacity returns once the
 *                         last mapping of it is gone, as with a GPU
 *   cuMemRetainAllocationHandle
 *                         the handle of the allocation mapped at an address,
 *                         one more cuMemRelease owed
 *   cuMemExportToShareableHandle / cuMemImportFromShareableHandle
 *                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR only: a
 *                         dup of the memfd, which another process can
 *                         import (after pidfd_getfd or SCM_RIGHTS) and map;
 *                         the memory stays charged to the exporting device
 *                         and process. Fabric handles need an IMEX
 *                         channel, which the process does not have: a
 *                         cuMemCreate asking for them is
 *                         CUDA_ERROR_NOT_PERMITTED, as an H200 answered
 *                         (run 7); exporting or importing one
 *                         CUDA_ERROR_NOT_SUPPORTED (not probed)
 *
 * Two mappings of one allocation therefore really alias, which is what
 * makes VMM-based allocators (expandable segments) testable here. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver_internal.h"

#include <cupti.h> /* the callback ids and params structs */

#define GRANULARITY ((size_t)2 << 20)

struct vmm_alloc {
    int fd;
    size_t size;
    int device;
    int charged; /* capacity taken here (0 for an imported allocation) */
    int refs;    /* cuMemCreate/Import/Retain minus cuMemRelease; 0: released */
    int maps;
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle handle; /* its key in allocs */
};

#define MAX_DEVICES 64 /* FSDPSHIM_SIM_DEVICES is at most 64 */

struct vmm_span {
    struct vmm_span *next;
    uintptr_t base;
    size_t size;
    struct vmm_alloc *alloc; /* NULL for a reservation */
    /* A mapping: the access cuMemSetAccess last granted each device
     * (CUmemAccess_flags; none until granted). */
    unsigned char access[MAX_DEVICES];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct vmm_span *reservations, *mappings;
static struct sim_handle_set *allocs;

static void fork_prepare(void)
{
    pthread_mutex_lock(&mu);
    sim_handles_lock(allocs);
}

static void fork_after(void)
{
    sim_handles_unlock(allocs);
    pthread_mutex_unlock(&mu);
}

/* The fork handler is registered after the device model's (sim_init
 * registers that), so it runs first and this lock is taken before the
 * model's, the order the VMM calls take them in (../core/fork.c). */
static void allocs_init(void)
{
    sim_init();
    allocs = sim_handles_new();
    pthread_atfork(fork_prepare, fork_after, fork_after);
}

static struct sim_handle_set *alloc_handles(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, allocs_init);
    return allocs;
}

static struct vmm_alloc *alloc_of(CUmemGenericAllocationHandle h)
{
    return sim_handles_get(alloc_handles(), (void *)(uintptr_t)h);
}

static int device_location(const CUmemLocation *loc)
{
    return loc->type == CU_MEM_LOCATION_TYPE_DEVICE && sim_dev(loc->id) != NULL;
}

SIM_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!granularity || !prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        !device_location(&prop->location) ||
        (unsigned)option > CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = GRANULARITY;
    return CUDA_SUCCESS;
}

/* Handle types an allocation can be exported as: a POSIX file descriptor.
 * The device says it supports fabric handles, but they need an IMEX
 * channel, which no process on the sim's node has: not permitted, as an
 * H200 without one answered (driver 580, run 7), rather than not
 * supported. */
static CUresult check_handle_types(unsigned long long types)
{
    if (types & CU_MEM_HANDLE_TYPE_FABRIC) return CUDA_ERROR_NOT_PERMITTED;
    if (types & ~(unsigned long long)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult add_alloc(int fd, size_t size, int device, int charged,
                          const CUmemAllocationProp *prop, CUmemGenericAllocationHandle *handle)
{
    struct vmm_alloc *a = calloc(1, sizeof *a);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    void *key = sim_handles_new_key();
    *a = (struct vmm_alloc){fd, size, device, charged, 1, 0, *prop, (uintptr_t)key};
    sim_handles_add(alloc_handles(), key, a);
    *handle = a->handle;
    return CUDA_SUCCESS;
}

static CUresult cuMemCreate_impl(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!handle || !prop || flags != 0 || size == 0 || size % GRANULARITY ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || !device_location(&prop->location))
        return CUDA_ERROR_INVALID_VALUE;
    if ((res = check_handle_types(prop->requestedHandleTypes))) return res;
    struct sim_device *dev = sim_dev(prop->location.id);
    if (size > sim_cfg.capacity || sim_capacity_take(dev, size)) {
        sim_capacity_refused(dev, size, cudaErrorMemoryAllocation);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* The device is in the name, so that an importer knows it. */
    char name[32];
    snprintf(name, sizeof name, "fsdpshim-sim-vmm-%d", dev->ordinal);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0 ||
        add_alloc(fd, size, dev->ordinal, 1, prop, handle)) {
        if (fd >= 0) close(fd);
        sim_capacity_give(dev, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    sim_capacity_count(dev, 0);
    return CUDA_SUCCESS;
}

/* Frees an allocation that is released and no longer mapped (under mu). */
static void maybe_destroy(struct vmm_alloc *a)
{
    if (a->refs || a->maps) return;
    close(a->fd);
    if (a->charged) {
        sim_capacity_give(sim_dev(a->device), a->size);
        sim_capacity_count(sim_dev(a->device), 1);
    }
    free(a);
}

static CUresult cuMemRelease_impl(CUmemGenericAllocationHandle h)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    pthread_mutex_lock(&mu);
    struct vmm_alloc *a = alloc_of(h);
    if (!a) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (--a->refs == 0) {
        sim_handles_remove(alloc_handles(), (void *)(uintptr_t)h);
        maybe_destroy(a);
    }
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

static CUresult cuMemAddressReserve_impl(CUdeviceptr *ptr, size_t size, size_t alignment,
                                         CUdeviceptr addr, unsigned long long flags)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    (void)addr; /* a hint only; the sim lets the kernel choose */
    if (!ptr || size == 0 || size % GRANULARITY || flags != 0 || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment < GRANULARITY) alignment = GRANULARITY;
    /* Over-reserve, then trim to the requested alignment. */
    size_t len = size + alignment;
    char *raw = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base = ((uintptr_t)raw + alignment - 1) & ~(uintptr_t)(alignment - 1);
    if (base > (uintptr_t)raw) munmap(raw, base - (uintptr_t)raw);
    size_t tail = (uintptr_t)raw + len - (base + size);
    if (tail) munmap((void *)(base + size), tail);
    struct vmm_span *r = malloc(sizeof *r);
    if (!r) {
        munmap((void *)base, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&mu);
    *r = (struct vmm_span){reservations, base, size, NULL, {0}};
    reservations = r;
    pthread_mutex_unlock(&mu);
    *ptr = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

static struct vmm_span **find_span(struct vmm_span **list, uintptr_t base, size_t size)
{
    for (struct vmm_span **pp = list; *pp; pp = &(*pp)->next)
        if ((*pp)->base == base && (size == 0 || (*pp)->size == size)) return pp;
    return NULL;
}

static int inside_reservation(uintptr_t base, size_t size)
{
    for (struct vmm_span *r = reservations; r; r = r->next)
        if (base >= r->base && base + size <= r->base + r->size) return 1;
    return 0;
}

static int overlaps_mapping(uintptr_t base, size_t size)
{
    for (struct vmm_span *m = mappings; m; m = m->next)
        if (base < m->base + m->size && m->base < base + size) return 1;
    return 0;
}

static CUresult cuMemAddressFree_impl(CUdeviceptr ptr, size_t size)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    pthread_mutex_lock(&mu);
    struct vmm_span **pp = find_span(&reservations, (uintptr_t)ptr, size);
    if (!pp || overlaps_mapping((uintptr_t)ptr, size)) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct vmm_span *r = *pp;
    *pp = r->next;
    pthread_mutex_unlock(&mu);
    munmap((void *)r->base, r->size);
    free(r);
    return CUDA_SUCCESS;
}

static CUresult cuMemMap_impl(CUdeviceptr ptr, size_t size, size_t offset,
                              CUmemGenericAllocationHandle h, unsigned long long flags)
{
    uintptr_t base = (uintptr_t)ptr;
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (size == 0 || size % GRANULARITY || base % GRANULARITY || offset % GRANULARITY || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct vmm_span *m = malloc(sizeof *m);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    struct vmm_alloc *a = alloc_of(h);
    if (!a || offset > a->size || size > a->size - offset)
        res = CUDA_ERROR_INVALID_HANDLE;
    else if (!inside_reservation(base, size) || overlaps_mapping(base, size))
        res = CUDA_ERROR_INVALID_VALUE;
    else if (mmap((void *)base, size, PROT_NONE, MAP_SHARED | MAP_FIXED, a->fd, (off_t)offset) ==
             MAP_FAILED)
        res = CUDA_ERROR_OUT_OF_MEMORY;
    if (res) {
        pthread_mutex_unlock(&mu);
        free(m);
        return res;
    }
    *m = (struct vmm_span){mappings, base, size, a, {0}};
    mappings = m;
    a->maps++;
    struct sim_range r = {base, size, SIM_RANGE_VMM, a->device, 1, NULL, 0, 0};
    sim_registry_add(&r);
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

static CUresult cuMemUnmap_impl(CUdeviceptr ptr, size_t size)
{
    uintptr_t base = (uintptr_t)ptr, end = base + size;
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    /* The range must consist of whole mappings. */
    size_t covered = 0;
    for (struct vmm_span *m = mappings; m; m = m->next)
        if (m->base >= base && m->base + m->size <= end) covered += m->size;
    if (covered != size) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (struct vmm_span **pp = &mappings; *pp;) {
        struct vmm_span *m = *pp;
        if (m->base < base || m->base + m->size > end) {
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        sim_registry_remove(m->base);
        mmap((void *)m->base, m->size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        m->alloc->maps--;
        maybe_destroy(m->alloc);
        free(m);
    }
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                size_t count)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    uintptr_t base = (uintptr_t)ptr, end = base + size;
    if (!desc || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
    int prot = PROT_NONE;
    for (size_t i = 0; i < count; i++) {
        if (!device_location(&desc[i].location)) return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            prot = PROT_READ | PROT_WRITE;
        else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE)
            prot = PROT_READ;
        else if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
                 desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&mu);
    size_t covered = 0;
    for (struct vmm_span *m = mappings; m; m = m->next)
        if (m->base < end && base < m->base + m->size) {
            uintptr_t lo = m->base > base ? m->base : base;
            uintptr_t hi = m->base + m->size < end ? m->base + m->size : end;
            covered += hi - lo;
        }
    if (!sim_cfg.moves_data) prot = PROT_NONE; /* nothing may touch it in a dry run */
    if (covered != size)
        res = CUDA_ERROR_INVALID_VALUE; /* every byte must be mapped */
    else if (mprotect((void *)base, size, prot) != 0)
        res = CUDA_ERROR_INVALID_VALUE;
    for (struct vmm_span *m = mappings; !res && m; m = m->next)
        if (m->base < end && base < m->base + m->size)
            for (size_t i = 0; i < count; i++)
                m->access[desc[i].location.id] = (unsigned char)desc[i].flags;
    pthread_mutex_unlock(&mu);
    return res;
}

/* What cuMemSetAccess granted the device `location` names on the mapping
 * that holds ptr. */
SIM_API CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                                CUdeviceptr ptr)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!flags || !location) return CUDA_ERROR_INVALID_VALUE;
    if (!device_location(location)) return CUDA_ERROR_INVALID_DEVICE;
    res = CUDA_ERROR_INVALID_VALUE; /* not mapped */
    pthread_mutex_lock(&mu);
    for (struct vmm_span *m = mappings; m; m = m->next)
        if ((uintptr_t)ptr - m->base < m->size) {
            *flags = m->access[location->id];
            res = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&mu);
    return res;
}

/* The allocation mapped at addr (anywhere inside a mapping). */
SIM_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p = (uintptr_t)addr;
    res = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    for (struct vmm_span *m = mappings; m; m = m->next)
        if (p >= m->base && p < m->base + m->size) {
            /* a handle released while mapped is valid again, as on a GPU */
            if (m->alloc->refs++ == 0)
                sim_handles_add(alloc_handles(), (void *)(uintptr_t)m->alloc->handle, m->alloc);
            *handle = m->alloc->handle;
            res = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&mu);
    return res;
}

SIM_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                        CUmemGenericAllocationHandle h)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!prop) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct vmm_alloc *a = alloc_of(h);
    if (a) *prop = a->prop;
    pthread_mutex_unlock(&mu);
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle h,
                                              CUmemAllocationHandleType type,
                                              unsigned long long flags)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!shareable || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return type == CU_MEM_HANDLE_TYPE_FABRIC ? CUDA_ERROR_NOT_SUPPORTED
                                                 : CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct vmm_alloc *a = alloc_of(h);
    if (!a || !(a->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        res = CUDA_ERROR_INVALID_VALUE; /* not created exportable as a descriptor */
    else if ((*(int *)shareable = dup(a->fd)) < 0)
        res = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&mu);
    return res;
}

/* The device an exported memfd belongs to, from its name. */
static int memfd_device(int fd)
{
    char link[64], target[256];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    int device;
    if (n <= 0) return -1;
    target[n] = '\0';
    if (sscanf(target, "/memfd:fsdpshim-sim-vmm-%d", &device) != 1 || !sim_dev(device)) return -1;
    return device;
}

/* The descriptor is the caller's: the allocation keeps a duplicate. */
SIM_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                                void *os_handle, CUmemAllocationHandleType type)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return type == CU_MEM_HANDLE_TYPE_FABRIC ? CUDA_ERROR_NOT_SUPPORTED
                                                 : CUDA_ERROR_INVALID_VALUE;
    int fd = (int)(intptr_t)os_handle, device = memfd_device(fd);
    struct stat st;
    if (device < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) return CUDA_ERROR_INVALID_VALUE;
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    CUmemAllocationProp prop = {
        .type = CU_MEM_ALLOCATION_TYPE_PINNED,
        .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device},
    };
    if ((res = add_alloc(own, (size_t)st.st_size, device, 0, &prop, handle))) close(own);
    return res;
}

/* ---- the entry points as CUPTI sees them (sim.h, ../core/api_callback.c) ---- */

SIM_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    return SIM_CU_TRACED(cuMemCreate, cuMemCreate_impl(handle, size, prop, flags), handle, size,
                         prop, flags);
}

SIM_API CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
    return SIM_CU_TRACED(cuMemRelease, cuMemRelease_impl(h), h);
}

SIM_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                     CUdeviceptr addr, unsigned long long flags)
{
    return SIM_CU_TRACED(cuMemAddressReserve,
                         cuMemAddressReserve_impl(ptr, size, alignment, addr, flags), ptr, size,
                         alignment, addr, flags);
}

SIM_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    return SIM_CU_TRACED(cuMemAddressFree, cuMemAddressFree_impl(ptr, size), ptr, size);
}

SIM_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle h, unsigned long long flags)
{
    return SIM_CU_TRACED(cuMemMap, cuMemMap_impl(ptr, size, offset, h, flags), ptr, size, offset, h,
                         flags);
}

SIM_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    return SIM_CU_TRACED(cuMemUnmap, cuMemUnmap_impl(ptr, size), ptr, size);
}
