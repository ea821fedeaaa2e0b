/* trace_glue.c - from the shim's events to the trace writer (trace/).
 *
 * Tracing starts with the allocator (the first CUDA call that reaches the
 * shim), so that processes that never touch the GPU, a torchrun launcher
 * among them, leave no file. The allocator's observer turns each allocator
 * event into one trace event with the device's totals; the stack of an
 * allocation is captured here, in the entry point, before the allocator is
 * entered (fs_trace_alloc_begin), so that no unwinding ever happens under
 * an allocator lock; the observer, called on the same thread, attaches it. */
#include "trace_glue.h"
#include "lifetime.h"

#include "../../trace/annot.h"
#include "../../trace/python.h"
#include "../../trace/snapshot.h"
#include "../../trace/stack.h"
#include "../../trace/trace.h"
#include "devices.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The stacks of the allocation this thread is making, captured before the
 * allocator was entered. */
static FS_TLS struct {
    uint32_t stack, pystack;
    bool armed;
} pending;

static void log_line(const char *line)
{
    fs_log(FS_LOG_WARN, "%s", line);
}

/* The rank as launchers name it, until a communicator says: torchrun and
 * most launchers set RANK; a process with only LOCAL_RANK is the rank on
 * a single node. */
static int env_rank(void)
{
    const char *v = getenv("RANK");
    if (!v || !*v) v = getenv("LOCAL_RANK");
    return v && *v ? atoi(v) : -1;
}

/* The allocator's configuration, for the analyzer to replay the trace as
 * it ran (docs/trace-format.md: FS_REC_CONFIG). */
static void define_config(const fs_alloc_config *alloc)
{
    char text[512];
    uint8_t rec[32];

    fs_alloc_config_describe(alloc, text, sizeof text);
    fs_trace_define(rec, fs_fmt_put_config(fs_trace_string(text, strlen(text)), rec));
}

/* Each device's total memory, once, at its first growth (a segment made or
 * pages mapped): the first event of a device. The allocator's event carries
 * the figure (asked when the allocator was made): the growth comes with its
 * device lock held, under which no CUDA call may be made. */
static void define_device(int device, size_t total)
{
    static atomic_uint_least64_t done;
    uint8_t rec[32];

    if (device < 0 || device >= 64) return;
    if (atomic_load_explicit(&done, memory_order_relaxed) & (1ull << device)) return;
    if (atomic_fetch_or(&done, 1ull << device) & (1ull << device)) return;
    fs_trace_define(rec, fs_fmt_put_device(device, total, rec));
}

void fs_trace_glue_start(void)
{
    const fs_shim_config *cfg = fs_shim_config_get();
    fs_trace_settings s = {
        .level = cfg->trace,
        .frames = cfg->trace_frames,
        .path = getenv("FSDPSHIM_TRACE"),
        .rank = env_rank(),
        .log = log_line,
    };

    if (!cfg->trace || !fs_trace_start(&s)) return;
    fs_modules_define();
    define_config(&cfg->alloc);
    fs_log(FS_LOG_INFO, "tracing (%s) to %s",
           cfg->trace == FS_TRACE_EVENTS   ? "events"
           : cfg->trace == FS_TRACE_STACKS ? "stacks"
                                           : "python",
           fs_trace_path() ? fs_trace_path() : "?");
}

/* The legacy stream is 0 in traces, as in the CUDA API. */
static uint64_t stream_value(fs_stream_t key)
{
    return key == (fs_stream_t)cudaStreamLegacy ? 0 : (uint64_t)key;
}

bool fs_trace_glue_stacks_taken(void)
{
    return fs_trace_level() >= FS_TRACE_STACKS || fs_shim_config_get()->oom_snapshot_stacks;
}

