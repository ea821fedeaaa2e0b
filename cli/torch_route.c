/* torch_route.c - for a Python command, `fsdpshim run` routes PyTorch through
 * the shim whatever PYTORCH_CUDA_ALLOC_CONF the user had.
 *
 * PyTorch hands every tensor allocation, with its stream, to the runtime only
 * under backend:cudaMallocAsync; with any other setting (the common
 * expandable_segments:True included) its own allocator keeps the memory and
 * the shim manages nothing. So the backend is always set, the user's keys
 * that the shim implements itself (expandable_segments, max_split_size_mb,
 * roundup_power2_divisions, garbage_collection_threshold, which that backend
 * would ignore) move into FSDPSHIM_CONF below the user's own FSDPSHIM_CONF,
 * and every other key stays for PyTorch. What changed of a user's setting is
 * said in one line (docs/cli.md). */
#include "cli.h"

#include "conf_lex.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define ROUTE_BACKEND "backend:cudaMallocAsync"

static const char *const shim_keys[] = {"expandable_segments", "max_split_size_mb",
                                        "roundup_power2_divisions", "garbage_collection_threshold"};

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* python, python3, python3.12, and torchrun by name */
static bool python_name(const char *base)
{
    if (!strcmp(base, "torchrun")) return true;
    return !strncmp(base, "python", 6) && strspn(base + 6, "0123456789.") == strlen(base + 6);
}

/* A script run by Python: a .py file, a #! line that names Python, or pip's
 * /bin/sh trampoline for long interpreter paths (`'''exec' /path/python ...`
 * on the second line). */
static bool python_script(const char *cmd)
{
    char path[PATH_MAX], line1[512] = "", line2[512] = "";
    FILE *f;

    if (!fs_exec_resolve(cmd, path, sizeof path)) return false;
    if (strlen(path) > 3 && !strcmp(path + strlen(path) - 3, ".py")) return true;
    if (!(f = fopen(path, "r"))) return false;
    if (fgets(line1, sizeof line1, f) && !fgets(line2, sizeof line2, f)) line2[0] = '\0';
    fclose(f);
    if (strncmp(line1, "#!", 2)) return false;
    return strstr(line1, "python") || (strstr(line2, "exec") && strstr(line2, "python"));
}

static bool word_runs_python(const char *word)
{
    return python_name(base_name(word)) || python_script(word);
}

/* Whether a shell command line (sh -c STRING, env -S STRING) starts Python in
 * one of its commands: the first word of each command, after variable
 * assignments and the wrappers exec, env, nohup, time and command. */
static bool shell_string_runs_python(const char *s)
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
                found = word_runs_python(word);
                command_position = false;
            }
        }
        *p = saved;
    }
    free(buf);
    return found;
}

static bool env_runs_python(char *const *argv)
{
    int i = 1;

    for (; argv[i]; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "-S") || !strcmp(a, "--split-string"))
            return argv[i + 1] && shell_string_runs_python(argv[i + 1]);
        if (!strncmp(a, "-S", 2)) return shell_string_runs_python(a + 2);
        if (!strncmp(a, "--split-string=", 15)) return shell_string_runs_python(a + 15);
        if (!strcmp(a, "-u") || !strcmp(a, "-C") || !strcmp(a, "--unset") ||
            !strcmp(a, "--chdir")) {
            if (!argv[++i]) return false;
        } else if (a[0] != '-' && !strchr(a, '=')) {
            break;
        }
    }
    return argv[i] && fs_torch_is_python(argv + i);
}

static bool shell_runs_python(char *const *argv)
{
    for (int i = 1; argv[i] && argv[i][0] == '-'; i++)
        if (argv[i][1] != '-' && strchr(argv[i], 'c'))
            return argv[i + 1] && shell_string_runs_python(argv[i + 1]);
    return false;
}

