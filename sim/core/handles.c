/* handles.c - maps from handles to the objects behind them (streams,
 * events, VMM allocations).
 *
 * A program may pass a handle that was destroyed. Looking handles up here,
 * instead of dereferencing them, turns a stale handle into
 * cudaErrorInvalidResourceHandle rather than a crash. Objects whose memory
 * is freed and reused (events, VMM allocations) get handles that are never
 * reused either (sim_handles_new_key), so a stale handle cannot silently name
 * a newer object. Open addressing with tombstones, rebuilt at 50% load. */
#include <stdatomic.h>
#include <stdlib.h>

#include "sim.h"

#define EMPTY ((uintptr_t)0)
#define TOMB  ((uintptr_t)1)

struct slot {
    uintptr_t key;
    void *obj;
};

struct sim_handle_set {
    pthread_mutex_t mu;
    struct slot *slots;
    size_t cap, used; /* used counts live entries and tombstones */
};

static atomic_uintptr_t next_key = 1;

void *sim_handles_new_key(void)
{
    /* Multiples of 16 look like aligned pointers and never collide with
     * the special stream handles 0, 1 and 2. */
    return (void *)(atomic_fetch_add(&next_key, 1) << 4);
}

struct sim_handle_set *sim_handles_new(void)
{
    struct sim_handle_set *set = calloc(1, sizeof *set);
    if (!set) abort();
    pthread_mutex_init(&set->mu, NULL);
    set->cap = 64;
    set->slots = calloc(set->cap, sizeof *set->slots);
    if (!set->slots) abort();
    return set;
}

static size_t hash(uintptr_t h, size_t cap)
{
    uint64_t x = h;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static void insert(struct slot *slots, size_t cap, uintptr_t key, void *obj)
{
    size_t i = hash(key, cap);
    while (slots[i].key > TOMB)
        i = (i + 1) & (cap - 1);
    slots[i] = (struct slot){key, obj};
}

static void rebuild(struct sim_handle_set *set)
{
    size_t live = 0;
    for (size_t i = 0; i < set->cap; i++)
        live += set->slots[i].key > TOMB;
    size_t cap = set->cap;
    while (live * 4 >= cap)
        cap *= 2;
    struct slot *slots = calloc(cap, sizeof *slots);
    if (!slots) abort();
    for (size_t i = 0; i < set->cap; i++)
        if (set->slots[i].key > TOMB) insert(slots, cap, set->slots[i].key, set->slots[i].obj);
    free(set->slots);
    set->slots = slots;
    set->cap = cap;
    set->used = live;
}

void sim_handles_add(struct sim_handle_set *set, const void *h, void *obj)
{
    pthread_mutex_lock(&set->mu);
    if ((set->used + 1) * 2 > set->cap) rebuild(set);
    insert(set->slots, set->cap, (uintptr_t)h, obj);
    set->used++;
    pthread_mutex_unlock(&set->mu);
}

static struct slot *find(struct sim_handle_set *set, uintptr_t key)
{
    size_t i = hash(key, set->cap);
    while (set->slots[i].key != EMPTY) {
        if (set->slots[i].key == key) return &set->slots[i];
        i = (i + 1) & (set->cap - 1);
    }
    return NULL;
}

void *sim_handles_remove(struct sim_handle_set *set, const void *h)
{
    void *obj = NULL;
    if ((uintptr_t)h <= TOMB) return NULL;
    pthread_mutex_lock(&set->mu);
    struct slot *s = find(set, (uintptr_t)h);
    if (s) {
        obj = s->obj;
        *s = (struct slot){TOMB, NULL};
    }
    pthread_mutex_unlock(&set->mu);
    return obj;
}

void *sim_handles_get(struct sim_handle_set *set, const void *h)
{
    return sim_handles_hold(set, h, NULL);
}

void *sim_handles_hold(struct sim_handle_set *set, const void *h, void (*hold)(void *obj))
{
    if ((uintptr_t)h <= TOMB) return NULL;
    pthread_mutex_lock(&set->mu);
    struct slot *s = find(set, (uintptr_t)h);
    void *obj = s ? s->obj : NULL;
    if (obj && hold) hold(obj);
    pthread_mutex_unlock(&set->mu);
    return obj;
}

void *sim_handles_get_locked(struct sim_handle_set *set, const void *h)
{
    struct slot *s = (uintptr_t)h <= TOMB ? NULL : find(set, (uintptr_t)h);
    return s ? s->obj : NULL;
}

void sim_handles_lock(struct sim_handle_set *set)
{
    pthread_mutex_lock(&set->mu);
}

void sim_handles_unlock(struct sim_handle_set *set)
{
    pthread_mutex_unlock(&set->mu);
}
