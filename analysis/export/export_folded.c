/* export_folded.c - `fsdpshim export --folded`: allocation sites as folded
 * stacks, the input of flamegraph.pl, inferno and speedscope: one line per
 * stack, its frames outermost first joined by ';', then a space and its
 * weight (docs/cli.md).
 *
 * The sites are `top`'s (sites.c: fs_sites_read reads each trace in time
 * order, ranks merged by the text of their stacks), so a flame graph and
 * `top` agree: --weight peak is a site's bytes live at its device's peak,
 * total its bytes allocated, count its allocations. A site's text holds
 * its frames innermost first, one a line (an annotation: a path, outermost
 * first); here they are turned around and joined. */
#include "export.h"
#include "render.h"

#include "exit_status.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static uint64_t weight_of(const fs_site *s, enum fs_export_weight w)
{
    return w == FS_WEIGHT_TOTAL ? s->total : w == FS_WEIGHT_COUNT ? s->count : s->peak;
}

/* Appends frame [s, s + n) to line at *at, its ';' (the separator) made ','. */
static void put_frame(char *line, size_t *at, const char *s, size_t n)
{
    if (*at) line[(*at)++] = ';';
    for (size_t i = 0; i < n; i++)
        line[(*at)++] = s[i] == ';' ? ',' : s[i];
}

/* The folded line of site s (malloc'ed): its frames outermost first */
static char *folded_line(const fs_site *s, enum fs_site_by by, uint64_t weight)
{
    size_t len = strlen(s->key), at = 0, start, stop;
    char *line = malloc(len + 32);
    const char *key = s->key;

    if (!line) fs_analysis_oom("export");
    if (by == FS_BY_ANNOT) {
        for (start = 0;; start = stop + 1) {
            const char *slash = strchr(key + start, '/');
            stop = slash ? (size_t)(slash - key) : len;
            put_frame(line, &at, key + start, stop - start);
            if (stop == len) break;
        }
    } else {
        for (stop = len;; stop = start - 1) {
            start = stop;
            while (start > 0 && key[start - 1] != '\n')
                start--;
            put_frame(line, &at, key + start, stop - start);
            if (start == 0) break;
        }
    }
    snprintf(line + at, 32, " %" PRIu64, weight);
    return line;
}

/* A file is read: its peaks on stderr, in the order the files were named */
static void file_read(void *ctx, const char *path, const fs_file_peaks *p)
{
    char name[64], bytes[32];
    (void)ctx;
    fs_file_name(p, name, sizeof name);
    for (int d = 0; d < FS_SITES_MAX_DEVICES; d++) {
        if (!p->bytes[d]) continue;
        fs_human_bytes(p->bytes[d], bytes, sizeof bytes);
        fprintf(stderr, "fsdpshim export: %s: %s: device %d peaked at %s allocated, %.6f s in\n",
                path, name, d, bytes, (double)p->time_ns[d] / 1e9);
    }
}

static int by_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int fs_export_folded(const fs_export_opts *o, int ntraces, char **traces)
{
    /* every frame: a flame graph viewer zooms and filters by itself, and a
     * fold line would be a frame of its own (fold.h) */
    fs_sites s = {.by = o->by, .full = true};
    int status = 0;
    char **lines;
    size_t n = 0;
    char path[4096];

    if (o->symbols && !(s.sym = fs_symbols_create(fs_export_warn, NULL))) fs_analysis_oom("export");
    if (fs_sites_read_job(&s, (size_t)ntraces, traces, "export", file_read, NULL))
        status = FS_EXIT_BAD_INPUT;
    if (!(lines = malloc((s.n ? s.n : 1) * sizeof *lines))) fs_analysis_oom("export");
    for (size_t i = 0; i < s.n; i++) {
        uint64_t w = weight_of(&s.all[i], o->weight);
        if (w) lines[n++] = folded_line(&s.all[i], s.by, w);
    }
    qsort(lines, n, sizeof *lines, by_text);

    /* one output for all the traces: -o as given */
    path[0] = '\0';
    if (o->out && strcmp(o->out, "-")) snprintf(path, sizeof path, "%s", o->out);
    FILE *f = fs_export_create(path);
    if (f) {
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%s\n", lines[i]);
        if (!fs_export_finish(f, path)) status = FS_EXIT_BAD_INPUT;
        fprintf(stderr, "fsdpshim export: %zu stack%s of %zu site%s by %s, weighed by %s\n", n,
                fs_plural(n), s.n, fs_plural(s.n), fs_site_by_name(s.by),
                o->weight == FS_WEIGHT_TOTAL   ? "bytes allocated"
                : o->weight == FS_WEIGHT_COUNT ? "allocations"
                                               : "bytes live at the peak");
    } else {
        status = FS_EXIT_BAD_INPUT;
    }
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
    fs_sites_free(&s);
    fs_symbols_destroy(s.sym);
    return status;
}
