/* attach.c - `fsdpshim attach PID [--duration S] [-o FILE]` and `fsdpshim
 * detach PID`: trace a job that is already running, without restarting it.
 *
 * Debian's gdb, in batch mode, stops the process for a moment and calls,
 * on one of its threads, stopped where that is safe (attach_gdb.py, the
 * script gdb runs), dlopen(libfsdpshim.so) and then the shim's
 * fsdpshim_attach_start, which subscribes to CUPTI and opens the trace
 * (interpose/attach/attach.c, docs/cli.md); detach calls fsdpshim_attach_stop the
 * same way. Every function is reached through a pointer gdb is told the type
 * of, since libc has no debug information; a library or function that is
 * missing is checked for before anything is called. Before gdb runs, what
 * would make ptrace fail (another user's process, kernel.yama.ptrace_scope,
 * no CAP_SYS_PTRACE) and a process without CUDA are each said in one line. */
#include "cli.h"
#include "cmdline.h"

#include "attach_gdb.h" /* attach_gdb_py: attach_gdb.py's text */

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CAP_SYS_PTRACE_BIT 19
#define GDB_TIMEOUT_S      60
#define GDB_WAIT_S         2 /* for a CUDA runtime call to stop at (attach_gdb.py) */

void usage_attach(FILE *out)
{
    fprintf(out,
            "usage: fsdpshim attach PID [--duration S] [-o FILE]\n"
            "Traces the allocations of a running CUDA process from now on, without restarting\n"
            "it: gdb loads libfsdpshim.so into it, which subscribes to CUPTI and writes the\n"
            "process's own allocations (its behaviour unchanged) with their stacks. Where\n"
            "CUPTI cannot be had it redirects the loaded objects' GOT slots instead, which\n"
            "see less; the line printed names the way taken (and CUPTI's path).\n"
            "  --duration S  detach after S seconds (else `fsdpshim detach PID` does)\n"
            "  -o FILE       the trace [fsdpshim-%%h-%%p.fst in this directory]: %%h the host,\n"
            "                %%p the process's pid, %%r its rank, %%q{VAR} its environment\n"
            "                variable VAR, %%%% a %%\n"
            "Needs gdb (or NVIDIA's cuda-gdb) and the right to ptrace the process (its owner,\n"
            "or CAP_SYS_PTRACE).\n"
            "\n"
            "examples:\n"
            "  fsdpshim attach 4242 --duration 30 -o job.fst\n"
            "  fsdpshim attach 4242; sleep 60; fsdpshim detach 4242\n");
}

void usage_detach(FILE *out)
{
    fprintf(out, "usage: fsdpshim detach PID\n"
                 "Stops tracing a process that `fsdpshim attach` attached to, and writes out\n"
                 "and closes its trace.\n"
                 "\n"
                 "example:\n"
                 "  fsdpshim detach 4242\n");
}

/* The value of `key` (e.g. "Uid:") in a /proc status file: its first number. */
static bool status_field(const char *path, const char *key, unsigned long long *out, int base)
{
    char line[512];
    FILE *f = fopen(path, "r");
    bool found = false;
    if (!f) return false;
    while (!found && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) {
            *out = strtoull(line + strlen(key), NULL, base);
            found = true;
        }
    fclose(f);
    return found;
}

/* Whether this process may ptrace `pid`; if not, one line says why and
 * what to do. */
