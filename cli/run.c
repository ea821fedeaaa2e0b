/* run.c - `fsdpshim run` and `fsdpshim record`: start a program under the
 * shim.
 *
 * As uftrace's record does, the launcher configures the library only
 * through the environment and then becomes the program: LD_PRELOAD gets
 * libfsdpshim.so in front (--lib, else FSDPSHIM_LIB, else the library
 * installed next to this binary), FSDPSHIM_CONF the configuration, and a
 * Python program has PyTorch routed through the shim (route/). The
 * program is then run as a shell would run it (exec.c), so the exit status
 * is the program's own. With --trace (or `record`) the launcher stays: it
 * runs the program as a child, and when it ends names the trace files that
 * its processes wrote, which each process appends to a list the launcher
 * made (FSDPSHIM_TRACE_LIST), so that a torchrun job's ranks are all named. */
#include "cli.h"
#include "conf_lex.h"
#include "python.h"
#include "torch_route.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void usage_run(FILE *out)
{
    fprintf(out, "usage: fsdpshim run [--conf CONF] [--lib PATH] [--trace] [-o PATTERN] [--]\n"
                 "                    CMD [ARGS...]\n"
                 "\n"
                 "Runs CMD with libfsdpshim.so preloaded, as a shell would run it.\n"
                 "  --conf CONF      FSDPSHIM_CONF for the program (key:value,...), e.g.\n"
                 "                   free_semantics:device,ag_limit:2 (see docs/configuration.md)\n"
                 "  --lib PATH       the libfsdpshim.so to preload [FSDPSHIM_LIB, else the one\n"
                 "                   installed with this program, ../lib/libfsdpshim.so]\n"
                 "  --trace          write an allocation trace per process (trace:stacks unless\n"
                 "                   CONF sets trace), and name the files at the end\n"
                 "  -o, --output PATTERN  the trace files, as for `fsdpshim record`; implies\n"
                 "                   --trace\n"
                 "  -h, --help       this text\n"
                 "\n"
                 "For a Python command (python, torchrun, python -m ..., a .py file, a script\n"
                 "whose #! names Python, also behind env or sh -c) PYTORCH_CUDA_ALLOC_CONF gets\n"
                 "backend:cudaMallocAsync so that PyTorch hands its allocations to the shim;\n"
                 "its expandable_segments, max_split_size_mb, roundup_power2_divisions and\n"
                 "garbage_collection_threshold move into FSDPSHIM_CONF (whose own keys win),\n"
                 "other keys stay for PyTorch; on PyTorch 2.15 and later (read from the\n"
                 "interpreter's torch/version.py) TORCH_DIST_USE_NCCL2=0 unless set, since its\n"
                 "default NCCL process group aborts under that backend; one line says what\n"
                 "changed.\n"
                 "A bare CMD is searched on PATH, then in the working directory; a .py file\n"
                 "that cannot run by itself runs under the python on PATH.\n"
                 "\n"
                 "examples:\n"
                 "  fsdpshim run -- python train.py\n"
                 "  fsdpshim run --conf expandable_segments:true -- \\\n"
                 "      torchrun --nproc-per-node 8 train.py\n"
                 "\n"
                 "Exit status: that of CMD; 1 the library is not found or not a shared library;\n"
                 "2 usage error; 126 CMD cannot be run; 127 CMD not found.\n");
}

