/* sites.h - what the commands that group allocations share: the sites
 * (groups of allocations with the same stack, top frame, annotation or
 * Python stack, merged across the files of one job by their text), and the
 * table of live blocks by address.
 *
 * A site's text is rendered once per definition id and file (ids differ
 * between files), so a trace of millions of allocations renders only its
 * unique stacks. The live blocks' table is live_blocks.h's. */
#ifndef FS_SITES_H
#define FS_SITES_H

#include "live_blocks.h"
#include "mem.h"
#include "reader.h"
#include "render.h"
#include "symbols.h"
#include "text_index.h"
#include "u64map.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum fs_site_by { FS_BY_STACK, FS_BY_FRAME, FS_BY_ANNOT, FS_BY_PYTHON };

/* The index of arg among the n names a grouping option takes (--by,
 * --sort, --weight), -1 when it is none of them. */
int fs_site_choice(const char *arg, const char *const *names, int n);
/* "stack", "frame", "annotation" or "python". */
bool fs_site_by_parse(const char *arg, enum fs_site_by *out);

/* fs_getopt (cmdline.h) over a grouping command's arguments (short
 * options -h and -n N; longopts with --by as 'b', --no-symbols as 'N' and
 * --full-stacks as 'W' among them), applying --by, -n, --no-symbols and
 * --full-stacks itself: the next of the command's own options,
 * FS_GETOPT_BAD after a line naming a bad option or value, -1 at the end. */
int fs_site_getopt(int argc, char *const *argv, const struct option *longopts, enum fs_site_by *by,
                   size_t *limit, bool *symbols, bool *full);
/* For a value of `option` that is none of the n names: one line naming it
 * and the choices ("--sort 'x': not peak, count or total"); the usage
 * status. */
int fs_site_bad(const char *command, const char *option, const char *arg, const char *const *names,
                int n);
const char *fs_site_by_name(enum fs_site_by by);

typedef struct fs_site {
    char *key;     /* frames one per line, or a path */
    uint64_t hash; /* fs_hash_text(key) */
    uint64_t peak, count, total, temporary, live, live_bytes;
    uint32_t ranks;     /* how many files contributed */
    uint32_t last_file; /* the file that last counted in ranks */
    bool suppressed;    /* leaks: matched a suppression */
} fs_site;

typedef struct fs_sites {
    enum fs_site_by by;
    fs_symbols *sym; /* NULL: frames as MODULE+0xOFFSET */
    bool full;       /* --full-stacks: every frame; else plumbing folded (fold.h) */
    fs_site *all;
    size_t n, cap;
    fs_text_index by_text; /* key -> index */
    uint32_t *by_id;       /* this file's definition id -> index + 1 */
    size_t by_id_cap;
    /* --by stack, allocations with Python frames: this file's (native,
     * Python) stack id pairs -> index + 1 (a uint32_t) */
    fs_u64map pairs;
    uint32_t file; /* 1-based, the file being read */
} fs_sites;

/* A new file begins: its ids mean other things. */
void fs_sites_next_file(fs_sites *s);
/* The site whose text is key, NULL when there is none. */
fs_site *fs_sites_find(fs_sites *s, const char *key);
/* Adds src's figures to dst's site of the same text (made if needed). */
void fs_sites_add(fs_sites *dst, const fs_site *src);
/* The site of an allocation event of file t, written by thread tid: its
 * index + 1. */
uint32_t fs_sites_of(fs_sites *s, fs_reader *t, const fs_fmt_event *ev, uint32_t tid);
void fs_sites_free(fs_sites *s);

/* One file's peaks, as fs_sites_read found them: for each device that
 * allocated, the highest allocated total and when (ns into the trace). */
#define FS_SITES_MAX_DEVICES 64
typedef struct fs_file_peaks {
    int rank; /* -1: unknown (then pid names the file's process) */
    unsigned pid;
    uint64_t allocs; /* allocation events read */
    uint64_t bytes[FS_SITES_MAX_DEVICES], time_ns[FS_SITES_MAX_DEVICES];
} fs_file_peaks;

/* Reads trace `path` into s: each allocation counted and totalled at its
 * site, the temporary ones (freed by their thread before it allocated
 * again, heaptrack's definition), each site's bytes live at its device's
 * peak (the moment the device's allocated total was highest) and its
 * blocks still live when the trace ends (live, live_bytes). One pass in
 * time order (blocks are followed by address). False, with a message on
 * stderr naming `command`, when the file cannot be read. */
bool fs_sites_read(fs_sites *s, const char *path, const char *command, fs_file_peaks *peaks);
/* The same over trace t, which the caller opened and closes, each record
 * also handed to `also` (NULL: none; nonzero stops the reading): a command
 * with figures of its own besides the sites reads the file once. */
void fs_sites_read_trace(fs_sites *s, fs_reader *t, const char *command, fs_file_peaks *peaks,
                         fs_reader_visit also, void *ctx);

/* The n traces at paths (the ranks of one job) read into dst, side by side
 * (parallel.h): each file's sites on their own, with dst's grouping and
 * symbols, then added to dst in the order named (dst->file counts them),
 * where each(ctx, path, peaks) is called for it (NULL: nothing). The
 * number of files that could not be read, each named on stderr. */
size_t fs_sites_read_job(fs_sites *dst, size_t n, char *const *paths, const char *command,
                         void (*each)(void *ctx, const char *path, const fs_file_peaks *peaks),
                         void *ctx);

/* "rank R" or "pid P" of a file, into buf. */
void fs_file_name(const fs_file_peaks *p, char *buf, size_t len);

/* A site's text, each line indented by four spaces. */
void fs_site_print_key(FILE *out, const fs_site *site);

#endif /* FS_SITES_H */
