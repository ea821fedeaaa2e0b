/* ipc_event.c - CUDA IPC event handles between processes: the state every
 * process that holds an interprocess event shares (the entry points,
 * cudaIpcGetEventHandle and cudaIpcOpenEventHandle, are in
 * sim/cudart/ipc_handles.c).
 *
 * An event made with cudaEventInterprocess keeps its state in a 64-byte
 * slot of a memfd of the process that made it (one file for all its
 * events); a process that opens the handle maps the slot's page through
 * /proc/<pid>/fd/<fd>, as memory handles do (ipc.c). A record, in any
 * process, takes the next generation from the slot's `issued` counter when
 * it is called; when its stream reaches it, it raises `completed` to its
 * generation and rings a futex. Query, synchronise and cudaStreamWaitEvent
 * look at the latest record when they are called (`issued` then) and are
 * done once `completed` reaches it, so a record in one process is waited on
 * in another exactly as within one. Like a GPU's semaphore, `completed`
 * only grows: if an older record of one event completes after a newer one,
 * waits for the older were already released.
 *
 * Opening a handle in the process that made it is
 * cudaErrorDeviceUninitialized, as with the runtime. Slots are reused once
 * their event is destroyed; each use has a serial in the handle, so opening
 * a handle of a destroyed event is cudaErrorInvalidValue (using an opened
 * event after its exporter destroyed it is undefined, as documented). */
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sim.h"

struct slot {
    _Atomic uint64_t serial;    /* which event owns the slot; 0: free */
    _Atomic uint64_t issued;    /* generation of the latest record */
    _Atomic uint64_t completed; /* highest generation a stream has reached */
    _Atomic uint32_t bell;      /* futex word: rung by every completion */
    char unused[36];
};
_Static_assert(sizeof(struct slot) == 64, "one slot per cache line");

/* Interprocess events a process may hold at once. */
#define NSLOTS 65536u

struct sim_ipc_event {
    struct slot *slot;
    void *map; /* an opened event's own mapping of the slot's page, else NULL */
    size_t map_len;
    struct sim_ipc_wire wire;
};

/* This process's slots (under mu): made on the first interprocess event. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int slots_fd = -1;
static uint64_t slots_ino;
static struct slot *slots;
static uint32_t *free_list; /* indices of slots given back */
static size_t nfree, free_cap;
static uint32_t untouched; /* slots from here on were never used */
static uint64_t serials;

static int slots_open(void)
{
    struct stat st;
    slots_fd = memfd_create("fsdpshim-sim-events", MFD_CLOEXEC);
    if (slots_fd < 0) return -1;
    size_t size = (size_t)NSLOTS * sizeof(struct slot);
    void *p = MAP_FAILED;
    if (ftruncate(slots_fd, (off_t)size) == 0 && fstat(slots_fd, &st) == 0)
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, slots_fd, 0);
    if (p == MAP_FAILED) {
        close(slots_fd);
        slots_fd = -1;
        return -1;
    }
    slots = p;
    slots_ino = (uint64_t)st.st_ino;
    return 0;
}

struct sim_ipc_event *sim_ipc_event_new(void)
{
    struct sim_ipc_event *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    pthread_mutex_lock(&mu);
    uint32_t index = NSLOTS;
    if (slots || slots_open() == 0) {
        if (nfree)
            index = free_list[--nfree];
        else if (untouched < NSLOTS)
            index = untouched++;
    }
    if (index == NSLOTS) {
        pthread_mutex_unlock(&mu);
        free(e);
        return NULL;
    }
    uint64_t serial = ++serials;
    struct slot *s = &slots[index];
    atomic_store(&s->issued, 0);
    atomic_store(&s->completed, 0);
    atomic_store(&s->serial, serial);
    e->slot = s;
    e->wire = (struct sim_ipc_wire){
        SIM_IPC_EVENT_MAGIC, (int32_t)getpid(), slots_fd, 0, slots_ino, index, serial, {0}};
    pthread_mutex_unlock(&mu);
    return e;
}

