/* report.c - `fsdpshim report TRACE...`: one text summary of a job's
 * traces (docs/cli.md): per rank and device the peaks and when, the cache's
 * overhead at the peak, segments, out-of-memory events with the figures the
 * allocator reported, streams, collectives, the rate limiter's waits, then
 * the sites that held the most at the peak, and the totals over the ranks.
 * Under a trace's figures, its out-of-memory failures explained (oom.c).
 *
 * One reading loop in time order gathers the figures (every memory event
 * carries its device's totals, so none of them needs block tracking) and,
 * the same loop, the sites (sites.c's reading, as `top` prints them): each
 * file is read once, the ranks of a job side by side (parallel.h), each
 * rank's text printed to memory and written out in the order the files
 * were named. With --html the same figures and sites also go to the page
 * (report_html.c), whose timeline is gathered in the same reading. */
#include "analysis.h"
#include "cmdline.h"
#include "oom.h"
#include "parallel.h"
#include "progress.h"
#include "reader.h"
#include "render.h"
#include "report.h"
#include "report_timeline.h"
#include "sites.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The reading loop's context: the figures, and the page when --html asks */
typedef struct reading {
    fs_report_figures *r;
    fs_timeline *tl;
} reading;

void usage_report(FILE *out)
{
    fprintf(out,
            "usage: fsdpshim report [--by stack|frame|annotation|python] [-n N] [--no-symbols]\n"
            "                       [--full-stacks] [--html FILE] TRACE...\n"
            "\n"
            "A text summary of one or more traces (the ranks of one job), each rank on its own\n"
            "and then in total: per device the peaks of allocated and reserved memory and when,\n"
            "the cache's overhead at the peak, segments, out-of-memory events, streams,\n"
            "collectives, the all-gather rate limiter's waits, and the N sites [5] that held\n"
            "the most at the peak (grouped --by, as for top). The first out-of-memory failures\n"
            "are explained: the request's call site, where the cache's free memory lay, the\n"
            "cause, what was live, and the settings that bear on the cause, checked by\n"
            "replaying the trace (as fsdpshim replay does).\n"
            "\n"
            "  --html FILE  also write FILE, one self-contained HTML page (no network): an SVG\n"
            "             memory timeline of allocated and reserved bytes per rank, device and\n"
            "             stream on one clock, with NVTX ranges, rate-limiter waits, collectives\n"
            "             and out-of-memory events marked, then these figures as tables, with\n"
            "             each failure's cause, each stream's figures, the frees held back\n"
            "             for their streams and the blocks live at exit by site\n"
            "  --by, -n N, --no-symbols, --full-stacks  the sites, as for top; -n 0 leaves\n"
            "             them out\n"
            "\n"
            "examples:\n"
            "  fsdpshim report train-4242.fst\n"
            "  fsdpshim report --by python --html job.html rank*.fst\n"
            "\n"
            "Exit status: 0 ok, 1 a file is not a readable trace or FILE cannot be written,\n"
            "2 usage.\n");
}

static void oom_line(FILE *out, const fs_fmt_event *ev)
{
    char req[32], alloc[32], res[32], spare[32], largest[32];
    fs_human_bytes(ev->size, req, sizeof req);
    fs_human_bytes(ev->allocated, alloc, sizeof alloc);
    fs_human_bytes(ev->reserved, res, sizeof res);
    fs_human_bytes(ev->reserved > ev->allocated ? ev->reserved - ev->allocated : 0, spare,
                   sizeof spare);
    fs_human_bytes(ev->aux, largest, sizeof largest);
    /* the cause is the explanation's (oom.c), under the figures: a verdict
     * from these totals alone would blame fragmentation for free bytes the
     * request could never take */
    fprintf(out,
            "  out of memory at %.3f s on device %d, stream 0x%" PRIx64 ": %s requested, %s "
            "allocated, %s reserved of which %s free in the cache, the largest free block %s\n",
            (double)ev->time_ns / 1e9, ev->device, ev->stream, req, alloc, res, spare, largest);
}

