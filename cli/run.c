/* run.c - `fsdpshim run` and `fsdpshim record`: start a program under the
 * shim.
 *
 * As uftrace's record does, the launcher configures the library only
 * through the environment and then becomes the program: LD_PRELOAD gets
 * libfsdpshim.so in front (--lib, else FSDPSHIM_LIB, else the library
 * installed next to this binary), FSDPSHIM_CONF the configuration, and a
 * Python program has PyTorch routed through the shim (torch_route.c). The
 * program is then run as a shell would run it (exec.c), so the exit status
 * is the program's own. Tracing is documented but not built yet: `record`,
 * --trace and --output refuse with exit status 3 rather than run a program
 * that writes no trace. */
#include "cli.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

void usage_run(FILE *out)
{
    fprintf(out, "usage: fsdpshim run [--conf CONF] [--lib PATH] [--] CMD [ARGS...]\n"
                 "\n"
                 "Runs CMD with libfsdpshim.so preloaded, as a shell would run it.\n"
                 "  --conf CONF      FSDPSHIM_CONF for the program (key:value,...), e.g.\n"
                 "                   free_semantics:device,ag_limit:2 (see docs/configuration.md)\n"
                 "  --lib PATH       the libfsdpshim.so to preload [FSDPSHIM_LIB, else the one\n"
                 "                   installed with this program, ../lib/libfsdpshim.so]\n"
                 "  --trace          not built yet: refused (exit 3) until traces are written\n"
                 "  -o, --output PATH  the trace file; not built yet: refused (exit 3)\n"
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
                 "Exit status: that of CMD; 1 the library is not found; 2 usage error;\n"
                 "3 not built yet; 126 CMD cannot be run; 127 CMD not found.\n");
}

void usage_record(FILE *out)
{
    fprintf(out, "usage: fsdpshim record [--conf CONF] [--lib PATH] [-o PATH] [--] CMD [ARGS...]\n"
                 "\n"
                 "Not built yet: this version writes no traces, so `record` refuses (exit 3)\n"
                 "instead of running CMD without one. When built it is `fsdpshim run --trace`;\n"
                 "-o/--output names the trace file [fsdpshim-%%h-%%p.fst; %%h host, %%p pid,\n"
                 "%%r rank]. `fsdpshim run` runs CMD under the shim without a trace.\n");
}

void fs_cli_note(const char *fmt, ...)
{
    static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                            "SLURM_PROCID", "LOCAL_RANK"};
    const char *level = getenv("FSDPSHIM_LOG"), *rank = NULL;
    char line[4096];
    va_list ap;
    int n;

    if (level && !strcasecmp(level, "error")) return;
    for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0] && !rank; i++) {
        const char *v = getenv(rank_vars[i]);
        if (v && *v && strlen(v) <= 9 && strspn(v, "0123456789") == strlen(v)) rank = v;
    }
    n = snprintf(line, sizeof line, "fsdpshim[%d%s%s]: ", (int)getpid(), rank ? " rank " : "",
                 rank ? rank : "");
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}

typedef struct launch_options {
    const char *conf, *lib, *output;
    bool trace;
    int first; /* argv index of CMD */
} launch_options;

/* -1 when the options are good, else the exit status. */
static int parse_options(int argc, char **argv, bool record, launch_options *o)
{
    const char *name = argv[0];
    void (*usage)(FILE *) = record ? usage_record : usage_run;
    int i;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], **value = NULL;
        if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!record && !strcmp(a, "--trace")) {
            o->trace = true;
        } else if (!strcmp(a, "--conf")) {
            value = &o->conf;
        } else if (!strcmp(a, "--lib")) {
            value = &o->lib;
        } else if (!strcmp(a, "--output") || !strcmp(a, "-o")) {
            value = &o->output;
        } else if (!strncmp(a, "--conf=", 7)) {
            o->conf = a + 7;
        } else if (!strncmp(a, "--lib=", 6)) {
            o->lib = a + 6;
        } else if (!strncmp(a, "--output=", 9)) {
            o->output = a + 9;
        } else if (!strncmp(a, "-o", 2)) {
            o->output = a + 2;
        } else if (a[0] == '-') {
            fprintf(stderr, "fsdpshim %s: unknown option '%s'\n", name, a);
            usage(stderr);
            return FS_EXIT_USAGE;
        } else {
            break;
        }
        if (value) {
            if (i + 1 >= argc) {
                fprintf(stderr, "fsdpshim %s: %s needs a value\n", name, a);
                return FS_EXIT_USAGE;
            }
            *value = argv[++i];
        }
    }
    if (i >= argc) {
        fprintf(stderr, "fsdpshim %s: no command to run\n", name);
        usage(stderr);
        return FS_EXIT_USAGE;
    }
    o->first = i;
    return -1;
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
    /* the loader splits LD_PRELOAD on both */
    if (strpbrk(out, ": ")) {
        fprintf(stderr, "fsdpshim %s: %s: LD_PRELOAD cannot hold a path with ':' or ' '\n", who,
                out);
        return false;
    }
    return true;
}

