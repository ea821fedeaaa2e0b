/* session.c - one process's trace file: its name, its header, starting and
 * stopping the writer, the rank, and fork.
 *
 * Names come from FSDPSHIM_TRACE with %h (host), %p (pid), %r (rank;
 * "x" until known; the file is renamed when the first communicator names
 * it), %q{VAR} (the process's environment variable VAR, as valgrind's
 * --log-file has it) and %% (a %). Two processes never share a file: a name
 * taken by a live process (its header names the pid), or by an earlier
 * process of the same `fsdpshim record` run, gets ".PID" appended, as %p
 * would have named it, while a file left by an earlier run is replaced. A
 * forked child writes a file of its own, opened only once it has an event to
 * write, so that fork+exec leaves nothing. */
#include "python.h"
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_PATTERN "fsdpshim-%h-%p.fst"

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

void fs_trace_log(const char *fmt, ...)
{
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (fs_trace_g.settings.log)
        fs_trace_g.settings.log(line);
    else
        fprintf(stderr, "fsdpshim: %s\n", line);
}

/* The length of VAR in a pattern's "%q{VAR}" that starts at q (the 'q'),
 * 0 when it is not one: a name as the shell takes one, in braces. */
static size_t env_escape(const char *q)
{
    size_t n = 0;
    if (q[1] != '{') return 0;
    for (const char *c = q + 2; *c == '_' || (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                                (n && *c >= '0' && *c <= '9');
         c++)
        n++;
    return n && q[2 + n] == '}' ? n : 0;
}

/* The pattern with %h, %p, %r, %q{VAR} and %% replaced; another % is kept
 * as it is (`fsdpshim record` refuses those before the program starts). A
 * variable the process does not have is empty, and said, once per name
 * made. */
static void expand(const char *pattern, char *out, size_t cap)
{
    char host[256] = "localhost";
    size_t n = 0, var;

    gethostname(host, sizeof host - 1);
    for (const char *p = pattern; *p && n + 1 < cap; p++) {
        char piece[300], name[256];
        const char *value;
        if (p[0] != '%' || !p[1]) {
            out[n++] = *p;
            continue;
        }
        if (p[1] == 'q' && (var = env_escape(p + 1)) && var < sizeof name) {
            snprintf(name, sizeof name, "%.*s", (int)var, p + 3);
            p += 3 + var; /* at the '}' */
            value = getenv(name);
            if (!value)
                fs_trace_log("the trace's name %s has %%q{%s}, but %s is not set in this process: "
                             "it is left empty",
                             pattern, name, name);
            n += (size_t)snprintf(out + n, cap - n, "%s", value ? value : "");
            if (n >= cap) n = cap - 1;
            continue;
        }
        switch (*++p) {
        case 'h':
            snprintf(piece, sizeof piece, "%s", host);
            break;
        case 'p':
            snprintf(piece, sizeof piece, "%d", (int)getpid());
            break;
        case 'r':
            if (fs_trace_g.rank >= 0)
                snprintf(piece, sizeof piece, "%d", fs_trace_g.rank);
            else
                snprintf(piece, sizeof piece, "x");
            break;
        case '%':
            snprintf(piece, sizeof piece, "%%");
            break;
        default:
            snprintf(piece, sizeof piece, "%%%c", *p);
            break;
        }
        n += (size_t)snprintf(out + n, cap - n, "%s", piece);
        if (n >= cap) n = cap - 1;
    }
    out[n] = 0;
}

/* Whether `path` is the trace of another process that is still running. */
static bool held_by_live_process(const char *path)
{
    uint8_t raw[FS_FMT_HEADER_SIZE];
    fs_fmt_header h;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    bool held = false;

    if (fd < 0) return false;
    if (read(fd, raw, sizeof raw) == (ssize_t)sizeof raw && !fs_fmt_header_decode(raw, &h))
        held = h.pid != (uint32_t)getpid() && (kill((pid_t)h.pid, 0) == 0 || errno == EPERM);
    else
        held = true; /* not a finished trace of ours: never overwrite it */
    close(fd);
    return held;
}

/* `fsdpshim run --trace` names the files at the end: each process adds the
 * name of its file to the launcher's list, one line written at once; a
 * file it could not create is a line "!" and why, so that the launcher says
 * so instead of "no process used the GPU". */
static void list_file(const char *path, const char *failure)
{
    const char *list = getenv("FSDPSHIM_TRACE_LIST");
    char line[sizeof fs_trace_g.path + 256];
    int fd, n;

    if (!list || !*list) return;
    fd = open(list, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return;
    if (failure)
        n = snprintf(line, sizeof line, "!%s: %s\n", path, failure);
    else
        n = snprintf(line, sizeof line, "%s\n", path);
    if (n >= (int)sizeof line) { /* cut, still one line */
        n = (int)sizeof line - 1;
        line[n - 1] = '\n';
    }
    if (write(fd, line, (size_t)n) != n) fs_trace_log("cannot add %s to %s", path, list);
    close(fd);
}

/* Whether another process of this `fsdpshim record` run has written
 * `path` (its line is in FSDPSHIM_TRACE_LIST): a name without %p that two
 * processes of one run make in turn gets .PID the second time, as one made
 * while the first still runs does, rather than replacing the first trace. */
static bool listed_in_this_run(const char *path)
{
    const char *list = getenv("FSDPSHIM_TRACE_LIST");
    char line[sizeof fs_trace_g.path + 256];
    bool found = false;
    FILE *f;

    if (!list || !*list || !(f = fopen(list, "re"))) return false;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        found = !strcmp(line, path);
    }
    fclose(f);
    return found;
}

static int create(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
}

void fs_trace_header_of(fs_fmt_header *h, uint32_t features, int level)
{
    struct timespec real;
    ssize_t n;

    memset(h, 0, sizeof *h);
    h->version = FS_FMT_VERSION;
    h->min_reader = FS_FMT_MIN_READER;
    h->pid = (uint32_t)getpid();
    h->rank = level ? fs_trace_g.rank : -1;
    h->trace_level = (uint32_t)level;
    h->frames = level ? fs_trace_g.settings.frames : 0;
    h->features = features;
    if (level >= FS_TRACE_STACKS) h->features |= FS_FMT_FEAT_STACKS;
    if (level >= FS_TRACE_PYTHON) h->features |= FS_FMT_FEAT_PYTHON;
    if (level) { /* the trace's clock, so that a snapshot lines up with it */
        h->clock_mono_ns = fs_trace_g.mono_base;
        h->clock_real_ns = fs_trace_g.real_base;
    } else {
        h->clock_mono_ns = fs_trace_mono_ns();
        clock_gettime(CLOCK_REALTIME, &real);
        h->clock_real_ns = (uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec;
    }
    gethostname(h->host, sizeof h->host - 1);
    n = readlink("/proc/self/exe", h->exe, sizeof h->exe - 1);
    h->exe[n > 0 ? n : 0] = 0;
}

static void write_header(int fd)
{
    uint8_t raw[FS_FMT_HEADER_SIZE];
    fs_fmt_header h;

    fs_trace_header_of(&h, 0, fs_trace_g.settings.level); /* not running yet */
    fs_fmt_header_encode(&h, raw);
    if (write(fd, raw, sizeof raw) != (ssize_t)sizeof raw)
        fs_trace_log("cannot write the trace header of %s", fs_trace_g.path);
}

bool fs_trace_open_file(void)
{
    char path[sizeof fs_trace_g.path];
    int fd;

    expand(fs_trace_g.pattern, path, sizeof path);
    fd = create(path);
    if (fd < 0 && errno == EEXIST) {
        if (held_by_live_process(path) || listed_in_this_run(path)) {
            size_t n = strlen(path);
            snprintf(path + n, sizeof path - n, ".%d", (int)getpid());
        }
        unlink(path); /* an earlier run's (or our pid's, reused) */
        fd = create(path);
    }
    if (fd < 0) {
        int err = errno;
        fs_trace_log("cannot create the trace file %s: %s; tracing is off", path, strerror(err));
        list_file(path, strerror(err));
        return false;
    }
    fchmod(fd, 0600); /* whatever the umask, never wider */
    snprintf(fs_trace_g.path, sizeof fs_trace_g.path, "%s", path);
    fs_trace_g.fd = fd;
    write_header(fd);
    list_file(path, NULL);
    return true;
}

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
    char path[sizeof fs_trace_g.path];

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
    if (unknown && fs_trace_g.fd >= 0 && strstr(fs_trace_g.pattern, "%r")) {
        expand(fs_trace_g.pattern, path, sizeof path);
        if (access(path, F_OK) != 0 && rename(fs_trace_g.path, path) == 0) {
            snprintf(fs_trace_g.path, sizeof fs_trace_g.path, "%s", path);
            list_file(path, NULL);
        }
    }
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
