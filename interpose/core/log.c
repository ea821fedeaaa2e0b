/* log.c - the shim's diagnostics on stderr.
 *
 * FSDPSHIM_LOG=error|warn|info|debug [warn] picks the level once. Every line
 * starts "fsdpshim[PID]: ", or "fsdpshim[PID rank R]: " in a job that names
 * the process's rank, so that the lines of several ranks sharing a terminal
 * can be told apart. Messages go out in one write() each so that lines from
 * several threads (or ranks) never interleave mid-line, and no stdio lock is
 * taken inside a program's CUDA call. */
#include "shim.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static int log_level = -1;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static char rank_label[24]; /* " rank R", or empty */

/* The rank as the launchers name it: torchrun (RANK, LOCAL_RANK), Open MPI,
 * MPICH and Slurm; only a plain decimal is taken. */
static void rank_init(void)
{
    static const char *const vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
                                       "LOCAL_RANK"};

    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v && strlen(v) <= 9 && strspn(v, "0123456789") == strlen(v)) {
            snprintf(rank_label, sizeof rank_label, " rank %s", v);
            return;
        }
    }
}

static void log_init(void)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    const char *env = getenv("FSDPSHIM_LOG");
    int level = FS_LOG_WARN;
    bool bad = false;

    rank_init();

    if (env && *env) {
        bad = true;
        for (int i = 0; i < 4; i++)
            if (strcasecmp(env, names[i]) == 0) {
                level = i;
                bad = false;
            }
    }
    __atomic_store_n(&log_level, level, __ATOMIC_RELEASE);
    if (bad)
        fs_log(FS_LOG_WARN, "FSDPSHIM_LOG=%s is not one of error|warn|info|debug; using warn", env);
}

bool fs_log_enabled(enum fs_log_level level)
{
    int cur = __atomic_load_n(&log_level, __ATOMIC_ACQUIRE);
    if (fs_unlikely(cur < 0)) {
        pthread_once(&log_once, log_init);
        cur = __atomic_load_n(&log_level, __ATOMIC_ACQUIRE);
    }
    return (int)level <= cur;
}

void fs_log(enum fs_log_level level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    if (!fs_log_enabled(level)) return;
    /* getpid() each time: a forked child's lines carry its own pid */
    n = snprintf(line, sizeof line, "fsdpshim[%d%s]: ", (int)getpid(), rank_label);
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* stderr is best effort: a closed descriptor must not disturb the program */
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}
