/* vmm.c - the driver's virtual memory management API, implemented for real
 * on the host's own virtual memory:
 *
 *   cuMemAddressReserve   a PROT_NONE, MAP_NORESERVE mapping
 *   cuMemCreate           a memfd of the size, charged to the device
 *   cuMemMap              the memfd mapped MAP_SHARED|MAP_FIXED into the
 *                         reservation (still PROT_NONE)
 *   cuMemSetAccess        mprotect (checked, but the mapping stays
 *                         PROT_NONE in a dry run, FSDPSHIM_SIM_DATA=0)
 *   cuMemUnmap            the range put back to PROT_NONE
 *   cuMemRelease          the memfd closed; its capacity returns once the
 *                         last mapping of it is gone, as with a GPU
 *
 * Two mappings of one allocation therefore really alias, which is what
 * makes VMM-based allocators (expandable segments) testable here. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#define GRANULARITY ((size_t)2 << 20)

struct vmm_alloc {
    int fd;
    size_t size;
    int device;
    int released;
    int maps;
};

struct vmm_span {
    struct vmm_span *next;
    uintptr_t base;
    size_t size;
    struct vmm_alloc *alloc; /* NULL for a reservation */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct vmm_span *reservations, *mappings;
static struct fs_handle_set *allocs;

static void allocs_init(void)
{
    allocs = fs_handles_new();
}

static struct fs_handle_set *alloc_handles(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, allocs_init);
    return allocs;
}

static struct vmm_alloc *alloc_of(CUmemGenericAllocationHandle h)
{
    return fs_handles_get(alloc_handles(), (void *)(uintptr_t)h);
}

static int device_location(const CUmemLocation *loc)
{
    return loc->type == CU_MEM_LOCATION_TYPE_DEVICE && fs_dev(loc->id) != NULL;
}

CUresult fs_cu_mem_get_allocation_granularity(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option)
{
    fs_init();
    if (!granularity || !prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        !device_location(&prop->location) ||
        (unsigned)option > CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = GRANULARITY;
    return CUDA_SUCCESS;
}

CUresult fs_cu_mem_create(CUmemGenericAllocationHandle *handle, size_t size,
                          const CUmemAllocationProp *prop, unsigned long long flags)
{
    fs_init();
    if (!handle || !prop || flags != 0 || size == 0 || size % GRANULARITY ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || !device_location(&prop->location))
        return CUDA_ERROR_INVALID_VALUE;
    struct fs_device *dev = fs_dev(prop->location.id);
    if (size > fs_cfg.capacity || fs_capacity_take(dev, size)) {
        fs_capacity_refused(dev, size, cudaErrorMemoryAllocation);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct vmm_alloc *a = calloc(1, sizeof *a);
    int fd = memfd_create("fsdpshim-sim-vmm", MFD_CLOEXEC);
    if (!a || fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        if (fd >= 0) close(fd);
        free(a);
        fs_capacity_give(dev, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *a = (struct vmm_alloc){fd, size, dev->ordinal, 0, 0};
    void *key = fs_handles_new_key();
    fs_handles_add(alloc_handles(), key, a);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)key;
    return CUDA_SUCCESS;
}

/* Frees an allocation that is released and no longer mapped (under mu). */
static void maybe_destroy(struct vmm_alloc *a)
{
    if (!a->released || a->maps) return;
    close(a->fd);
    fs_capacity_give(fs_dev(a->device), a->size);
    free(a);
}

CUresult fs_cu_mem_release(CUmemGenericAllocationHandle h)
{
    pthread_mutex_lock(&mu);
    struct vmm_alloc *a = fs_handles_remove(alloc_handles(), (void *)(uintptr_t)h);
    if (!a) {
        pthread_mutex_unlock(&mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    a->released = 1;
    maybe_destroy(a);
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

CUresult fs_cu_mem_address_reserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                   CUdeviceptr addr, unsigned long long flags)
{
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
    *r = (struct vmm_span){reservations, base, size, NULL};
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

CUresult fs_cu_mem_address_free(CUdeviceptr ptr, size_t size)
{
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

CUresult fs_cu_mem_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                       unsigned long long flags)
{
    uintptr_t base = (uintptr_t)ptr;
    if (size == 0 || size % GRANULARITY || base % GRANULARITY || offset % GRANULARITY || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct vmm_span *m = malloc(sizeof *m);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    struct vmm_alloc *a = alloc_of(h);
    CUresult res = CUDA_SUCCESS;
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
    *m = (struct vmm_span){mappings, base, size, a};
    mappings = m;
    a->maps++;
    struct fs_range r = {base, size, FS_RANGE_VMM, a->device, 1, NULL};
    fs_registry_add(&r);
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

CUresult fs_cu_mem_unmap(CUdeviceptr ptr, size_t size)
{
    uintptr_t base = (uintptr_t)ptr, end = base + size;
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
        fs_registry_remove(m->base);
        mmap((void *)m->base, m->size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        m->alloc->maps--;
        maybe_destroy(m->alloc);
        free(m);
    }
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

CUresult fs_cu_mem_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                              size_t count)
{
    fs_init();
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
    CUresult res = CUDA_SUCCESS;
    if (!fs_cfg.moves_data) prot = PROT_NONE; /* nothing may touch it in a dry run */
    if (covered != size)
        res = CUDA_ERROR_INVALID_VALUE; /* every byte must be mapped */
    else if (mprotect((void *)base, size, prot) != 0)
        res = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&mu);
    return res;
}

void fs_vmm_fork(enum fs_fork_phase phase)
{
    struct fs_handle_set *set = alloc_handles();
    if (phase == FS_FORK_PREPARE) {
        pthread_mutex_lock(&mu);
        fs_handles_lock(set);
    } else {
        fs_handles_unlock(set);
        pthread_mutex_unlock(&mu);
    }
}
