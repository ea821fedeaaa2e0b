/* pair_ids.c - pairs of words to dense ids (pair_ids.h). */
#include "pair_ids.h"

#include "mem.h"

#include <stdlib.h>

struct fs_pair_entry {
    uint64_t a, b;
    uint32_t next; /* the next (older) id with the same hash; 0: none */
};

uint32_t fs_pair_id(fs_pair_ids *m, uint64_t a, uint64_t b, bool *added)
{
    uint64_t hash = fs_mix64(a ^ fs_mix64(b));
    bool new_hash;
    if (!m->first.stride) fs_u64map_init(&m->first, sizeof(uint32_t));
    uint32_t *newest = fs_u64map_put(&m->first, hash, &new_hash);
    if (!newest) fs_analysis_oom("analysis");
    *added = false;
    for (uint32_t id = *newest; id; id = m->by_id[id - 1].next) /* 0 for a new hash */
        if (m->by_id[id - 1].a == a && m->by_id[id - 1].b == b) return id;
    m->by_id = fs_grow(m->by_id, &m->cap, m->n + 1, sizeof *m->by_id);
    m->by_id[m->n] = (struct fs_pair_entry){a, b, *newest};
    *added = true;
    return *newest = (uint32_t)++m->n;
}

void fs_pair_of(const fs_pair_ids *m, uint32_t id, uint64_t *a, uint64_t *b)
{
    *a = m->by_id[id - 1].a;
    *b = m->by_id[id - 1].b;
}

void fs_pair_ids_free(fs_pair_ids *m)
{
    if (m->first.stride) fs_u64map_free(&m->first);
    free(m->by_id);
    *m = (fs_pair_ids){0};
}
