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
 * Each file is read twice through the one reading loop, in time order
 * (blocks are followed by address, and threads' events reach the file out
 * of order): once to find the peak of every device, once to group, taking
 * the live blocks at that moment. Memory grows with the live blocks and the groups, never with the
 * number of events. */
#include "analysis.h"
#include "reader.h"
#include "sites.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 64

enum sort_key { SORT_PEAK, SORT_COUNT, SORT_TOTAL, SORT_TEMPORARY };

typedef struct thread_last {
    uint32_t tid;
    uint64_t addr; /* its last allocation, still the last thing it did; 0: none */
} thread_last;

typedef struct top_run {
    fs_sites sites;
    enum sort_key sort;
    size_t limit;
    /* per file */
    uint64_t ordinal; /* memory events read so far in this file */
    uint64_t peak_bytes[MAX_DEVICES], peak_at[MAX_DEVICES], peak_time[MAX_DEVICES];
    fs_live live;
    thread_last *threads;
    size_t nthreads;
    uint64_t allocs;
} top_run;

void usage_top(FILE *out)
{
    fprintf(out, "usage: fsdpshim top [--by stack|frame|annotation|python]\n"
                 "                    [--sort peak|count|total|temporary] [-n N] [--no-symbols]\n"
                 "                    TRACE...\n"
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
                 "\n"
                 "Native frames are symbolised from the modules on this machine (libdw; separate\n"
                 "debug files by build id); a module that is missing or was rebuilt since the\n"
                 "trace is named once on stderr and its frames stay MODULE+0xOFFSET.\n"
                 "Exit status: 0 ok, 1 a file is not a readable trace, 2 usage.\n");
}

static thread_last *thread_of(top_run *r, uint32_t tid)
{
    for (size_t i = 0; i < r->nthreads; i++)
        if (r->threads[i].tid == tid) return &r->threads[i];
    thread_last *more = realloc(r->threads, (r->nthreads + 1) * sizeof *r->threads);
    if (!more) fs_analysis_oom("top");
    r->threads = more;
    r->threads[r->nthreads] = (thread_last){tid, 0};
    return &r->threads[r->nthreads++];
}

/* ---- the two passes ------------------------------------------------------------ */

static bool device_ok(int d)
{
    return d >= 0 && d < MAX_DEVICES;
}

static int find_peaks(void *ctx, fs_reader *t, const fs_fmt_record *rec, uint32_t tid)
{
    top_run *r = ctx;
    const fs_fmt_event *ev = &rec->ev;
    (void)t, (void)tid;
    if (rec->kind != FS_REC_ALLOC && rec->kind != FS_REC_FREE_REQUESTED) return 0;
    r->ordinal++;
    if (rec->kind == FS_REC_ALLOC && device_ok(ev->device) &&
        ev->allocated > r->peak_bytes[ev->device]) {
        r->peak_bytes[ev->device] = ev->allocated;
        r->peak_at[ev->device] = r->ordinal;
        r->peak_time[ev->device] = ev->time_ns;
    }
    return 0;
}

static int group_events(void *ctx, fs_reader *t, const fs_fmt_record *rec, uint32_t tid)
{
    top_run *r = ctx;
    const fs_fmt_event *ev = &rec->ev;
    fs_live_block b;

    if (rec->kind != FS_REC_ALLOC && rec->kind != FS_REC_FREE_REQUESTED) return 0;
    r->ordinal++;
    thread_last *th = thread_of(r, tid);
    if (rec->kind == FS_REC_ALLOC) {
        uint32_t si = fs_sites_of(&r->sites, t, ev);
        fs_site *site = &r->sites.all[si - 1];
        site->count++;
        site->total += ev->size;
        r->allocs++;
        fs_live_put(&r->live, ev->addr, ev->size, si, ev->device);
        th->addr = ev->addr;
        if (device_ok(ev->device) && r->ordinal == r->peak_at[ev->device]) {
            for (size_t i = 0; i < r->live.cap; i++) {
                const fs_live_block *l = &r->live.slots[i];
                if (l->site && l->device == ev->device) r->sites.all[l->site - 1].peak += l->size;
            }
        }
        return 0;
    }
    if (fs_live_take(&r->live, ev->addr, &b) && th->addr == ev->addr)
        r->sites.all[b.site - 1].temporary++;
    th->addr = 0;
    return 0;
}

