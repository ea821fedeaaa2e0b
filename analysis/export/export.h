/* export.h - what the formats of `fsdpshim export` (export_memviz.c,
 * export_folded.c, export_chrome.c, export_perfetto.c) share with the
 * command (export.c): its options, and what output.c keeps for all of
 * them: opening a trace, where an output goes, the helpers more than one
 * format needs. */
#ifndef FS_EXPORT_H
#define FS_EXPORT_H

#include "reader.h"
#include "sites.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* memviz: the moment whose segments are written */
enum fs_export_at { FS_AT_END, FS_AT_PEAK, FS_AT_TIME };
/* folded: what a stack weighs */
enum fs_export_weight { FS_WEIGHT_PEAK, FS_WEIGHT_TOTAL, FS_WEIGHT_COUNT };

typedef struct fs_export_opts {
    const char *out; /* -o: a file, a directory or a pattern; NULL or "-": stdout */
    bool symbols;    /* native frames symbolised (libdw) */
    /* --memviz */
    size_t max_entries; /* trace entries kept per device, the newest; 0: all */
    enum fs_export_at at;
    uint64_t at_ns; /* FS_AT_TIME: ns since the trace's start */
    /* --folded */
    enum fs_site_by by;
    enum fs_export_weight weight;
    /* --chrome */
    uint64_t limit; /* events at most; 0: no limit */
} fs_export_opts;

/* output.c */

/* Opens a trace; NULL after a message on stderr. */
fs_reader *fs_export_open(const char *path);
/* The reader's warning callback: "fsdpshim export: LINE" on stderr. */
void fs_export_warn(void *ctx, const char *line);

/* The file an output of trace t (read from `trace`) goes to, into path:
 * -o as given for one output; for one output per trace, -o's %r (the rank,
 * else the pid), %p (pid), %n (the trace's file name without directory and
 * extension) and %% expanded, or DIR/NAME.EXT when -o is a directory. ""
 * for stdout. */
void fs_export_path(const fs_export_opts *o, const char *trace, const fs_reader *t, const char *ext,
                    char *path, size_t len);

/* Whether -o's value means stdout (none, or "-") / a directory (ends in
 * '/', or is one). */
bool fs_export_to_stdout(const char *out);
bool fs_export_to_directory(const char *out);

/* Opens path for writing ("" : stdout); NULL after a message. */
FILE *fs_export_create(const char *path);
/* Closes f (stdout is flushed, not closed); false after a message naming
 * path when a write failed. */
bool fs_export_finish(FILE *f, const char *path);

/* Each format: the exit status (0, FS_EXIT_BAD_INPUT). */
int fs_export_memviz(const fs_export_opts *o, int ntraces, char **traces);
int fs_export_folded(const fs_export_opts *o, int ntraces, char **traces);
int fs_export_chrome(const fs_export_opts *o, int ntraces, char **traces);
int fs_export_perfetto(const fs_export_opts *o, int ntraces, char **traces);

#endif /* FS_EXPORT_H */
