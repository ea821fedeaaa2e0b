/* run.c - `fsdpshim run` and `fsdpshim record`: start a program under the
 * shim.
 *
 * As uftrace's record does, the launcher configures the library only
 * through the environment and then becomes the program: LD_PRELOAD gets
 * libfsdpshim.so (found next to this binary, ../lib/libfsdpshim.so) in
 * front, FSDPSHIM_CONF the configuration, and a Python program (the
 * interpreter, or a script whose #! line names it, such as torchrun) also gets
 * PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (unless the user set it)
 * so that PyTorch hands every tensor allocation, with its stream, to the
 * shim. */
#include "cli.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void usage_run(FILE *out)
{
    fprintf(out,
            "usage: fsdpshim run [--conf CONF] [--trace] [--output PATH] [--] CMD [ARGS...]\n"
            "\n"
            "Runs CMD with libfsdpshim.so preloaded.\n"
            "  --conf CONF     FSDPSHIM_CONF for the program (key:value,...), e.g.\n"
            "                  free_semantics:device,ag_limit:2 (see docs/configuration.md)\n"
            "  --trace         record a trace (adds trace:stacks to the configuration unless\n"
            "                  it sets trace:) into FSDPSHIM_TRACE [fsdpshim-%%h-%%p.fst]\n"
            "  --output PATH   the trace file name (FSDPSHIM_TRACE; %%h host, %%p pid, %%r rank)\n"
            "  -h, --help      this text\n"
            "\n"
            "For a Python command PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync is set unless\n"
            "already set, so that PyTorch hands its allocations to the shim.\n"
            "Exit status: that of CMD; 2 on a usage error; 127 if CMD cannot be run.\n");
}

void usage_record(FILE *out)
{
    fprintf(out, "usage: fsdpshim record [--conf CONF] [--output PATH] [--] CMD [ARGS...]\n"
                 "\n"
                 "The same as `fsdpshim run --trace`; see `fsdpshim run --help`.\n");
}

/* ../lib/libfsdpshim.so relative to this executable. */
static bool find_library(char *out, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

    if (n <= 0) return false;
    exe[n] = '\0';
    if ((size_t)snprintf(out, len, "%s/../lib/libfsdpshim.so", dirname(exe)) >= len) return false;
    return access(out, R_OK) == 0;
}

/* The file execvp would run for `cmd`, into path (empty if none). */
static void resolve(const char *cmd, char *path, size_t len)
{
    const char *dirs = getenv("PATH"), *end;

    path[0] = '\0';
    if (strchr(cmd, '/')) {
        snprintf(path, len, "%s", cmd);
        return;
    }
    for (; dirs && *dirs; dirs = *end ? end + 1 : end) {
        end = strchrnul(dirs, ':');
        snprintf(path, len, "%.*s/%s", (int)(end - dirs), end > dirs ? dirs : ".", cmd);
        if (access(path, X_OK) == 0) return;
    }
    path[0] = '\0';
}

/* A Python program: the interpreter itself, or a script run by one (as
 * torchrun and other entry-point scripts are). */
static bool is_python(const char *cmd)
{
    const char *base = strrchr(cmd, '/');
    char path[PATH_MAX], line[256] = "";
    FILE *f;

    base = base ? base + 1 : cmd;
    if (!strncmp(base, "python", 6)) return true;
    resolve(cmd, path, sizeof path);
    if (!path[0] || !(f = fopen(path, "r"))) return false;
    if (!fgets(line, sizeof line, f)) line[0] = '\0';
    fclose(f);
    return !strncmp(line, "#!", 2) && strstr(line, "python");
}

static int setenv_or_die(const char *name, const char *value)
{
    if (setenv(name, value, 1) == 0) return 0;
    fprintf(stderr, "fsdpshim run: cannot set %s: %s\n", name, strerror(errno));
    return -1;
}

static int launch(int argc, char **argv, bool trace, const char *cmdname)
{
    const char *conf = NULL, *output = NULL, *old;
    char lib[PATH_MAX], *buf;
    int i;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            !strcmp(cmdname, "record") ? usage_record(stdout) : usage_run(stdout);
            return 0;
        } else if (!strcmp(a, "--trace")) {
            trace = true;
        } else if (!strcmp(a, "--conf") || !strcmp(a, "--output")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "fsdpshim %s: %s needs a value\n", cmdname, a);
                return FS_EXIT_USAGE;
            }
            *(a[2] == 'c' ? &conf : &output) = argv[++i];
        } else if (!strncmp(a, "--conf=", 7)) {
            conf = a + 7;
        } else if (!strncmp(a, "--output=", 9)) {
            output = a + 9;
        } else if (a[0] == '-') {
            fprintf(stderr, "fsdpshim %s: unknown option '%s'\n", cmdname, a);
            usage_run(stderr);
            return FS_EXIT_USAGE;
        } else {
            break;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "fsdpshim %s: no command to run\n", cmdname);
        usage_run(stderr);
        return FS_EXIT_USAGE;
    }
    if (!find_library(lib, sizeof lib)) {
        fprintf(stderr, "fsdpshim %s: cannot find libfsdpshim.so next to this program (%s)\n",
                cmdname, lib);
        return 1;
    }

    /* LD_PRELOAD: the shim first, then whatever the user preloads */
    old = getenv("LD_PRELOAD");
    if (old && *old) {
        size_t n = strlen(lib) + strlen(old) + 2;
        if (!(buf = malloc(n))) return 1;
        snprintf(buf, n, "%s:%s", lib, old);
        if (setenv_or_die("LD_PRELOAD", buf)) return 1;
        free(buf);
    } else if (setenv_or_die("LD_PRELOAD", lib)) {
        return 1;
    }

    /* FSDPSHIM_CONF: --conf, plus trace:stacks for --trace unless it says */
    if (!conf) conf = getenv("FSDPSHIM_CONF");
    if (trace && (!conf || !strstr(conf, "trace:"))) {
        size_t n = (conf ? strlen(conf) : 0) + 16;
        if (!(buf = malloc(n))) return 1;
        snprintf(buf, n, "%s%strace:stacks", conf && *conf ? conf : "", conf && *conf ? "," : "");
        if (setenv_or_die("FSDPSHIM_CONF", buf)) return 1;
        free(buf);
    } else if (conf && setenv_or_die("FSDPSHIM_CONF", conf)) {
        return 1;
    }
    if (output && setenv_or_die("FSDPSHIM_TRACE", output)) return 1;
    if (trace && !getenv("FSDPSHIM_TRACE") && setenv_or_die("FSDPSHIM_TRACE", "fsdpshim-%h-%p.fst"))
        return 1;
    if (is_python(argv[i]) && !getenv("PYTORCH_CUDA_ALLOC_CONF") &&
        setenv_or_die("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"))
        return 1;

    execvp(argv[i], argv + i);
    fprintf(stderr, "fsdpshim %s: cannot run %s: %s\n", cmdname, argv[i], strerror(errno));
    return 127;
}

int command_run(int argc, char **argv)
{
    return launch(argc, argv, false, "run");
}

int command_record(int argc, char **argv)
{
    return launch(argc, argv, true, "record");
}
