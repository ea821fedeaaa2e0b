/* exec.c - `fsdpshim run` becomes the program the way a shell runs a
 * command, so that a launch fails or succeeds exactly where the user's shell
 * would, with the shell's exit codes: 127 when nothing of that name exists,
 * 126 when it exists but cannot be run. Two conveniences on top, both for
 * what a user plainly meant: `fsdpshim run train.py` runs the train.py of the
 * working directory when PATH has none, and a Python file that cannot run by
 * itself (no #! line, or not executable) runs under the python on PATH, as
 * `python train.py` would, instead of failing under /bin/sh. */
#include "cli.h"

#include "path.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static bool has_shebang(const char *path)
{
    char magic[2] = "";
    FILE *f = fopen(path, "r");

    if (!f) return false;
    size_t n = fread(magic, 1, 2, f);
    fclose(f);
    return n == 2 && magic[0] == '#' && magic[1] == '!';
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* argv with argv[0] replaced by `first` and `path` put after it. */
static char **with_interpreter(const char *first, const char *path, char **argv)
{
    int n = 0;
    char **v;

    while (argv[n])
        n++;
    if (!(v = calloc((size_t)n + 2, sizeof *v))) return NULL;
    v[0] = (char *)first;
    v[1] = (char *)path;
    for (int i = 1; i < n; i++)
        v[i + 1] = argv[i];
    return v;
}

static int run_python_file(const char *who, const char *path, char **argv)
{
    char python[PATH_MAX];
    const char *name = "python3";
    char **v;

    if (!fs_path_search(name, python, sizeof python, NULL) || access(python, X_OK) != 0) {
        name = "python";
        if (!fs_path_search(name, python, sizeof python, NULL) || access(python, X_OK) != 0) {
            fprintf(stderr, "fsdpshim %s: %s: no python3 or python on PATH to run it\n", who, path);
            return FS_EXIT_NOT_FOUND;
        }
    }
    if (!(v = with_interpreter(name, path, argv))) return FS_EXIT_CANNOT_RUN;
    execv(python, v);
    int err = errno;
    fprintf(stderr, "fsdpshim %s: %s: %s\n", who, python, strerror(err));
    free(v);
    return err == ENOENT ? FS_EXIT_NOT_FOUND : FS_EXIT_CANNOT_RUN;
}

int fs_exec_program(const char *who, char **argv)
{
    const char *cmd = argv[0];
    char path[PATH_MAX];
    struct stat st;
    char **v;

    if (!fs_path_resolve(cmd, path, sizeof path) || stat(path, &st) != 0) {
        if (strchr(cmd, '/'))
            fprintf(stderr, "fsdpshim %s: %s: %s\n", who, cmd, strerror(errno ? errno : ENOENT));
        else
            fprintf(stderr, "fsdpshim %s: %s: command not found\n", who, cmd);
        return FS_EXIT_NOT_FOUND;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "fsdpshim %s: %s: Is a directory\n", who, path);
        return FS_EXIT_CANNOT_RUN;
    }
    if (ends_with(path, ".py") && (access(path, X_OK) != 0 || !has_shebang(path)))
        return run_python_file(who, path, argv);
    if (access(path, X_OK) != 0) {
        fprintf(stderr, "fsdpshim %s: %s: Permission denied\n", who, path);
        return FS_EXIT_CANNOT_RUN;
    }
    execv(path, argv);
    if (errno == ENOEXEC && (v = with_interpreter("sh", path, argv))) {
        /* what execvp and every shell do with a file the kernel cannot run */
        fs_cli_note("%s: %s has no #! line; running it with /bin/sh", who, path);
        execv("/bin/sh", v);
        free(v);
    }
    /* the file exists, so ENOENT here is its #! interpreter */
    fprintf(stderr, "fsdpshim %s: %s: %s%s\n", who, path,
            errno == ENOENT ? "bad interpreter: " : "", strerror(errno));
    return FS_EXIT_CANNOT_RUN;
}

/* Waits for the program as a shell does for a foreground job: the
 * terminal's SIGINT and SIGQUIT reach it directly, so the launcher ignores
 * them; a SIGTERM or SIGHUP sent to the launcher alone is passed on. */
static pid_t child_pid;

static void pass_on(int sig)
{
    if (child_pid > 0) kill(child_pid, sig);
}

int fs_wait_program(pid_t pid)
{
    struct sigaction ignore = {.sa_handler = SIG_IGN}, forward = {.sa_handler = pass_on};
    int status;

    child_pid = pid;
    sigaction(SIGINT, &ignore, NULL);
    sigaction(SIGQUIT, &ignore, NULL);
    sigaction(SIGTERM, &forward, NULL);
    sigaction(SIGHUP, &forward, NULL);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return FS_EXIT_CANNOT_RUN;
    if (!WIFSIGNALED(status)) return WEXITSTATUS(status);
    /* as a shell says it, but for the interrupt the user typed and a
     * closed pipe, which shells leave unsaid too */
    int sig = WTERMSIG(status);
    if (sig != SIGINT && sig != SIGPIPE) {
        const char *abbrev = sigabbrev_np(sig);
        fs_cli_note("the program was killed by signal %d (%s%s%s%s)%s; exit status %d", sig,
                    abbrev ? "SIG" : "", abbrev ? abbrev : "", abbrev ? ", " : "", strsignal(sig),
                    WCOREDUMP(status) ? ", core dumped" : "", 128 + sig);
    }
    return 128 + sig;
}
