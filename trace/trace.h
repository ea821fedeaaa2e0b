/* trace.h - the trace writer inside libfsdpshim.so (SPEC section 8).
 *
 * Producers (the allocator observer glue, streams, collectives, the rate
 * limiter, annotations) hand it fs_fmt_event structs; it appends each to the
 * calling thread's buffer and one writer thread frames full buffers into
 * blocks (format/format.h) and writes them out. Definitions (strings,
 * stacks, Python stacks, annotation stacks, modules, threads) go through a
 * separate channel that is never dropped and is always written ahead of the
 * event blocks that name them.
 *
 * trace/ knows nothing of CUDA: streams are opaque 64-bit handles and the
 * settings come in a plain struct. Every function is safe to call while
 * tracing is off (it does nothing, ids are 0), and from any thread. */
#ifndef FS_TRACE_H
#define FS_TRACE_H

#include "../format/format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fs_trace_level {
    FS_TRACE_OFF = 0,
    FS_TRACE_EVENTS = 1, /* events, no stacks */
    FS_TRACE_STACKS = 2, /* + native stacks */
    FS_TRACE_PYTHON = 3, /* + Python frames */
};

typedef struct fs_trace_settings {
    int level;        /* enum fs_trace_level */
    unsigned frames;  /* native frames kept per stack (trace_frames) */
    const char *path; /* FSDPSHIM_TRACE: a name or a %h/%p/%r pattern */
    int rank;         /* -1 when not known yet */
    /* Where the writer's own warnings go (one line, no newline): the
     * preload library's logger. */
    void (*log)(const char *line);
} fs_trace_settings;

/* Opens the trace file and starts the writer thread. Returns false (after
 * logging why) when the file cannot be created; tracing stays off. */
bool fs_trace_start(const fs_trace_settings *s);

/* The level tracing runs at, FS_TRACE_OFF when it is not running. Cheap
 * (one relaxed load): producers test it before building an event. */
int fs_trace_level(void);

/* Native stacks of up to `frames` frames for snapshots alone
 * (oom_snapshot:stacks): from now on
 * fs_stack_capture works, and stacks, the module map and strings are
 * defined in memory, whether or not a trace is written, so that a snapshot
 * can name each live block's allocating stack. */
void fs_trace_keep_stacks(unsigned frames);

/* Nanoseconds since the trace's clock base (CLOCK_MONOTONIC). */
uint64_t fs_trace_now(void);

/* Appends one event to the calling thread's buffer; ev->time_ns is filled
 * in when 0. Never blocks on the disk: when buffers are full the event is
 * dropped and counted (an FS_REC_DROPPED record says how many). */
void fs_trace_event(const fs_fmt_event *ev);

/* Appends one encoded definition record (from an fs_fmt_put_* encoder
 * other than fs_fmt_put_event) to the definitions channel. Definitions are
 * never dropped, and every definition appended before an event is written
 * to the file before that event. */
void fs_trace_define(const uint8_t *rec, size_t len);

/* The id of string s (len bytes), defining it on first use; 0 when tracing
 * is off. Strings are interned per process: the same bytes, the same id. */
uint32_t fs_trace_string(const char *s, size_t len);

/* Copies the text of string `id` into out (cut to len); false for an
 * unknown id. */
bool fs_trace_string_text(uint32_t id, char *out, size_t len);

/* The rank became known (the first NCCL communicator): written as an
 * FS_REC_RANK record, and used for %r in file names opened after it. */
void fs_trace_set_rank(int rank, int world);

/* Writes everything buffered so far and waits until it is on disk
 * (fsdpshim_trace_flush). */
void fs_trace_flush(void);

/* The file being written, or NULL; for the exit line and the OOM message. */
const char *fs_trace_path(void);

/* Flushes and closes the trace; called at exit. (Fatal signals and SIGTERM
 * write what is buffered through handlers of the writer's own.) */
void fs_trace_stop(void);

#endif /* FS_TRACE_H */