static bool may_trace(const char *who, pid_t pid)
{
    char path[64];
    unsigned long long uid = 0, caps = 0;
    int scope = 0;
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    if (f) {
        if (fscanf(f, "%d", &scope) != 1) scope = 0;
        fclose(f);
    }
    bool cap =
        status_field("/proc/self/status", "CapEff:", &caps, 16) && (caps >> CAP_SYS_PTRACE_BIT) & 1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    status_field(path, "Uid:", &uid, 10);
    if (scope >= 3) {
        fprintf(stderr,
                "fsdpshim %s: ptrace is disabled on this machine (kernel.yama.ptrace_scope=3) "
                "until it reboots: no process can be attached to\n",
                who);
        return false;
    }
    if (cap) return true;
    if (uid != (unsigned long long)geteuid()) {
        fprintf(stderr,
                "fsdpshim %s: process %d belongs to uid %llu and this is uid %u without "
                "CAP_SYS_PTRACE: run fsdpshim %s as that user, or as root\n",
                who, (int)pid, uid, (unsigned)geteuid(), who);
        return false;
    }
    if (scope == 2) {
        fprintf(stderr,
                "fsdpshim %s: kernel.yama.ptrace_scope=2 lets only CAP_SYS_PTRACE attach: run "
                "fsdpshim %s as root (sudo)\n",
                who, who);
        return false;
    }
    if (scope == 1) {
        fprintf(stderr,
                "fsdpshim %s: kernel.yama.ptrace_scope=1 lets a process trace only its own "
                "children: run as root, or allow it with `echo 0 | sudo tee "
                "/proc/sys/kernel/yama/ptrace_scope`\n",
                who);
        return false;
    }
    return true;
}

/* Whether the process has a CUDA runtime or driver loaded. */
static bool has_cuda(pid_t pid)
{
    char path[64], line[4096];
    bool found = false;
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, "/libcudart.so") || strstr(line, "/libcuda.so");
    fclose(f);
    return found;
}

/* Whether pid still runs: neither gone nor a zombie. */
static bool alive(pid_t pid)
{
    char path[64], state = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    /* "PID (COMM) STATE ...": COMM may hold spaces and parentheses */
    char line[1024];
    if (fgets(line, sizeof line, f)) {
        char *close = strrchr(line, ')');
        if (close && close[1] == ' ') state = close[2];
    }
    fclose(f);
    return state && state != 'Z' && state != 'X';
}

/* Runs gdb on pid with the Python script `script`; the number it printed
 * after "FSDPSHIM_RESULT", or INT_MIN with gdb's output on stderr. What it
 * printed after "FSDPSHIM_NOTE" goes into note (empty without one). */
static int run_gdb(const char *who, pid_t pid, const char *script, char *note, size_t note_len)
{
    char script_path[] = "/tmp/fsdpshim-gdb-XXXXXX.py", out_path[] = "/tmp/fsdpshim-out-XXXXXX";
    char pid_text[32], line[8192];
    int sfd = mkstemps(script_path, 3), ofd = mkstemp(out_path), result = INT_MIN, status;
    FILE *out = NULL;
    pid_t child;

    if (note_len) note[0] = 0;

    if (sfd < 0 || ofd < 0 || write(sfd, script, strlen(script)) != (ssize_t)strlen(script)) {
        fprintf(stderr, "fsdpshim %s: cannot write gdb's commands in /tmp\n", who);
        goto done;
    }
    snprintf(pid_text, sizeof pid_text, "%d", (int)pid);
    child = fork();
    if (child == 0) {
        dup2(ofd, 1);
        dup2(ofd, 2);
        alarm(GDB_TIMEOUT_S); /* a process that never lets gdb in must not hang us */
        /* NVIDIA's cuda-gdb is a gdb with Python: GPU images often have it alone */
        for (const char *const *gdb = (const char *const[]){"gdb", "cuda-gdb", NULL}; *gdb; gdb++)
            execlp(*gdb, *gdb, "-nx", "-batch", "-q", "-iex", "set debuginfod enabled off", "-p",
                   pid_text, "-x", script_path, (char *)NULL);
        _exit(127);
    }
    if (child < 0 || waitpid(child, &status, 0) != child) {
        fprintf(stderr, "fsdpshim %s: cannot run gdb: %s\n", who, strerror(errno));
        goto done;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        fprintf(stderr,
                "fsdpshim %s: neither gdb nor cuda-gdb is installed (Debian: apt-get install "
                "gdb)\n",
                who);
        goto done;
    }
    out = fopen(out_path, "r");
    while (out && fgets(line, sizeof line, out)) {
        if (!strncmp(line, "FSDPSHIM_RESULT ", 16)) result = atoi(line + 16);
        if (!strncmp(line, "FSDPSHIM_NOTE ", 14) && note_len) {
            snprintf(note, note_len, "%s", line + 14);
            note[strcspn(note, "\n")] = 0;
        }
    }
    if (result == INT_MIN && !alive(pid)) {
        /* a signal gdb passed on (attach_gdb.py), or its own end */
        fprintf(stderr, "fsdpshim %s: process %d ended while gdb was attached to it\n", who,
                (int)pid);
    } else if (result == INT_MIN && out) {
        rewind(out);
        fprintf(stderr, "fsdpshim %s: gdb could not call into process %d:\n", who, (int)pid);
        while (fgets(line, sizeof line, out))
            fprintf(stderr, "  %s", line);
    } else if (result == -3) {
        fprintf(stderr,
                "fsdpshim %s: process %d was never stopped where a call into it is safe (each "
                "time a thread was inside the C library's allocator or loader, and it made no "
                "CUDA runtime call for %d s): nothing was done; try again\n",
                who, (int)pid, GDB_WAIT_S);
    }
done:
    if (out) fclose(out);
    if (sfd >= 0) close(sfd);
    if (ofd >= 0) close(ofd);
    unlink(script_path);
    unlink(out_path);
    return result;
}

