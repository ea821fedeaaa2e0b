/* registry.c - every address range the sim knows (device allocations, pool
 * blocks, VMM mappings, pinned and registered host memory): what every copy,
 * free and pointer query asks (cudaPointerGetAttributes is in
 * sim/cudart/pointer.c).
 *
 * A sorted array searched by binary search: lookups (every copy infers its
 * direction here) far outnumber inserts. */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct sim_range *ranges;
static size_t count, cap;

/* Index of the first range with base > addr. */
static size_t upper(uintptr_t addr)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ranges[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int sim_registry_add(const struct sim_range *r)
{
    pthread_rwlock_wrlock(&lock);
    size_t i = upper(r->base);
    int overlap = (i > 0 && ranges[i - 1].base + ranges[i - 1].size > r->base) ||
                  (i < count && r->base + r->size > ranges[i].base);
    if (!overlap && count == cap) {
        size_t ncap = cap ? cap * 2 : 256;
        struct sim_range *n = realloc(ranges, ncap * sizeof *n);
        if (!n)
            overlap = 1;
        else {
            ranges = n;
            cap = ncap;
        }
    }
    if (!overlap) {
        memmove(&ranges[i + 1], &ranges[i], (count - i) * sizeof *ranges);
        ranges[i] = *r;
        count++;
    }
    pthread_rwlock_unlock(&lock);
    return overlap ? -1 : 0;
}

void sim_registry_remove(uintptr_t base)
{
    pthread_rwlock_wrlock(&lock);
    size_t i = upper(base);
    if (i > 0 && ranges[i - 1].base == base) {
        memmove(&ranges[i - 1], &ranges[i], (count - i) * sizeof *ranges);
        count--;
    }
    pthread_rwlock_unlock(&lock);
}

int sim_registry_find(uintptr_t addr, struct sim_range *out)
{
    pthread_rwlock_rdlock(&lock);
    size_t i = upper(addr);
    int found = i > 0 && addr < ranges[i - 1].base + ranges[i - 1].size;
    if (found) *out = ranges[i - 1];
    pthread_rwlock_unlock(&lock);
    return found;
}

/* The end of what a copy or set may reach in range r. */
static uintptr_t reach(const struct sim_range *r)
{
    return r->base + (r->extent ? r->extent : r->size);
}

int sim_registry_covers(uintptr_t addr, size_t n)
{
    uintptr_t end = addr + n;
    if (end < addr) return 0;
    pthread_rwlock_rdlock(&lock);
    size_t i = upper(addr);
    int ok = i > 0 && addr < reach(&ranges[i - 1]);
    /* ranges[i - 1] holds the span so far; walk on while it runs past. */
    while (ok && end > reach(&ranges[i - 1])) {
        uintptr_t stop = ranges[i - 1].base + ranges[i - 1].size;
        ok = ranges[i - 1].kind == SIM_RANGE_VMM && i < count && ranges[i].base == stop &&
             ranges[i].kind == SIM_RANGE_VMM;
        i++;
    }
    pthread_rwlock_unlock(&lock);
    return ok;
}

void sim_registry_set_extent(uintptr_t base, size_t extent)
{
    pthread_rwlock_wrlock(&lock);
    size_t i = upper(base);
    if (i > 0 && ranges[i - 1].base == base) ranges[i - 1].extent = extent;
    pthread_rwlock_unlock(&lock);
}

int sim_registry_set_flags(uintptr_t addr, unsigned set, unsigned clear)
{
    pthread_rwlock_wrlock(&lock);
    size_t i = upper(addr);
    int ok = i > 0 && addr - ranges[i - 1].base < ranges[i - 1].size;
    if (ok) ranges[i - 1].flags = (ranges[i - 1].flags & ~clear) | set;
    pthread_rwlock_unlock(&lock);
    return ok;
}

int sim_registry_set_live(uintptr_t base, int expect, int live)
{
    pthread_rwlock_wrlock(&lock);
    size_t i = upper(base);
    int ok = i > 0 && ranges[i - 1].base == base && ranges[i - 1].live == expect;
    if (ok) ranges[i - 1].live = live;
    pthread_rwlock_unlock(&lock);
    return ok;
}

size_t sim_registry_collect(int device, enum sim_range_kind kind, struct sim_range **out)
{
    pthread_rwlock_rdlock(&lock);
    size_t n = 0;
    struct sim_range *list = malloc((count ? count : 1) * sizeof *list);
    for (size_t i = 0; list && i < count; i++)
        if (ranges[i].device == device && ranges[i].kind == kind) list[n++] = ranges[i];
    pthread_rwlock_unlock(&lock);
    *out = list;
    return n;
}

void sim_registry_fork(enum sim_fork_phase phase)
{
    sim_fork_rwlock(&lock, phase);
}
