/* live_blocks.h - the blocks live at a moment of a trace, by address: what every
 * command that follows allocations and frees through a trace keeps (sites
 * for top, leaks and report; export's memviz and Perfetto writers). One
 * table of fs_u64map (u64map.h) keyed by address; a block remembers its
 * size, its device and a number its user gives it (`site`, never 0: a site
 * index + 1, a block or a kind id + 1). */
#ifndef FS_LIVE_BLOCKS_H
#define FS_LIVE_BLOCKS_H

#include "u64map.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct fs_live_block {
    uint64_t addr, size;
    uint32_t site; /* the user's number, never 0 */
    int device;
} fs_live_block;

typedef struct fs_live {
    fs_u64map map; /* addr -> struct live_value (live_blocks.c) */
} fs_live;

/* A zeroed table ({0}) is an empty one. */
void fs_live_put(fs_live *l, uint64_t addr, uint64_t size, uint32_t site, int device);
/* As fs_live_put; true, with the block it replaced in *old, when addr was
 * live already. */
static inline bool fs_live_replace(fs_live *l, uint64_t addr, uint64_t size, uint32_t site,
                                   int device, fs_live_block *old);
/* Removes the block at addr into *out; false when it is not live. */
static inline bool fs_live_take(fs_live *l, uint64_t addr, fs_live_block *out);
/* How many blocks are live. */
size_t fs_live_count(const fs_live *l);
/* The blocks one by one (start with *pos = 0), in the table's order: true
 * with the next in *out until there is none. The table must not change
 * meanwhile (collect the addresses, then take them). */
bool fs_live_next(const fs_live *l, size_t *pos, fs_live_block *out);
void fs_live_clear(fs_live *l);
void fs_live_free(fs_live *l);

/* ---- the hot path, inline: a put and a take per allocation and free of a
 * trace (live_blocks.c has the rest) ---- */

struct fs_live_value {
    uint64_t size;
    uint32_t site;
    int device;
};

/* live_blocks.c: the table made, and room for its first blocks */
void fs_live_ready(fs_live *l);
_Noreturn void fs_live_oom(void);

static inline bool fs_live_replace(fs_live *l, uint64_t addr, uint64_t size, uint32_t site,
                                   int device, fs_live_block *old)
{
    bool added;
    if (!l->map.cap) fs_live_ready(l);
    struct fs_live_value *v = (struct fs_live_value *)fs_u64map_put(&l->map, addr, &added);
    if (!v) fs_live_oom();
    if (!added) *old = (fs_live_block){addr, v->size, v->site, v->device};
    *v = (struct fs_live_value){size, site, device};
    return !added;
}

static inline bool fs_live_take(fs_live *l, uint64_t addr, fs_live_block *out)
{
    struct fs_live_value v;
    if (!l->map.stride || !fs_u64map_take(&l->map, addr, &v)) return false;
    *out = (fs_live_block){addr, v.size, v.site, v.device};
    return true;
}

#endif /* FS_LIVE_BLOCKS_H */