static void warn(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "fsdpshim top: %s\n", line);
}

/* Reads one file twice; false when it cannot be opened. */
static bool read_file(top_run *r, const char *path)
{
    char err[4200];
    fs_reader *t = fs_reader_open(path, err, sizeof err);
    if (!t) {
        fprintf(stderr, "fsdpshim top: %s\n", err);
        return false;
    }
    r->ordinal = 0;
    memset(r->peak_bytes, 0, sizeof r->peak_bytes);
    memset(r->peak_at, 0, sizeof r->peak_at);
    fs_reader_read_ordered(t, find_peaks, warn, r);
    fs_reader_close(t);

    t = fs_reader_open(path, err, sizeof err);
    if (!t) {
        fprintf(stderr, "fsdpshim top: %s\n", err);
        return false;
    }
    r->ordinal = 0;
    fs_sites_next_file(&r->sites);
    fs_live_clear(&r->live);
    r->nthreads = 0;
    fs_reader_read_ordered(t, group_events, NULL, r); /* damage was named by the first pass */
    for (int d = 0; d < MAX_DEVICES; d++)
        if (r->peak_at[d])
            printf("%s: %s %d: device %d peaked at %.1f MiB allocated, %.3f s in\n",
                   fs_reader_file(t), fs_reader_rank(t) >= 0 ? "rank" : "pid",
                   fs_reader_rank(t) >= 0 ? fs_reader_rank(t) : (int)fs_reader_header(t)->pid, d,
                   (double)r->peak_bytes[d] / (1 << 20), (double)r->peak_time[d] / 1e9);
    fs_reader_close(t);
    return true;
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
    static const char *const sort_names[] = {"peak", "count", "total", "temporary"};
    fs_sites *s = &r->sites;
    size_t n = r->limit && r->limit < s->n ? r->limit : s->n;

    sort_by = r->sort;
    qsort(s->all, s->n, sizeof *s->all, by_metric);
    printf("%" PRIu64 " allocations in %u trace%s, %zu groups by %s, sorted by %s%s\n", r->allocs,
           s->file, s->file == 1 ? "" : "s", s->n, fs_site_by_name(s->by), sort_names[r->sort],
           n < s->n ? " (first ones)" : "");
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
        {"by", required_argument, NULL, 'b'},
        {"sort", required_argument, NULL, 's'},
        {"no-symbols", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *const sort_names[] = {"peak", "count", "total", "temporary"};
    top_run r = {.sites.by = FS_BY_STACK, .sort = SORT_PEAK, .limit = 10};
    bool symbols = true, sorted = false;
    int c, status = 0;
    char *end;

    optind = 1;
    while ((c = getopt_long(argc, argv, "hn:", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (!fs_site_by_parse(optarg, &r.sites.by)) goto bad;
            break;
        case 's':
            sorted = false;
            for (int i = 0; i < 4; i++)
                if (!strcmp(optarg, sort_names[i])) {
                    r.sort = (enum sort_key)i;
                    sorted = true;
                }
            if (!sorted) goto bad;
            break;
        case 'n':
            r.limit = strtoul(optarg, &end, 10);
            if (!*optarg || *end) goto bad;
            break;
        case 'N':
            symbols = false;
            break;
        case 'h':
            usage_top(stdout);
            return 0;
        default:
            goto bad;
        }
    }
    if (optind >= argc) goto bad;
    if (symbols && !(r.sites.sym = fs_symbols_create(warn, NULL))) fs_analysis_oom("top");
    for (int i = optind; i < argc; i++)
        if (!read_file(&r, argv[i])) status = FS_EXIT_BAD_INPUT;
    print_table(&r);
    fs_sites_free(&r.sites);
    fs_live_free(&r.live);
    free(r.threads);
    fs_symbols_destroy(r.sites.sym);
    return status;
bad:
    usage_top(stderr);
    return FS_EXIT_USAGE;
}