static void wait_begins(fs_report_figures *r, uint32_t tid, uint64_t at)
{
    if (r->nwaiting < FS_REPORT_MAX_WAITERS)
        r->waiting[r->nwaiting++] = (struct fs_report_waiter){tid, at};
}

static void wait_ends(fs_report_figures *r, uint32_t tid, uint64_t at)
{
    for (size_t i = 0; i < r->nwaiting; i++)
        if (r->waiting[i].tid == tid) {
            uint64_t ns = at - r->waiting[i].since;
            r->waits++;
            r->wait_ns += ns;
            if (ns > r->longest_wait_ns) r->longest_wait_ns = ns;
            r->waiting[i] = r->waiting[--r->nwaiting];
            return;
        }
}

static int visit(void *ctx, fs_reader *t, const fs_fmt_record *rec, uint32_t tid)
{
    const reading *rd = ctx;
    fs_report_figures *r = rd->r;
    const fs_fmt_event *ev = &rec->ev;
    if (rd->tl) fs_tl_record(rd->tl, t, rec, tid);
    if (rec->kind > FS_REC_EVENT_LAST) return 0;
    if (!r->events++) r->first_ns = ev->time_ns;
    r->last_ns = ev->time_ns;
    if (rec->kind == FS_REC_FREE_REQUESTED && (ev->aux & FS_FMT_FREE_BEFORE_TRACE))
        r->frees_before_trace++;
    if (rec->kind >= FS_REC_ALLOC && rec->kind <= FS_REC_OOM && ev->device >= 0 &&
        ev->device < FS_REPORT_MAX_DEVICES) {
        fs_report_device *d = &r->dev[ev->device];
        d->seen = true;
        d->last_allocated = ev->allocated;
        d->last_reserved = ev->reserved;
        if (ev->allocated > d->peak_allocated) {
            d->peak_allocated = ev->allocated;
            d->peak_allocated_at = ev->time_ns;
            d->reserved_at_peak = ev->reserved;
        }
        if (ev->reserved > d->peak_reserved) {
            d->peak_reserved = ev->reserved;
            d->peak_reserved_at = ev->time_ns;
        }
        switch (rec->kind) {
        case FS_REC_ALLOC:
            d->allocs++;
            d->alloc_bytes += ev->size;
            break;
        case FS_REC_SEGMENT_ALLOC:
            d->segments++;
            d->segment_bytes += ev->size;
            break;
        case FS_REC_SEGMENT_FREE:
            d->segment_frees++;
            break;
        case FS_REC_OOM:
            d->ooms++;
            if (r->nooms < FS_REPORT_MAX_OOMS) r->ooms[r->nooms++] = *ev;
            break;
        default:
            break;
        }
        return 0;
    }
    switch (rec->kind) {
    case FS_REC_STREAM_CREATE:
        r->streams_created++;
        break;
    case FS_REC_POOL_HIT:
        r->streams_reused++;
        break;
    case FS_REC_STREAM_DESTROY:
        r->streams_destroyed++;
        break;
    case FS_REC_COLLECTIVE:
        if (ev->aux < FS_REPORT_MAX_COLL) {
            r->coll_count[ev->aux]++;
            r->coll_bytes[ev->aux] += ev->size;
        }
        break;
    case FS_REC_RL_WAIT_START:
        wait_begins(r, tid, ev->time_ns);
        break;
    case FS_REC_RL_WAIT_END:
        wait_ends(r, tid, ev->time_ns);
        break;
    default:
        break;
    }
    return 0;
}

