/* bins.c - a pool's free blocks in best-fit order, (size, address), as
 * PyTorch's (stream, size, address) sets keep them, but in segregated bins
 * so that the common operations touch one or two cache lines instead of a
 * tree path: sizes under 32 KiB get a bin per 512-byte size, larger ones 64
 * bins per power of two (the last bin takes everything from 1 TiB up). Each
 * bin is a list sorted by (size, address); a two-level bitmap finds the
 * next non-empty bin. Best fit is the first block of at least the size in
 * its bin, else the first block of the next non-empty bin. */
#include "internal.h"

static unsigned bin_of(size_t size)
{
    if (size < FS_BIN_EXACT_LIMIT) return (unsigned)(size / FS_MIN_BLOCK);
    unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)size);
    unsigned sub = (unsigned)(size >> (k - FS_BIN_SUB_BITS)) & ((1u << FS_BIN_SUB_BITS) - 1);
    unsigned idx = FS_BIN_EXACT + (k - FS_BIN_EXACT_LOG) * (1u << FS_BIN_SUB_BITS) + sub;
    return idx < FS_BINS ? idx : FS_BINS - 1;
}

static bool before(const fs_block *x, const fs_block *y)
{
    return x->size < y->size || (x->size == y->size && x->addr < y->addr);
}

static void mark(fs_bins *s, unsigned i)
{
    s->map[i / 64] |= 1ull << (i % 64);
    s->summary |= 1u << (i / 64);
}

static void unmark(fs_bins *s, unsigned i)
{
    s->map[i / 64] &= ~(1ull << (i % 64));
    if (!s->map[i / 64]) s->summary &= ~(1u << (i / 64));
}

/* The first non-empty bin at or after i, or FS_BINS. */
static unsigned next_bin(const fs_bins *s, unsigned i)
{
    if (i >= FS_BINS) return FS_BINS;
    unsigned w = i / 64;
    uint64_t bits = s->map[w] & (~0ull << (i % 64));
    if (bits) return w * 64 + (unsigned)__builtin_ctzll(bits);
    uint32_t rest = w + 1 < 32 ? s->summary & (~0u << (w + 1)) : 0;
    if (!rest) return FS_BINS;
    w = (unsigned)__builtin_ctz(rest);
    return w * 64 + (unsigned)__builtin_ctzll(s->map[w]);
}

void fs_bins_insert(fs_bins *s, fs_block *b)
{
    unsigned i = bin_of(b->size);
    fs_block **at = &s->bin[i], *prev = NULL;
    b->bin = i;
    while (*at && before(*at, b)) {
        prev = *at;
        at = &(*at)->right;
    }
    b->left = prev;
    b->right = *at;
    if (*at) (*at)->left = b;
    *at = b;
    mark(s, i);
}

void fs_bins_remove(fs_bins *s, fs_block *b)
{
    unsigned i = b->bin;
    if (b->left)
        b->left->right = b->right;
    else
        s->bin[i] = b->right;
    if (b->right) b->right->left = b->left;
    b->left = b->right = NULL;
    if (!s->bin[i]) unmark(s, i);
}

fs_block *fs_bins_lower_bound(const fs_bins *s, size_t size)
{
    unsigned i = bin_of(size);
    for (fs_block *b = s->bin[i]; b; b = b->right)
        if (b->size >= size) return b;
    i = next_bin(s, i + 1);
    return i < FS_BINS ? s->bin[i] : NULL;
}

fs_block *fs_bins_next(const fs_bins *s, const fs_block *b)
{
    if (b->right) return b->right;
    unsigned i = next_bin(s, b->bin + 1);
    return i < FS_BINS ? s->bin[i] : NULL;
}

fs_block *fs_bins_max(const fs_bins *s)
{
    for (int w = 31; w >= 0; w--) {
        if (!(s->summary >> w & 1)) continue;
        unsigned i = (unsigned)w * 64 + 63u - (unsigned)__builtin_clzll(s->map[w]);
        fs_block *b = s->bin[i];
        while (b->right)
            b = b->right;
        return b;
    }
    return NULL;
}

fs_block *fs_bins_first(const fs_bins *s)
{
    unsigned i = next_bin(s, 0);
    return i < FS_BINS ? s->bin[i] : NULL;
}
