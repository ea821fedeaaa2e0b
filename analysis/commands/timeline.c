/* timeline.c - `fsdpshim timeline TRACE...`: allocated and reserved device
 * memory over time, as text (docs/cli.md).
 *
 * Every memory event carries its device's totals after it, so the curve
 * needs no block tracking: the run's span is cut into equal intervals and
 * each interval shows the highest allocated and reserved figures reached
 * in it, per rank and device, as numbers and as a bar, then a row for the
 * state when the trace ended. Times are seconds since the (first) trace
 * began, as report and top give them. Several files are ranks of one job,
 * put on one clock through each header's wall-clock base (the monotonic
 * clocks of different hosts do not compare), and a last table sums the
 * ranks' highs. Two passes over each file: the span, then
 * the intervals, each over the files side by side (parallel.h); memory is
 * the intervals, never the events. */
#include "analysis.h"
#include "cmdline.h"
#include "parallel.h"
#include "progress.h"
#include "reader.h"
#include "sites.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 64

typedef struct series {
    int rank, device;
    const char *file;
    uint64_t *allocated, *reserved;                  /* per interval: the highest in it */
    uint64_t peak_allocated, peak_reserved, peak_at; /* peak_at: wall ns */
    size_t last;                          /* the interval of the latest event, + 1; 0: none yet */
    uint64_t allocated_now, reserved_now; /* the totals after the latest event */
    uint64_t last_at;                     /* wall ns of the latest event */
} series;

typedef struct timeline_run {
    size_t intervals, width;
    uint64_t start, end; /* wall-clock ns: the first trace's start, the last memory event */
    uint64_t events;     /* memory events in the span */
    uint64_t base;       /* this file's wall-clock ns at its time 0 */
    series *s;
    size_t ns;
    size_t file_first; /* this file's first series */
    int rank;
} timeline_run;

void usage_timeline(FILE *out)
{
    fprintf(out,
            "usage: fsdpshim timeline [--intervals N] [--width W] TRACE...\n"
            "\n"
            "Allocated and reserved device memory over the run, per rank and device: the run's\n"
            "span cut into N equal intervals [40], each with the highest allocated and reserved\n"
            "bytes reached in it, and a bar W characters wide [50] ('#' allocated, '-' reserved\n"
            "beyond it). Several traces are ranks of one job, put on one clock; a last table\n"
            "sums their highs.\n"
            "\n"
            "  --intervals N  how many rows, 1 to 400 [40]\n"
            "  --width W      the bar's width in characters, 1 to 400 [50]\n"
            "\n"
            "Times are seconds since the (first) trace began, as report and top give them;\n"
            "the last row, 'end', is the state when each trace ended.\n"
            "\n"
            "example:\n"
            "  fsdpshim timeline --intervals 20 --width 60 rank*.fst\n"
            "\n"
            "Exit status: 0 ok, 1 a file is not a readable trace, 2 usage.\n");
}

static bool is_memory(unsigned kind)
{
    return kind >= FS_REC_ALLOC && kind <= FS_REC_OOM;
}

static int span(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    timeline_run *o = ctx;
    (void)t, (void)tid;
    if (!is_memory(r->kind) || r->ev.device < 0) return 0;
    uint64_t at = o->base + r->ev.time_ns;
    if (at < o->start) o->start = at; /* an event before its trace's base: a damaged one */
    if (at > o->end) o->end = at;
    o->events++;
    return 0;
}

static series *series_of(timeline_run *o, int device)
{
    for (size_t i = o->file_first; i < o->ns; i++)
        if (o->s[i].device == device) return &o->s[i];
    series *more = realloc(o->s, (o->ns + 1) * sizeof *more);
    if (!more) fs_analysis_oom("timeline");
    o->s = more;
    series *s = &o->s[o->ns++];
    *s = (series){.rank = o->rank,
                  .device = device,
                  .allocated = calloc(o->intervals, sizeof(uint64_t)),
                  .reserved = calloc(o->intervals, sizeof(uint64_t))};
    if (!s->allocated || !s->reserved) fs_analysis_oom("timeline");
    return s;
}

