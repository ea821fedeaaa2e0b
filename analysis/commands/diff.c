/* diff.c - `fsdpshim diff A B`: which sites grew from one trace to another
 * (docs/cli.md): two runs of a job before and after a change, or two ranks
 * of one run that should behave alike.
 *
 * Each trace is read as `top` reads it (sites.c), into its own set of
 * sites, the two side by side; sites are matched by their text, so the two traces may come from
 * different processes, builds of libraries included, as long as the stacks
 * read the same. Sites are listed by how much they grew, in peak-live
 * bytes (or total bytes, or count), the largest growth first. */
#include "analysis.h"
#include "cmdline.h"
#include "parallel.h"
#include "progress.h"
#include "reader.h"
#include "render.h"
#include "sites.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum measure { BY_PEAK, BY_TOTAL, BY_COUNT };

typedef struct change {
    const fs_site *a, *b; /* NULL: the site is not in that trace */
    int64_t delta;
} change;

void usage_diff(FILE *out)
{
    fprintf(out,
            "usage: fsdpshim diff [--by stack|frame|annotation|python] [--sort peak|total|count]\n"
            "                     [-n N] [--no-symbols] [--full-stacks] A B\n"
            "\n"
            "Which allocation sites grew from trace A to trace B (two runs of a job, or two\n"
            "ranks of one run), the largest growth first: bytes live at the peak (default),\n"
            "total bytes allocated, or number of allocations. Sites are matched by their text\n"
            "(the symbolised stack, frame, annotation or Python stack), so two builds of a\n"
            "program match where their frames have the same functions and lines.\n"
            "\n"
            "  --by      stack (default): the allocating native stack; frame: its first\n"
            "            frame; annotation: the NVTX range stack; python: the Python stack\n"
            "  --sort    what the change is measured in: peak (default), the bytes live at\n"
            "            the peak; total, all bytes allocated; count, the allocations\n"
            "  -n N      print the first N sites that changed [10]; 0 prints all\n"
            "  --no-symbols  native frames as MODULE+0xOFFSET, matched by module and offset\n"
            "  --full-stacks  every frame, none folded (as for top); sites are matched by\n"
            "            the text shown, folded or not\n"
            "\n"
            "examples:\n"
            "  fsdpshim diff before.fst after.fst\n"
            "  fsdpshim diff --by frame --sort total rank0.fst rank1.fst\n"
            "\n"
            "Exit status: 0 ok, 1 a file is not a readable trace, 2 usage.\n");
}

static enum measure measure_by;

static uint64_t measure(const fs_site *s)
{
    if (!s) return 0;
    return measure_by == BY_TOTAL ? s->total : measure_by == BY_COUNT ? s->count : s->peak;
}

/* to - from as a signed figure, held to what int64_t holds: a damaged
 * trace's figures can pass 2^63, where the subtraction would overflow */
static int64_t growth(uint64_t from, uint64_t to)
{
    if (to >= from) return to - from > INT64_MAX ? INT64_MAX : (int64_t)(to - from);
    return from - to > INT64_MAX ? -INT64_MAX : -(int64_t)(from - to);
}

static int by_growth(const void *x, const void *y)
{
    const change *a = x, *b = y;
    if (a->delta != b->delta) return a->delta < b->delta ? 1 : -1;
    const char *ka = a->a ? a->a->key : a->b->key, *kb = b->a ? b->a->key : b->b->key;
    return strcmp(ka, kb);
}

/* A frame line "FUNCTION (MODULE+0xOFFSET)": symbolised, without line
 * information. Its length up to " (" when it is one, else 0. */
static size_t function_only(const char *line, size_t len)
{
    const char *open = NULL;
    if (len < 6 || line[len - 1] != ')') return 0;
    for (const char *c = line + len - 1; c > line && !open; c--)
        if (c[0] == '(' && c[-1] == ' ') open = c;
    if (!open || open - 1 == line || !strncmp(line, "??", 2)) return 0;
    const char *plus = memmem(open, (size_t)(line + len - open), "+0x", 3);
    if (!plus) return 0;
    for (const char *h = plus + 3; h < line + len - 1; h++)
        if (!strchr("0123456789abcdef", *h)) return 0;
    return (size_t)(open - 1 - line);
}