static void print_figures(FILE *out, const fs_report_figures *r)
{
    char a[32], b[32], c[32];
    for (size_t i = 0; i < r->nooms; i++)
        oom_line(out, &r->ooms[i]);
    for (int i = 0; i < FS_REPORT_MAX_DEVICES; i++) {
        const fs_report_device *d = &r->dev[i];
        if (!d->seen) continue;
        fs_human_bytes(d->peak_allocated, a, sizeof a);
        fs_human_bytes(d->reserved_at_peak, b, sizeof b);
        fprintf(out, "  device %d: peak allocated %s at %.3f s, with %s reserved then", i, a,
                (double)d->peak_allocated_at / 1e9, b);
        if (d->reserved_at_peak >= d->peak_allocated && d->peak_allocated)
            fprintf(out, " (the cache's overhead %.1f%%)",
                    100.0 * (double)(d->reserved_at_peak - d->peak_allocated) /
                        (double)d->peak_allocated);
        fs_human_bytes(d->peak_reserved, a, sizeof a);
        fprintf(out, "\n  device %d: peak reserved %s at %.3f s\n", i, a,
                (double)d->peak_reserved_at / 1e9);
        fs_human_bytes(d->alloc_bytes, a, sizeof a);
        fs_human_bytes(d->segment_bytes, b, sizeof b);
        fs_human_bytes(d->last_allocated, c, sizeof c);
        fprintf(out,
                "  device %d: %" PRIu64 " allocation%s (%s); %" PRIu64 " segment%s reserved "
                "(%s), %" PRIu64 " released; %s allocated at the last event; %" PRIu64
                " out-of-memory event%s\n",
                i, d->allocs, fs_plural(d->allocs), a, d->segments, fs_plural(d->segments), b,
                d->segment_frees, c, d->ooms, fs_plural(d->ooms));
    }
    if (r->frees_before_trace)
        fprintf(out,
                "  %" PRIu64 " free%s of blocks allocated before the trace began (a trace-only "
                "attach: not counted in the totals)\n",
                r->frees_before_trace, fs_plural(r->frees_before_trace));
    fprintf(out,
            "  streams: %" PRIu64 " created, %" PRIu64 " handed out again from a pool, %" PRIu64
            " destroyed\n",
            r->streams_created, r->streams_reused, r->streams_destroyed);
    for (int k = 0; k < FS_REPORT_MAX_COLL; k++)
        if (r->coll_count[k]) {
            const char *op = fs_fmt_coll_name((unsigned)k);
            fs_human_bytes(r->coll_bytes[k], a, sizeof a);
            fprintf(out, "  collectives: %" PRIu64 " %s, %s\n", r->coll_count[k], op ? op : "?", a);
        }
    if (r->waits)
        fprintf(out,
                "  rate limiter: %" PRIu64 " all-gather%s waited, %.3f ms in all, the longest "
                "%.3f ms\n",
                r->waits, fs_plural(r->waits), (double)r->wait_ns / 1e6,
                (double)r->longest_wait_ns / 1e6);
    else
        fprintf(out, "  rate limiter: no all-gather waited\n");
}

static void add_figures(fs_report_figures *total, const fs_report_figures *r)
{
    for (int i = 0; i < FS_REPORT_MAX_DEVICES; i++) {
        const fs_report_device *d = &r->dev[i];
        fs_report_device *t = &total->dev[i];
        if (!d->seen) continue;
        /* ranks are separate processes: each device's peak is its own, and
         * a device used by two files (two processes on one GPU) sums them */
        t->seen = true;
        t->peak_allocated += d->peak_allocated;
        t->reserved_at_peak += d->reserved_at_peak;
        t->peak_reserved += d->peak_reserved;
        if (d->peak_allocated_at > t->peak_allocated_at)
            t->peak_allocated_at = d->peak_allocated_at;
        if (d->peak_reserved_at > t->peak_reserved_at) t->peak_reserved_at = d->peak_reserved_at;
        t->allocs += d->allocs;
        t->alloc_bytes += d->alloc_bytes;
        t->segments += d->segments;
        t->segment_bytes += d->segment_bytes;
        t->segment_frees += d->segment_frees;
        t->ooms += d->ooms;
        t->last_allocated += d->last_allocated;
    }
    for (int k = 0; k < FS_REPORT_MAX_COLL; k++) {
        total->coll_count[k] += r->coll_count[k];
        total->coll_bytes[k] += r->coll_bytes[k];
    }
    total->streams_created += r->streams_created;
    total->streams_reused += r->streams_reused;
    total->streams_destroyed += r->streams_destroyed;
    total->waits += r->waits;
    total->wait_ns += r->wait_ns;
    if (r->longest_wait_ns > total->longest_wait_ns) total->longest_wait_ns = r->longest_wait_ns;
}

