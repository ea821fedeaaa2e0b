/* vram.c - where cudaMalloc, cuMemAlloc and loaded modules' variables lie
 * in a device's memory, laid out as the driver evidently lays them out
 * (docs/sim.md, "Device memory"; seen on an H100, driver 580):
 *
 *   - the device is charged in whole pages of SIM_PAGE_SIZE (2 MiB);
 *   - an allocation of at most SIM_SMALL_MAX (1 MiB) is placed at
 *     SIM_ALLOC_GRANULE (512 B) in a page it shares with the device's other
 *     small allocations, at the lowest free address of the oldest page with
 *     room: eight 1-byte allocations lie 512 B apart and cost one page;
 *   - a larger one is rounded up to whole pages of its own.
 *
 * A page goes back to the device (and its mapping to the host) when its
 * last allocation is freed. Each page and each large allocation is one
 * mapping of sim/core/arena.c.
 *
 * The price of sharing pages: the host touching a freed small allocation,
 * or running past its end into a neighbour, does not fault while the page
 * lives, where a mapping per allocation did. Copies and sets are still
 * checked against each allocation's own range (sim/core/registry.c), which is
 * what a program sees through the API; only direct host access, which only
 * works on the sim, loses the check. */
#include <stdlib.h>

#include "sim.h"

#define MAX_DEVICES    64
#define SLOTS_PER_PAGE ((unsigned)(SIM_PAGE_SIZE / SIM_ALLOC_GRANULE))
#define WORD_BITS      64u

struct page {
    struct page *next;
    char *base;
    unsigned free_slots;
    /* In a forked child, a page it inherited: its private copy, which it
     * cannot export (sim/core/arena.c), so its own allocations go elsewhere. */
    int inherited;
    uint64_t taken[SLOTS_PER_PAGE / WORD_BITS]; /* a set bit: a slot in use */
};

/* A device's pages for small allocations, oldest first (under mu). */
struct heap {
    struct page *pages;
};

/* What sim_vram_alloc placed, by address. */
struct placed {
    struct page *page; /* NULL: pages of its own */
    unsigned slot, nslots;
    size_t len; /* pages of its own: their length */
    int device;
};

/* One lock for every device's heap: small allocations are few (PyTorch's
 * own cache asks for 2 MiB and more), and a fork takes one lock, not one
 * per device. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct heap heaps[MAX_DEVICES];
static struct sim_handle_set *placed;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void vram_init(void)
{
    placed = sim_handles_new();
}

static int slot_taken(const struct page *p, unsigned i)
{
    return (int)(p->taken[i / WORD_BITS] >> (i % WORD_BITS) & 1);
}

static void mark(struct page *p, unsigned slot, unsigned n, int taken)
{
    for (unsigned i = slot; i < slot + n; i++) {
        uint64_t bit = (uint64_t)1 << (i % WORD_BITS);
        if (taken)
            p->taken[i / WORD_BITS] |= bit;
        else
            p->taken[i / WORD_BITS] &= ~bit;
    }
}

/* The lowest slot starting n free slots in p, or -1. */
static long find_run(const struct page *p, unsigned n)
{
    unsigned run = 0;
    for (unsigned i = 0; i < SLOTS_PER_PAGE; i++) {
        if (i % WORD_BITS == 0 && p->taken[i / WORD_BITS] == UINT64_MAX) {
            run = 0;
            i += WORD_BITS - 1;
            continue;
        }
        if (slot_taken(p, i))
            run = 0;
        else if (++run == n)
            return (long)(i + 1 - n);
    }
    return -1;
}

/* Pages of their own: `len` bytes charged and mapped. */
static cudaError_t own_pages(struct sim_device *dev, size_t len, void **out)
{
    cudaError_t err = sim_capacity_take(dev, len);
    if (err) return err;
    void *p = sim_arena_map(dev, len);
    if (!p) {
        sim_capacity_give(dev, len);
        return cudaErrorMemoryAllocation;
    }
    *out = p;
    return cudaSuccess;
}