__attribute__((noinline)) void fs_trace_alloc_begin(void)
{
    int level = fs_trace_level();

    pending.armed = level != FS_TRACE_OFF || fs_shim_config_get()->oom_snapshot_stacks;
    pending.stack = pending.pystack = 0;
    if (fs_trace_glue_stacks_taken())
        pending.stack = fs_stack_capture(fs_shim_config_get()->trace_frames);
    if (level >= FS_TRACE_PYTHON)
        pending.pystack = fs_python_stack(fs_shim_config_get()->trace_frames);
}

void fs_trace_alloc_end(void)
{
    pending.armed = false;
}

static const uint8_t kinds[] = {
    [FS_EV_ALLOC] = FS_REC_ALLOC,
    [FS_EV_FREE_REQUESTED] = FS_REC_FREE_REQUESTED,
    [FS_EV_FREE_COMPLETED] = FS_REC_FREE_COMPLETED,
    [FS_EV_SEGMENT_ALLOC] = FS_REC_SEGMENT_ALLOC,
    [FS_EV_SEGMENT_FREE] = FS_REC_SEGMENT_FREE,
    [FS_EV_SEGMENT_MAP] = FS_REC_SEGMENT_MAP,
    [FS_EV_SEGMENT_UNMAP] = FS_REC_SEGMENT_UNMAP,
};

static void on_event(void *ctx, const fs_alloc_event *e)
{
    fs_fmt_event ev = {
        .kind = kinds[e->kind],
        .device = e->device,
        .stream = stream_value(e->stream),
        .addr = e->addr,
        .size = e->size,
        .allocated = e->allocated,
        .reserved = e->reserved,
        .annot = fs_annot_current(),
    };
    (void)ctx;
    if ((e->kind == FS_EV_SEGMENT_ALLOC || e->kind == FS_EV_SEGMENT_MAP) && fs_trace_level())
        define_device(e->device, e->capacity);
    if (e->kind == FS_EV_ALLOC) {
        ev.requested = e->requested;
        ev.aux = (uint64_t)e->pool | (e->stream_ordered ? FS_FMT_ALLOC_STREAM_ORDERED : 0);
        if (pending.armed) {
            ev.stack = pending.stack;
            ev.pystack = pending.pystack;
        }
        /* what allocated each live block, for snapshots */
        if (ev.stack || ev.pystack) fs_blocks_set(e->addr, e->size, ev.stack, ev.pystack);
    } else if (e->kind == FS_EV_FREE_REQUESTED) {
        ev.aux = e->stream_ordered ? FS_FMT_FREE_STREAM_ORDERED : 0;
        if (fs_trace_glue_stacks_taken()) fs_blocks_clear(e->addr);
    }
    if (fs_trace_level()) fs_trace_event(&ev);
}

/* The FS_REC_OOM event of a failure, for the trace and for its snapshot:
 * with the device's free memory, asked now (the allocator's locks are not
 * held when it reports a failure). */
static fs_fmt_event oom_event(const fs_oom_info *info)
{
    fs_fmt_event ev = {
        .kind = FS_REC_OOM,
        .device = info->device,
        .stream = stream_value(info->stream),
        .size = info->requested,
        .allocated = info->allocated,
        .reserved = info->reserved,
        .aux = info->largest_free,
        .aux3 = info->other_free,
        .aux4 = info->pending,
        .annot = fs_annot_current(),
    };
    size_t free, total;

    ev.aux2 = fs_shim_mem_info(info->device, &free, &total) ? free : FS_FMT_UNKNOWN;
    if (pending.armed) {
        ev.stack = pending.stack;
        ev.pystack = pending.pystack;
    }
    return ev;
}

void fs_trace_glue_oom(const fs_oom_info *info)
{
    if (!fs_trace_level()) return;
    fs_fmt_event ev = oom_event(info);
    fs_trace_event(&ev);
}