/* s as a Python string literal */
static size_t python_string(char *out, size_t len, const char *s)
{
    size_t n = 0;
    if (len) out[n++] = '\'';
    for (; *s && n + 5 < len; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == '\'')
            n += (size_t)snprintf(out + n, len - n, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            n += (size_t)snprintf(out + n, len - n, "\\x%02x", c);
        else
            out[n++] = (char)c;
    }
    n += (size_t)snprintf(out + n, len - n, "'");
    return n;
}

/* gdb's script (attach_gdb.py, after its settings): in process pid, once
 * stopped where that is safe, dlopen lib with `mode` (2: RTLD_NOW; 6:
 * RTLD_NOW | RTLD_NOLOAD, only if it is there) and call fn, of C type
 * `type`, with the trace's path (NULL: no argument) and `level`; then, when
 * fn answered 0, note_fn (NULL: none), whose string run_gdb returns. */
static void gdb_script(char *out, size_t len, pid_t pid, const char *lib, int mode, const char *fn,
                       const char *type, const char *path, int level, const char *note_fn)
{
    char lib_text[2 * PATH_MAX], path_text[2 * PATH_MAX + 64] = "";
    python_string(lib_text, sizeof lib_text, lib);
    if (path) {
        size_t n = python_string(path_text, sizeof path_text, path);
        snprintf(path_text + n, sizeof path_text - n, ", %d", level);
    }
    snprintf(out, len,
             "PID = %d\nLIB = %s\nMODE = %d\nFN = '%s'\nTYPE = '%s'\nCALL_ARGS = [%s]\n"
             "NOTE_FN = '%s'\nWAIT_S = %d\n%s",
             (int)pid, lib_text, mode, fn, type, path_text, note_fn ? note_fn : "", GDB_WAIT_S,
             attach_gdb_py);
}

/* 0 with *pid set; a word that is no process id is a usage error (2), a
 * process that does not exist bad input (1). */
static int parse_pid(const char *who, const char *text, pid_t *pid)
{
    char *end, path[64];
    struct stat st;
    long v = strtol(text, &end, 10);
    if (*text < '0' || *text > '9' || *end || v <= 0 || v > INT_MAX)
        return fs_usage_error(who, "'%s' is not a process id", text);
    snprintf(path, sizeof path, "/proc/%ld", v);
    if (stat(path, &st) != 0) {
        fprintf(stderr, "fsdpshim %s: no process %ld\n", who, v);
        return FS_EXIT_BAD_INPUT;
    }
    *pid = (pid_t)v;
    return 0;
}

