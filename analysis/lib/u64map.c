/* u64map.c - open addressing over 64-bit keys (u64map.h).
 *
 * Written here rather than taken from a library: the analyzer needs one
 * small table with deletion by backward shift and values of a size chosen
 * at run time, in C, without a code generator or macros that instantiate a
 * table per type (khash, stb_ds); this file is that table, once. */
#include "u64map.h"

#include <stdlib.h>
#include <string.h>

#define MIN_SLOTS 64

static inline unsigned char *slot(const fs_u64map *m, size_t i)
{
    return m->slots + i * m->stride;
}

static inline uint64_t key_at(const fs_u64map *m, size_t i)
{
    uint64_t k;
    memcpy(&k, slot(m, i), sizeof k);
    return k;
}

static inline size_t home(const fs_u64map *m, uint64_t key)
{
    return (size_t)fs_mix64(key) & (m->cap - 1);
}

void fs_u64map_init(fs_u64map *m, size_t vsize)
{
    *m = (fs_u64map){.vsize = vsize, .stride = sizeof(uint64_t) + (vsize + 7) / 8 * 8};
}

void fs_u64map_free(fs_u64map *m)
{
    free(m->slots);
    free(m->zero_value);
    fs_u64map_init(m, m->vsize);
}

void fs_u64map_clear(fs_u64map *m)
{
    if (m->slots) memset(m->slots, 0, m->cap * m->stride);
    m->has_zero = false;
    m->n = 0;
}

/* The slot holding key (never 0), or the empty one where it would go. */
static inline size_t find(const fs_u64map *m, uint64_t key)
{
    size_t i = home(m, key);
    for (uint64_t k; (k = key_at(m, i)) != 0 && k != key;)
        i = (i + 1) & (m->cap - 1);
    return i;
}

void *fs_u64map_get(const fs_u64map *m, uint64_t key)
{
    if (!key) return m->has_zero ? m->zero_value : NULL;
    if (!m->cap) return NULL;
    size_t i = find(m, key);
    return key_at(m, i) ? slot(m, i) + sizeof key : NULL;
}

static bool resize(fs_u64map *m, size_t cap)
{
    unsigned char *slots = calloc(cap, m->stride);
    if (!slots) return false;
    fs_u64map old = *m;
    m->slots = slots;
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        uint64_t k = key_at(&old, i);
        if (k) memcpy(slot(m, find(m, k)), slot(&old, i), m->stride);
    }
    free(old.slots);
    return true;
}

bool fs_u64map_reserve(fs_u64map *m, size_t slots)
{
    size_t cap = MIN_SLOTS;
    while (cap < slots)
        cap *= 2;
    return cap <= m->cap || resize(m, cap);
}

static void *put_zero(fs_u64map *m, bool *added)
{
    if (!m->zero_value && !(m->zero_value = malloc(m->vsize ? m->vsize : 1))) return NULL;
    if (added) *added = !m->has_zero;
    if (!m->has_zero) {
        memset(m->zero_value, 0, m->vsize);
        m->has_zero = true;
        m->n++;
    }
    return m->zero_value;
}

void *fs_u64map_put(fs_u64map *m, uint64_t key, bool *added)
{
    if (!key) return put_zero(m, added);
    if (2 * (m->n + 1) > m->cap && !resize(m, m->cap ? 2 * m->cap : MIN_SLOTS)) return NULL;
    size_t i = find(m, key);
    unsigned char *s = slot(m, i);
    bool fresh = !key_at(m, i);
    if (added) *added = fresh;
    if (fresh) {
        memcpy(s, &key, sizeof key);
        memset(s + sizeof key, 0, m->stride - sizeof key);
        m->n++;
    }
    return s + sizeof key;
}

bool fs_u64map_take(fs_u64map *m, uint64_t key, void *out)
{
    if (!key) {
        if (!m->has_zero) return false;
        if (out) memcpy(out, m->zero_value, m->vsize);
        m->has_zero = false;
        m->n--;
        return true;
    }
    if (!m->cap) return false;
    size_t i = find(m, key), mask = m->cap - 1;
    if (!key_at(m, i)) return false;
    if (out) memcpy(out, slot(m, i) + sizeof key, m->vsize);
    /* Backward shift: each entry after the hole that may move into it (its
     * home is not between the hole and it, cyclically) does, and the hole
     * moves on, until an empty slot ends the run. */
    for (size_t j = (i + 1) & mask; key_at(m, j); j = (j + 1) & mask) {
        size_t h = home(m, key_at(m, j));
        if (((j - h) & mask) >= ((j - i) & mask)) {
            memcpy(slot(m, i), slot(m, j), m->stride);
            i = j;
        }
    }
    memset(slot(m, i), 0, sizeof key);
    m->n--;
    return true;
}

bool fs_u64map_next(const fs_u64map *m, size_t *pos, uint64_t *key, void **value)
{
    for (size_t i = *pos; i < m->cap; i++) {
        uint64_t k = key_at(m, i);
        if (!k) continue;
        if (key) *key = k;
        if (value) *value = slot(m, i) + sizeof k;
        *pos = i + 1;
        return true;
    }
    if (*pos <= m->cap && m->has_zero) { /* key 0 last */
        if (key) *key = 0;
        if (value) *value = m->zero_value;
        *pos = m->cap + 1;
        return true;
    }
    *pos = m->cap + 1;
    return false;
}
