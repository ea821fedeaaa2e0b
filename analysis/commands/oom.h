/* oom.h - why a trace's out-of-memory failures happened: what `report`
 * says under each failure (docs/cli.md, "Explaining an out-of-memory
 * failure"). */
#ifndef FS_OOM_H
#define FS_OOM_H

#include "sites.h"

#include <stdbool.h>
#include <stdio.h>

/* The failures explained per trace; the rest are counted by report. */
#define FS_OOM_EXPLAINED 4

/* The longest cause, in one sentence (the line after "why: "). */
#define FS_OOM_WHY_LEN 512

typedef struct fs_oom_options {
    fs_symbols *sym; /* NULL: native frames as MODULE+0xOFFSET */
    size_t holders;  /* the top live holders listed, by stack and by annotation */
    bool full;       /* --full-stacks: stacks with their plumbing frames (fold.h) */
    void (*warn)(void *ctx, const char *line); /* lines for stderr; NULL: none */
    void *warn_ctx;
    /* The cause of each of the trace's first `nwhy` failures, in time
     * order, into why[i], the sentence the text prints after "why: " (""
     * for the failures the trace does not have); NULL: not asked. */
    char (*why)[FS_OOM_WHY_LEN];
    size_t nwhy;
} fs_oom_options;

/* Explains the first FS_OOM_EXPLAINED failures of trace (or OOM snapshot)
 * `path` on out: the request and its call site, the device's and the
 * cache's memory then (by stream, pending frees, and where the free bytes
 * lay: in segments the request could take or in ones it never takes), the
 * cause, the live holders by stack and by annotation at that moment, and,
 * for a trace, which of the settings that bear on the causes would have
 * avoided each failure, found by replaying the trace (replay.h), with the
 * one that serves every request in the least memory. Prints nothing for a
 * trace without one. False, with one line to warn, when the file cannot be
 * read. */
bool fs_oom_explain(FILE *out, const char *path, const fs_oom_options *opt);

#endif /* FS_OOM_H */