void sim_ipc_event_free(struct sim_ipc_event *e)
{
    if (e->map) {
        munmap(e->map, e->map_len);
        free(e);
        return;
    }
    pthread_mutex_lock(&mu);
    atomic_store(&e->slot->serial, 0);
    if (nfree == free_cap) {
        size_t cap = free_cap ? free_cap * 2 : 64;
        uint32_t *n = realloc(free_list, cap * sizeof *n);
        if (n) {
            free_list = n;
            free_cap = cap;
        }
    }
    /* Without room to remember it the slot is only lost, not misused. */
    if (nfree < free_cap) free_list[nfree++] = (uint32_t)e->wire.offset;
    pthread_mutex_unlock(&mu);
    free(e);
}

void sim_ipc_event_wire(const struct sim_ipc_event *e, struct sim_ipc_wire *w)
{
    *w = e->wire;
}

uint64_t sim_ipc_event_issue(struct sim_ipc_event *e)
{
    return atomic_fetch_add(&e->slot->issued, 1) + 1;
}

void sim_ipc_event_complete(struct sim_ipc_event *e, uint64_t gen)
{
    uint64_t seen = atomic_load(&e->slot->completed);
    while (seen < gen && !atomic_compare_exchange_weak(&e->slot->completed, &seen, gen))
        ;
    atomic_fetch_add(&e->slot->bell, 1);
    syscall(SYS_futex, (uint32_t *)&e->slot->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

uint64_t sim_ipc_event_latest(struct sim_ipc_event *e)
{
    return atomic_load(&e->slot->issued);
}

int sim_ipc_event_done(struct sim_ipc_event *e, uint64_t gen)
{
    return atomic_load(&e->slot->completed) >= gen;
}

void sim_ipc_event_wait(struct sim_ipc_event *e, uint64_t gen)
{
    for (;;) {
        uint32_t bell = atomic_load(&e->slot->bell);
        if (atomic_load(&e->slot->completed) >= gen) return;
        /* Not a private futex: the other process rings it. */
        syscall(SYS_futex, (uint32_t *)&e->slot->bell, FUTEX_WAIT, bell, NULL, NULL, 0);
    }
}

/* Maps the slot a handle names into this process. */
cudaError_t sim_ipc_event_open(const struct sim_ipc_wire *w, struct sim_ipc_event **out)
{
    if (w->pid == (int32_t)getpid()) return cudaErrorDeviceUninitialized;
    if (w->offset >= NSLOTS) return cudaErrorInvalidValue;
    int fd = sim_ipc_open_peer_fd(w);
    if (fd < 0) return cudaErrorMapBufferObjectFailed;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t at = (size_t)w->offset * sizeof(struct slot);
    size_t page_at = at & ~(page - 1);
    void *map = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)page_at);
    close(fd);
    if (map == MAP_FAILED) return cudaErrorMapBufferObjectFailed;
    struct slot *s = (struct slot *)((char *)map + (at - page_at));
    struct sim_ipc_event *e = calloc(1, sizeof *e);
    /* A serial that does not match: that event was destroyed. */
    cudaError_t err = !e                                   ? cudaErrorMemoryAllocation
                      : atomic_load(&s->serial) != w->size ? cudaErrorInvalidValue
                                                           : cudaSuccess;
    if (err) {
        munmap(map, page);
        free(e);
        return err;
    }
    *e = (struct sim_ipc_event){s, map, page, *w};
    *out = e;
    return cudaSuccess;
}

void sim_ipc_event_fork(enum sim_fork_phase phase)
{
    if (phase == SIM_FORK_PREPARE) {
        pthread_mutex_lock(&mu);
        return;
    }
    pthread_mutex_unlock(&mu);
    if (phase != SIM_FORK_CHILD || !slots) return;
    /* The child starts without events (sim_events_fork); the parent's slots
     * are the parent's: the child makes a file of its own when it needs. */
    munmap(slots, (size_t)NSLOTS * sizeof(struct slot));
    close(slots_fd);
    slots = NULL;
    slots_fd = -1;
    free(free_list);
    free_list = NULL;
    nfree = free_cap = 0;
    untouched = 0;
}
