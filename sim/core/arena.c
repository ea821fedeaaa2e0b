/* arena.c - the backing of device memory: one sparse memfd per device.
 *
 * Every mapping of device memory (a page or a large allocation of vram.c,
 * a pool's chunk of chunks.c) is a MAP_SHARED mapping of a range of its
 * device's memfd, aligned to the device's page (SIM_PAGE_SIZE) as a GPU's
 * addresses are, so that another process can map the very same pages
 * (cudaIpcOpenMemHandle opens /proc/<pid>/fd/<fd>, sim/core/ipc.c). One file per
 * device, not one per mapping, keeps the process's file descriptors few.
 * Ranges come from a bump pointer and are never handed out again, so
 * (inode, offset) names one piece of memory for the life of the process; an
 * unmapped range gives its pages back at once by punching a hole. The
 * file's size is set once, far beyond any capacity: it is sparse, and a
 * memfd is not charged to the commit limit, so nothing costs until it is
 * touched. Capacity is accounted elsewhere (devmem.c).
 *
 * In a dry run (FSDPSHIM_SIM_DATA=0) there is no file: a mapping is
 * PROT_NONE anonymous memory, and its offset only a number.
 *
 * fork: a child gets its own copy of the memory (docs/sim.md), so it remaps
 * every inherited mapping MAP_PRIVATE from the parent's file: its writes
 * stay its own, for one mmap per mapping and no copying. It then closes
 * the parent's files and starts files of its own on its next mapping. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim.h"

/* 1 EiB: no process allocates that much in its lifetime. */
#define ARENA_FILE_SIZE ((off_t)1 << 60)
#define MAX_DEVICES     64

struct arena {
    int fd; /* -1 in a dry run, and once a forked child has let go of it */
    int owned;
    uint64_t ino;
    uint64_t next; /* the next offset to hand out (under mu) */
};

/* One per live mapping, keyed by its base address, and in a list for the
 * fork handler. */
struct record {
    struct record *prev, *next; /* under mu */
    struct arena *arena;
    void *base;
    uint64_t offset;
    size_t len; /* the mapped length, whole pages */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct arena *arenas[MAX_DEVICES]; /* made on first use (under mu) */
static struct sim_handle_set *records;
static struct record *all; /* every live mapping (under mu) */
static size_t page_size;

static void arena_init(void)
{
    records = sim_handles_new();
    page_size = (size_t)sysconf(_SC_PAGESIZE);
}

static void arena_once(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, arena_init);
}

/* The device's arena, made on first use (under mu); NULL if the host
 * refuses a memfd. */
static struct arena *arena_of(int device)
{
    struct arena *a = arenas[device];
    if (a) return a;
    a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->fd = -1;
    a->owned = 1;
    if (sim_cfg.moves_data) {
        char name[32];
        snprintf(name, sizeof name, "fsdpshim-sim-dev%d", device);
        struct stat st;
        a->fd = memfd_create(name, MFD_CLOEXEC);
        if (a->fd < 0 || ftruncate(a->fd, ARENA_FILE_SIZE) != 0 || fstat(a->fd, &st) != 0) {
            if (a->fd >= 0) close(a->fd);
            free(a);
            return NULL;
        }
        a->ino = (uint64_t)st.st_ino;
    }
    arenas[device] = a;
    return a;
}

/* `len` bytes of address space aligned to SIM_PAGE_SIZE, PROT_NONE and
 * committing nothing; MAP_FAILED when the host refuses. */