static bool find_shim(const char *who, char *out, size_t len)
{
    const char *env = getenv("FSDPSHIM_LIB");
    char found[PATH_MAX];
    if (env && *env) {
        snprintf(found, sizeof found, "%s", env);
    } else if (!fs_cli_installed(FS_BIN_TO_LIB, "../lib", "libfsdpshim.so", found, sizeof found)) {
        fprintf(stderr,
                "fsdpshim %s: cannot find libfsdpshim.so installed with this program; "
                "set FSDPSHIM_LIB\n",
                who);
        return false;
    }
    if (!realpath(found, out)) {
        fprintf(stderr, "fsdpshim %s: %s: %s\n", who, found, strerror(errno));
        return false;
    }
    (void)len;
    return true;
}

/* The trace's path as the process will open it: absolute (its working
 * directory is not ours), %p and %h already its own. %r, %q{VAR} and %% are
 * left to the process, which has the rank and the environment. */
static void trace_path(const char *pattern, pid_t pid, char *out, size_t len)
{
    char cwd[PATH_MAX] = ".", host[256] = "localhost";
    size_t n = 0;
    if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
    gethostname(host, sizeof host - 1);
    if (pattern[0] != '/') n = (size_t)snprintf(out, len, "%s/", cwd);
    for (const char *p = pattern; *p && n + 1 < len; p++) {
        if (p[0] == '%' && p[1] == '%') { /* a %, and never the start of another */
            out[n++] = *p++;
            if (n + 1 < len) out[n++] = *p;
        } else if (p[0] == '%' && (p[1] == 'p' || p[1] == 'h')) {
            if (p[1] == 'p')
                n += (size_t)snprintf(out + n, len - n, "%d", (int)pid);
            else
                n += (size_t)snprintf(out + n, len - n, "%s", host);
            p++;
        } else {
            out[n++] = *p;
        }
        if (n >= len) n = len - 1;
    }
    out[n] = 0;
}

static int detach_pid(const char *who, pid_t pid, const char *lib)
{
    static char script[sizeof attach_gdb_py + 4 * PATH_MAX];
    gdb_script(script, sizeof script, pid, lib, 6, "fsdpshim_attach_stop", "int (*)(void)", NULL, 0,
               NULL);
    int r = run_gdb(who, pid, script, NULL, 0);
    if (r == INT_MIN) return FS_EXIT_BAD_INPUT;
    if (r != 0) {
        fprintf(stderr, "fsdpshim %s: process %d is not being traced by fsdpshim attach\n", who,
                (int)pid);
        return FS_EXIT_BAD_INPUT;
    }
    return 0;
}

