/* pair_ids.h - keys of two 64-bit words to dense ids 1, 2, 3... in the
 * order they were first seen: what an exporter numbers its threads,
 * streams, stacks and frames with (export --perfetto's interned ids and
 * tracks). Over fs_u64map (u64map.h): the pair's mixed hash to the newest
 * id with that hash, any older ones of the same hash chained behind it, so
 * that a collision costs a comparison, never a wrong id (text_index.h does
 * the same for strings). The pairs are kept here, by id. A zeroed table
 * ({0}) is an empty one. */
#ifndef FS_PAIR_IDS_H
#define FS_PAIR_IDS_H

#include "u64map.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fs_pair_ids {
    fs_u64map first;             /* hash -> the newest id with that hash (uint32_t) */
    struct fs_pair_entry *by_id; /* by id - 1: the pair, the next id of its hash (0: none) */
    size_t n, cap;
} fs_pair_ids;

/* The id of (a, b); *added true when the pair is new and got the next id.
 * Memory running out ends the command (mem.h). */
uint32_t fs_pair_id(fs_pair_ids *m, uint64_t a, uint64_t b, bool *added);
/* The pair that got id (1 .. count). */
void fs_pair_of(const fs_pair_ids *m, uint32_t id, uint64_t *a, uint64_t *b);
/* How many ids were given. */
static inline size_t fs_pair_ids_count(const fs_pair_ids *m)
{
    return m->n;
}
void fs_pair_ids_free(fs_pair_ids *m);

#endif /* FS_PAIR_IDS_H */
