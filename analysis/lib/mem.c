/* mem.c - growing arrays and running out of memory (mem.h). */
#include "mem.h"

#include "exit_status.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void fs_analysis_oom(const char *command)
{
    fprintf(stderr, "fsdpshim %s: out of memory\n", command);
    exit(FS_EXIT_BAD_INPUT);
}

void *fs_grow_at_most(void *items, size_t *cap, size_t need, size_t size, size_t limit)
{
    if (need <= *cap) return items;
    size_t c = *cap ? 2 * *cap : 64;
    while (c < need)
        c *= 2;
    if (limit && c > limit) c = limit;
    if (c > SIZE_MAX / size) fs_analysis_oom("analysis");
    char *grown = realloc(items, c * size);
    if (!grown) fs_analysis_oom("analysis");
    memset(grown + *cap * size, 0, (c - *cap) * size);
    *cap = c;
    return grown;
}
