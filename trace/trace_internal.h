/* trace_internal.h - what the writer's files share, grouped by the file
 * that defines it, from the bottom up: the process-wide state and log
 * (state.c), the file (file.c), the buffers and write cycle (writer.c),
 * string interning over the writer (strings.c), the signal hooks
 * (signals.c) and, on top, the session (session.c). No file calls one
 * above it. */
#ifndef FS_TRACE_INTERNAL_H
#define FS_TRACE_INTERNAL_H

#include "../common/compiler.h"
#include "trace.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#define FS_TRACE_FLUSH_MS 50 /* SIGKILL loses at most about this much */

typedef struct fs_trace_state {
    atomic_int level;        /* enum fs_trace_level; OFF until the file is open */
    atomic_bool keep_stacks; /* fs_trace_keep_stacks: defined in memory, for snapshots */
    int fd;
    char path[4096];
    char pattern[4096];
    fs_trace_settings settings;
    uint64_t mono_base; /* CLOCK_MONOTONIC at open: record times count from here */
    uint64_t real_base; /* CLOCK_REALTIME at the same instant */
    int rank, world;
    int comm_rank, comm_world; /* from a communicator made before tracing started; world 0: none */
    pthread_t writer;
    bool writer_running, stopping;
    unsigned write_delay_ms; /* FSDPSHIM_TRACE_WRITE_DELAY_MS: only tests slow the disk */
    unsigned buffers;        /* spare buffers, at most [64]; FSDPSHIM_TRACE_BUFFERS for tests */
} fs_trace_state;

/* state.c */
extern fs_trace_state fs_trace_g;

uint64_t fs_trace_mono_ns(void);
void fs_trace_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The level definitions (strings, modules, stacks) are kept at: the trace's,
 * or FS_TRACE_STACKS with tracing off after fs_trace_keep_stacks. */
static inline int fs_trace_defs_level(void)
{
    int level = atomic_load_explicit(&fs_trace_g.level, memory_order_relaxed);
    if (level < FS_TRACE_STACKS &&
        atomic_load_explicit(&fs_trace_g.keep_stacks, memory_order_relaxed))
        return FS_TRACE_STACKS;
    return level;
}

/* file.c */
/* Creates the file the pattern names and writes its header; false (after
 * logging why, and listing the failure) when it cannot be created. */
bool fs_trace_open_file(void);
/* The file named again once the rank is known, where the pattern has %r. */
void fs_trace_file_rename(void);
/* A header for this process (a trace's, or with FS_FMT_FEAT_SNAPSHOT a
 * snapshot's) at trace level `level`: on the trace's clock unless 0. */
void fs_trace_header_of(fs_fmt_header *h, uint32_t features, int level);

/* writer.c */
void fs_trace_write_cycle(bool in_signal);
bool fs_trace_writer_start(void);
void fs_trace_writer_stop(void);
void fs_trace_writer_lock_all(void);
void fs_trace_writer_unlock_all(void);
void fs_trace_writer_after_fork(void);
void fs_trace_writer_reset(void);
/* How the writer gets the string id of a thread's name (strings.c's
 * fs_trace_string, given by session.c before tracing is first on). */
void fs_trace_writer_name_threads(uint32_t (*string_id)(const char *s, size_t len));
/* Every definition appended so far, in blocks of whole records (for
 * snapshot files, which must stand alone). */
void fs_trace_definitions(void (*emit)(void *ctx, const uint8_t *raw, size_t len), void *ctx);

/* strings.c */
void fs_trace_strings_lock(void);
void fs_trace_strings_unlock(bool child);

/* signals.c */
void fs_trace_signals_install(void);

#endif /* FS_TRACE_INTERNAL_H */
