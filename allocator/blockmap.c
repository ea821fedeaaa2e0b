/* blockmap.c - each pool's live blocks by start address, for frees.
 *
 * A free names only a pointer. Its block is almost always in the pool the
 * freeing thread last allocated from, so the map lives in the pool, under
 * the pool lock the free takes anyway: the common free costs no lock of its
 * own, and threads on distinct streams share nothing here. A live block
 * sits in the map of the pool that owns its segment (a block handed to
 * another stream included); segments change pools only when wholly free,
 * so entries never move. The map is a chained hash table through
 * fs_block.map_next. */
#include "internal.h"

#include <stdlib.h>

#define FS_LIVE_MIN_BUCKETS 64

static size_t bucket_of(const fs_livemap *m, uintptr_t addr)
{
    return (size_t)((((uint64_t)addr >> 9) * 0x9E3779B97F4A7C15ull) >> 32) & m->mask;
}

int fs_live_init(fs_livemap *m)
{
    m->mask = FS_LIVE_MIN_BUCKETS - 1;
    m->n = 0;
    m->tab = fs_zalloc_lines((m->mask + 1) * sizeof *m->tab); /* written by one thread only */
    return m->tab ? 0 : -1;
}

void fs_live_fini(fs_livemap *m)
{
    free(m->tab);
    m->tab = NULL;
}

/* Doubles the bucket array; on allocation failure the table just stays denser. */
static void grow(fs_livemap *m)
{
    fs_livemap nm = {.mask = m->mask * 2 + 1, .n = m->n};
    nm.tab = fs_zalloc_lines((nm.mask + 1) * sizeof *nm.tab);
    if (!nm.tab) return;
    for (size_t i = 0; i <= m->mask; i++) {
        for (fs_block *b = m->tab[i], *next; b; b = next) {
            next = b->map_next;
            size_t j = bucket_of(&nm, b->addr);
            b->map_next = nm.tab[j];
            nm.tab[j] = b;
        }
    }
    free(m->tab);
    *m = nm;
}

void fs_live_insert(fs_livemap *m, fs_block *b)
{
    if (m->n > m->mask) grow(m);
    size_t i = bucket_of(m, b->addr);
    b->map_next = m->tab[i];
    m->tab[i] = b;
    m->n++;
}

fs_block *fs_live_remove(fs_livemap *m, uintptr_t addr)
{
    fs_block **at = &m->tab[bucket_of(m, addr)];
    while (*at && (*at)->addr != addr)
        at = &(*at)->map_next;
    fs_block *b = *at;
    if (b) {
        *at = b->map_next;
        b->map_next = NULL;
        m->n--;
    }
    return b;
}
