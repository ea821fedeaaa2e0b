/* trace_glue.h - what the shim's entry points call to trace
 * (trace_glue.c). Every call is cheap and does nothing while tracing is off. */
#ifndef FS_TRACE_GLUE_H
#define FS_TRACE_GLUE_H

#include "../../trace/trace.h"
#include "shim.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Starts tracing per FSDPSHIM_CONF and FSDPSHIM_TRACE (with the allocator). */
void fs_trace_glue_start(void);

/* With snapshot_signal:1, SIGUSR2 writes a snapshot (a thread of its own
 * writes it; the handler only wakes it). Called with the allocator. */
void fs_trace_glue_snapshot_signal(void);

/* Whether each allocation's native stack is taken (and each live block's
 * stacks kept, trace/snapshot.h): traced, or kept for snapshots alone
 * (oom_snapshot:stacks). */
bool fs_trace_glue_stacks_taken(void);

/* Sets the allocator observer's event callback when tracing is on. */
void fs_trace_glue_observe(fs_alloc_observer *obs);

/* An out-of-memory report, as an FS_REC_OOM event. */
void fs_trace_glue_oom(const fs_oom_info *info);

/* Writes a snapshot file of every device (docs/tracing.md): `kind` names
 * it ("fsdpshim-oom", "fsdpshim-snapshot"), `oom` the failed request if one
 * caused it. path receives the file's name, or why there is none. */
bool fs_trace_glue_snapshot(const char *kind, const fs_oom_info *oom, char *path, size_t len);

/* Around an allocation entry point's call into the allocator: captures the
 * native (and Python) stack before any allocator lock is taken; the
 * allocation event attaches it. */
void fs_trace_alloc_begin(void);
void fs_trace_alloc_end(void);

/* Stream lifetime: created (or handed out again by a stream pool) and
 * destroyed. */
void fs_trace_stream(bool create, int device, const void *stream, unsigned flags, int priority,
                     bool pool_hit);

/* A collective launched on `stream` (enum fs_fmt_coll). */
void fs_trace_collective(int coll, int device, const void *stream, const void *buf, size_t bytes,
                         const void *comm);

/* The all-gather rate limiter starts waiting (in flight: gathers and bytes)
 * or stops (the fence it waited for). */
void fs_trace_rate_limit(bool start, int device, uint64_t in_flight, uint64_t bytes,
                         const void *fence);

/* The program's own virtual-memory call through the driver (op: enum
 * fs_fmt_vmm), passed through by the shim and traced when it succeeded;
 * device -1 when the call does not name one. A cuMemCreate takes the
 * caller's stack. */
void fs_trace_vmm(int op, int device, uint64_t addr, size_t size, uint64_t handle);

#endif /* FS_TRACE_GLUE_H */
