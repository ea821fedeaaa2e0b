/* ipc.c - CUDA IPC memory handles between processes: what a handle holds,
 * and the mappings of other processes' allocations this process opened
 * (the entry points are in sim/cudart/ipc_handles.c).
 *
 * Device memory lives in one memfd per device (arena.c), so a handle
 * only has to say where: the exporter's pid, its memfd's fd number and
 * inode, and the allocation's offset and extent (struct sim_ipc_wire in the
 * 64 opaque bytes). The importer opens /proc/<pid>/fd/<fd>, which the
 * kernel allows a process of the same user (ptrace's "read" access check),
 * checks the inode, and maps that range MAP_SHARED: both processes then
 * read and write the same pages. The handle names the whole allocation that
 * contains the pointer it was made from, and opening it returns that
 * allocation's base, as on a GPU (a program that shares a piece of an
 * allocation sends the offset along; PyTorch finds it with
 * cuMemGetAddressRange).
 *
 * Opening a handle in the process that made it is cudaErrorDeviceUninitialized
 * ("invalid device context"), what the runtime answers. Opening one handle
 * twice in a process returns the same pointer and counts a reference;
 * cudaIpcCloseMemHandle unmaps on the last, after the device's pending work
 * (which may still be copying into it) is done. In a dry run the imported
 * range is PROT_NONE anonymous memory of the same extent: checks and
 * ordering hold, no data is shared, as for all dry-run device memory. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"

_Static_assert(sizeof(struct sim_ipc_wire) == sizeof(cudaIpcMemHandle_t),
               "a memory handle holds the wire form exactly");
_Static_assert(sizeof(struct sim_ipc_wire) == sizeof(cudaIpcEventHandle_t),
               "an event handle holds the wire form exactly");

/* A handle opened in this process. */
struct opened {
    struct opened *next;
    int32_t pid;
    uint64_t ino, offset; /* with pid: which allocation */
    void *base;           /* the allocation, as the importer sees it */
    void *map;            /* the mapping that holds it */
    size_t len;           /* mapped length, whole pages */
    int refs;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct opened *opened; /* under mu */

int sim_ipc_open_peer_fd(const struct sim_ipc_wire *w)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)w->pid, (int)w->fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_ino != w->ino) {
        close(fd);
        return -1;
    }
    return fd;
}

static int peer_alive(int32_t pid)
{
    return kill(pid, 0) == 0 || errno == EPERM;
}

/* Maps the allocation a handle names, `len` bytes from the host page that
 * holds its start (small allocations share a device page, so the offset
 * need not be page-aligned) (under mu). */
static cudaError_t map_peer(const struct sim_ipc_wire *w, size_t len, void **out)
{
    void *p;
    if (w->fd >= 0 && sim_cfg.moves_data) {
        int fd = sim_ipc_open_peer_fd(w);
        if (fd < 0) return cudaErrorInvalidResourceHandle;
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd,
                 (off_t)(w->offset & ~(uint64_t)(page - 1)));
        close(fd);
    } else {
        /* A dry run on either side: there are no pages to share. */
        if (!peer_alive(w->pid)) return cudaErrorInvalidResourceHandle;
        int prot = sim_cfg.moves_data ? PROT_READ | PROT_WRITE : PROT_NONE;
        p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    }
    if (p == MAP_FAILED) return cudaErrorMapBufferObjectFailed;
    *out = p;
    return cudaSuccess;
}

cudaError_t sim_ipc_mem_open(const struct sim_ipc_wire *w, int device, void **out)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t lead = (size_t)(w->offset & (page - 1));
    size_t len = (lead + (size_t)w->size + page - 1) & ~(page - 1);
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&mu);
    struct opened *o = opened;
    while (o && (o->pid != w->pid || o->ino != w->ino || o->offset != w->offset))
        o = o->next;
    if (o) {
        o->refs++;
        *out = o->base;
        pthread_mutex_unlock(&mu);
        return cudaSuccess;
    }
    void *map = NULL, *p = NULL;
    o = malloc(sizeof *o);
    if (!o) err = cudaErrorMemoryAllocation;
    if (!err) err = map_peer(w, len, &map);
    if (!err) {
        /* The device it lives on, when this process sees it. */
        if (sim_dev(w->device)) device = w->device;
        p = (char *)map + lead;
        struct sim_range r = {(uintptr_t)p, (size_t)w->size, SIM_RANGE_IPC, device, 1, NULL, 0, 0};
        if (sim_registry_add(&r) != 0) {
            munmap(map, len);
            err = cudaErrorMemoryAllocation;
        }
    }
    if (err) {
        pthread_mutex_unlock(&mu);
        free(o);
        return err;
    }
    *o = (struct opened){opened, w->pid, w->ino, w->offset, p, map, len, 1};
    opened = o;
    pthread_mutex_unlock(&mu);
    *out = p;
    return cudaSuccess;
}

cudaError_t sim_ipc_mem_close(void *base)
{
    pthread_mutex_lock(&mu);
    struct opened **pp = &opened;
    while (*pp && (*pp)->base != base)
        pp = &(*pp)->next;
    struct opened *o = *pp;
    if (!o) {
        pthread_mutex_unlock(&mu);
        return cudaErrorInvalidValue;
    }
    if (--o->refs > 0) {
        pthread_mutex_unlock(&mu);
        return cudaSuccess;
    }
    *pp = o->next;
    pthread_mutex_unlock(&mu);

    struct sim_range r;
    if (sim_registry_find((uintptr_t)o->base, &r)) {
        /* Work already submitted may still read or write it. */
        sim_device_sync(sim_dev(r.device));
        sim_registry_remove(r.base);
    }
    munmap(o->map, o->len);
    free(o);
    return cudaSuccess;
}

void sim_ipc_fork(enum sim_fork_phase phase)
{
    /* The child keeps what was opened: the mappings are MAP_SHARED and
     * stay so. */
    if (phase == SIM_FORK_PREPARE)
        pthread_mutex_lock(&mu);
    else
        pthread_mutex_unlock(&mu);
}