void usage_record(FILE *out)
{
    fprintf(out,
            "usage: fsdpshim record [-o PATTERN] [--conf CONF] [--lib PATH] [--]\n"
            "                       CMD [ARGS...]\n"
            "\n"
            "`fsdpshim run --trace`: runs CMD under the shim with an allocation trace per\n"
            "process that uses the GPU, then names the trace files written, or says why none\n"
            "was. `fsdpshim dump FILE` prints one, `fsdpshim report FILE...` sums them up.\n"
            "  -o, --output PATTERN  the trace files [fsdpshim-%%h-%%p.fst], valgrind's way:\n"
            "                 %%p the pid, %%q{VAR} the environment variable VAR, %%%% a %%, and\n"
            "                 %%h the host, %%r the rank; each process expands them itself\n"
            "                 (a VAR it lacks is empty, and said). Another %% is a usage\n"
            "                 error. Without %%p, a name another process of the run\n"
            "                 writes, or wrote, gets .PID appended. An existing directory\n"
            "                 (or a name ending in /) gets fsdpshim-%%h-%%p.fst in it. A\n"
            "                 directory that does not exist or cannot be written stops the\n"
            "                 run before CMD\n"
            "  --conf CONF    FSDPSHIM_CONF for the program; trace:stacks is added unless\n"
            "                 it sets trace (trace:python adds Python frames, trace:events\n"
            "                 leaves stacks out)\n"
            "  --lib PATH     the libfsdpshim.so to preload, as for `fsdpshim run`\n"
            "  -h, --help     this text\n"
            "\n"
            "examples:\n"
            "  fsdpshim record -o 'train-%%p.fst' -- python train.py\n"
            "  fsdpshim record -o 'job%%q{SLURM_JOB_ID}-rank%%q{RANK}.fst' -- \\\n"
            "      torchrun --nproc-per-node 2 train.py\n"
            "  fsdpshim record -o traces/ --conf trace:python -- \\\n"
            "      torchrun --nproc-per-node 2 train.py\n"
            "\n"
            "Exit status: that of CMD (128+N when signal N killed it, named on stderr);\n"
            "1 the library is not found or the trace cannot be written there; 2 usage\n"
            "error; 126 CMD cannot be run; 127 CMD not found.\n");
}

typedef struct launch_options {
    const char *conf, *lib, *output;
    bool trace;
    int first; /* argv index of CMD */
} launch_options;

/* -1 when the options are good, else the exit status. */
static int parse_options(int argc, char **argv, bool record, launch_options *o)
{
    const fs_option opts[] = {
        {"--conf", NULL, &o->conf, NULL},
        {"--lib", NULL, &o->lib, NULL},
        {"--output", "-o", &o->output, NULL},
        {"--trace", NULL, NULL, &o->trace}, /* last: `record` has no --trace */
    };
    size_t n = sizeof opts / sizeof opts[0] - (record ? 1 : 0);

    return fs_parse_options(argc, argv, opts, n, record ? usage_record : usage_run, &o->first);
}

/* Whether path is an ELF shared object of this machine's class: ET_DYN
 * without a program interpreter, which a position-independent executable
 * (ET_DYN too) has. */
static bool shared_library(const char *path)
{
    ElfW(Ehdr) h;
    ElfW(Phdr) ph;
    FILE *f = fopen(path, "rb");
    bool ok = f && fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.e_ident, ELFMAG, SELFMAG) &&
              h.e_ident[EI_CLASS] == (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) &&
              h.e_type == ET_DYN && h.e_phentsize == sizeof ph &&
              fseek(f, (long)h.e_phoff, SEEK_SET) == 0;
    for (unsigned i = 0; ok && i < h.e_phnum; i++)
        ok = fread(&ph, sizeof ph, 1, f) == 1 && ph.p_type != PT_INTERP;
    if (f) fclose(f);
    return ok;
}

static bool usable_library(const char *who, const char *from, const char *given, char *out)
{
    struct stat st;

    if (!realpath(given, out) || stat(out, &st) != 0) {
        fprintf(stderr, "fsdpshim %s: %s%s: %s\n", who, from, given, strerror(errno));
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "fsdpshim %s: %s%s: not a file\n", who, from, given);
        return false;
    }
    /* the loader would say "invalid ELF header", ignore it and run the
     * program without the shim */
    if (!shared_library(out)) {
        fprintf(stderr, "fsdpshim %s: %s%s: not a shared library (libfsdpshim.so)\n", who, from,
                given);
        return false;
    }
    /* the loader splits LD_PRELOAD on both */
    if (strpbrk(out, ": ")) {
        fprintf(stderr, "fsdpshim %s: %s: LD_PRELOAD cannot hold a path with ':' or ' '\n", who,
                out);
        return false;
    }
    return true;
}

bool fs_cli_installed(const char *install_dir, const char *build_dir, const char *file, char *out,
                      size_t len)
{
    const char *const dirs[] = {install_dir, build_dir};
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

    if (n <= 0) return false;
    exe[n] = '\0';
    const char *bin = dirname(exe);
    for (size_t i = 0; i < 2; i++) {
        snprintf(out, len, "%s/%s/%s", bin, dirs[i], file);
        if (access(out, R_OK) == 0) return true;
    }
    return false;
}

/* --lib, else FSDPSHIM_LIB, else the library installed with this binary
 * (FS_BIN_TO_LIB from the install layout; ../lib in the build tree). */