/* --lib, else FSDPSHIM_LIB, else the library installed with this binary
 * (FS_BIN_TO_LIB from the install layout; ../lib in the build tree). */
static bool find_library(const char *who, const char *lib_opt, char *out)
{
    static const char *const next_to_bin[] = {FS_BIN_TO_LIB, "../lib"};
    const char *env = getenv("FSDPSHIM_LIB");
    char exe[PATH_MAX], candidate[PATH_MAX * 2];
    ssize_t n;

    if (lib_opt) return usable_library(who, "--lib ", lib_opt, out);
    if (env && *env) return usable_library(who, "FSDPSHIM_LIB=", env, out);
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        for (size_t i = 0; i < sizeof next_to_bin / sizeof next_to_bin[0]; i++) {
            snprintf(candidate, sizeof candidate, "%s/%s/libfsdpshim.so", dirname(exe),
                     next_to_bin[i]);
            if (access(candidate, R_OK) == 0) return usable_library(who, "", candidate, out);
        }
    }
    fprintf(stderr,
            "fsdpshim %s: cannot find libfsdpshim.so next to this program (%s/%s); "
            "set FSDPSHIM_LIB or pass --lib\n",
            who, n > 0 ? exe : "?", FS_BIN_TO_LIB);
    return false;
}

static int set(const char *who, const char *name, const char *value)
{
    if (setenv(name, value, 1) == 0) return 0;
    fprintf(stderr, "fsdpshim %s: cannot set %s: %s\n", who, name, strerror(errno));
    return -1;
}

static int launch(int argc, char **argv, bool record)
{
    const char *who = argv[0], *conf, *preload;
    launch_options o = {0};
    char lib[PATH_MAX], interp[PATH_MAX], *routed = NULL, *buf;
    int rc = parse_options(argc, argv, record, &o);

    if (rc >= 0) return rc;
    if (record || o.trace || o.output) {
        fprintf(stderr,
                "fsdpshim %s: %s is not built yet: this version writes no trace files, so "
                "nothing would be recorded; `fsdpshim run` without --trace or --output runs the "
                "program under the shim\n",
                who,
                record    ? "recording"
                : o.trace ? "--trace"
                          : "--output");
        return FS_EXIT_NOT_BUILT;
    }
    if (!find_library(who, o.lib, lib)) return FS_EXIT_BAD_INPUT;

    /* LD_PRELOAD: the shim first, then whatever the user preloads */
    preload = getenv("LD_PRELOAD");
    if (preload && *preload) {
        size_t n = strlen(lib) + strlen(preload) + 2;
        if (!(buf = malloc(n))) return FS_EXIT_BAD_INPUT;
        snprintf(buf, n, "%s:%s", lib, preload);
        rc = set(who, "LD_PRELOAD", buf);
        free(buf);
    } else {
        rc = set(who, "LD_PRELOAD", lib);
    }
    if (rc) return FS_EXIT_BAD_INPUT;

    conf = o.conf ? o.conf : getenv("FSDPSHIM_CONF");
    if (fs_torch_python(argv + o.first, interp) && fs_torch_route(interp, conf, &routed))
        return FS_EXIT_BAD_INPUT;
    if (routed) conf = routed;
    if (conf && set(who, "FSDPSHIM_CONF", conf)) return FS_EXIT_BAD_INPUT;
    rc = fs_exec_program(who, argv + o.first);
    free(routed);
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
