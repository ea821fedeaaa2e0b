/* blockmap.c - live block start address -> block, for frees.
 *
 * A free names only a pointer, not a stream, so this is the one structure
 * every thread's frees share. It is split into 64 shards by address hash,
 * each a chained hash table under its own short lock: threads freeing
 * different blocks almost never meet, and no device owns a lock here. */
#include "internal.h"

#include <stdlib.h>

static uint64_t hash_addr(uintptr_t addr)
{
    return ((uint64_t)addr >> 9) * 0x9E3779B97F4A7C15ull;
}

static fs_map_shard *shard_of(fs_allocator *a, uint64_t h)
{
    return &a->map[h >> 58]; /* top 6 bits: 64 shards */
}

int fs_map_init(fs_allocator *a)
{
    for (int i = 0; i < FS_MAP_SHARDS; i++) {
        fs_map_shard *s = &a->map[i];
        fs_spin_init(&s->lock);
        s->mask = 63;
        s->n = 0;
        s->tab = calloc(s->mask + 1, sizeof *s->tab);
        if (!s->tab) return -1;
    }
    return 0;
}

void fs_map_fini(fs_allocator *a)
{
    for (int i = 0; i < FS_MAP_SHARDS; i++)
        free(a->map[i].tab);
}

/* Doubles the bucket array; on allocation failure the table just stays denser. */
static void grow(fs_map_shard *s)
{
    size_t nmask = s->mask * 2 + 1;
    fs_block **nt = calloc(nmask + 1, sizeof *nt);
    if (!nt) return;
    for (size_t i = 0; i <= s->mask; i++) {
        fs_block *b = s->tab[i], *next;
        for (; b; b = next) {
            next = b->map_next;
            size_t j = (size_t)hash_addr(b->addr) & nmask;
            b->map_next = nt[j];
            nt[j] = b;
        }
    }
    free(s->tab);
    s->tab = nt;
    s->mask = nmask;
}

void fs_map_insert(fs_allocator *a, fs_block *b)
{
    uint64_t h = hash_addr(b->addr);
    fs_map_shard *s = shard_of(a, h);
    fs_spin_lock(&s->lock);
    if (s->n > s->mask) grow(s);
    size_t i = (size_t)h & s->mask;
    b->map_next = s->tab[i];
    s->tab[i] = b;
    s->n++;
    fs_spin_unlock(&s->lock);
}

fs_block *fs_map_remove(fs_allocator *a, uintptr_t addr)
{
    uint64_t h = hash_addr(addr);
    fs_map_shard *s = shard_of(a, h);
    fs_spin_lock(&s->lock);
    fs_block **at = &s->tab[(size_t)h & s->mask];
    while (*at && (*at)->addr != addr)
        at = &(*at)->map_next;
    fs_block *b = *at;
    if (b) {
        *at = b->map_next;
        b->map_next = NULL;
        s->n--;
    }
    fs_spin_unlock(&s->lock);
    return b;
}

/* cudaDeviceReset: drops the device's live blocks from the map (their
 * metadata is freed by the caller afterwards). */
void fs_map_forget_device(fs_allocator *a, int device)
{
    for (int i = 0; i < FS_MAP_SHARDS; i++) {
        fs_map_shard *s = &a->map[i];
        fs_spin_lock(&s->lock);
        for (size_t j = 0; j <= s->mask; j++) {
            fs_block **at = &s->tab[j];
            while (*at) {
                if ((*at)->seg->pool->dev->id == device) {
                    *at = (*at)->map_next;
                    s->n--;
                } else {
                    at = &(*at)->map_next;
                }
            }
        }
        fs_spin_unlock(&s->lock);
    }
}