static int fill(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    timeline_run *o = ctx;
    const fs_fmt_event *ev = &r->ev;
    (void)t, (void)tid;
    if (!is_memory(r->kind) || ev->device < 0 || ev->device >= MAX_DEVICES) return 0;
    uint64_t at = o->base + ev->time_ns, len = o->end - o->start + 1;
    /* len wraps to 0 when a damaged trace's times span all 2^64 ns */
    double span = len ? (double)len : 18446744073709551616.0;
    size_t k = (size_t)((double)(at - o->start) / span * (double)o->intervals);
    if (k >= o->intervals) k = o->intervals - 1;
    series *s = series_of(o, ev->device);
    /* intervals without events hold what the previous one ended with, and
     * an interval's high includes the state it began with */
    for (size_t j = s->last; s->last && j <= k && j < o->intervals; j++) {
        if (s->allocated_now > s->allocated[j]) s->allocated[j] = s->allocated_now;
        if (s->reserved_now > s->reserved[j]) s->reserved[j] = s->reserved_now;
    }
    s->last = k + 1;
    s->allocated_now = ev->allocated;
    s->reserved_now = ev->reserved;
    s->last_at = at;
    if (ev->allocated > s->allocated[k]) s->allocated[k] = ev->allocated;
    if (ev->reserved > s->reserved[k]) s->reserved[k] = ev->reserved;
    if (ev->allocated > s->peak_allocated) {
        s->peak_allocated = ev->allocated;
        s->peak_at = at;
    }
    if (ev->reserved > s->peak_reserved) s->peak_reserved = ev->reserved;
    return 0;
}

static void warn(void *ctx, const char *line)
{
    (void)ctx;
    fs_progress_warn("timeline", line);
}

/* Reads one file with visitor v into o; false when it cannot be opened. */
static bool read_file(timeline_run *o, const char *path, fs_reader_visit v, bool warnings)
{
    char err[4200];
    fs_reader *t = fs_reader_open(path, err, sizeof err);
    if (!t) {
        if (warnings) fs_progress_warn("timeline", err);
        return false;
    }
    fs_progress_watch(t);
    const fs_fmt_header *h = fs_reader_header(t);
    o->base = h->clock_real_ns;
    if (o->base < o->start) o->start = o->base; /* time 0 of the trace */
    o->file_first = o->ns;
    fs_reader_read(t, v, warnings ? warn : NULL, o);
    o->rank = fs_reader_rank(t) >= 0 ? fs_reader_rank(t) : -(int)h->pid;
    for (size_t i = o->file_first; i < o->ns; i++)
        o->s[i].rank = o->rank;
    fs_reader_close(t);
    return true;
}

/* ---- the two passes, each over the files side by side (parallel.h) ------------------- */

typedef struct timeline_job {
    timeline_run *run;
    char **paths;
    timeline_run *files; /* each file's own reading */
    bool *read;
    size_t unread;
} timeline_job;

static void read_span(void *ctx, size_t i)
{
    timeline_job *job = ctx;
    job->files[i] = (timeline_run){.start = UINT64_MAX};
    job->read[i] = read_file(&job->files[i], job->paths[i], span, true);
}

static void merge_span(void *ctx, size_t i)
{
    timeline_job *job = ctx;
    const timeline_run *f = &job->files[i];
    if (!job->read[i]) job->unread++;
    if (f->start < job->run->start) job->run->start = f->start;
    if (f->end > job->run->end) job->run->end = f->end;
    job->run->events += f->events;
}

static void read_fill(void *ctx, size_t i)
{
    timeline_job *job = ctx;
    const timeline_run *o = job->run;
    job->files[i] = (timeline_run){
        .intervals = o->intervals, .width = o->width, .start = o->start, .end = o->end};
    if (job->read[i]) job->read[i] = read_file(&job->files[i], job->paths[i], fill, false);
}

static void merge_fill(void *ctx, size_t i)
{
    timeline_job *job = ctx;
    timeline_run *o = job->run, *f = &job->files[i];
    if (f->ns) {
        series *more = realloc(o->s, (o->ns + f->ns) * sizeof *more);
        if (!more) fs_analysis_oom("timeline");
        o->s = more;
        for (size_t k = 0; k < f->ns; k++) {
            f->s[k].file = job->paths[i];
            o->s[o->ns++] = f->s[k];
        }
    }
    free(f->s);
}

/* The series of the n files into o (its span first, then the intervals);
 * false when a file could not be read. */
static bool read_files(timeline_run *o, size_t n, char **paths)
{
    timeline_job job = {o, paths, calloc(n, sizeof *job.files), calloc(n, sizeof *job.read), 0};
    if (!job.files || !job.read) fs_analysis_oom("timeline");
    fs_par_read("timeline", n, paths, read_span, merge_span, &job);
    if (o->events) fs_par_read("timeline", n, paths, read_fill, merge_fill, &job);
    free(job.files);
    free(job.read);
    return !job.unread;
}

/* The part of a bar's width that bytes fill on scale, all of it at most: the
 * scale is the highest reserved figure, and a damaged trace's allocated
 * figure can pass it (a double beyond size_t would not convert). */
static size_t filled(uint64_t bytes, uint64_t scale, size_t width)
{
    if (!scale) return 0;
    if (bytes >= scale) return width;
    return (size_t)((double)bytes / (double)scale * (double)width + 0.5);
}

static void bar(char *buf, size_t width, uint64_t allocated, uint64_t reserved, uint64_t scale)
{
    size_t a = filled(allocated, scale, width), r = filled(reserved, scale, width);
    for (size_t i = 0; i < width; i++)
        buf[i] = i < a ? '#' : i < r ? '-' : ' ';
    buf[width] = '\0';
}

