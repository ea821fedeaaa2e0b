/* text_index.h - strings to the numbers their owner gave them (0, 1, 2...
 * in the order it added them): the analyzer's one table keyed by text
 * (sites by their text, report's annotation names by path, the memviz
 * pickle's memo of strings). Over fs_u64map: a string's hash (fs_hash_text)
 * to the first number with that hash, any others of the same hash chained
 * behind it, so that a collision costs a comparison, never a wrong answer.
 * The owner keeps the strings, in its own array, and says which string a
 * number is (text_of): nothing is stored twice. A zeroed index ({0}) is an
 * empty one. */
#ifndef FS_TEXT_INDEX_H
#define FS_TEXT_INDEX_H

#include "u64map.h"

#include <stdint.h>

typedef struct fs_text_index {
    fs_u64map first; /* hash -> the first number + 1 with that hash (uint32_t) */
    uint32_t *next;  /* by number: the next number + 1 with the same hash; 0: none */
    size_t cap;
} fs_text_index;

/* The text the owner keeps under `number`. */
typedef const char *(*fs_text_of)(const void *owner, uint32_t number);

/* A string's hash, eight bytes a step (a site's text is kilobytes of
 * frames). */
uint64_t fs_hash_text(const char *s);

/* The number + 1 of `text` (whose hash is `hash`), 0 when it was never
 * added. */
uint32_t fs_text_index_find(const fs_text_index *x, const char *text, uint64_t hash,
                            fs_text_of text_of, const void *owner);
/* Adds `number`, whose text (of hash `hash`) the owner now keeps and which
 * find did not know; numbers are added in order from 0. Memory running out
 * ends the command (mem.h). */
void fs_text_index_add(fs_text_index *x, uint32_t number, uint64_t hash);
void fs_text_index_free(fs_text_index *x);

#endif /* FS_TEXT_INDEX_H */