bool fs_torch_is_python(char *const *argv)
{
    static const char *const shells[] = {"sh", "bash", "dash", "zsh", "ksh"};
    const char *base = base_name(argv[0]);

    if (word_runs_python(argv[0])) return true;
    if (!strcmp(base, "env") && env_runs_python(argv)) return true;
    for (size_t i = 0; i < sizeof shells / sizeof shells[0]; i++)
        if (!strcmp(base, shells[i]) && shell_runs_python(argv)) return true;
    /* a launcher or wrapper (mpirun, srun, uv run, timeout, numactl, ...)
     * that starts Python by name; a false positive only sets a variable that
     * nothing else reads */
    for (int i = 1; argv[i]; i++)
        if (python_name(base_name(argv[i]))) return true;
    return false;
}

static bool is_shim_key(const char *key)
{
    for (size_t i = 0; i < sizeof shim_keys / sizeof shim_keys[0]; i++)
        if (!strcmp(key, shim_keys[i])) return true;
    return false;
}

static void append(char *buf, size_t len, const char *key, const char *value)
{
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, "%s%s%s%s", n ? "," : "", key, value ? ":" : "", value ? value : "");
}

static int set(const char *name, const char *value)
{
    if (setenv(name, value, 1) == 0) return 0;
    fprintf(stderr, "fsdpshim run: cannot set %s: %s\n", name, strerror(errno));
    return -1;
}

int fs_torch_route(const char *shim_conf_in, char **shim_conf)
{
    const char *user = getenv("PYTORCH_CUDA_ALLOC_CONF");
    char *copy, *torch, *taken, *kept, *ignored, *cur, *key, *value, backend[64] = "";
    bool any = false, routed = false; /* routed: the user's setting names the backend */
    size_t len;
    int rc = -1;

    *shim_conf = NULL;
    if (!user) user = "";
    len = strlen(user) + sizeof ROUTE_BACKEND + 2;
    copy = strdup(user);
    torch = calloc(1, len);
    taken = calloc(1, len);
    kept = calloc(1, len);
    ignored = calloc(1, len);
    if (!copy || !torch || !taken || !kept || !ignored) {
        fprintf(stderr, "fsdpshim run: out of memory\n");
        goto out;
    }
    fs_conf_squeeze(copy);
    append(torch, len, ROUTE_BACKEND, NULL);
    for (cur = copy; fs_conf_next(&cur, &key, &value);) {
        any = true;
        if (value && !strcmp(key, "backend")) {
            routed = !strcmp(value, "cudaMallocAsync");
            if (!routed) snprintf(backend, sizeof backend, "%s", value);
        } else if (value && is_shim_key(key)) {
            if (fs_conf_sets(shim_conf_in, key))
                append(kept, len, key, NULL);
            else
                append(taken, len, key, value);
        } else {
            /* PyTorch's own keys (and anything it alone must judge) */
            append(torch, len, key, value);
            append(ignored, len, key, NULL);
        }
    }
    if (set("PYTORCH_CUDA_ALLOC_CONF", torch)) goto out;
    if (*taken) {
        size_t n = strlen(taken) + (shim_conf_in ? strlen(shim_conf_in) : 0) + 2;
        if (!(*shim_conf = malloc(n))) goto out;
        snprintf(*shim_conf, n, "%s%s%s", taken, shim_conf_in && *shim_conf_in ? "," : "",
                 shim_conf_in && *shim_conf_in ? shim_conf_in : "");
    }
    if (any && (!routed || *taken || *kept))
        fs_cli_note("run: PYTORCH_CUDA_ALLOC_CONF '%s' is now '%s' so that PyTorch hands its "
                    "allocations to the shim%s%s%s%s%s%s%s%s%s",
                    user, torch, *backend ? " (instead of backend:" : "", backend,
                    *backend ? ")" : "", *taken ? "; the shim takes " : "", taken,
                    *kept ? "; FSDPSHIM_CONF's own value kept for " : "", kept,
                    *ignored ? "; ignored by the shim, left to PyTorch: " : "", ignored);
    rc = 0;
out:
    free(copy);
    free(torch);
    free(taken);
    free(kept);
    free(ignored);
    return rc;
}
