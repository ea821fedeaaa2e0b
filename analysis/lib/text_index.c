/* text_index.c - strings to their owner's numbers (text_index.h). */
#include "text_index.h"

#include "mem.h"

#include <stdlib.h>
#include <string.h>

uint64_t fs_hash_text(const char *s)
{
    /* eight bytes a step: a site's text is kilobytes of frames (FNV-1a, a
     * byte a step, was a fifth of report's time on a trace of Python
     * stacks) */
    size_t n = strlen(s);
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

uint32_t fs_text_index_find(const fs_text_index *x, const char *text, uint64_t hash,
                            fs_text_of text_of, const void *owner)
{
    const uint32_t *first = fs_u64map_get(&x->first, hash);
    for (uint32_t at = first ? *first : 0; at; at = x->next[at - 1])
        if (!strcmp(text_of(owner, at - 1), text)) return at;
    return 0;
}

void fs_text_index_add(fs_text_index *x, uint32_t number, uint64_t hash)
{
    bool added;
    if (!x->first.stride) fs_u64map_init(&x->first, sizeof(uint32_t));
    x->next = fs_grow(x->next, &x->cap, (size_t)number + 1, sizeof *x->next);
    uint32_t *first = fs_u64map_put(&x->first, hash, &added);
    if (!first) fs_analysis_oom("analysis");
    /* the newest of a hash goes first: its chain is the older ones */
    x->next[number] = added ? 0 : *first;
    *first = number + 1;
}

void fs_text_index_free(fs_text_index *x)
{
    fs_u64map_free(&x->first);
    free(x->next);
    *x = (fs_text_index){0};
}