void fs_trace_vmm(int op, int device, uint64_t addr, size_t size, uint64_t handle)
{
    int level = fs_trace_level();
    if (!level) return;
    fs_fmt_event ev = {
        .kind = FS_REC_VMM,
        .device = device,
        .addr = addr,
        .size = size,
        .aux = (uint64_t)op,
        .aux2 = handle,
        .annot = fs_annot_current(),
    };
    if (op == FS_VMM_CREATE && level >= FS_TRACE_STACKS) {
        ev.stack = fs_stack_capture(fs_shim_config_get()->trace_frames);
        if (level >= FS_TRACE_PYTHON)
            ev.pystack = fs_python_stack(fs_shim_config_get()->trace_frames);
    }
    fs_trace_event(&ev);
}

void fs_trace_glue_observe(fs_alloc_observer *obs)
{
    if (fs_shim_config_get()->oom_snapshot_stacks)
        fs_trace_keep_stacks(fs_shim_config_get()->trace_frames);
    if (fs_trace_level() || fs_shim_config_get()->oom_snapshot_stacks) obs->on_event = on_event;
}

void fs_trace_stream(bool create, int device, const void *stream, unsigned flags, int priority,
                     bool pool_hit)
{
    fs_fmt_event ev = {
        .kind =
            create ? (pool_hit ? FS_REC_POOL_HIT : FS_REC_STREAM_CREATE) : FS_REC_STREAM_DESTROY,
        .device = device,
        .stream = (uint64_t)(uintptr_t)stream,
        .aux = flags,
        .aux2 = (uint64_t)(int64_t)priority,
        .annot = fs_annot_current(),
    };
    if (fs_trace_level()) fs_trace_event(&ev);
}

void fs_trace_collective(int coll, int device, const void *stream, const void *buf, size_t bytes,
                         const void *comm)
{
    fs_fmt_event ev = {
        .kind = FS_REC_COLLECTIVE,
        .device = device,
        .stream = stream_value((fs_stream_t)stream),
        .addr = (uint64_t)(uintptr_t)buf,
        .size = bytes,
        .aux = (uint64_t)coll,
        .aux2 = (uint64_t)(uintptr_t)comm,
        .annot = fs_annot_current(),
    };
    if (!stream) ev.stream = 0;
    if (fs_trace_level()) fs_trace_event(&ev);
}

void fs_trace_rate_limit(bool start, int device, uint64_t in_flight, uint64_t bytes,
                         const void *fence)
{
    fs_fmt_event ev = {
        .kind = start ? FS_REC_RL_WAIT_START : FS_REC_RL_WAIT_END,
        .device = device,
        .aux = start ? in_flight : (uint64_t)(uintptr_t)fence,
        .aux2 = start ? bytes : 0,
        .annot = fs_annot_current(),
    };
    if (fs_trace_level()) fs_trace_event(&ev);
}

/* ---- snapshots ------------------------------------------------------------ */

static const uint8_t walk_kinds[] = {
    [FS_WALK_SEGMENT] = FS_REC_SNAP_SEGMENT,
    [FS_WALK_LIVE] = FS_REC_SNAP_BLOCK,
    [FS_WALK_CACHED] = FS_REC_SNAP_BLOCK,
    [FS_WALK_PENDING] = FS_REC_SNAP_BLOCK,
};
static const uint8_t walk_states[] = {
    [FS_WALK_LIVE] = FS_BLOCK_LIVE,
    [FS_WALK_CACHED] = FS_BLOCK_CACHED,
    [FS_WALK_PENDING] = FS_BLOCK_PENDING,
};