static bool find_library(const char *who, const char *lib_opt, char *out)
{
    const char *env = getenv("FSDPSHIM_LIB");
    char candidate[PATH_MAX * 2];

    if (lib_opt) return usable_library(who, "--lib ", lib_opt, out);
    if (env && *env) return usable_library(who, "FSDPSHIM_LIB=", env, out);
    if (fs_cli_installed(FS_BIN_TO_LIB, "../lib", "libfsdpshim.so", candidate, sizeof candidate))
        return usable_library(who, "", candidate, out);
    fprintf(stderr,
            "fsdpshim %s: cannot find libfsdpshim.so installed with this program (%s from its "
            "directory); set FSDPSHIM_LIB or pass --lib\n",
            who, FS_BIN_TO_LIB);
    return false;
}

int fs_cli_setenv(const char *who, const char *name, const char *value)
{
    if (setenv(name, value, 1) == 0) return 0;
    fprintf(stderr, "fsdpshim %s: cannot set %s: %s\n", who, name, strerror(errno));
    return -1;
}

int fs_cli_prepend(const char *who, const char *name, const char *value)
{
    const char *old = getenv(name);
    char *buf;
    size_t n;
    int rc;

    if (!old || !*old) return fs_cli_setenv(who, name, value);
    n = strlen(value) + strlen(old) + 2;
    if (!(buf = malloc(n))) {
        fprintf(stderr, "fsdpshim %s: out of memory\n", who);
        return -1;
    }
    snprintf(buf, n, "%s:%s", value, old);
    rc = fs_cli_setenv(who, name, buf);
    free(buf);
    return rc;
}

/* The shim is the NVTX injection library, so that the program's ranges
 * annotate its allocations; an injection library the user had configured
 * (a profiler's) is kept in FSDPSHIM_NVTX_CHAIN and chained by the shim. */
static int nvtx_environment(const char *who, const char *lib)
{
    const char *old = getenv("NVTX_INJECTION64_PATH");

    if (old && *old && strcmp(old, lib) && !getenv("FSDPSHIM_NVTX_CHAIN") &&
        fs_cli_setenv(who, "FSDPSHIM_NVTX_CHAIN", old))
        return -1;
    return fs_cli_setenv(who, "NVTX_INJECTION64_PATH", lib);
}

/* Routes PyTorch for argv when it runs Python (route/): the environment
 * set, *routed the FSDPSHIM_CONF value (malloc'ed, NULL: unchanged), and one
 * line saying what changed of the user's setting. -1 after a message when
 * the environment cannot be set. */
static int route_torch(char *const *argv, const char *lib, const char *conf, char **routed)
{
    char interp[PATH_MAX], lib_dir[PATH_MAX], note[4096], *slash;

    if (!fs_route_argv_python(argv, interp)) return 0;
    snprintf(lib_dir, sizeof lib_dir, "%s", lib);
    if ((slash = strrchr(lib_dir, '/'))) *slash = '\0';
    if (fs_route_torch(interp, lib_dir, conf, routed, note, sizeof note)) {
        fprintf(stderr, "fsdpshim run: %s\n", note);
        return -1;
    }
    if (*note) fs_cli_note("run: %s", note);
    return 0;
}

int fs_shim_environment(const char *who, const char *lib_opt, const char *conf_opt,
                        char *const *argv)
{
    const char *conf = conf_opt ? conf_opt : getenv("FSDPSHIM_CONF");
    char lib[PATH_MAX], *routed = NULL;
    int rc = 0;

    if (!find_library(who, lib_opt, lib)) return FS_EXIT_BAD_INPUT;
    /* the shim first, then whatever else is preloaded */
    if (fs_cli_prepend(who, "LD_PRELOAD", lib)) return FS_EXIT_BAD_INPUT;
    if (nvtx_environment(who, lib)) return FS_EXIT_BAD_INPUT;
    if (route_torch(argv, lib, conf, &routed)) return FS_EXIT_BAD_INPUT;
    if (routed) conf = routed;
    if (conf && fs_cli_setenv(who, "FSDPSHIM_CONF", conf)) rc = FS_EXIT_BAD_INPUT;
    free(routed);
    return rc;
}

/* Whether CONF sets the trace key itself. */
static bool conf_sets_trace(const char *conf)
{
    char *copy = conf ? strdup(conf) : NULL, *cur = copy, *key, *value;
    bool found = false;

    while (cur && !found && fs_conf_next(&cur, &key, &value))
        found = !strcmp(key, "trace");
    free(copy);
    return found;
}

