/* torch_route.c - which environment routes PyTorch through the shim, for
 * the PyTorch version the process will import (torch_route.h).
 *
 * PyTorch hands every tensor allocation, with its stream, to the runtime only
 * under backend:cudaMallocAsync; with any other setting (the common
 * expandable_segments:True included) its own allocator keeps the memory and
 * the shim manages nothing. So the backend is always set, the user's keys
 * that the shim implements itself (expandable_segments, max_split_size_mb,
 * roundup_power2_divisions, garbage_collection_threshold, which that backend
 * would ignore) move into FSDPSHIM_CONF below the user's own FSDPSHIM_CONF,
 * and every other key stays for PyTorch.
 *
 * PyTorch 2.15 made its nccl2 process group (torch/csrc/distributed/c10d/
 * nccl2) the default behind "nccl" (2.14 had it behind
 * TORCH_DIST_USE_NCCL2=1). At init it builds NcclCachingAllocatorHook, whose
 * registerMemPreHook asks the allocator for a snapshot; the cudaMallocAsync
 * backend refuses with an exception, and the job dies in std::terminate. The
 * hook is unconditional there, while the previous ProcessGroupNCCL attaches
 * one only under TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK (off by
 * default), and TORCH_DIST_USE_NCCL2=0 selects it (distributed_c10d.py reads
 * the variable once, at import). So on such a version the route sets
 * TORCH_DIST_USE_NCCL2=0 unless the user set it; a user's explicit choice of
 * nccl2 is kept, and then PyTorch's own allocator stays in charge, said.
 *
 * By default (torch_route:adapter, or unset) the route is the other one
 * where an adapter for the PyTorch found exists or can be built
 * (docs/pytorch.md): PyTorch's own allocator interface served by the shim
 * through fsdpshim's adapter, which the shim installs when PyTorch loads.
 * PyTorch's backend and process group are then left as the user has them
 * (the adapter serves what nccl2 asks), the user's shim keys are carried as
 * on the other route, and the line names the adapter; without one, the line
 * says why and the cudaMallocAsync route above is taken, as it is at once
 * under torch_route:async. By default an interpreter whose PyTorch the route
 * cannot name (no torch/version.py with its git hash) gets the
 * cudaMallocAsync route silently.
 *
 * PYTORCH_NO_CUDA_MEMORY_CACHING=1 is a route of its own: PyTorch's native
 * allocator then hands every tensor to cudaMalloc and cudaFree (no stream),
 * which the shim serves, while under backend:cudaMallocAsync that variable
 * means nothing. The user asked for it, so PyTorch's backend is left alone
 * and the line says so (nothing else needs changing: the nccl2 hook's
 * snapshot works with the native backend). */
#include "torch_route.h"

#include "conf_lex.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define ROUTE_BACKEND "backend:cudaMallocAsync"
#define NCCL2_VAR     "TORCH_DIST_USE_NCCL2"

static const char *const shim_keys[] = {"expandable_segments", "max_split_size_mb",
                                        "roundup_power2_divisions", "garbage_collection_threshold"};

bool fs_route_python_name(const char *base)
{
    return !strncmp(base, "python", 6) && strspn(base + 6, "0123456789.") == strlen(base + 6);
}

/* "__version__ = '2.15.0+cu132'" in torch/version.py */
static bool read_version(const char *file, char *text, size_t len, int *major, int *minor)
{
    char line[256];
    FILE *f = fopen(file, "r");
    bool found = false;

    if (!f) return false;
    while (!found && fgets(line, sizeof line, f)) {
        char *q, *end;
        if (strncmp(line, "__version__", 11) || !(q = strpbrk(line, "'\""))) continue;
        if (!(end = strchr(q + 1, *q))) continue;
        *end = '\0';
        found = sscanf(q + 1, "%d.%d", major, minor) == 2;
        if (found) snprintf(text, len, "%s", q + 1);
    }
    fclose(f);
    return found;
}

/* The quoted value of `name = '...'` in a version.py line, in place. */
static const char *quoted_value(char *line, const char *name)
{
    size_t n = strlen(name);
    char *q, *end;

    if (strncmp(line, name, n) || !strchr(" =:", line[n]) || !(q = strpbrk(line + n, "'\"")))
        return NULL;
    if (!(end = strchr(q + 1, *q))) return NULL;
    *end = '\0';
    return q + 1;
}

