/* note.c - the launcher's lines on stderr (fs_cli_note, cli.h), in the form
 * the preloaded library's own lines take, so that a user reads one voice:
 * "fsdpshim[PID]: ", with the rank when the job's launcher set one. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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