/* The intervals' rows, then the state at the end: after the latest event,
 * at end_at (wall ns). */
static void print_series(const timeline_run *o, const char *title, const uint64_t *allocated,
                         const uint64_t *reserved, uint64_t scale, uint64_t end_allocated,
                         uint64_t end_reserved, uint64_t end_at)
{
    char a[32], r[32], line[512];
    double step = (double)(o->end - o->start + 1) / (double)o->intervals / 1e9;

    printf("%s\n%14s %12s %12s\n", title, "time", "allocated", "reserved");
    for (size_t k = 0; k < o->intervals; k++) {
        fs_human_bytes(allocated[k], a, sizeof a);
        fs_human_bytes(reserved[k], r, sizeof r);
        bar(line, o->width, allocated[k], reserved[k], scale);
        printf("%12.6f s %12s %12s |%s|\n", step * (double)k, a, r, line);
    }
    fs_human_bytes(end_allocated, a, sizeof a);
    fs_human_bytes(end_reserved, r, sizeof r);
    bar(line, o->width, end_allocated, end_reserved, scale);
    printf("%12.6f s %12s %12s |%s| end\n", (double)(end_at - o->start) / 1e9, a, r, line);
}

int command_timeline(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"intervals", required_argument, NULL, 'i'},
        {"width", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    timeline_run o = {.intervals = 40, .width = 50, .start = UINT64_MAX};
    int c, status = 0;
    uint64_t v;

    optind = 1;
    while ((c = fs_getopt(argc, argv, "h", longopts)) != -1) {
        switch (c) {
        case 'i':
        case 'w':
            if (!fs_parse_count(optarg, 400, &v) || v < 1)
                return fs_usage_error(argv[0], "%s '%s': not a number from 1 to 400",
                                      c == 'i' ? "--intervals" : "--width", optarg);
            *(c == 'i' ? &o.intervals : &o.width) = (size_t)v;
            break;
        default: /* -h, or a mistake fs_getopt has said */
            return fs_option_rest(c, usage_timeline);
        }
    }
    if (optind >= argc) return fs_usage_error(argv[0], "no trace named");
    if (!read_files(&o, (size_t)(argc - optind), argv + optind)) status = FS_EXIT_BAD_INPUT;
    if (!o.events) {
        printf("no memory events\n");
        return status;
    }

    uint64_t scale = 0;
    for (size_t i = 0; i < o.ns; i++)
        for (size_t k = 0; k < o.intervals; k++)
            if (o.s[i].reserved[k] > scale) scale = o.s[i].reserved[k];
    printf("%zu series over %.6f s, %zu intervals of %.6f s; one bar scale: %.1f MiB\n", o.ns,
           (double)(o.end - o.start) / 1e9, o.intervals,
           (double)(o.end - o.start + 1) / (double)o.intervals / 1e9, (double)scale / (1 << 20));
    for (size_t i = 0; i < o.ns; i++) {
        const series *s = &o.s[i];
        char title[4400], a[32], r[32];
        fs_human_bytes(s->peak_allocated, a, sizeof a);
        fs_human_bytes(s->peak_reserved, r, sizeof r);
        snprintf(title, sizeof title,
                 "\n%s: %s %d, device %d: peak allocated %s at %.6f s, peak "
                 "reserved %s",
                 s->file, s->rank >= 0 ? "rank" : "pid", s->rank >= 0 ? s->rank : -s->rank,
                 s->device, a, (double)(s->peak_at - o.start) / 1e9, r);
        print_series(&o, title, s->allocated, s->reserved, scale, s->allocated_now, s->reserved_now,
                     s->last_at);
    }
    if (o.ns > 1) {
        uint64_t *ta = calloc(o.intervals, sizeof *ta), *tr = calloc(o.intervals, sizeof *tr);
        uint64_t tscale = 0, end_a = 0, end_r = 0, end_at = 0;
        if (!ta || !tr) fs_analysis_oom("timeline");
        for (size_t i = 0; i < o.ns; i++) {
            for (size_t k = 0; k < o.intervals; k++) {
                ta[k] += o.s[i].allocated[k];
                tr[k] += o.s[i].reserved[k];
                if (tr[k] > tscale) tscale = tr[k];
            }
            end_a += o.s[i].allocated_now;
            end_r += o.s[i].reserved_now;
            if (o.s[i].last_at > end_at) end_at = o.s[i].last_at;
        }
        if (end_r > tscale) tscale = end_r;
        print_series(&o,
                     "\nall ranks and devices (the sum of each one's highs in the interval; own "
                     "bar scale)",
                     ta, tr, tscale, end_a, end_r, end_at);
        free(ta);
        free(tr);
    }
    for (size_t i = 0; i < o.ns; i++) {
        free(o.s[i].allocated);
        free(o.s[i].reserved);
    }
    free(o.s);
    return status;
}
