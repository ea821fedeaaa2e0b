/* pickle.h - writing a Python pickle (protocol 4) from C, for the memviz
 * export: dicts, lists, tuples, integers, booleans and strings, nothing
 * else, and only opcodes that both Python's unpickler and the small one in
 * PyTorch's MemoryViz.js (the memory_viz page) read.
 *
 * Strings are memoized: each distinct string is written once and fetched
 * again from the memo, as Python's own pickler does, so the key names and
 * file names repeated in every trace entry cost two bytes each. A list can
 * be memoized too and written again by reference (fs_pickle_get): the same
 * stack's frames for thousands of allocations.
 *
 * Usage: begin a container, write its items (a list: fs_pickle_item before
 * each; a dict: a key then its value), end it. Write errors are sticky and
 * reported by fs_pickle_close. */
#ifndef FS_PICKLE_H
#define FS_PICKLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct fs_pickle fs_pickle;

/* Starts a pickle on out (the PROTO header). */
fs_pickle *fs_pickle_open(FILE *out);
/* Ends the pickle (STOP) and frees the writer; false when a write failed. */
bool fs_pickle_close(fs_pickle *p);

void fs_pickle_dict_begin(fs_pickle *p);
void fs_pickle_dict_end(fs_pickle *p);
/* memo: the list is memoized and its memo id returned (else 0, unused). */
uint32_t fs_pickle_list_begin(fs_pickle *p, bool memo);
/* Before each item of the innermost open list. */
void fs_pickle_item(fs_pickle *p);
void fs_pickle_list_end(fs_pickle *p);
/* Pushes the object memoized as id again. */
void fs_pickle_get(fs_pickle *p, uint32_t id);

void fs_pickle_int(fs_pickle *p, int64_t v);
void fs_pickle_bool(fs_pickle *p, bool v);
void fs_pickle_str(fs_pickle *p, const char *s); /* UTF-8, memoized */
/* A tuple of the two integers already written. */
void fs_pickle_tuple2(fs_pickle *p);

/* A dict's key and an integer / string value. */
void fs_pickle_key_int(fs_pickle *p, const char *key, int64_t v);
void fs_pickle_key_str(fs_pickle *p, const char *key, const char *v);

#endif /* FS_PICKLE_H */