static int by_peak(const void *a, const void *b)
{
    const fs_site *x = a, *y = b;
    if (x->peak != y->peak) return x->peak < y->peak ? 1 : -1;
    return strcmp(x->key, y->key);
}

static void print_sites(FILE *out, fs_sites *s, size_t limit)
{
    char peak[32], total[32];
    size_t n = limit < s->n ? limit : s->n;
    if (!s->n) { /* not "the 0 sites ..." over nothing */
        fprintf(out, "  no allocation, so no site held memory at the peak\n");
        return;
    }
    qsort(s->all, s->n, sizeof *s->all, by_peak);
    if (n == 1)
        fprintf(out, "  the site (by %s) that held the most at the peak:\n",
                fs_site_by_name(s->by));
    else
        fprintf(out, "  the %zu sites (by %s) that held the most at the peak:\n", n,
                fs_site_by_name(s->by));
    for (size_t i = 0; i < n; i++) {
        fs_human_bytes(s->all[i].peak, peak, sizeof peak);
        fs_human_bytes(s->all[i].total, total, sizeof total);
        fprintf(out, "  %10s at the peak, %" PRIu64 " allocation%s (%s)\n", peak, s->all[i].count,
                fs_plural(s->all[i].count), total);
        fs_site_print_key(out, &s->all[i]);
    }
}

static void warn(void *ctx, const char *line)
{
    (void)ctx;
    fs_progress_warn("report", line);
}

/* ---- reading the traces, side by side (parallel.h) ----------------------------------- */

/* One trace: what a worker read, and the text it printed for it */
typedef struct report_file {
    bool read; /* it could be read */
    fs_report_figures fig;
    fs_sites sites;
    fs_timeline tl; /* --html: its timeline, one rank */
    fs_report_trace tr;
    char *text;
    size_t len;
} report_file;

typedef struct report_job {
    char **paths;
    report_file *files;
    fs_symbols *sym;
    enum fs_site_by by;
    bool full; /* --full-stacks */
    size_t limit;
    fs_report_html *html;
    fs_report_figures total;
    fs_sites all; /* every trace's sites, merged */
    int readable;
} report_job;

/* Worker: trace i read, its figures gathered and its text printed to memory */
static void read_trace(void *ctx, size_t i)
{
    report_job *job = ctx;
    report_file *f = &job->files[i];
    const char *path = job->paths[i];
    char err[4200], name[64];
    fs_reader *t = fs_reader_open(path, err, sizeof err);
    if (!t) {
        fs_progress_warn("report", err);
        return;
    }
    FILE *out = open_memstream(&f->text, &f->len);
    if (!out) fs_analysis_oom("report");
    fs_progress_watch(t);
    const fs_fmt_header *h = fs_reader_header(t);
    fprintf(out, "%s: pid %u on %s, %s\n", path, h->pid, h->host, h->exe);
    f->sites = (fs_sites){.by = job->by, .sym = job->sym, .full = job->full};
    reading rd = {&f->fig, job->html ? &f->tl : NULL};
    if (rd.tl) fs_tl_begin(rd.tl, t);
    fs_file_peaks peaks;
    if (job->limit) /* the figures read with the sites: the file once */
        fs_sites_read_trace(&f->sites, t, "report", &peaks, visit, &rd);
    else
        fs_reader_read_ordered(t, visit, warn, &rd);
    if (rd.tl) fs_tl_end(rd.tl);
    const fs_reader_damage *dmg = fs_reader_damage_of(t);
    snprintf(name, sizeof name, "%d", fs_reader_rank(t));
    fprintf(out, "  rank %s, %" PRIu64 " event%s over %.3f s%s",
            fs_reader_rank(t) >= 0 ? name : "?", f->fig.events, fs_plural(f->fig.events),
            (double)(f->fig.last_ns - f->fig.first_ns) / 1e9,
            dmg->dropped_events ? "" : ", none dropped\n");
    if (dmg->dropped_events)
        fprintf(out, ", %" PRIu64 " dropped by the writer (the disk was behind)\n",
                dmg->dropped_events);
    if (dmg->skipped_blocks)
        fprintf(out, "  damaged: %" PRIu64 " block%s skipped\n", dmg->skipped_blocks,
                fs_plural(dmg->skipped_blocks));
    f->tr = (fs_report_trace){path, *h, fs_reader_rank(t), *dmg, &f->fig};
    fs_reader_close(t);
    print_figures(out, &f->fig);
    if (f->fig.nooms) {
        fs_oom_options oo = {.sym = job->sym,
                             .holders = job->limit ? job->limit : 3,
                             .full = job->full,
                             .warn = fs_progress_warn,
                             .warn_ctx = "report",
                             .why = f->fig.oom_why,
                             .nwhy = f->fig.nooms};
        fs_oom_explain(out, path, &oo);
    }
    if (job->limit) print_sites(out, &f->sites, job->limit);
    fputc('\n', out);
    fclose(out);
    f->read = true;
}