/* The text a site is matched by: a frame with a symbol but no line
 * information counts by its function alone, not by the module's path and
 * the offset in it, which differ between two builds of one program (or a
 * copy of it under another name) where the code does not. Frames with
 * lines ("FUNCTION at FILE:LINE"), Python frames, annotations and frames
 * with no symbol (MODULE+0xOFFSET) are matched as they read. */
static char *match_text(const char *key)
{
    size_t n = strlen(key), at = 0;
    char *out = malloc(n + 1);
    if (!out) fs_analysis_oom("diff");
    for (const char *line = key; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line), keep = function_only(line, len);
        memcpy(out + at, line, keep ? keep : len);
        at += keep ? keep : len;
        if (end) out[at++] = '\n';
        line += len + (end ? 1 : 0);
    }
    out[at] = '\0';
    return out;
}

/* One side's sites merged by their match_text into *m, with the text each
 * is shown by (the first of its sites', owned by `read`) in *shown. */
static void matchable(const fs_sites *read, fs_sites *m, const char ***shown)
{
    *m = (fs_sites){.by = read->by};
    if (!(*shown = calloc(read->n + 1, sizeof **shown))) fs_analysis_oom("diff");
    for (size_t i = 0; i < read->n; i++) {
        fs_site site = read->all[i];
        char *text = match_text(site.key);
        site.key = text;
        fs_sites_add(m, &site);
        size_t k = (size_t)(fs_sites_find(m, text) - m->all);
        if (!(*shown)[k]) (*shown)[k] = read->all[i].key;
        free(text);
    }
}

/* A and B, read side by side (parallel.h) */
typedef struct sides {
    char **paths;
    fs_sites *sites[2];
    fs_file_peaks peaks[2];
    bool read[2];
} sides;

static void read_side(void *ctx, size_t i)
{
    sides *d = ctx;
    d->read[i] = fs_sites_read(d->sites[i], d->paths[i], "diff", &d->peaks[i]);
}

static void describe(const char *label, const char *path, const fs_file_peaks *p)
{
    char name[64];
    fs_file_name(p, name, sizeof name);
    printf("%s: %s (%s): %" PRIu64 " allocation%s", label, path, name, p->allocs,
           fs_plural(p->allocs));
    for (int d = 0; d < FS_SITES_MAX_DEVICES; d++)
        if (p->bytes[d])
            printf(", device %d peaked at %.1f MiB", d, (double)p->bytes[d] / (1 << 20));
    printf("\n");
}

/* "+1.5 MiB" / "-3" / "0" for the change column */
static void signed_amount(int64_t v, bool bytes, char *buf, size_t len)
{
    char num[32];
    uint64_t mag = v < 0 ? (uint64_t)-v : (uint64_t)v;
    if (bytes)
        fs_human_bytes(mag, num, sizeof num);
    else
        snprintf(num, sizeof num, "%" PRIu64, mag);
    snprintf(buf, len, "%s%s", v > 0 ? "+" : v < 0 ? "-" : "", num);
}

