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
void *fs_u64map_get(const fs_u64map *m, uint64_t key);
/* key's value, made (zeroed) when key was not in the table (*added set
 * true then, false otherwise; added may be NULL). NULL only when memory ran
 * out, the table unchanged. */
void *fs_u64map_put(fs_u64map *m, uint64_t key, bool *added);
/* Removes key, its value copied to out first (out may be NULL); false when
 * key was not in the table. */
bool fs_u64map_take(fs_u64map *m, uint64_t key, void *out);

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

#endif /* FS_U64MAP_H */