#define DEFAULT_TRACE_NAME "fsdpshim-%h-%p.fst"

int fs_cli_trace_name_check(const char *who, const char *given)
{
    for (const char *c = strchr(given, '%'); c; c = strchr(c + 1, '%')) {
        if (c[1] && strchr("hpr%", c[1])) {
            c++; /* %% is one piece: its second % starts nothing */
            continue;
        }
        if (!c[1]) {
            fprintf(stderr, "fsdpshim %s: -o '%s': a lone %% at the end (%%%% writes a %%)\n", who,
                    given);
            return FS_EXIT_USAGE;
        }
        if (c[1] != 'q') {
            fprintf(stderr,
                    "fsdpshim %s: -o '%s': %%%.1s is not %%h (host), %%p (pid), %%r (rank), "
                    "%%q{VAR} (an environment variable) or %%%% (a %%)\n",
                    who, given, c + 1);
            return FS_EXIT_USAGE;
        }
        /* %q{VAR}: a name as the shell takes one, expanded in each process */
        const char *name = c + 3, *end = name;
        while (*end == '_' || (*end >= 'A' && *end <= 'Z') || (*end >= 'a' && *end <= 'z') ||
               (end > name && *end >= '0' && *end <= '9'))
            end++;
        if (c[2] != '{' || end == name || *end != '}') {
            fprintf(stderr,
                    "fsdpshim %s: -o '%s': %%q takes an environment variable's name in braces, "
                    "as %%q{SLURM_JOB_ID}%s\n",
                    who, given, c[2] == '{' && !strchr(c, '}') ? " (no closing brace)" : "");
            return FS_EXIT_USAGE;
        }
        c = end;
    }
    return 0;
}

/* The trace files' pattern from -o, checked before anything runs, so that
 * a name the shim cannot create never makes a run untraced: each % is one
 * the shim expands, and the directory exists and may be written. It is
 * made absolute, so that a process that changes directory writes where
 * the user looks; an existing directory (or a name ending in '/') gets the
 * default name in it. 0, or an exit status after one line. */
static int trace_pattern(const char *who, const char *given, char *pattern, size_t len)
{
    char cwd[PATH_MAX], dir[PATH_MAX * 2];
    struct stat st;
    size_t n;
    int err = 0;

    if ((err = fs_cli_trace_name_check(who, given))) return err;
    if (given[0] != '/' && !getcwd(cwd, sizeof cwd)) {
        fprintf(stderr, "fsdpshim %s: the working directory: %s\n", who, strerror(errno));
        return FS_EXIT_BAD_INPUT;
    }
    snprintf(pattern, len, "%s%s%s", given[0] == '/' ? "" : cwd, given[0] == '/' ? "" : "/", given);
    n = strlen(pattern);
    if (pattern[n - 1] == '/' || (stat(pattern, &st) == 0 && S_ISDIR(st.st_mode)))
        snprintf(pattern + n, len - n, "%s%s", pattern[n - 1] == '/' ? "" : "/",
                 DEFAULT_TRACE_NAME);
    /* the directory, unless a % makes it one per host, pid, rank or
     * variable: each process's own */
    snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(pattern, '/') - pattern), pattern);
    if (strchr(dir, '%')) return 0;
    if (!dir[0]) snprintf(dir, sizeof dir, "/");
    if (stat(dir, &st) != 0)
        err = errno;
    else if (!S_ISDIR(st.st_mode))
        err = ENOTDIR;
    else if (access(dir, W_OK | X_OK) != 0)
        err = errno;
    if (err) {
        fprintf(stderr, "fsdpshim %s: the trace could not be written in %s: %s\n", who, dir,
                strerror(err));
        return FS_EXIT_BAD_INPUT;
    }
    return 0;
}

/* The environment of a traced run: trace:stacks unless CONF says, the
 * file pattern, and the list the processes name their files in. */
static int trace_environment(const char *who, const launch_options *o, char **conf, char *list,
                             size_t len)
{
    const char *base = o->conf ? o->conf : getenv("FSDPSHIM_CONF");
    char pattern[PATH_MAX * 3];
    int rc;

    if ((rc = trace_pattern(who, o->output ? o->output : DEFAULT_TRACE_NAME, pattern,
                            sizeof pattern)))
        return rc;
    if (!conf_sets_trace(base)) {
        size_t n = (base ? strlen(base) : 0) + 16;
        if (!(*conf = malloc(n))) return FS_EXIT_BAD_INPUT;
        snprintf(*conf, n, "%s%strace:stacks", base && *base ? base : "", base && *base ? "," : "");
    }
    if (fs_cli_setenv(who, "FSDPSHIM_TRACE", pattern)) return FS_EXIT_BAD_INPUT;
    return fs_trace_list_begin(who, list, len);
}

