/* passive.h - the trace-only event source (passive.c): the program's own
 * allocations, seen from outside the allocator (CUPTI callbacks, cupti.c),
 * written to the trace in the format the allocator's events use, with
 * per-device totals kept here. Nothing is served: the program's memory is
 * its runtime's. */
#ifndef FS_PASSIVE_H
#define FS_PASSIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Starts the trace at `level` (enum fs_trace_level, at least events) with
 * `frames` native frames per stack, to `path` (a FSDPSHIM_TRACE pattern;
 * NULL: the default name). `how` names the source in the log line. False,
 * after logging why, when the file cannot be made. */
bool fs_passive_start(int level, unsigned frames, const char *path, const char *how);

/* Flushes and closes the trace; later events are dropped. */
void fs_passive_stop(void);

/* The stack of the call the thread is entering, for the event its exit
 * writes (at trace:stacks and above). Leading frames inside the CUDA
 * libraries (runtime, driver, CUPTI) are left out: the stack starts at the
 * program's call. */
void fs_passive_enter(void);

/* A block the program got from its runtime or driver (size as asked), and
 * its free; a free of an address allocated before the trace began is
 * written as such (FS_FMT_FREE_BEFORE_TRACE). device -1: unknown. */
void fs_passive_alloc(int device, uint64_t stream, uint64_t addr, size_t size, bool stream_ordered);
void fs_passive_free(int device, uint64_t stream, uint64_t addr, bool stream_ordered);

/* A free call of addr begins: its block leaves the live blocks now, before
 * the runtime can give the address to another thread's allocation, and
 * fs_passive_free writes the event when the call succeeds;
 * fs_passive_free_failed puts the block back when it fails. */
void fs_passive_free_enter(uint64_t addr);
void fs_passive_free_failed(void);

#endif /* FS_PASSIVE_H */