bool fs_route_torch_key(const char *torch_dir, char *key, size_t len)
{
    char file[PATH_MAX + 16], line[256], version[128] = "", git[128] = "";
    const char *v;
    FILE *f;

    snprintf(file, sizeof file, "%s/version.py", torch_dir);
    if (!(f = fopen(file, "r"))) return false;
    while (fgets(line, sizeof line, f)) {
        if ((v = quoted_value(line, "__version__")))
            snprintf(version, sizeof version, "%s", v);
        else if ((v = quoted_value(line, "git_version")))
            snprintf(git, sizeof git, "%s", v);
    }
    fclose(f);
    if (!*version || !*git) return false;
    snprintf(key, len, "%s@%s", version, git);
    return true;
}

/* The torch package directory of the last version_in that found one: the
 * lookups below run in one thread, at the process's start. */
static char found_dir[PATH_MAX + 8];

/* torch/version.py in the first directory matching `pattern` that has one */
static bool version_in(const char *pattern, char *text, size_t len, int *major, int *minor)
{
    char file[PATH_MAX + 32];
    glob_t g;
    bool found = false;

    if (glob(pattern, GLOB_NOSORT, NULL, &g) != 0) return false;
    for (size_t i = 0; i < g.gl_pathc && !found; i++) {
        snprintf(file, sizeof file, "%s/torch/version.py", g.gl_pathv[i]);
        found = read_version(file, text, len, major, minor);
        if (found) snprintf(found_dir, sizeof found_dir, "%s/torch", g.gl_pathv[i]);
    }
    globfree(&g);
    return found;
}

/* The site-packages directories of the prefix `prefix`, as CPython's site
 * module lists them (Debian's dist-packages too). */
static bool version_in_prefix(const char *prefix, char *text, size_t len, int *major, int *minor)
{
    static const char *const layouts[] = {
        "lib/python3*/site-packages", "lib/python3*/dist-packages",
        "local/lib/python3*/dist-packages", "lib64/python3*/site-packages"};
    char pattern[PATH_MAX + 64];

    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        snprintf(pattern, sizeof pattern, "%s/%s", prefix, layouts[i]);
        if (version_in(pattern, text, len, major, minor)) return true;
    }
    return false;
}

/* path's parent directory, in place ("/" stays "/") */
static void parent(char *path)
{
    char *slash = strrchr(path, '/');

    if (!slash)
        snprintf(path, 2, ".");
    else
        slash[slash == path] = '\0';
}

/* Whether the venv at `prefix` (a pyvenv.cfg there) sees the base
 * interpreter's packages too: include-system-site-packages = true. */
static bool venv_includes_system(const char *cfg)
{
    char line[512];
    FILE *f = fopen(cfg, "r");
    bool yes = false;

    if (!f) return false;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "include-system-site-packages", 28) && strstr(line, "true")) yes = true;
    fclose(f);
    return yes;
}

