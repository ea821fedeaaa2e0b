/* session.c - one process's trace: starting and stopping it, the rank,
 * and fork; the top of trace/, over the file (file.c), the writer
 * (writer.c), strings (strings.c), Python frames (python.c) and the signal
 * handlers (signals.c). A forked child writes a file of its own, opened
 * only once it has an event to write, so that fork+exec leaves nothing. */
#include "python.h"
#include "trace_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define DEFAULT_PATTERN "fsdpshim-%h-%p.fst"

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

static void at_exit(void)
{
    fs_trace_stop();
}

static void before_fork(void)
{
    fs_python_fork_prepare();
    fs_trace_strings_lock();
    fs_trace_writer_lock_all();
}

static void after_fork_parent(void)
{
    fs_trace_writer_unlock_all();
    fs_trace_strings_unlock(false);
    fs_python_fork_parent();
}

static void after_fork_child(void)
{
    fs_trace_strings_unlock(true);
    fs_python_fork_child();
    fs_trace_writer_after_fork();
    if (!fs_trace_level()) return;
    if (fs_trace_g.fd >= 0) close(fs_trace_g.fd);
    fs_trace_g.fd = -1; /* opened at the first cycle with an event (writer.c) */
    fs_trace_g.path[0] = 0;
    if (!fs_trace_writer_start()) atomic_store(&fs_trace_g.level, FS_TRACE_OFF);
}

bool fs_trace_start(const fs_trace_settings *s)
{
    static bool hooks;
    struct timespec real;
    const char *delay, *buffers;

    if (!s || s->level <= FS_TRACE_OFF) return false;
    pthread_mutex_lock(&start_lock);
    if (fs_trace_level()) {
        pthread_mutex_unlock(&start_lock);
        return true;
    }
    fs_trace_writer_reset(); /* what an earlier trace of this process left */
    fs_trace_g.settings = *s;
    if (fs_trace_g.settings.frames > FS_FMT_MAX_FRAMES)
        fs_trace_g.settings.frames = FS_FMT_MAX_FRAMES;
    snprintf(fs_trace_g.pattern, sizeof fs_trace_g.pattern, "%s",
             s->path && *s->path ? s->path : DEFAULT_PATTERN);
    fs_trace_g.settings.path = fs_trace_g.pattern;
    fs_trace_g.rank = fs_trace_g.comm_world > 0 ? fs_trace_g.comm_rank : s->rank;
    fs_trace_g.world = -1;
    /* two knobs for the tests of drops: a slow disk, fewer buffers */
    delay = getenv("FSDPSHIM_TRACE_WRITE_DELAY_MS");
    fs_trace_g.write_delay_ms = delay ? (unsigned)atoi(delay) : 0;
    buffers = getenv("FSDPSHIM_TRACE_BUFFERS");
    fs_trace_g.buffers = buffers && atoi(buffers) > 0 ? (unsigned)atoi(buffers) : 64;
    fs_trace_g.mono_base = fs_trace_mono_ns();
    clock_gettime(CLOCK_REALTIME, &real);
    fs_trace_g.real_base = (uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec;
    if (!hooks) /* set before tracing is first on, never again: read without a lock */
        fs_trace_writer_name_threads(fs_trace_string);
    if (!fs_trace_open_file()) {
        pthread_mutex_unlock(&start_lock);
        return false;
    }
    atomic_store(&fs_trace_g.level, s->level > FS_TRACE_PYTHON ? FS_TRACE_PYTHON : s->level);
    if (!fs_trace_writer_start()) {
        fs_trace_log("cannot start the trace writer thread; tracing is off");
        atomic_store(&fs_trace_g.level, FS_TRACE_OFF);
        close(fs_trace_g.fd);
        fs_trace_g.fd = -1;
        pthread_mutex_unlock(&start_lock);
        return false;
    }
    if (fs_trace_g.comm_world > 0) { /* learned before the trace started */
        uint8_t rec[32];
        fs_trace_g.world = fs_trace_g.comm_world;
        fs_trace_define(rec, fs_fmt_put_rank(fs_trace_g.rank, fs_trace_g.world, rec));
    }
    if (!hooks) {
        hooks = true;
        atexit(at_exit);
        pthread_atfork(before_fork, after_fork_parent, after_fork_child);
        fs_trace_signals_install();
    }
    pthread_mutex_unlock(&start_lock);
    return true;
}

void fs_trace_set_rank(int rank, int world)
{
    uint8_t rec[32];

    if (rank < 0) return;
    pthread_mutex_lock(&start_lock);
    /* A communicator made before the first allocation (tracing starts with
     * the allocator): kept for fs_trace_start. */
    if (!fs_trace_level()) {
        fs_trace_g.comm_rank = rank;
        fs_trace_g.comm_world = world;
        pthread_mutex_unlock(&start_lock);
        return;
    }
    /* once: the communicator confirms (or corrects) the launcher's RANK and
     * says the world size */
    if (rank == fs_trace_g.rank && world == fs_trace_g.world) {
        pthread_mutex_unlock(&start_lock);
        return;
    }
    bool unknown = fs_trace_g.rank < 0;
    fs_trace_g.rank = rank;
    fs_trace_g.world = world;
    fs_trace_define(rec, fs_fmt_put_rank(rank, world, rec));
    /* a name made before the rank was known says "x": name it now */
    if (unknown) fs_trace_file_rename();
    pthread_mutex_unlock(&start_lock);
}

void fs_trace_flush(void)
{
    if (fs_trace_level()) fs_trace_write_cycle(false);
}

const char *fs_trace_path(void)
{
    return fs_trace_level() && fs_trace_g.path[0] ? fs_trace_g.path : NULL;
}

void fs_trace_stop(void)
{
    if (!fs_trace_level()) return;
    fs_trace_writer_stop();
    fs_trace_write_cycle(false);
    atomic_store(&fs_trace_g.level, FS_TRACE_OFF);
    if (fs_trace_g.fd >= 0) close(fs_trace_g.fd);
    fs_trace_g.fd = -1;
}
