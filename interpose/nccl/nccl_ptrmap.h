/* nccl_ptrmap.h - a map from addresses to numbers, for the NCCL glue.
 *
 * Open addressing with linear probing and backward-shift deletion: there are
 * no tombstones, so a map that sees endless insert/remove churn (one entry
 * per all-gather output, removed when the output is freed) never degrades.
 * Not thread-safe: the caller holds a lock. Key 0 is reserved (NULL is never
 * a device buffer). A zeroed fs_ptrmap is an empty map. */
#ifndef FS_NCCL_PTRMAP_H
#define FS_NCCL_PTRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fs_ptrmap_slot {
    uintptr_t key; /* 0 = empty */
    uintptr_t value;
} fs_ptrmap_slot;

typedef struct fs_ptrmap {
    fs_ptrmap_slot *slots;
    size_t mask;  /* capacity - 1; the capacity is a power of two, or 0 */
    size_t count; /* keys held */
} fs_ptrmap;

/* True and *value (if not NULL) set when `key` is in the map. */
bool fs_ptrmap_get(const fs_ptrmap *m, uintptr_t key, uintptr_t *value);

/* Inserts `key` or overwrites its value. Returns false, leaving the map as
 * it was, when memory ran out. */
bool fs_ptrmap_put(fs_ptrmap *m, uintptr_t key, uintptr_t value);

/* Removes `key`; true and *value (if not NULL) set when it was there. */
bool fs_ptrmap_remove(fs_ptrmap *m, uintptr_t key, uintptr_t *value);

#endif /* FS_NCCL_PTRMAP_H */