int command_diff(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"by", required_argument, NULL, 'b'},   {"sort", required_argument, NULL, 's'},
        {"no-symbols", no_argument, NULL, 'N'}, {"full-stacks", no_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0},
    };
    static const char *const measures[] = {"peak", "total", "count"};
    fs_sites a = {.by = FS_BY_STACK}, b = {.by = FS_BY_STACK};
    fs_symbols *sym = NULL;
    size_t limit = 10;
    bool symbols = true;
    int c, sort, status = 0;

    measure_by = BY_PEAK;
    optind = 1;
    while ((c = fs_site_getopt(argc, argv, longopts, &a.by, &limit, &symbols, &a.full)) != -1) {
        switch (c) {
        case 's':
            if ((sort = fs_site_choice(optarg, measures, 3)) < 0)
                return fs_site_bad(argv[0], "--sort", optarg, measures, 3);
            measure_by = (enum measure)sort;
            break;
        default: /* -h, or a mistake fs_getopt has said */
            return fs_option_rest(c, usage_diff);
        }
    }
    if (argc - optind != 2)
        return fs_usage_error(argv[0], "two traces to compare, A and B; %d given", argc - optind);
    b.by = a.by;
    b.full = a.full;
    if (symbols && !(sym = fs_symbols_create(fs_progress_warn, "diff"))) fs_analysis_oom("diff");
    a.sym = b.sym = sym;
    sides d = {.paths = argv + optind, .sites = {&a, &b}};
    fs_par_read("diff", 2, d.paths, read_side, NULL, &d);
    if (!d.read[0] || !d.read[1]) {
        status = FS_EXIT_BAD_INPUT;
        goto out;
    }
    describe("A", argv[optind], &d.peaks[0]);
    describe("B", argv[optind + 1], &d.peaks[1]);

    fs_sites ma, mb; /* the sites as matched */
    const char **shown_a, **shown_b;
    matchable(&a, &ma, &shown_a);
    matchable(&b, &mb, &shown_b);
    change *ch = calloc(ma.n + mb.n + 1, sizeof *ch);
    size_t n = 0, grew = 0, shrank = 0, only_a = 0, only_b = 0;
    if (!ch) fs_analysis_oom("diff");
    for (size_t i = 0; i < ma.n; i++) {
        const fs_site *in_b = fs_sites_find(&mb, ma.all[i].key);
        ch[n++] = (change){&ma.all[i], in_b, growth(measure(&ma.all[i]), measure(in_b))};
        only_a += !in_b;
    }
    for (size_t i = 0; i < mb.n; i++)
        if (!fs_sites_find(&ma, mb.all[i].key)) {
            ch[n++] = (change){NULL, &mb.all[i], growth(0, measure(&mb.all[i]))};
            only_b++;
        }
    for (size_t i = 0; i < n; i++) {
        grew += ch[i].delta > 0;
        shrank += ch[i].delta < 0;
    }
    qsort(ch, n, sizeof *ch, by_growth);
    printf("%zu site%s by %s: %zu grew, %zu shrank in %s, %zu only in A, %zu only in B\n", n,
           fs_plural(n), fs_site_by_name(a.by), grew, shrank, measures[measure_by], only_a, only_b);
    printf("%12s %12s %12s %10s %10s\n", "change", "A", "B", "A count", "B count");
    size_t printed = 0;
    for (size_t i = 0; i < n && (!limit || printed < limit); i++) {
        if (!ch[i].delta) continue;
        char d[40], x[32], y[32];
        bool bytes = measure_by != BY_COUNT;
        signed_amount(ch[i].delta, bytes, d, sizeof d);
        if (bytes) {
            fs_human_bytes(measure(ch[i].a), x, sizeof x);
            fs_human_bytes(measure(ch[i].b), y, sizeof y);
        } else {
            snprintf(x, sizeof x, "%" PRIu64, measure(ch[i].a));
            snprintf(y, sizeof y, "%" PRIu64, measure(ch[i].b));
        }
        printf("%12s %12s %12s %10" PRIu64 " %10" PRIu64 "%s\n", d, ch[i].a ? x : "-",
               ch[i].b ? y : "-", ch[i].a ? ch[i].a->count : 0, ch[i].b ? ch[i].b->count : 0,
               !ch[i].a   ? "  (only in B)"
               : !ch[i].b ? "  (only in A)"
                          : "");
        /* as A's trace reads it, or B's for a site only in B */
        fs_site shown = ch[i].a ? *ch[i].a : *ch[i].b;
        shown.key = (char *)(ch[i].a ? shown_a[ch[i].a - ma.all] : shown_b[ch[i].b - mb.all]);
        fs_site_print_key(stdout, &shown);
        printed++;
    }
    free(ch);
    free(shown_a);
    free(shown_b);
    fs_sites_free(&ma);
    fs_sites_free(&mb);
out:
    fs_sites_free(&a);
    fs_sites_free(&b);
    fs_symbols_destroy(sym);
    return status;
}