/* n slots in the oldest page of h with room, or in a new page (under mu). */
static cudaError_t share_page(struct sim_device *dev, struct heap *h, unsigned n, struct placed *at,
                              void **out)
{
    struct page **tail = &h->pages;
    for (struct page *p = h->pages; p; tail = &p->next, p = p->next) {
        long slot = p->free_slots >= n && !p->inherited ? find_run(p, n) : -1;
        if (slot < 0) continue;
        *at = (struct placed){p, (unsigned)slot, n, 0, dev->ordinal};
        *out = p->base + (size_t)slot * SIM_ALLOC_GRANULE;
        return cudaSuccess;
    }
    struct page *p = calloc(1, sizeof *p);
    if (!p) return cudaErrorMemoryAllocation;
    void *base;
    cudaError_t err = own_pages(dev, SIM_PAGE_SIZE, &base);
    if (err) {
        free(p);
        return err;
    }
    p->base = base;
    p->free_slots = SLOTS_PER_PAGE;
    *tail = p;
    *at = (struct placed){p, 0, n, 0, dev->ordinal};
    *out = base;
    return cudaSuccess;
}

cudaError_t sim_vram_alloc(struct sim_device *dev, size_t size, int own, void **out)
{
    pthread_once(&once, vram_init);
    if (size == 0 || size > sim_cfg.capacity) return cudaErrorMemoryAllocation;
    struct placed *at = malloc(sizeof *at);
    if (!at) return cudaErrorMemoryAllocation;
    cudaError_t err;
    if (own || size > SIM_SMALL_MAX) {
        size_t len = sim_round_up(size, SIM_PAGE_SIZE);
        *at = (struct placed){NULL, 0, 0, len, dev->ordinal};
        err = own_pages(dev, len, out);
    } else {
        struct heap *h = &heaps[dev->ordinal];
        unsigned n = (unsigned)(sim_round_up(size, SIM_ALLOC_GRANULE) / SIM_ALLOC_GRANULE);
        pthread_mutex_lock(&mu);
        err = share_page(dev, h, n, at, out);
        if (!err) {
            mark(at->page, at->slot, n, 1);
            at->page->free_slots -= n;
        }
        pthread_mutex_unlock(&mu);
    }
    if (err) {
        free(at);
        return err;
    }
    sim_handles_add(placed, *out, at);
    return cudaSuccess;
}

void sim_vram_free(void *ptr, int unmap)
{
    pthread_once(&once, vram_init);
    struct placed *at = sim_handles_remove(placed, ptr);
    if (!at) return;
    struct sim_device *dev = sim_dev(at->device);
    if (!at->page) {
        if (unmap) sim_arena_unmap(ptr, at->len);
        sim_capacity_give(dev, at->len);
        free(at);
        return;
    }
    struct heap *h = &heaps[at->device];
    struct page *empty = NULL;
    pthread_mutex_lock(&mu);
    struct page *p = at->page;
    mark(p, at->slot, at->nslots, 0);
    p->free_slots += at->nslots;
    if (p->free_slots == SLOTS_PER_PAGE) {
        struct page **pp = &h->pages;
        while (*pp != p)
            pp = &(*pp)->next;
        *pp = p->next;
        empty = p;
    }
    pthread_mutex_unlock(&mu);
    free(at);
    if (!empty) return;
    if (unmap) sim_arena_unmap(empty->base, SIM_PAGE_SIZE);
    sim_capacity_give(dev, SIM_PAGE_SIZE);
    free(empty);
}

int sim_vram_backing(const void *ptr, struct sim_backing *out)
{
    pthread_once(&once, vram_init);
    struct placed *at = sim_handles_get(placed, ptr);
    if (!at) return 0;
    const char *mapping = at->page ? at->page->base : ptr;
    if (!sim_arena_backing(mapping, out)) return 0;
    out->offset += (uint64_t)((const char *)ptr - mapping);
    return 1;
}

/* The heaps' lock, then the map of what was placed (which a thread takes
 * without mu held, never the other way round). */
void sim_vram_fork(enum sim_fork_phase phase)
{
    pthread_once(&once, vram_init);
    if (phase == SIM_FORK_PREPARE) {
        pthread_mutex_lock(&mu);
        sim_handles_lock(placed);
        return;
    }
    sim_handles_unlock(placed);
    for (int d = 0; phase == SIM_FORK_CHILD && d < MAX_DEVICES; d++)
        for (struct page *p = heaps[d].pages; p; p = p->next)
            p->inherited = 1;
    pthread_mutex_unlock(&mu);
}