int command_attach(int argc, char **argv)
{
    const char *duration = NULL, *output = "fsdpshim-%h-%p.fst", *pid_text = NULL;
    static char script[sizeof attach_gdb_py + 4 * PATH_MAX];
    char lib[PATH_MAX], path[PATH_MAX + 64], way[8192];
    double seconds = 0;
    pid_t pid;
    int rc;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage_attach(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--duration") && i + 1 < argc) {
            duration = argv[++i];
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            output = argv[++i];
        } else if (argv[i][0] != '-' && !pid_text) {
            pid_text = argv[i];
        } else if (argv[i][0] == '-' &&
                   (!strcmp(argv[i], "--duration") || !strcmp(argv[i], "-o"))) {
            return fs_usage_error("attach", "%s needs a value", argv[i]);
        } else if (argv[i][0] == '-') {
            return fs_usage_error("attach", "unknown option '%s'", argv[i]);
        } else {
            return fs_usage_error("attach", "one process at a time: '%s' and '%s'", pid_text,
                                  argv[i]);
        }
    }
    if (!pid_text) return fs_usage_error("attach", "no process id");
    if ((rc = fs_cli_trace_name_check("attach", output))) return rc;
    if (duration) {
        char *end;
        seconds = strtod(duration, &end);
        if (!*duration || *end || !(seconds > 0))
            return fs_usage_error("attach", "--duration wants seconds > 0, not '%s'", duration);
    }
    if ((rc = parse_pid("attach", pid_text, &pid))) return rc;
    if (!may_trace("attach", pid)) return FS_EXIT_BAD_INPUT;
    if (!has_cuda(pid)) {
        fprintf(stderr,
                "fsdpshim attach: process %d has no CUDA runtime or driver loaded "
                "(libcudart.so, libcuda.so): nothing to trace\n",
                (int)pid);
        return FS_EXIT_BAD_INPUT;
    }
    if (!find_shim("attach", lib, sizeof lib)) return FS_EXIT_BAD_INPUT;
    trace_path(output, pid, path, sizeof path);
    gdb_script(script, sizeof script, pid, lib, 2, "fsdpshim_attach_start",
               "int (*)(const char *, int)", path, 2 /* trace:stacks */, "fsdpshim_attach_way");
    switch (run_gdb("attach", pid, script, way, sizeof way)) {
    case INT_MIN:
        return FS_EXIT_BAD_INPUT;
    case 0:
        break;
    case -1:
    case -2:
        fprintf(stderr, "fsdpshim attach: process %d could not load %s\n", (int)pid, lib);
        return FS_EXIT_BAD_INPUT;
    case 1: /* FSDPSHIM_ERR_INACTIVE */
        fprintf(stderr,
                "fsdpshim attach: process %d runs with libfsdpshim.so preloaded: trace it with "
                "FSDPSHIM_CONF=trace:stacks (fsdpshim run --trace)\n",
                (int)pid);
        return FS_EXIT_BAD_INPUT;
    case 2: /* FSDPSHIM_ERR_INVALID: the level is ours, so the file */
        fprintf(stderr,
                "fsdpshim attach: process %d could not create the trace file %s (its stderr "
                "says why): nothing is traced\n",
                (int)pid, path);
        return FS_EXIT_BAD_INPUT;
    default:
        fprintf(stderr,
                "fsdpshim attach: process %d can be traced neither through CUPTI nor through "
                "its GOT slots (no CUDA entry point found there: its stderr says more)\n",
                (int)pid);
        return FS_EXIT_BAD_INPUT;
    }
    /* A fallback to the GOT slots is said here too: the process's stderr,
     * where its shim says it, may be a log no one reads, and the slots miss
     * calls through pointers taken before the attach (docs/attach.md). */
    if (!strncmp(way, "the GOT slots", 13))
        fprintf(stderr,
                "fsdpshim attach: process %d is traced through %s: calls made through driver "
                "functions it looked up before the attach are not seen (docs/attach.md)\n",
                (int)pid, way);
    if (!*way) snprintf(way, sizeof way, "an older libfsdpshim.so that does not say how");
    if (!duration) {
        printf("fsdpshim attach: tracing process %d through %s to %s; `fsdpshim detach %d` "
               "stops\n",
               (int)pid, way, path, (int)pid);
        return 0;
    }
    printf("fsdpshim attach: tracing process %d through %s to %s for %s s\n", (int)pid, way, path,
           duration);
    fflush(stdout);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    int st = detach_pid("attach", pid, lib);
    if (st == 0) printf("fsdpshim attach: detached from process %d; trace: %s\n", (int)pid, path);
    return st;
}

int command_detach(int argc, char **argv)
{
    char lib[PATH_MAX];
    pid_t pid;
    int rc;

    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage_detach(stdout);
        return 0;
    }
    if (argc != 2)
        return fs_usage_error("detach", "%s",
                              argc < 2 ? "no process id" : "one process id, no options");
    if ((rc = parse_pid("detach", argv[1], &pid))) return rc;
    if (!may_trace("detach", pid) || !find_shim("detach", lib, sizeof lib))
        return FS_EXIT_BAD_INPUT;
    int st = detach_pid("detach", pid, lib);
    if (st == 0) printf("fsdpshim detach: process %d is no longer traced\n", (int)pid);
    return st;
}
