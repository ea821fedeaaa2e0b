/* file.c - the trace file of one process: its name, creating it and its
 * header, and the launcher's list of files (session.c starts and stops the
 * trace; writer.c opens a fork child's file through here).
 *
 * Names come from FSDPSHIM_TRACE with %h (host), %p (pid), %r (rank;
 * "x" until known; the file is renamed when the first communicator names
 * it), %q{VAR} (the process's environment variable VAR, as valgrind's
 * --log-file has it) and %% (a %). Two processes never share a file: a name
 * taken by a live process (its header names the pid), or by an earlier
 * process of the same `fsdpshim record` run, gets ".PID" appended, as %p
 * would have named it, while a file left by an earlier run is replaced. */
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* After the rank became known: a file named before it ("x" for %r) takes
 * the name the pattern now makes, unless a file has that name. */
void fs_trace_file_rename(void)
{
    char path[sizeof fs_trace_g.path];

    if (fs_trace_g.fd < 0 || !strstr(fs_trace_g.pattern, "%r")) return;
    expand(fs_trace_g.pattern, path, sizeof path);
    if (access(path, F_OK) != 0 && rename(fs_trace_g.path, path) == 0) {
        snprintf(fs_trace_g.path, sizeof fs_trace_g.path, "%s", path);
        list_file(path, NULL);
    }
}
