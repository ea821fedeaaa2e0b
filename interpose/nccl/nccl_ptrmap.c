/* nccl_ptrmap.c - a map from addresses to numbers (see nccl_ptrmap.h).
 *
 * Linear probing keeps a lookup to one or two cache lines at the load
 * factor we allow (one half); deletion shifts the following run back so
 * that every key stays reachable from its home slot without tombstones. */
#include "nccl_ptrmap.h"

#include <stdlib.h>

/* Fibonacci hashing: device addresses are 512-byte aligned, so the low
 * bits carry nothing; the multiply spreads the high ones. */
static size_t home_slot(const fs_ptrmap *m, uintptr_t key)
{
    return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 32) & m->mask;
}

/* The slot holding `key`, or the empty slot where it would go. The map is
 * never full (load <= 1/2), so the probe ends. */
static size_t find_slot(const fs_ptrmap *m, uintptr_t key)
{
    size_t i = home_slot(m, key);
    while (m->slots[i].key && m->slots[i].key != key)
        i = (i + 1) & m->mask;
    return i;
}

bool fs_ptrmap_get(const fs_ptrmap *m, uintptr_t key, uintptr_t *value)
{
    if (!m->count) return false;
    size_t i = find_slot(m, key);
    if (!m->slots[i].key) return false;
    if (value) *value = m->slots[i].value;
    return true;
}

static bool grow(fs_ptrmap *m)
{
    size_t capacity = m->slots ? (m->mask + 1) * 2 : 16;
    fs_ptrmap_slot *slots = calloc(capacity, sizeof(*slots));
    if (!slots) return false;
    fs_ptrmap old = *m;
    m->slots = slots;
    m->mask = capacity - 1;
    if (old.slots) {
        for (size_t i = 0; i <= old.mask; i++)
            if (old.slots[i].key) m->slots[find_slot(m, old.slots[i].key)] = old.slots[i];
        free(old.slots);
    }
    return true;
}

bool fs_ptrmap_put(fs_ptrmap *m, uintptr_t key, uintptr_t value)
{
    if ((!m->slots || (m->count + 1) * 2 > m->mask + 1) && !grow(m)) return false;
    size_t i = find_slot(m, key);
    if (!m->slots[i].key) {
        m->slots[i].key = key;
        m->count++;
    }
    m->slots[i].value = value;
    return true;
}

bool fs_ptrmap_remove(fs_ptrmap *m, uintptr_t key, uintptr_t *value)
{
    if (!m->count) return false;
    size_t hole = find_slot(m, key);
    if (!m->slots[hole].key) return false;
    if (value) *value = m->slots[hole].value;
    m->count--;

    /* Pull later members of the run into the hole when the hole lies
     * between their home slot and where they sit now. */
    for (size_t j = (hole + 1) & m->mask; m->slots[j].key; j = (j + 1) & m->mask) {
        size_t displacement = (j - home_slot(m, m->slots[j].key)) & m->mask;
        if (displacement >= ((j - hole) & m->mask)) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].key = 0;
    return true;
}
