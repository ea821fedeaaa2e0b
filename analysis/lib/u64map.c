/* u64map.c - open addressing over 64-bit keys (u64map.h).
 *
 * Written here rather than taken from a library: the analyzer needs one
 * small table with deletion by backward shift and values of a size chosen
 * at run time, in C, without a code generator or macros that instantiate a
 * table per type (khash, stb_ds); this file is that table, once. */
#include "u64map.h"

#include <stdlib.h>
#include <string.h>

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

bool fs_u64map_resize(fs_u64map *m, size_t cap)
{
    unsigned char *slots = calloc(cap, m->stride);
    if (!slots) return false;
    fs_u64map old = *m;
    m->slots = slots;
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        uint64_t k = fs_u64map_key_(&old, i);
        if (k)
            memcpy(fs_u64map_slot_(m, fs_u64map_find_(m, k)), fs_u64map_slot_(&old, i), m->stride);
    }
    free(old.slots);
    return true;
}

bool fs_u64map_reserve(fs_u64map *m, size_t slots)
{
    size_t cap = FS_U64MAP_MIN_SLOTS;
    while (cap < slots)
        cap *= 2;
    return cap <= m->cap || fs_u64map_resize(m, cap);
}

void *fs_u64map_zero_put(fs_u64map *m, bool *added)
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

bool fs_u64map_zero_take(fs_u64map *m, void *out)
{
    if (!m->has_zero) return false;
    if (out) fs_u64map_copy_value_(out, m->zero_value, m->vsize);
    m->has_zero = false;
    m->n--;
    return true;
}

bool fs_u64map_next(const fs_u64map *m, size_t *pos, uint64_t *key, void **value)
{
    for (size_t i = *pos; i < m->cap; i++) {
        uint64_t k = fs_u64map_key_(m, i);
        if (!k) continue;
        if (key) *key = k;
        if (value) *value = fs_u64map_slot_(m, i) + sizeof k;
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
