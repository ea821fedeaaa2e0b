/* top.c - `fsdpshim top TRACE...`: where the bytes went, grouped by
 * allocating stack, top frame, annotation or Python stack (docs/cli.md).
 *
 * Each group gets: its bytes live at its rank's peak (the moment the
 * device's allocated total was highest, the figure that decides whether a
 * job fits), the count and total bytes of its allocations, and how many of
 * them were temporary: freed by the thread that made them before it made
 * any other allocation, heaptrack's definition, the allocations a cache or
 * a reordering would save. Several files are ranks of one job: groups are
 * merged by their text (ids differ between files), each rank's peak is
 * named, and the table sums the ranks.
 *
 * The reading is sites.c's (fs_sites_read_job): once per file in time
 * order, the files side by side, grouping while it finds every device's
 * peak and what each group held then. Memory grows with the live blocks
 * and the groups, never with the number of events. */
#include "analysis.h"
#include "cmdline.h"
#include "progress.h"
#include "reader.h"
#include "render.h"
#include "sites.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum sort_key { SORT_PEAK, SORT_COUNT, SORT_TOTAL, SORT_TEMPORARY };
static const char *const sort_names[] = {"peak", "count", "total", "temporary"};

typedef struct top_run {
    fs_sites sites;
    enum sort_key sort;
    size_t limit;
    uint64_t allocs;
} top_run;

void usage_top(FILE *out)
{
    fprintf(out, "usage: fsdpshim top [--by stack|frame|annotation|python]\n"
                 "                    [--sort peak|count|total|temporary] [-n N] [--no-symbols]\n"
                 "                    [--full-stacks] TRACE...\n"
                 "       fsdpshim top --live [PID...] [-d SECONDS] [--once]\n"
                 "\n"
                 "Allocation sites of one or more traces (ranks of one job are merged), largest\n"
                 "first. For each: bytes live at the rank's peak (the moment the device's\n"
                 "allocated total was highest), the number and total bytes of its allocations,\n"
                 "and the temporary ones (freed by their thread before it allocated again).\n"
                 "\n"
                 "  --by      stack (default): the allocating native stack; frame: its first\n"
                 "            frame; annotation: the NVTX range stack; python: the Python stack\n"
                 "  --sort    peak (default), count, total or temporary\n"
                 "  -n N      print the first N groups [10]; 0 prints all\n"
                 "  --no-symbols  native frames as MODULE+0xOFFSET, not FUNCTION at FILE:LINE\n"
                 "  --full-stacks  every frame of a stack; by default a run of the Python\n"
                 "            interpreter's, PyTorch dispatcher's and other plumbing frames is\n"
                 "            one line saying how many were folded (docs/cli.md lists them)\n"
                 "\n"
                 "Native frames are symbolised from the modules on this machine (libdw; separate\n"
                 "debug files by build id); a module that is missing or was rebuilt since the\n"
                 "trace is named once on stderr and its frames stay MODULE+0xOFFSET.\n"
                 "With --live: running processes, not traces (`fsdpshim top --live --help`).\n"
                 "\n"
                 "examples:\n"
                 "  fsdpshim top --by frame -n 5 train-4242.fst\n"
                 "  fsdpshim top --by python --sort total rank*.fst\n"
                 "\n"
                 "Exit status: 0 ok, 1 a file is not a readable trace, 2 usage.\n");
}

/* A file is read: its peaks named, in the order the files were named */
static void file_read(void *ctx, const char *path, const fs_file_peaks *p)
{
    top_run *r = ctx;
    char name[64];
    r->allocs += p->allocs;
    fs_file_name(p, name, sizeof name);
    for (int d = 0; d < FS_SITES_MAX_DEVICES; d++)
        if (p->bytes[d])
            printf("%s: %s: device %d peaked at %.1f MiB allocated, %.3f s in\n", path, name, d,
                   (double)p->bytes[d] / (1 << 20), (double)p->time_ns[d] / 1e9);
}

/* ---- output ------------------------------------------------------------------ */

static enum sort_key sort_by;

static uint64_t metric(const fs_site *g)
{
    switch (sort_by) {
    case SORT_COUNT:
        return g->count;
    case SORT_TOTAL:
        return g->total;
    case SORT_TEMPORARY:
        return g->temporary;
    default:
        return g->peak;
    }
}

static int by_metric(const void *a, const void *b)
{
    const fs_site *x = a, *y = b;
    uint64_t mx = metric(x), my = metric(y);
    if (mx != my) return mx < my ? 1 : -1;
    if (x->total != y->total) return x->total < y->total ? 1 : -1;
    return strcmp(x->key, y->key);
}

static void print_table(top_run *r)
{
    fs_sites *s = &r->sites;
    size_t n = r->limit && r->limit < s->n ? r->limit : s->n;

    sort_by = r->sort;
    if (s->n) qsort(s->all, s->n, sizeof *s->all, by_metric); /* no sites: all is NULL */
    printf("%" PRIu64 " allocation%s in %u trace%s, %zu group%s by %s, sorted by %s%s\n", r->allocs,
           fs_plural(r->allocs), s->file, fs_plural(s->file), s->n, fs_plural(s->n),
           fs_site_by_name(s->by), sort_names[r->sort], n < s->n ? " (first ones)" : "");
    printf("%12s %12s %10s %16s %6s\n", "peak", "total", "count", "temporary", "ranks");
    for (size_t i = 0; i < n; i++) {
        const fs_site *g = &s->all[i];
        char peak[32], total[32], temp[40];
        fs_human_bytes(g->peak, peak, sizeof peak);
        fs_human_bytes(g->total, total, sizeof total);
        snprintf(temp, sizeof temp, "%" PRIu64 " (%.0f%%)", g->temporary,
                 g->count ? 100.0 * (double)g->temporary / (double)g->count : 0.0);
        printf("%12s %12s %10" PRIu64 " %16s %6u\n", peak, total, g->count, temp, g->ranks);
        fs_site_print_key(stdout, g);
    }
}

int command_top(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"by", required_argument, NULL, 'b'},   {"sort", required_argument, NULL, 's'},
        {"no-symbols", no_argument, NULL, 'N'}, {"full-stacks", no_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0},
    };
    top_run r = {.sites.by = FS_BY_STACK, .sort = SORT_PEAK, .limit = 10};
    bool symbols = true;
    int c, sort, status = 0;

    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--live")) return command_top_live(argc, argv);
    optind = 1;
    while ((c = fs_site_getopt(argc, argv, longopts, &r.sites.by, &r.limit, &symbols,
                               &r.sites.full)) != -1) {
        switch (c) {
        case 's':
            if ((sort = fs_site_choice(optarg, sort_names, 4)) < 0)
                return fs_site_bad(argv[0], "--sort", optarg, sort_names, 4);
            r.sort = (enum sort_key)sort;
            break;
        default: /* -h, or a mistake fs_getopt has said */
            return fs_option_rest(c, usage_top);
        }
    }
    if (optind >= argc) return fs_usage_error(argv[0], "no trace named");
    if (symbols && !(r.sites.sym = fs_symbols_create(fs_progress_warn, "top")))
        fs_analysis_oom("top");
    if (fs_sites_read_job(&r.sites, (size_t)(argc - optind), argv + optind, "top", file_read, &r))
        status = FS_EXIT_BAD_INPUT;
    print_table(&r);
    fs_sites_free(&r.sites);
    fs_symbols_destroy(r.sites.sym);
    return status;
}