bool fs_route_torch_version(const char *python, char *text, size_t len, int *major, int *minor)
{
    const char *pythonpath = getenv("PYTHONPATH"), *home = getenv("HOME");
    char venv[PATH_MAX], cfg[PATH_MAX + 16], real[PATH_MAX], pattern[PATH_MAX + 64];

    if (pythonpath && *pythonpath) {
        char *copy = strdup(pythonpath), *save = NULL;
        bool found = false;
        for (char *p = copy ? strtok_r(copy, ":", &save) : NULL; p && !found;
             p = strtok_r(NULL, ":", &save))
            found = version_in(p, text, len, major, minor);
        free(copy);
        if (found) return true;
    }
    if (!python || !*python || strlen(python) >= sizeof venv) return false;
    /* a venv: pyvenv.cfg next to bin/ (or next to the interpreter) */
    snprintf(venv, sizeof venv, "%s", python);
    parent(venv);
    for (int up = 0; up < 2; up++) {
        snprintf(cfg, sizeof cfg, "%s/pyvenv.cfg", venv);
        if (access(cfg, R_OK) == 0) {
            if (version_in_prefix(venv, text, len, major, minor)) return true;
            if (!venv_includes_system(cfg)) return false;
            break;
        }
        parent(venv);
    }
    if (home && *home && !getenv("PYTHONNOUSERSITE")) {
        snprintf(pattern, sizeof pattern, "%s/.local/lib/python3*/site-packages", home);
        if (version_in(pattern, text, len, major, minor)) return true;
    }
    /* the interpreter's own prefix: the parent of the bin/ it really is in */
    if (!realpath(python, real)) return false;
    parent(real);
    parent(real);
    return version_in_prefix(real, text, len, major, minor);
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

/* one more clause of the note, after "; " */
static void add_note(char *note, size_t len, const char *text)
{
    size_t n = strlen(note);
    snprintf(note + n, len - n, "%s%s", n ? "; " : "", text);
}

static int set(const char *name, const char *value, char *note, size_t note_len)
{
    if (setenv(name, value, 1) == 0) return 0;
    snprintf(note, note_len, "cannot set %s: %s", name, strerror(errno));
    return -1;
}

/* Whether PyTorch `major.minor` builds nccl2 behind "nccl" with the user's
 * TORCH_DIST_USE_NCCL2 `value` (NULL unset): the default from 2.15 unless
 * "0", opt-in with "1" in 2.14; unknown to older versions. */
static bool selects_nccl2(int major, int minor, const char *value)
{
    if (major > 2 || (major == 2 && minor >= 15)) return !value || strcmp(value, "0");
    return major == 2 && minor == 14 && value && !strcmp(value, "1");
}

/* FSDPSHIM_CONF's torch_route, the last setting winning as the shim reads
 * it: ROUTE_DEFAULT when unset, which takes the adapter where there is one
 * and says nothing when the interpreter has no PyTorch to build one for. */
enum route_choice { ROUTE_DEFAULT, ROUTE_ADAPTER, ROUTE_ASYNC };

static enum route_choice route_choice(const char *shim_conf)
{
    char *copy, *cur, *key, *value;
    enum route_choice r = ROUTE_DEFAULT;

    if (!shim_conf || !(copy = strdup(shim_conf))) return r;
    fs_conf_squeeze(copy);
    for (cur = copy; fs_conf_next(&cur, &key, &value);)
        if (value && !strcmp(key, "torch_route"))
            r = !strcmp(value, "adapter") ? ROUTE_ADAPTER : ROUTE_ASYNC;
    free(copy);
    return r;
}

/* Where adapters built on first use are kept: FSDPSHIM_TORCH_CACHE, else
 * $XDG_CACHE_HOME/fsdpshim/torch, else ~/.cache/fsdpshim/torch; under it
 * <PyTorch key>/<hash of the adapter sources>/. */
static void cache_root(char *out, size_t len)
{
    const char *own = getenv("FSDPSHIM_TORCH_CACHE"), *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");

    if (own && *own)
        snprintf(out, len, "%s", own);
    else if (xdg && *xdg)
        snprintf(out, len, "%s/fsdpshim/torch", xdg);
    else
        snprintf(out, len, "%s/.cache/fsdpshim/torch", home && *home ? home : "/tmp");
}

/* mkdir -p */
static void make_dirs(const char *path)
{
    char buf[PATH_MAX];

    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(buf, 0755);
        *p = '/';
    }
    mkdir(buf, 0755);
}

/* Builds the adapter for the PyTorch python imports into dir with the
 * sources installed beside libfsdpshim.so (share/fsdpshim/torch-adapter,
 * build.sh: PyTorch's headers and the system's C++ compiler, under a lock
 * so that ranks starting together build it once), the compiler's output in
 * dir/build.log. The program waits: about half a minute, once per PyTorch
 * build. The shim is not preloaded into the build. */
static bool build_adapter(const char *python, const char *lib_dir, const char *dir, char *why,
                          size_t why_len)
{
    char script[PATH_MAX + 64], log[PATH_MAX + 16];
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int status = 0, n = 0;

    snprintf(script, sizeof script, "%s/../share/fsdpshim/torch-adapter/build.sh",
             lib_dir ? lib_dir : ".");
    if (access(script, R_OK) != 0) {
        snprintf(why, why_len, "and no adapter sources to build one (%s: %s)", script,
                 strerror(errno));
        return false;
    }
    make_dirs(dir);
    snprintf(log, sizeof log, "%s/build.log", dir);
    for (char **e = environ; *e; e++)
        n++;
    char **env = calloc((size_t)n + 1, sizeof *env);
    if (!env) {
        snprintf(why, why_len, "and no memory to build one");
        return false;
    }
    n = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11)) env[n++] = *e;
    char *argv[] = {"/bin/sh", script, (char *)python, (char *)dir, NULL};
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int err = posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    if (err) {
        snprintf(why, why_len, "and building one failed to start (%s)", strerror(err));
        return false;
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(why, why_len, "and building one failed (%s)", log);
        return false;
    }
    return true;
}

/* The adapter for the PyTorch in found_dir, into path: the user's
 * FS_ROUTE_ADAPTER_VAR, else the one built beside libfsdpshim.so, else one
 * built on first use and cached (*built says it was built now). False,
 * with why, when there is none. */
