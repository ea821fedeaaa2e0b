/* u64map.h - the analyzer's one hash table: 64-bit keys (addresses, ids,
 * thread ids, pairs of ids packed by the caller) to values of a fixed size
 * that the caller chooses (a struct of its own).
 *
 * Open addressing with linear probing over a power-of-two number of slots,
 * at most half full; every key is mixed through murmur3's finaliser
 * (fs_mix64) first, since addresses share their low bits (512-byte
 * rounding, 2 MiB alignment) and the mask keeps only the low bits. Removal
 * shifts the entries behind back into the hole (no tombstones), so a table
 * that sees millions of allocations and frees stays as small as what is
 * live in it. Key 0 marks an empty slot (the slots are calloc'd: empty
 * from the start) and is kept beside them, so any key may be stored; a
 * probe touches the slots alone.
 *
 * A value's place (the pointer fs_u64map_get and fs_u64map_put return)
 * stays valid only until the next put or take on the same table: both may
 * move entries. Iteration (fs_u64map_next) is in slot order, which depends
 * on the keys' hashes: a command whose output follows a table sorts first. */
#ifndef FS_U64MAP_H
#define FS_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct fs_u64map {
    unsigned char *slots; /* cap slots of `stride` bytes: the key (0: empty), then the value */
    size_t n, cap;        /* entries (key 0's included); slots (0 or a power of two) */
    size_t vsize, stride;
    bool has_zero;             /* key 0 is in the table, its value in zero_value */
    unsigned char *zero_value; /* vsize bytes, made at key 0's first put */
} fs_u64map;

/* An empty table of values of vsize bytes (0: a set of keys). */
void fs_u64map_init(fs_u64map *m, size_t vsize);
/* Room for `slots` slots (rounded up to a power of two) before the first
 * growth: for a table known to grow large, and for a caller whose output
 * follows slot order and must stay as it was. False when memory ran out. */
bool fs_u64map_reserve(fs_u64map *m, size_t slots);
void fs_u64map_free(fs_u64map *m);
/* Empties it, keeping its slots for reuse. */
void fs_u64map_clear(fs_u64map *m);

/* key's value, NULL when key is not in the table. */
static inline void *fs_u64map_get(const fs_u64map *m, uint64_t key);
/* key's value, made (zeroed) when key was not in the table (*added set
 * true then, false otherwise; added may be NULL). NULL only when memory ran
 * out, the table unchanged. */
static inline void *fs_u64map_put(fs_u64map *m, uint64_t key, bool *added);
/* Removes key, its value copied to out first (out may be NULL); false when
 * key was not in the table. */
static inline bool fs_u64map_take(fs_u64map *m, uint64_t key, void *out);

/* The entries one by one: start with *pos = 0; true with the next entry's
 * key and value (either may be NULL) until there is none. The table must
 * not change meanwhile. */
bool fs_u64map_next(const fs_u64map *m, size_t *pos, uint64_t *key, void **value);

/* murmur3's 64-bit finaliser: every bit of x moves every bit of the
 * result, the low ones that pick a slot included. */
static inline uint64_t fs_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* ---- the hot path, inline: one put and one take per allocation and free
 * of a trace (u64map.c has the rest) ---- */

#define FS_U64MAP_MIN_SLOTS 64 /* slots of a table at its first put */

/* u64map.c */
bool fs_u64map_resize(fs_u64map *m, size_t cap);
void *fs_u64map_zero_put(fs_u64map *m, bool *added);
bool fs_u64map_zero_take(fs_u64map *m, void *out);

static inline unsigned char *fs_u64map_slot_(const fs_u64map *m, size_t i)
{
    return m->slots + i * m->stride;
}

static inline uint64_t fs_u64map_key_(const fs_u64map *m, size_t i)
{
    uint64_t k;
    memcpy(&k, fs_u64map_slot_(m, i), sizeof k);
    return k;
}

/* Copies of whole slots and values: a few words each, inline rather than a
 * call to memcpy/memset of a size known only at run time (the table sits on
 * the analyzer's hottest path, one put and one take per allocation). */
static inline void fs_u64map_copy_words_(unsigned char *dst, const unsigned char *src, size_t bytes)
{
    for (size_t i = 0; i < bytes; i += 8)
        memcpy(dst + i, src + i, 8);
}

static inline void fs_u64map_copy_value_(void *out, const unsigned char *value, size_t vsize)
{
    switch (vsize) {
    case 4:
        memcpy(out, value, 4);
        break;
    case 8:
        memcpy(out, value, 8);
        break;
    case 16:
        memcpy(out, value, 16);
        break;
    default:
        memcpy(out, value, vsize);
    }
}

static inline size_t fs_u64map_home_(const fs_u64map *m, uint64_t key)
{
    return (size_t)fs_mix64(key) & (m->cap - 1);
}

/* The slot holding key (never 0), or the empty one where it would go. */
static inline size_t fs_u64map_find_(const fs_u64map *m, uint64_t key)
{
    size_t i = fs_u64map_home_(m, key);
    for (uint64_t k; (k = fs_u64map_key_(m, i)) != 0 && k != key;)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static inline void *fs_u64map_get(const fs_u64map *m, uint64_t key)
{
    if (!key) return m->has_zero ? m->zero_value : NULL;
    if (!m->cap) return NULL;
    size_t i = fs_u64map_find_(m, key);
    return fs_u64map_key_(m, i) ? fs_u64map_slot_(m, i) + sizeof key : NULL;
}

static inline void *fs_u64map_put(fs_u64map *m, uint64_t key, bool *added)
{
    if (!key) return fs_u64map_zero_put(m, added);
    if (2 * (m->n + 1) > m->cap && !fs_u64map_resize(m, m->cap ? 2 * m->cap : FS_U64MAP_MIN_SLOTS))
        return NULL;
    size_t i = fs_u64map_find_(m, key);
    unsigned char *s = fs_u64map_slot_(m, i);
    bool fresh = !fs_u64map_key_(m, i);
    if (added) *added = fresh;
    if (fresh) {
        memcpy(s, &key, sizeof key);
        for (size_t i = sizeof key; i < m->stride; i += 8)
            memset(s + i, 0, 8);
        m->n++;
    }
    return s + sizeof key;
}

static inline bool fs_u64map_take(fs_u64map *m, uint64_t key, void *out)
{
    if (!key) return fs_u64map_zero_take(m, out);
    if (!m->cap) return false;
    size_t i = fs_u64map_find_(m, key), mask = m->cap - 1;
    if (!fs_u64map_key_(m, i)) return false;
    if (out) fs_u64map_copy_value_(out, fs_u64map_slot_(m, i) + sizeof key, m->vsize);
    /* Backward shift: each entry after the hole that may move into it (its
     * home is not between the hole and it, cyclically) does, and the hole
     * moves on, until an empty slot ends the run. */
    for (size_t j = (i + 1) & mask; fs_u64map_key_(m, j); j = (j + 1) & mask) {
        size_t h = fs_u64map_home_(m, fs_u64map_key_(m, j));
        if (((j - h) & mask) >= ((j - i) & mask)) {
            fs_u64map_copy_words_(fs_u64map_slot_(m, i), fs_u64map_slot_(m, j), m->stride);
            i = j;
        }
    }
    memset(fs_u64map_slot_(m, i), 0, sizeof key);
    m->n--;
    return true;
}

#endif /* FS_U64MAP_H */