/* In the order named: trace i printed and added to the job's figures */
static void merge_trace(void *ctx, size_t i)
{
    report_job *job = ctx;
    report_file *f = &job->files[i];
    if (!f->read) return;
    fwrite(f->text, 1, f->len, stdout);
    add_figures(&job->total, &f->fig);
    for (size_t k = 0; k < f->sites.n; k++)
        fs_sites_add(&job->all, &f->sites.all[k]);
    if (job->html) fs_report_html_end(job->html, &f->tr, job->limit ? &f->sites : NULL, &f->tl);
    fs_sites_free(&f->sites);
    free(f->text);
    job->readable++;
}

int command_report(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"by", required_argument, NULL, 'b'},    {"no-symbols", no_argument, NULL, 'N'},
        {"full-stacks", no_argument, NULL, 'W'}, {"html", required_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    report_job job = {.by = FS_BY_STACK, .limit = 5};
    bool symbols = true;
    int c, status = 0;
    const char *html_path = NULL;

    optind = 1;
    while ((c = fs_site_getopt(argc, argv, longopts, &job.by, &job.limit, &symbols, &job.full)) !=
           -1) {
        switch (c) {
        case 'h':
            usage_report(stdout);
            return 0;
        case 'H':
            html_path = optarg;
            break;
        default:
            return FS_EXIT_USAGE;
        }
    }
    if (optind >= argc) return fs_usage_error(argv[0], "no trace named");
    if (html_path && !(job.html = fs_report_html_open(html_path, job.limit)))
        return FS_EXIT_BAD_INPUT;
    if (symbols && !(job.sym = fs_symbols_create(fs_progress_warn, "report")))
        fs_analysis_oom("report");
    size_t n = (size_t)(argc - optind);
    job.paths = argv + optind;
    job.all = (fs_sites){.by = job.by, .sym = job.sym, .full = job.full};
    if (!(job.files = calloc(n, sizeof *job.files))) fs_analysis_oom("report");
    fs_par_read("report", n, job.paths, read_trace, merge_trace, &job);
    if ((size_t)job.readable < n) status = FS_EXIT_BAD_INPUT;
    if (job.readable > 1) {
        printf("all %d traces (devices summed over the ranks; each rank's peak is its own)\n",
               job.readable);
        print_figures(stdout, &job.total);
        if (job.limit) print_sites(stdout, &job.all, job.limit);
    }
    bool job_wide = job.readable > 1;
    if (job.html && !fs_report_html_finish(job.html, job_wide ? &job.total : NULL,
                                           job_wide && job.limit ? &job.all : NULL))
        status = FS_EXIT_BAD_INPUT;
    else if (job.html)
        fprintf(stderr, "fsdpshim report: the page is %s\n", html_path);
    free(job.files);
    fs_sites_free(&job.all);
    fs_symbols_destroy(job.sym);
    return status;
}
