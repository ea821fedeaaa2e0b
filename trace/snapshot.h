/* snapshot.h - snapshot files (trace/snapshot.c), and the map from live
 * blocks to the stacks that allocated them (trace/blocks.c).
 *
 * A snapshot is a file in the trace format (FS_FMT_FEAT_SNAPSHOT): every
 * definition the trace has made (so the stacks it names resolve), then one
 * FS_REC_SNAP_SEGMENT per segment followed by an FS_REC_SNAP_BLOCK per block,
 * and the FS_REC_OOM event that caused it, if one did. The caller (the
 * preload library, which knows the allocator) gathers the entries; this
 * file only writes them. */
#ifndef FS_SNAPSHOT_H
#define FS_SNAPSHOT_H

#include "../format/format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Writes the entries into a new file named `kind`-HOST-PID-N.fst (mode
 * 0600) in dir (NULL: the working directory), its path into path. False
 * when it cannot be written (path then says why). */
bool fs_snapshot_write(const char *dir, const char *kind, const fs_fmt_event *entries, size_t n,
                       char *path, size_t pathlen);

/* The stacks that allocated each live block (and its size), kept while
 * stacks are traced: set when a block is handed out, cleared when it is
 * freed. */
void fs_blocks_set(uint64_t addr, uint64_t size, uint32_t stack, uint32_t pystack);
void fs_blocks_clear(uint64_t addr);
/* False when the block's stacks are not known. */
bool fs_blocks_get(uint64_t addr, uint32_t *stack, uint32_t *pystack);
/* Calls fn for every live block with known stacks, for the live statistics
 * page: a few buckets at a time under their stripe's lock, so the walk is
 * not one consistent picture, and fn (called under that lock) must be
 * short and must not reach the allocator or the trace. */
void fs_blocks_each(void (*fn)(void *ctx, uint32_t stack, uint32_t pystack, uint64_t size),
                    void *ctx);
/* In a fork child: the parent's blocks are not the child's (its allocator
 * starts afresh), so every entry is forgotten. */
void fs_blocks_after_fork(void);

#endif /* FS_SNAPSHOT_H */