bool fs_conf_traces(const char *conf)
{
    char *copy = conf ? strdup(conf) : NULL, *cur = copy, *key, *value;
    bool on = false;

    /* as the shim reads it (interpose/core/config.c): the last good trace key
     * wins; a bad value is reported there and changes nothing */
    while (cur && fs_conf_next(&cur, &key, &value)) {
        if (strcmp(key, "trace")) continue;
        if (!strcmp(value, "off"))
            on = false;
        else if (!strcmp(value, "events") || !strcmp(value, "stacks") || !strcmp(value, "python"))
            on = true;
    }
    free(copy);
    return on;
}

int fs_trace_list_begin(const char *who, char *list, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    int fd;

    snprintf(list, len, "%s/fsdpshim-traces-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if ((fd = mkstemp(list)) < 0) {
        fprintf(stderr, "fsdpshim %s: cannot make the list of trace files: %s\n", who,
                strerror(errno));
        return FS_EXIT_BAD_INPUT;
    }
    close(fd);
    if (fs_cli_setenv(who, "FSDPSHIM_TRACE_LIST", list)) {
        unlink(list);
        return FS_EXIT_BAD_INPUT;
    }
    return 0;
}

/* One line about the run's traces: `fsdpshim sim: ...` for who, else as
 * the library's own lines start (fs_cli_note) */
static void say(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const char *who, const char *fmt, ...)
{
    char line[PATH_MAX + 600];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (who)
        fprintf(stderr, "fsdpshim %s: %s\n", who, line);
    else
        fs_cli_note("%s", line);
}

void fs_trace_list_name(const char *list, const char *who)
{
    FILE *f = fopen(list, "r");
    char line[PATH_MAX + 512], **seen = NULL;
    size_t n = 0, found = 0, failed = 0;

    while (f && fgets(line, sizeof line, f)) {
        struct stat st;
        bool dup = false;
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '!') {
            say(who, "the trace could not be written: %s", line + 1);
            failed++;
            continue;
        }
        for (size_t i = 0; i < n && !dup; i++)
            dup = !strcmp(seen[i], line);
        if (dup || stat(line, &st) != 0) continue;
        char **s = realloc(seen, (n + 1) * sizeof *s);
        if (!s) break;
        seen = s;
        if (!(seen[n] = strdup(line))) break;
        n++;
        found++;
        say(who, "trace: %s (%lld bytes)", line, (long long)st.st_size);
    }
    if (!found && !failed) say(who, "no trace was written: no process of the run used the GPU");
    if (f) fclose(f);
    for (size_t i = 0; i < n; i++)
        free(seen[i]);
    free(seen);
    unlink(list);
}

static int launch(int argc, char **argv, bool record)
{
    const char *who = argv[0];
    launch_options o = {0};
    char list[PATH_MAX], *conf = NULL;
    int rc = parse_options(argc, argv, record, &o);
    pid_t pid;

    if (rc >= 0) return rc;
    if (!(record || o.trace || o.output)) {
        if ((rc = fs_shim_environment(who, o.lib, o.conf, argv + o.first))) return rc;
        return fs_exec_program(who, argv + o.first);
    }
    if ((rc = trace_environment(who, &o, &conf, list, sizeof list))) {
        free(conf);
        return rc;
    }
    rc = fs_shim_environment(who, o.lib, conf ? conf : o.conf, argv + o.first);
    free(conf);
    if (rc) {
        unlink(list);
        return rc;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "fsdpshim %s: cannot start the program: %s\n", who, strerror(errno));
        unlink(list);
        return FS_EXIT_CANNOT_RUN;
    }
    if (pid == 0) _exit(fs_exec_program(who, argv + o.first));
    rc = fs_wait_program(pid);
    fs_trace_list_name(list, NULL);
    return rc;
}

int command_run(int argc, char **argv)
{
    return launch(argc, argv, false);
}

int command_record(int argc, char **argv)
{
    return launch(argc, argv, true);
}