/* Appends device d's segments and blocks to *ev (grown as needed). */
static bool walk_device(fs_allocator *a, int d, fs_fmt_event **ev, size_t *n, size_t *cap)
{
    fs_walk_entry *w = NULL;
    size_t got = fs_alloc_walk(a, d, NULL, 0), room = 0;

    do { /* the device may grow between two walks */
        room = got + 64;
        fs_walk_entry *p = realloc(w, room * sizeof *w);
        if (!p) {
            free(w);
            return false;
        }
        w = p;
        got = fs_alloc_walk(a, d, w, room);
    } while (got > room);
    if (*n + got > *cap) {
        size_t c = *n + got + 64;
        fs_fmt_event *p = realloc(*ev, c * sizeof *p);
        if (!p) {
            free(w);
            return false;
        }
        *ev = p;
        *cap = c;
    }
    for (size_t i = 0; i < got; i++) {
        fs_fmt_event *e = &(*ev)[(*n)++];
        *e = (fs_fmt_event){
            .kind = walk_kinds[w[i].state],
            .time_ns = fs_trace_level() ? fs_trace_now() : 0,
            .device = d,
            .stream = stream_value(w[i].stream),
            .addr = w[i].addr,
            .size = w[i].size,
            /* a cached block is written with requested 0, as before the walk kept its last request
             */
            .requested = w[i].state == FS_WALK_CACHED ? 0 : w[i].requested,
            .aux = w[i].state == FS_WALK_SEGMENT ? w[i].expandable : walk_states[w[i].state],
        };
        if (w[i].state == FS_WALK_LIVE) fs_blocks_get(e->addr, &e->stack, &e->pystack);
    }
    free(w);
    return true;
}

/* At most this many snapshot files stay in the default directory: a
 * program that keeps running out of memory, run again and again, left 36
 * in the working directory after an hour of plain runs. */
#define DEFAULT_DIR_KEEP 32

typedef struct snapshot_file {
    struct timespec mtime;
    char name[256];
} snapshot_file;

static int by_mtime(const void *x, const void *y)
{
    const struct timespec *a = &((const snapshot_file *)x)->mtime,
                          *b = &((const snapshot_file *)y)->mtime;
    if (a->tv_sec != b->tv_sec) return a->tv_sec < b->tv_sec ? -1 : 1;
    return a->tv_nsec < b->tv_nsec ? -1 : a->tv_nsec > b->tv_nsec;
}

/* Removes the oldest snapshot files (fsdpshim-*.fst) of dir so that, with
 * the one about to be written, at most DEFAULT_DIR_KEEP remain. */
static void prune(const char *dir)
{
    DIR *d = opendir(dir);
    snapshot_file *all = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;

    if (!d) return;
    while ((e = readdir(d))) {
        struct stat st;
        if (strncmp(e->d_name, "fsdpshim-", 9) || !strstr(e->d_name, ".fst")) continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            snapshot_file *more = realloc(all, (cap ? cap * 2 : 64) * sizeof *all);
            if (!more) break;
            all = more;
            cap = cap ? cap * 2 : 64;
        }
        all[n].mtime = st.st_mtim;
        snprintf(all[n].name, sizeof all[n].name, "%s", e->d_name);
        n++;
    }
    if (n >= DEFAULT_DIR_KEEP) {
        qsort(all, n, sizeof *all, by_mtime);
        for (size_t i = 0; i + DEFAULT_DIR_KEEP <= n; i++)
            unlinkat(dirfd(d), all[i].name, 0);
    }
    closedir(d);
    free(all);
}

/* Where snapshots go: FSDPSHIM_OOM_DIR, else beside the trace, else (a
 * plain run, which asked for no files) a directory of the user's own,
 * $TMPDIR/fsdpshim-UID (/tmp without TMPDIR), mode 0700, which keeps the
 * newest DEFAULT_DIR_KEEP; the working directory only if that cannot be
 * made or is not the user's. */
