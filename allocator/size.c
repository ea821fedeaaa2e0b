/* size.c - size arithmetic: request rounding (with roundup_power2_divisions),
 * pool choice, segment sizes and the split
 * rule. Every function refuses to wrap around near SIZE_MAX: 0 means "no
 * such size". */
#include "internal.h"

static size_t round_up(size_t size, size_t to)
{
    size_t r = size % to;
    if (r == 0) return size;
    if (size > SIZE_MAX - (to - r)) return 0;
    return size + (to - r);
}

static int floor_log2(size_t v)
{
    return 63 - __builtin_clzll((unsigned long long)v);
}

/* Bucket i covers [2^(20+i), 2^(21+i)); sizes under 1 MiB use bucket 0 and
 * sizes of 32 GiB and more the last. */
static unsigned divisions_for(const fs_alloc_config *cfg, size_t size)
{
    int l = floor_log2(size);
    int idx = l > 20 ? l - 20 : 0;
    if (idx >= FS_ROUNDUP_BUCKETS) idx = FS_ROUNDUP_BUCKETS - 1;
    return cfg->roundup_divisions[idx];
}

/* Rounds up to the next of `div` equal steps between two powers of two. */
static size_t next_division(size_t size, size_t div)
{
    if (!(size & (size - 1))) return size;
    size_t floor2 = (size_t)1 << floor_log2(size);
    size_t step = floor2 >> floor_log2(div);
    if (step == 0) return floor2 > SIZE_MAX / 2 ? 0 : floor2 << 1;
    return round_up(size, step);
}

size_t fs_round_size(const fs_alloc_config *cfg, size_t size)
{
    if (size < FS_MIN_BLOCK) return FS_MIN_BLOCK;
    unsigned div = divisions_for(cfg, size);
    if (div > 1 && size > FS_MIN_BLOCK * div) return next_division(size, div);
    return round_up(size, FS_MIN_BLOCK);
}

bool fs_rounding_is_plain(const fs_alloc_config *cfg)
{
    for (int i = 0; i < FS_ROUNDUP_BUCKETS; i++)
        if (cfg->roundup_divisions[i] > 1) return false;
    return true;
}

size_t fs_segment_least(size_t rounded)
{
    if (rounded <= FS_SMALL_SIZE) return FS_SMALL_BUFFER;
    return round_up(rounded, FS_ROUND_LARGE);
}

/* The large pool's shared segment (for requests from 1 to 10 MiB) is
 * large_segment_mb, PyTorch's 20 MiB by default, once the device's cache
 * holds that much; until then each such request gets a segment of its own,
 * rounded up to 2 MiB.
 *
 * Why shared. A segment is only given back whole, so one that serves
 * requests of several sizes is what lets a freed 4 MiB block and its
 * neighbours serve a later 16 MiB request. Segments sized to the device's
 * use (2, 4, 8 MiB as it grew) were smaller than the requests that came
 * later: PyTorch FSDP2 on 4 ranks (train_fsdp.py --size small) kept many
 * such segments partly used and peaked at 1.21 times PyTorch's own
 * allocator, 1.10 (median) with 20 MiB ones (docs/allocator.md).
 *
 * Why not at first. A job that never holds one shared segment's worth
 * pays for sharing without using it: the bundled demo (minifsdp, 9.2 MiB
 * allocated at its peak) reserved 28 MiB, where a GPU's cudaMalloc would
 * have taken its blocks' 2 MiB pages. Below the threshold a segment of
 * the request's own size costs what the device would charge anyway; the
 * exact segments a larger job made on its way past it are at most one
 * shared segment's worth. segment_growth:pytorch shares from the first,
 * as PyTorch does. The small pool keeps its 2 MiB. */
size_t fs_segment_size(const fs_alloc_config *cfg, size_t rounded, size_t reserved)
{
    size_t least = fs_segment_least(rounded);
    if (rounded <= FS_SMALL_SIZE || rounded >= FS_MIN_LARGE_ALLOC || least == 0) return least;
    if (!cfg->pytorch_growth && reserved < cfg->large_segment) return least;
    return cfg->large_segment > least ? cfg->large_segment : least;
}

int fs_size_kind(size_t rounded)
{
    return rounded <= FS_SMALL_SIZE ? FS_KIND_SMALL : FS_KIND_LARGE;
}

/* Small blocks split down to the minimum block; large ones only when the
 * remainder could serve another large request, and never at or above
 * max_split_size (those stay whole so they cannot be nibbled into slivers).
 * In an expandable segment any remainder can be given back page by page, so
 * it always splits. */
bool fs_should_split(const fs_alloc_config *cfg, const fs_block *b, size_t size)
{
    size_t remaining = b->size - size;
    if (atomic_load_explicit(&b->seg->pool->no_split, memory_order_relaxed)) return false;
    if (b->seg->kind == FS_KIND_SMALL || b->seg->expandable) return remaining >= FS_MIN_BLOCK;
    return size < cfg->max_split_size && remaining > FS_SMALL_SIZE;
}