static void *reserve_aligned(size_t len)
{
    size_t slack = SIM_PAGE_SIZE;
    char *p =
        mmap(NULL, len + slack, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return MAP_FAILED;
    char *at = (char *)sim_round_up((uintptr_t)p, SIM_PAGE_SIZE);
    if (at > p) munmap(p, (size_t)(at - p));
    if (at + len < p + len + slack) munmap(at + len, (size_t)(p + len + slack - (at + len)));
    return at;
}

void *sim_arena_map(struct sim_device *dev, size_t size)
{
    arena_once();
    size_t len = (size + page_size - 1) & ~(page_size - 1);
    struct record *rec = malloc(sizeof *rec);
    if (!rec) return NULL;
    pthread_mutex_lock(&mu);
    struct arena *a = arena_of(dev->ordinal);
    uint64_t offset = 0;
    if (a) {
        offset = a->next;
        a->next += len;
    }
    pthread_mutex_unlock(&mu);
    void *p = a ? reserve_aligned(len) : MAP_FAILED;
    if (p != MAP_FAILED && a->fd >= 0 &&
        mmap(p, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, a->fd,
             (off_t)offset) == MAP_FAILED) {
        munmap(p, len);
        p = MAP_FAILED;
    }
    if (p == MAP_FAILED) {
        free(rec);
        return NULL;
    }
    pthread_mutex_lock(&mu);
    *rec = (struct record){NULL, all, a, p, offset, len};
    if (all) all->prev = rec;
    all = rec;
    pthread_mutex_unlock(&mu);
    sim_handles_add(records, p, rec);
    return p;
}

void sim_arena_unmap(void *base, size_t size)
{
    arena_once();
    struct record *rec = sim_handles_remove(records, base);
    if (!rec) {
        munmap(base, size);
        return;
    }
    /* Out of the list before the pages go, so that a fork never remaps
     * what another thread may map anew. */
    pthread_mutex_lock(&mu);
    if (rec->prev)
        rec->prev->next = rec->next;
    else
        all = rec->next;
    if (rec->next) rec->next->prev = rec->prev;
    pthread_mutex_unlock(&mu);
    size_t len = rec->len;
    munmap(base, len);
    if (rec->arena->fd >= 0 && rec->arena->owned &&
        fallocate(rec->arena->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)rec->offset,
                  (off_t)len) != 0)
        /* Only costs host memory until exit; the allocation itself is gone. */
        fprintf(stderr, "fsdpshim-sim: cannot give back %zu bytes of device memory: %s\n", len,
                strerror(errno));
    free(rec);
}

int sim_arena_backing(const void *base, struct sim_backing *out)
{
    arena_once();
    struct record *rec = sim_handles_get(records, base);
    if (!rec) return 0;
    *out = (struct sim_backing){rec->arena->fd, rec->arena->owned, rec->arena->ino, rec->offset};
    return 1;
}

/* In a forked child: maps every mapping of arena a MAP_PRIVATE from its
 * file at the same address, so the child's writes no longer reach the
 * parent. Runs while the prepare handler's hold on mu still stands: the
 * child has one thread, and taking no further lock keeps its lock order
 * that of the prepare handlers. */
static void privatise(struct arena *a)
{
    for (struct record *rec = all; rec; rec = rec->next) {
        if (rec->arena != a) continue;
        if (mmap(rec->base, rec->len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, a->fd, (off_t)rec->offset) == MAP_FAILED)
            fprintf(stderr, "fsdpshim-sim: forked child shares %zu bytes with its parent: %s\n",
                    rec->len, strerror(errno));
    }
}

void sim_arena_fork(enum sim_fork_phase phase)
{
    arena_once();
    if (phase == SIM_FORK_PREPARE) {
        pthread_mutex_lock(&mu);
        sim_handles_lock(records);
        return;
    }
    for (int d = 0; phase == SIM_FORK_CHILD && d < MAX_DEVICES; d++) {
        struct arena *a = arenas[d];
        if (!a) continue;
        if (a->fd >= 0) {
            privatise(a);
            close(a->fd);
            a->fd = -1;
        }
        /* What it inherited is the child's own copy: nobody else can map
         * it, and its offsets are the parent's to give out. */
        a->owned = 0;
        arenas[d] = NULL;
    }
    sim_handles_unlock(records);
    pthread_mutex_unlock(&mu);
}