static void snapshot_dir(char *dir, size_t len)
{
    const char *env = getenv("FSDPSHIM_OOM_DIR"), *trace = fs_trace_path();
    const char *tmp = getenv("TMPDIR");
    char copy[4096];
    struct stat st;

    if (env && *env) {
        snprintf(dir, len, "%s", env);
    } else if (trace) {
        snprintf(copy, sizeof copy, "%s", trace);
        snprintf(dir, len, "%s", dirname(copy));
    } else {
        snprintf(dir, len, "%s/fsdpshim-%u", tmp && *tmp ? tmp : "/tmp", (unsigned)getuid());
        if (mkdir(dir, 0700) && errno != EEXIST) {
            snprintf(dir, len, ".");
        } else if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) {
            snprintf(dir, len, "."); /* another user's, or a link: not ours to write */
        } else {
            prune(dir);
        }
    }
}

bool fs_trace_glue_snapshot(const char *kind, const fs_oom_info *oom, char *path, size_t len)
{
    fs_allocator *a = fs_shim_allocator();
    fs_fmt_event *ev = NULL;
    size_t n = 0, cap = 0;
    char dir[4096];
    bool ok = a != NULL;

    for (int d = 0; ok && d < fs_shim_device_count(); d++)
        ok = walk_device(a, d, &ev, &n, &cap);
    if (ok && oom) {
        fs_fmt_event *p = realloc(ev, (n + 1) * sizeof *p);
        ok = p != NULL;
        if (ok) {
            ev = p;
            ev[n++] = oom_event(oom);
        }
    }
    snapshot_dir(dir, sizeof dir);
    if (ok) {
        ok = fs_snapshot_write(dir, kind, ev, n, path, len);
    } else {
        snprintf(path, len, "out of memory gathering the snapshot");
    }
    free(ev);
    return ok;
}

/* ---- snapshot_signal: SIGUSR2 writes a snapshot ------------------------------
 * The handler only posts a semaphore (async-signal-safe); a thread of the
 * shim's own, started with the allocator, writes the file. A handler the
 * program had installed for SIGUSR2 is called after. */

static sem_t snapshot_request;
static struct sigaction previous_usr2;

static void on_usr2(int sig, siginfo_t *info, void *uc)
{
    sem_post(&snapshot_request);
    if ((previous_usr2.sa_flags & SA_SIGINFO) && previous_usr2.sa_sigaction)
        previous_usr2.sa_sigaction(sig, info, uc);
    else if (!(previous_usr2.sa_flags & SA_SIGINFO) && previous_usr2.sa_handler != SIG_DFL &&
             previous_usr2.sa_handler != SIG_IGN)
        previous_usr2.sa_handler(sig);
}

static void *snapshot_thread(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "fsdpshim-snap");
    for (;;) {
        char path[4096];
        if (sem_wait(&snapshot_request) != 0) continue;
        if (!fs_shim_enter()) continue;
        if (fs_trace_glue_snapshot("fsdpshim-snapshot", NULL, path, sizeof path))
            fs_log(FS_LOG_WARN, "SIGUSR2: snapshot: %s", path);
        else
            fs_log(FS_LOG_WARN, "SIGUSR2: no snapshot: %s", path);
        fs_shim_leave();
    }
    return NULL;
}

void fs_trace_glue_snapshot_signal(void)
{
    struct sigaction sa;
    sigset_t all, old;
    pthread_t t;

    if (!fs_shim_config_get()->snapshot_signal || sem_init(&snapshot_request, 0, 0) != 0) return;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the thread takes none of the program's signals */
    int rc = pthread_create(&t, NULL, snapshot_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        fs_log(FS_LOG_WARN, "snapshot_signal: cannot start the snapshot thread");
        return;
    }
    pthread_detach(t);
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr2;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, &previous_usr2);
    fs_log(FS_LOG_INFO, "snapshot_signal: SIGUSR2 writes a snapshot");
}

/* A fork child's trace keeps none of its parent's live blocks. */
static void trace_started(fs_allocator *a, int ndev)
{
    (void)a, (void)ndev;
    fs_trace_glue_start();
}

FS_LIFETIME(trace_blocks) = {
    .order = FS_ORDER_TRACE_BLOCKS, .fork_child = fs_blocks_after_fork, .started = trace_started};
