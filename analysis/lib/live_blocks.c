/* live_blocks.c - live blocks by address (live_blocks.h), over one fs_u64map. */
#include "live_blocks.h"

#include "mem.h"

/* 4096 slots from the first block: a trace's live set is thousands of
 * blocks, and the tables' order (export --perfetto follows it) is the one
 * the analyzer has always had. */
#define FIRST_SLOTS 4096

void fs_live_ready(fs_live *l)
{
    if (!l->map.stride) fs_u64map_init(&l->map, sizeof(struct fs_live_value));
    if (!l->map.cap && !fs_u64map_reserve(&l->map, FIRST_SLOTS)) fs_live_oom();
}

void fs_live_oom(void)
{
    fs_analysis_oom("analysis");
}

void fs_live_put(fs_live *l, uint64_t addr, uint64_t size, uint32_t site, int device)
{
    fs_live_block old;
    fs_live_replace(l, addr, size, site, device, &old);
}

size_t fs_live_count(const fs_live *l)
{
    return l->map.n;
}

bool fs_live_next(const fs_live *l, size_t *pos, fs_live_block *out)
{
    uint64_t addr;
    void *p;
    if (!l->map.stride || !fs_u64map_next(&l->map, pos, &addr, &p)) return false;
    const struct fs_live_value *v = p;
    *out = (fs_live_block){addr, v->size, v->site, v->device};
    return true;
}

void fs_live_clear(fs_live *l)
{
    if (l->map.stride) fs_u64map_clear(&l->map);
}

void fs_live_free(fs_live *l)
{
    if (l->map.stride) fs_u64map_free(&l->map);
}
