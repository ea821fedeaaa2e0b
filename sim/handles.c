/* handles.c - a set of live handles (streams, events, VMM allocations).
 *
 * CUDA handles are pointers to opaque structs; a program may pass one that
 * was destroyed. Looking handles up here, instead of trusting them, turns a
 * stale handle into cudaErrorInvalidResourceHandle rather than a crash.
 * Open addressing with tombstones, grown at 50% load. */
#include <stdlib.h>

#include "internal.h"

#define TOMB ((uintptr_t)1)

struct fs_handle_set {
    pthread_mutex_t mu;
    uintptr_t *slots;
    size_t cap, used; /* used counts live entries and tombstones */
};

struct fs_handle_set *fs_handles_new(void)
{
    struct fs_handle_set *set = calloc(1, sizeof *set);
    if (!set)
        abort();
    pthread_mutex_init(&set->mu, NULL);
    set->cap = 64;
    set->slots = calloc(set->cap, sizeof *set->slots);
    if (!set->slots)
        abort();
    return set;
}

static size_t hash(uintptr_t h, size_t cap)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)h & (cap - 1);
}

static void insert(uintptr_t *slots, size_t cap, uintptr_t h)
{
    size_t i = hash(h, cap);
    while (slots[i] > TOMB)
        i = (i + 1) & (cap - 1);
    slots[i] = h;
}

static void grow(struct fs_handle_set *set)
{
    size_t live = 0;
    for (size_t i = 0; i < set->cap; i++)
        live += set->slots[i] > TOMB;
    size_t cap = set->cap;
    while (live * 4 >= cap)
        cap *= 2;
    uintptr_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        abort();
    for (size_t i = 0; i < set->cap; i++)
        if (set->slots[i] > TOMB)
            insert(slots, cap, set->slots[i]);
    free(set->slots);
    set->slots = slots;
    set->cap = cap;
    set->used = live;
}

void fs_handles_add(struct fs_handle_set *set, const void *h)
{
    pthread_mutex_lock(&set->mu);
    if ((set->used + 1) * 2 > set->cap)
        grow(set);
    insert(set->slots, set->cap, (uintptr_t)h);
    set->used++;
    pthread_mutex_unlock(&set->mu);
}

static size_t *find_slot(struct fs_handle_set *set, uintptr_t h, size_t *out)
{
    size_t i = hash(h, set->cap);
    while (set->slots[i] != 0) {
        if (set->slots[i] == h) {
            *out = i;
            return out;
        }
        i = (i + 1) & (set->cap - 1);
    }
    return NULL;
}

void fs_handles_remove(struct fs_handle_set *set, const void *h)
{
    size_t i;
    pthread_mutex_lock(&set->mu);
    if (find_slot(set, (uintptr_t)h, &i))
        set->slots[i] = TOMB;
    pthread_mutex_unlock(&set->mu);
}

int fs_handles_has(struct fs_handle_set *set, const void *h)
{
    size_t i;
    if ((uintptr_t)h <= TOMB)
        return 0;
    pthread_mutex_lock(&set->mu);
    int found = find_slot(set, (uintptr_t)h, &i) != NULL;
    pthread_mutex_unlock(&set->mu);
    return found;
}
