/* python.c - which Python a command line runs, and which one this process
 * is (python.h): the first half of routing PyTorch, whose version decides
 * the route (torch_route.c). The launcher asks about the argv it is about to
 * run (cli/run.c), the preloaded library about the process it was loaded
 * into (interpose/pytorch/route.c); both then take the same route. */
#include "python.h"

#include "path.h"
#include "torch_route.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* python, python3, python3.12, and torchrun by name */
static bool python_name(const char *base)
{
    return !strcmp(base, "torchrun") || fs_route_python_name(base);
}

/* The next word of `*s` (quotes around it dropped) into out. */
static bool next_word(const char **s, char *out, size_t len)
{
    const char *p = *s + strspn(*s, " \t'\""), *end = p + strcspn(p, " \t\n'\"");

    *s = end;
    if (end == p || (size_t)(end - p) >= len) return false;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = '\0';
    return true;
}

/* The interpreter path a script's first two lines name: `#!/path/python`,
 * `#!/usr/bin/env [-S] [VAR=x] python3` (found on PATH), or a shell
 * trampoline that execs Python on its second line (pip's `'''exec'
 * /path/python`, `exec python3 ...`). */
static bool script_interpreter(const char *line1, const char *line2, char *out, size_t len)
{
    char word[PATH_MAX];
    const char *p = line1 + 2, *exec;

    if (!next_word(&p, word, sizeof word)) return false;
    if (!strcmp(fs_base_name(word), "env"))
        while (next_word(&p, word, sizeof word) && (word[0] == '-' || strchr(word, '=')))
            ;
    if (fs_route_python_name(fs_base_name(word))) return fs_path_resolve(word, out, len);
    if (!(exec = strstr(line2, "exec"))) return false;
    p = exec + 4;
    return next_word(&p, word, sizeof word) && fs_route_python_name(fs_base_name(word)) &&
           fs_path_resolve(word, out, len);
}

/* The python on PATH, which the launcher runs a .py file under that cannot
 * run by itself (cli/exec.c). */
static void python_on_path(char *interp)
{
    if (!fs_path_resolve("python3", interp, PATH_MAX) &&
        !fs_path_resolve("python", interp, PATH_MAX))
        interp[0] = '\0';
}

/* A script run by Python: a .py file, a #! line that names Python, or pip's
 * /bin/sh trampoline for long interpreter paths (`'''exec' /path/python ...`
 * on the second line). `interp` gets the interpreter where it can be told. */
static bool python_script(const char *cmd, char *interp)
{
    char path[PATH_MAX], line1[512] = "", line2[512] = "";
    bool dot_py, shebang;
    FILE *f;

    if (!fs_path_resolve(cmd, path, sizeof path)) return false;
    dot_py = strlen(path) > 3 && !strcmp(path + strlen(path) - 3, ".py");
    if (!(f = fopen(path, "r"))) {
        if (dot_py) python_on_path(interp);
        return dot_py;
    }
    if (fgets(line1, sizeof line1, f) && !fgets(line2, sizeof line2, f)) line2[0] = '\0';
    fclose(f);
    shebang = !strncmp(line1, "#!", 2);
    if (shebang && access(path, X_OK) == 0 && script_interpreter(line1, line2, interp, PATH_MAX))
        return true;
    if (dot_py) {
        python_on_path(interp);
        return true;
    }
    return shebang &&
           (strstr(line1, "python") || (strstr(line2, "exec") && strstr(line2, "python")));
}

static bool word_runs_python(const char *word, char *interp)
{
    if (fs_route_python_name(fs_base_name(word))) {
        if (!fs_path_resolve(word, interp, PATH_MAX)) interp[0] = '\0';
        return true;
    }
    return python_script(word, interp) || python_name(fs_base_name(word));
}

/* Whether a shell command line (sh -c STRING, env -S STRING) starts Python in
 * one of its commands: the first word of each command, after variable
 * assignments and the wrappers exec, env, nohup, time and command. */
