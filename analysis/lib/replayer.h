/* replayer.h - the one walk over a trace's events that commands share: it
 * keeps what several of them follow, the live blocks (live_blocks.h) and
 * each thread's annotation stack, and tells the command what changed
 * through its callbacks, so that no command replays allocations, frees and
 * NVTX ranges by hand.
 *
 * Annotation ranges: every event names its thread's annotation stack after
 * it. When a thread's stack differs from the one its previous event showed,
 * the ranges the new stack left close (innermost first) and the ones it
 * entered open (outermost first), at the event's time. So a range pushed
 * before the trace began (a program's first NVTX range often comes before
 * its first CUDA call) opens at the first event that shows it, and pushes
 * and pops, themselves events, are exact.
 *
 * Live blocks: an allocation (and, when asked, a snapshot's live block)
 * puts its block in the table, numbered by the command (`site`); a free the
 * program requested (free_requested) takes it out. An address allocated
 * again without a free (a free lost with a damaged block) replaces the
 * block there.
 *
 * Within one event: the ranges close and open first, then `site`, `gone`
 * for a block it replaced or freed, `added` for the new one.
 *
 * A command either lets the replayer read (fs_replayer_read: time order, each
 * record to the command's `record` after the replayer saw it) or calls
 * fs_replayer_see from a visitor of its own, with its work around it. */
#ifndef FS_REPLAYER_H
#define FS_REPLAYER_H

#include "live_blocks.h"
#include "reader.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fs_replayer fs_replayer;

/* One annotation range on one thread. */
typedef struct fs_replayer_range {
    uint32_t tid;
    int depth;         /* 0: the outermost */
    uint32_t node;     /* its annotation node (fs_reader_annot, fs_render_annot) */
    uint64_t start_ns; /* the event that first showed it */
} fs_replayer_range;

/* The command's side; every callback may be NULL, ctx is the command's. */
typedef struct fs_replayer_ops {
    /* Blocks are kept only with a `site`: the number an allocation's block
     * keeps (never 0; 0 keeps none). */
    uint32_t (*site)(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid);
    /* r's allocation made b live (after a `gone` for the block it replaced) */
    void (*added)(void *ctx, const fs_live_block *b, const fs_fmt_record *r);
    /* b left the table: freed by r, or replaced by r's allocation */
    void (*gone)(void *ctx, const fs_live_block *b, const fs_fmt_record *r);
    /* Stacks are followed only with `opened` or `closed`. */
    void (*opened)(void *ctx, fs_reader *t, const fs_replayer_range *r);
    void (*closed)(void *ctx, fs_reader *t, const fs_replayer_range *r, uint64_t end_ns);
    /* fs_replayer_read: every record (definitions too), after the replayer */
    fs_reader_visit record;
    fs_reader_warn warn;
    /* > 0: only events of devices 0 .. devices - 1 touch blocks (others
     * are the damage of a trace) */
    int devices;
    /* a snapshot's live blocks (FS_REC_SNAP_BLOCK, FS_BLOCK_LIVE) are put
     * as allocations are: for a command that reads an OOM's snapshot file */
    bool snapshot_blocks;
    /* a block's size is the bytes asked for (an allocation's `requested`,
     * its size when the trace does not say), not the block's rounded size */
    bool requested;
    /* bytes of the command's own state per thread (fs_replayer_thread) */
    size_t thread_size;
} fs_replayer_ops;

/* A replayer for one trace; ops is copied. Memory running out ends the
 * command (fs_analysis_oom). */
fs_replayer *fs_replayer_create(const fs_replayer_ops *ops, void *ctx);
void fs_replayer_free(fs_replayer *rp);

/* Record r of thread tid: ranges and blocks follow it (definitions and
 * snapshot entries change nothing). Returns the thread's own state (as
 * fs_replayer_thread) for an event when ops.thread_size is not 0, else
 * NULL. */
void *fs_replayer_see(fs_replayer *rp, fs_reader *t, const fs_fmt_record *r, uint32_t tid);
/* Reads t in time order (fs_reader_read_ordered): each record seen, then
 * given to ops->record (nonzero from it stops). Returns the records read. */
uint64_t fs_replayer_read(fs_replayer *rp, fs_reader *t);

/* The trace is over at end_ns: thread tid's open ranges close (innermost
 * first); fs_replayer_end does so for every thread, in the order they were
 * first seen. */
void fs_replayer_end_thread(fs_replayer *rp, fs_reader *t, uint32_t tid, uint64_t end_ns);
void fs_replayer_end(fs_replayer *rp, fs_reader *t, uint64_t end_ns);

/* The blocks live now. */
const fs_live *fs_replayer_live(const fs_replayer *rp);
/* Thread tid's own state (ops->thread_size bytes, zeroed at first), made
 * if new; valid until the next new thread. */
void *fs_replayer_thread(fs_replayer *rp, uint32_t tid);
/* The threads seen so far, in the order first seen: the i-th's id in *tid
 * and its state in *state; false past the last. */
bool fs_replayer_thread_at(fs_replayer *rp, size_t i, uint32_t *tid, void **state);

#endif /* FS_REPLAYER_H */
