/* mem.h - the analyzer's memory: an array that grows, and what happens when
 * memory runs out. A command reads a trace into tables it cannot do without,
 * so running out of memory ends it with one line naming the command, not a
 * crash or a partial answer (SPEC section 9). Every growing array of
 * analysis/ grows through fs_grow, so that its policy (doubling from 64,
 * the new elements zeroed) is in one place. */
#ifndef FS_MEM_H
#define FS_MEM_H

#include <stddef.h>

/* "fsdpshim COMMAND: out of memory" on stderr, exit status 1. */
_Noreturn void fs_analysis_oom(const char *command);

/* As fs_grow, never beyond `limit` elements (0: no limit; need <= limit):
 * for an array that is a ring of at most `limit` entries. */
void *fs_grow_at_most(void *items, size_t *cap, size_t need, size_t size, size_t limit);

/* items (*cap elements of `size` bytes, NULL when *cap is 0) grown to hold
 * at least `need` elements: the capacity doubles from 64 until it does,
 * the new elements are zeroed, and *cap is updated. Memory running out ends
 * the command (fs_analysis_oom). Returns the (possibly moved) array.
 * Inline: most calls find the room there already (sites.c asks once per
 * allocation and free of a trace). */
static inline void *fs_grow(void *items, size_t *cap, size_t need, size_t size)
{
    return need <= *cap ? items : fs_grow_at_most(items, cap, need, size, 0);
}

#endif /* FS_MEM_H */