static bool shell_string_runs_python(const char *s, char *interp)
{
    static const char separators[] = ";&|()\n";
    static const char *const wrappers[] = {"exec", "env", "nohup", "time", "command"};
    char *buf = strdup(s), *p = buf;
    bool command_position = true, found = false;

    if (!buf) return false;
    while (*p && !found) {
        if (strchr(separators, *p)) {
            command_position = true;
            p++;
            continue;
        }
        if (isspace((unsigned char)*p)) {
            p++;
            continue;
        }
        char *word = p;
        while (*p && !isspace((unsigned char)*p) && !strchr(separators, *p))
            p++;
        char saved = *p;
        *p = '\0';
        if (command_position) {
            size_t n = strlen(word);
            bool wrapper = false;
            if ((word[0] == '"' || word[0] == '\'') && n > 1 && word[n - 1] == word[0]) {
                word[n - 1] = '\0';
                word++;
            }
            for (size_t i = 0; i < sizeof wrappers / sizeof wrappers[0]; i++)
                wrapper = wrapper || !strcmp(word, wrappers[i]);
            if (!wrapper && word[0] != '-' && !strchr(word, '=')) {
                found = word_runs_python(word, interp);
                command_position = false;
            }
        }
        *p = saved;
    }
    free(buf);
    return found;
}

static bool env_runs_python(char *const *argv, char *interp)
{
    int i = 1;

    for (; argv[i]; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "-S") || !strcmp(a, "--split-string"))
            return argv[i + 1] && shell_string_runs_python(argv[i + 1], interp);
        if (!strncmp(a, "-S", 2)) return shell_string_runs_python(a + 2, interp);
        if (!strncmp(a, "--split-string=", 15)) return shell_string_runs_python(a + 15, interp);
        if (!strcmp(a, "-u") || !strcmp(a, "-C") || !strcmp(a, "--unset") ||
            !strcmp(a, "--chdir")) {
            if (!argv[++i]) return false;
        } else if (a[0] != '-' && !strchr(a, '=')) {
            break;
        }
    }
    return argv[i] && fs_route_argv_python(argv + i, interp);
}

static bool shell_runs_python(char *const *argv, char *interp)
{
    for (int i = 1; argv[i] && argv[i][0] == '-'; i++)
        if (argv[i][1] != '-' && strchr(argv[i], 'c'))
            return argv[i + 1] && shell_string_runs_python(argv[i + 1], interp);
    return false;
}

bool fs_route_argv_python(char *const *argv, char *interp)
{
    static const char *const shells[] = {"sh", "bash", "dash", "zsh", "ksh"};
    const char *base = fs_base_name(argv[0]);

    interp[0] = '\0';
    if (word_runs_python(argv[0], interp)) return true;
    if (!strcmp(base, "env") && env_runs_python(argv, interp)) return true;
    for (size_t i = 0; i < sizeof shells / sizeof shells[0]; i++)
        if (!strcmp(base, shells[i]) && shell_runs_python(argv, interp)) return true;
    /* a launcher or wrapper (mpirun, srun, uv run, timeout, numactl, ...)
     * that starts Python by name; a false positive only sets a variable that
     * nothing else reads */
    for (int i = 1; argv[i]; i++)
        if (python_name(fs_base_name(argv[i]))) return word_runs_python(argv[i], interp);
    return false;
}

/* The interpreter as this process was started (argv[0], found on PATH as
 * the shell found it): a venv's bin/python is a link to the base
 * interpreter, so /proc/self/exe alone would miss the venv's packages. */
static void started_as(const char *exe, char *out, size_t len)
{
    char arg0[PATH_MAX] = "";
    FILE *f = fopen("/proc/self/cmdline", "r");
    size_t n = 0;

    snprintf(out, len, "%s", exe);
    if (!f) return;
    n = fread(arg0, 1, sizeof arg0 - 1, f);
    fclose(f);
    arg0[n] = '\0';
    if (!*arg0 || !fs_route_python_name(fs_base_name(arg0))) return;
    if (strchr(arg0, '/')) {
        snprintf(out, len, "%s", arg0);
        return;
    }
    bool executable = false;
    char found[PATH_MAX];
    if (fs_path_search(arg0, found, sizeof found, &executable) && executable)
        snprintf(out, len, "%s", found);
}

bool fs_route_process_python(char *python, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

    if (n <= 0) return false;
    exe[n] = '\0';
    if (!fs_route_python_name(fs_base_name(exe))) return false;
    started_as(exe, python, len);
    return true;
}