static bool find_adapter(const char *python, const char *lib_dir, char *path, size_t len,
                         bool *built, char *why, size_t why_len)
{
    const char *own = getenv(FS_ROUTE_ADAPTER_VAR);
    char key[320], dir[PATH_MAX], how[PATH_MAX + 128] = "";

    if (own && *own) {
        snprintf(path, len, "%s", own);
        if (access(path, R_OK) == 0) return true;
        snprintf(why, why_len, "%s=%s: %s", FS_ROUTE_ADAPTER_VAR, own, strerror(errno));
        return false;
    }
    if (!*found_dir || !fs_route_torch_key(found_dir, key, sizeof key)) {
        snprintf(why, why_len,
                 "no PyTorch with a version.py (and its git_version) found for the "
                 "interpreter");
        return false;
    }
    snprintf(path, len, "%s/torch/%s/libfsdpshim_torch.so", lib_dir ? lib_dir : ".", key);
    if (access(path, R_OK) == 0) return true;
    /* per PyTorch build and per adapter source: another fsdpshim's build is
     * never loaded */
    cache_root(dir, sizeof dir - 350);
    size_t used = strlen(dir);
    snprintf(dir + used, sizeof dir - used, "/%s/%s", key, FS_TORCH_ADAPTER_SOURCES);
    snprintf(path, len, "%s/libfsdpshim_torch.so", dir);
    if (access(path, R_OK) == 0) return true;
    if (build_adapter(python, lib_dir, dir, how, sizeof how) && access(path, R_OK) == 0) {
        *built = true;
        return true;
    }
    snprintf(why, why_len, "no adapter built for PyTorch %s, %s", key,
             *how ? how : "and the build made none");
    return false;
}

/* PYTORCH_NO_CUDA_MEMORY_CACHING as PyTorch reads it (c10::utils::check_env):
 * on only when exactly "1". */
static bool no_caching(void)
{
    const char *v = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
    return v && !strcmp(v, "1");
}

