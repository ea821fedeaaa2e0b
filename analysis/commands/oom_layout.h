/* oom_layout.h - where the cache's free memory lay when a request failed:
 * the cache's segments followed through a trace (segment and allocation
 * events, or an OOM snapshot's entries), each with its stream, its pool
 * (small or large) and its memory (cudaMalloc's or stream-ordered), so that
 * oom.c can tell the free bytes a failed request could have taken from
 * those it never could. */
#ifndef FS_OOM_LAYOUT_H
#define FS_OOM_LAYOUT_H

#include "format.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct fs_oom_layout fs_oom_layout;

/* The cache's free bytes as one failed request saw them. The allocator
 * serves a request only from segments of its own pool (small up to 1 MiB,
 * large above) and its own memory (a cudaMallocAsync only from
 * stream-ordered segments, a cudaMalloc only from cudaMalloc's), first its
 * stream's, then, as cross_stream_reuse allows, other streams' (SPEC
 * sections 4 and 5). Free bytes count pending frees too: the failure's own
 * record says how many of those there were. */
typedef struct fs_oom_where {
    /* The segments and live blocks followed add up to the failure's
     * reserved and allocated bytes; else (a trace without segment events,
     * dropped events) nothing below is known. */
    bool known;
    /* The request is taken for a cudaMallocAsync: its stream's
     * allocations were mostly stream-ordered (traces of format 2 say so of
     * each allocation; the failure's record does not), or, for a stream
     * with none (by_stream false), any stream but the legacy one. */
    bool ordered, by_stream;
    bool memory_known; /* format 2: each segment's memory is known */
    uint64_t rounded;  /* the request as the allocator rounds it (512 bytes) */
    /* Free bytes in segments the request could take, and the largest free
     * piece among them: its own stream's, and other streams'. */
    uint64_t own, own_largest;
    uint64_t other, other_largest;
    /* Free bytes in segments it never takes: of the other memory
     * (cudaMalloc's segments for a cudaMallocAsync, and the reverse), and
     * of the other pool (the small pool's 2 MiB segments for a request of
     * more than 1 MiB, and the reverse). What lies in both counts once, as
     * other memory. */
    uint64_t other_memory, other_pool;
} fs_oom_where;

fs_oom_layout *fs_oom_layout_create(void);
void fs_oom_layout_free(fs_oom_layout *l);

/* Follows one record of a trace read in time order (others are ignored).
 * api_recorded: the trace is of format 2, whose allocations say whether
 * they were stream-ordered. */
void fs_oom_layout_see(fs_oom_layout *l, const fs_fmt_record *r, bool api_recorded);

/* Where the cache's free bytes lay for failure `oom` (an FS_REC_OOM event),
 * as the records seen so far leave the cache. */
void fs_oom_layout_where(const fs_oom_layout *l, const fs_fmt_event *oom, fs_oom_where *out);

#endif /* FS_OOM_LAYOUT_H */
