/* tree.c - a pool's free blocks ordered by (size, address): an intrusive
 * treap, so that best fit is one descent and ties go to the lowest address,
 * as in PyTorch's (stream, size, address) sets. Priorities come from the
 * block address, so the shape (and every test) is deterministic. */
#include "internal.h"

static bool less(const fs_block *x, const fs_block *y)
{
    return x->size < y->size || (x->size == y->size && x->addr < y->addr);
}

static uint32_t prio_of(uintptr_t addr)
{
    uint64_t h = (uint64_t)addr * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

/* Splits t into (< key) and (>= key). */
static void split(fs_block *t, const fs_block *key, fs_block **l, fs_block **r)
{
    if (!t) {
        *l = *r = NULL;
    } else if (less(t, key)) {
        split(t->right, key, &t->right, r);
        *l = t;
    } else {
        split(t->left, key, l, &t->left);
        *r = t;
    }
}

static fs_block *merge(fs_block *l, fs_block *r)
{
    if (!l)
        return r;
    if (!r)
        return l;
    if (l->prio > r->prio) {
        l->right = merge(l->right, r);
        return l;
    }
    r->left = merge(l, r->left);
    return r;
}

void fs_tree_insert(fs_block **root, fs_block *b)
{
    b->prio = prio_of(b->addr);
    fs_block **at = root;
    while (*at && (*at)->prio > b->prio)
        at = less(b, *at) ? &(*at)->left : &(*at)->right;
    split(*at, b, &b->left, &b->right);
    *at = b;
}

void fs_tree_remove(fs_block **root, fs_block *b)
{
    fs_block **at = root;
    while (*at != b)
        at = less(b, *at) ? &(*at)->left : &(*at)->right;
    *at = merge(b->left, b->right);
    b->left = b->right = NULL;
}

fs_block *fs_tree_lower_bound(fs_block *t, size_t size)
{
    fs_block *best = NULL;
    while (t) {
        if (t->size >= size) {
            best = t;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best;
}

fs_block *fs_tree_max(fs_block *t)
{
    while (t && t->right)
        t = t->right;
    return t;
}

fs_block *fs_tree_next(fs_block *t, const fs_block *b)
{
    fs_block *best = NULL;
    while (t) {
        if (less(b, t)) {
            best = t;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best;
}