int fs_route_torch(const char *python, const char *lib_dir, const char *shim_conf_in,
                   char **shim_conf, char *note, size_t note_len)
{
    /* PyTorch (2.9 and later) reads PYTORCH_ALLOC_CONF only when
     * PYTORCH_CUDA_ALLOC_CONF is unset: the route sets the latter, so the
     * user's setting is whichever of the two PyTorch would have read. */
    const char *user_var = "PYTORCH_CUDA_ALLOC_CONF", *user = getenv(user_var);
    const char *nccl2 = getenv(NCCL2_VAR);
    char *copy, *torch, *taken, *kept, *ignored, *cur, *key, *value, backend[64] = "";
    char version[64] = "", adapter[PATH_MAX + 384] = "", no_adapter[PATH_MAX + 512] = "";
    bool any = false, routed = false; /* routed: the user's setting names the backend */
    bool use_adapter = false, built = false;
    int major = 0, minor = 0, rc = -1;
    size_t len;

    *shim_conf = NULL;
    note[0] = '\0';
    if (set(FS_ROUTE_MARK, "1", note, note_len)) return -1;
    if (no_caching()) {
        unsetenv(FS_ROUTE_ADAPTER_VAR); /* no route: nothing for the shim to install */
        snprintf(note, note_len,
                 "PYTORCH_NO_CUDA_MEMORY_CACHING=1: PyTorch's allocator backend left as it is; "
                 "it hands every tensor to cudaMalloc/cudaFree, which the shim serves");
        return 0;
    }
    found_dir[0] = '\0';
    bool have_version = fs_route_torch_version(python, version, sizeof version, &major, &minor);
    enum route_choice choice = route_choice(shim_conf_in);
    char torch_key[320];
    /* by default only for a PyTorch the route can name: an interpreter
     * without one is left alone, silently, as before */
    if (choice == ROUTE_ADAPTER || (choice == ROUTE_DEFAULT && *found_dir &&
                                    fs_route_torch_key(found_dir, torch_key, sizeof torch_key)))
        use_adapter = find_adapter(python, lib_dir, adapter, sizeof adapter, &built, no_adapter,
                                   sizeof no_adapter);
    /* the shim installs whatever FS_ROUTE_ADAPTER_VAR names: only on this route */
    if (!use_adapter) unsetenv(FS_ROUTE_ADAPTER_VAR);
    /* the adapter serves what nccl2's allocator hook asks (snapshot, trace
     * trackers): PyTorch's process group is left as the user has it */
    if (have_version && !use_adapter && selects_nccl2(major, minor, nccl2)) {
        if (nccl2) {
            /* the user's explicit choice of nccl2 stands; the cudaMallocAsync
             * backend would abort it, so PyTorch keeps its allocator */
            snprintf(note, note_len,
                     "PyTorch %s with %s=%s (nccl2 process group, which aborts at "
                     "init_process_group under " ROUTE_BACKEND
                     "): PYTORCH_CUDA_ALLOC_CONF left as it is, PyTorch's allocator stays in "
                     "charge and the shim serves only its segments; unset %s or set it to 0 to "
                     "route PyTorch through the shim",
                     version, NCCL2_VAR, nccl2, NCCL2_VAR);
            return 0;
        }
        if (set(NCCL2_VAR, "0", note, note_len)) return -1;
        snprintf(note, note_len,
                 "%s=0 for PyTorch %s: its default NCCL process group (nccl2) aborts at "
                 "init_process_group under " ROUTE_BACKEND
                 ", the previous ProcessGroupNCCL does not",
                 NCCL2_VAR, version);
    }
    if (use_adapter && set(FS_ROUTE_ADAPTER_VAR, adapter, note, note_len)) return -1;

    if (!user && (user = getenv("PYTORCH_ALLOC_CONF"))) user_var = "PYTORCH_ALLOC_CONF";
    if (!user) user = "";
    len = strlen(user) + sizeof ROUTE_BACKEND + 2;
    copy = strdup(user);
    torch = calloc(1, len);
    taken = calloc(1, len);
    kept = calloc(1, len);
    ignored = calloc(1, len);
    if (!copy || !torch || !taken || !kept || !ignored) {
        snprintf(note, note_len, "out of memory");
        goto out;
    }
    fs_conf_squeeze(copy);
    if (!use_adapter) append(torch, len, ROUTE_BACKEND, NULL);
    for (cur = copy; fs_conf_next(&cur, &key, &value);) {
        any = true;
        if (value && !strcmp(key, "backend") && use_adapter) {
            append(torch, len, key, value); /* the user's backend: the adapter steps aside */
        } else if (value && !strcmp(key, "backend")) {
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
    if (*torch) {
        if (set("PYTORCH_CUDA_ALLOC_CONF", torch, note, note_len)) goto out;
    } else {
        /* nothing left for PyTorch (the adapter's route, every key the
         * shim's): unset rather than empty, which PyTorch reads as unset
         * but some of its users' code does not (its test helpers raise on
         * an empty value) */
        unsetenv("PYTORCH_CUDA_ALLOC_CONF");
        unsetenv("PYTORCH_ALLOC_CONF");
    }
    if (*taken) {
        size_t n = strlen(taken) + (shim_conf_in ? strlen(shim_conf_in) : 0) + 2;
        if (!(*shim_conf = malloc(n))) {
            snprintf(note, note_len, "out of memory");
            goto out;
        }
        snprintf(*shim_conf, n, "%s%s%s", taken, shim_conf_in && *shim_conf_in ? "," : "",
                 shim_conf_in && *shim_conf_in ? shim_conf_in : "");
    }
    if (use_adapter) {
        char line[PATH_MAX + 512];
        snprintf(line, sizeof line, "PyTorch's allocator: fsdpshim's adapter (%s%s)%s%s%s%s",
                 adapter, built ? ", built now for this PyTorch and kept" : "",
                 *taken ? "; the shim takes " : "", taken,
                 *kept ? "; FSDPSHIM_CONF's own value kept for " : "", kept);
        add_note(note, note_len, line);
    } else if (any && (!routed || *taken || *kept)) {
        char line[2048];
        snprintf(line, sizeof line,
                 "%s '%s' is now %s'%s' so that PyTorch hands its allocations to the "
                 "shim%s%s%s%s%s%s%s%s%s",
                 user_var, user,
                 strcmp(user_var, "PYTORCH_CUDA_ALLOC_CONF") ? "PYTORCH_CUDA_ALLOC_CONF " : "",
                 torch, *backend ? " (instead of backend:" : "", backend, *backend ? ")" : "",
                 *taken ? "; the shim takes " : "", taken,
                 *kept ? "; FSDPSHIM_CONF's own value kept for " : "", kept,
                 *ignored ? "; ignored by the shim, left to PyTorch: " : "", ignored);
        add_note(note, note_len, line);
    }
    if (*no_adapter) {
        char line[PATH_MAX + 600];
        snprintf(line, sizeof line,
                 "fsdpshim's PyTorch adapter: %s; PyTorch goes by " ROUTE_BACKEND, no_adapter);
        add_note(note, note_len, line);
    }
    rc = 0;
out:
    if (rc) {
        free(*shim_conf);
        *shim_conf = NULL;
    }
    free(copy);
    free(torch);
    free(taken);
    free(kept);
    free(ignored);
    return rc;
}
