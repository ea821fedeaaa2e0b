/* report_html.c - `fsdpshim report --html FILE`: the report as one
 * self-contained HTML page (docs/cli.md). No script, font or style comes
 * from anywhere else: the page opens from disk on a machine without a
 * network.
 *
 * This file owns the page: what it keeps of each trace as report.c reads
 * them (report.h: the figures the text prints, the sites, and through
 * report_timeline.c the timeline), its frame, and its tables, the same
 * numbers the text prints plus what only the page shows (each stream's
 * memory, the deferred frees, the blocks live at exit); report_svg.c draws
 * the charts. Every string from a trace (paths, host names, NVTX names,
 * symbolised frames) goes through fs_html_esc(): a trace is input, and a
 * range named "</svg><script>" must stay text. The page is also
 * well-formed XML, so that tests (and tools) can parse it strictly. */
#include "report_html.h"

#include "render.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static char *dup_or_die(const char *s)
{
    char *d = strdup(s);
    if (!d) fs_analysis_oom("report");
    return d;
}

fs_report_html *fs_report_html_open(const char *path, size_t limit)
{
    fs_report_html *h = fs_html_alloc(1, sizeof *h);
    if (!(h->f = fopen(path, "w"))) {
        fprintf(stderr, "fsdpshim report: cannot write %s: %s\n", path, strerror(errno));
        free(h);
        return NULL;
    }
    h->path = dup_or_die(path);
    h->limit = limit;
    return h;
}

static fs_html_site row_of(const fs_site *s)
{
    return (fs_html_site){.key = dup_or_die(s->key),
                          .peak = s->peak,
                          .count = s->count,
                          .total = s->total,
                          .live = s->live,
                          .live_bytes = s->live_bytes,
                          .ranks = s->ranks};
}

static int by_live_bytes(const void *a, const void *b)
{
    const fs_site *x = *(const fs_site *const *)a, *y = *(const fs_site *const *)b;
    if (x->live_bytes != y->live_bytes) return x->live_bytes < y->live_bytes ? 1 : -1;
    if (x->live != y->live) return x->live < y->live ? 1 : -1;
    return strcmp(x->key, y->key);
}

/* The first `limit` sites of s (sorted by peak), and the `limit` that held
 * the most when the trace ended */
static fs_html_sites rows_of(const fs_sites *s, size_t limit)
{
    fs_html_sites out = {.read = true, .by = s->by};
    const fs_site **held = fs_html_alloc(s->n, sizeof *held);
    size_t nheld = 0;

    out.ntop = limit < s->n ? limit : s->n;
    out.top = fs_html_alloc(out.ntop, sizeof *out.top);
    for (size_t i = 0; i < out.ntop; i++)
        out.top[i] = row_of(&s->all[i]);
    for (size_t i = 0; i < s->n; i++)
        if (s->all[i].live) {
            held[nheld++] = &s->all[i];
            out.live += s->all[i].live;
            out.live_bytes += s->all[i].live_bytes;
        }
    qsort(held, nheld, sizeof *held, by_live_bytes);
    out.nleaks = limit < nheld ? limit : nheld;
    out.leaks = fs_html_alloc(out.nleaks, sizeof *out.leaks);
    for (size_t i = 0; i < out.nleaks; i++)
        out.leaks[i] = row_of(held[i]);
    free(held);
    return out;
}

static void free_rows(fs_html_sites *r)
{
    for (size_t i = 0; i < r->ntop; i++)
        free(r->top[i].key);
    for (size_t i = 0; i < r->nleaks; i++)
        free(r->leaks[i].key);
    free(r->top);
    free(r->leaks);
}

void fs_report_html_end(fs_report_html *h, const fs_report_trace *tr, const fs_sites *sites,
                        fs_timeline *tl)
{
    fs_html_trace *more = realloc(h->traces, (h->ntraces + 1) * sizeof *more);
    if (!more) fs_analysis_oom("report");
    h->traces = more;
    fs_tl_adopt(&h->tl, tl);
    fs_html_trace *p = &h->traces[h->ntraces++];
    *p = (fs_html_trace){.path = dup_or_die(tr->path),
                         .header = tr->header,
                         .rank = tr->rank,
                         .damage = tr->damage,
                         .fig = *tr->fig};
    if (sites) p->sites = rows_of(sites, h->limit);
}

/* ---- text ---------------------------------------------------------------------------- */

static void td_bytes(FILE *f, uint64_t bytes)
{
    char b[32];
    fs_human_bytes(bytes, b, sizeof b);
    fprintf(f, "<td class=\"n\" data-bytes=\"%" PRIu64 "\">%s</td>", bytes, b);
}

static void td_count(FILE *f, uint64_t n)
{
    fprintf(f, "<td class=\"n\">%" PRIu64 "</td>", n);
}

/* A time as the text prints it: seconds into the trace */
static void td_seconds(FILE *f, uint64_t ns)
{
    fprintf(f, "<td class=\"n\">%.3f</td>", (double)ns / 1e9);
}

/* A wait, "-" when there was none to measure */
static void td_duration(FILE *f, uint64_t ns, bool any)
{
    char b[32];
    if (!any) {
        fputs("<td class=\"n\">-</td>", f);
        return;
    }
    fs_human_duration(ns, b, sizeof b);
    fprintf(f, "<td class=\"n\">%s</td>", b);
}

static void td_text(FILE *f, const char *s)
{
    fputs("<td>", f);
    fs_html_esc(f, s, 0);
    fputs("</td>", f);
}

static void td_trace(FILE *f, const fs_html_trace *p)
{
    char name[32];
    fs_html_trace_name(p, name, sizeof name);
    td_text(f, name);
}

static void td_stream(FILE *f, uint64_t stream)
{
    char name[64];
    fs_html_stream_name(stream, name, sizeof name);
    td_text(f, name);
}

/* A row's start; a row that sums the traces is in bold (tr.total) */
static void tr_begin(FILE *f, bool total)
{
    fprintf(f, "<tr%s>", total ? " class=\"total\"" : "");
}

/* ---- the tables -------------------------------------------------------------------------- */

static void traces_table(fs_report_html *h)
{
    FILE *f = h->f;
    fputs("<h2 id=\"traces\">Traces</h2>\n<p class=\"note\">One trace file per process (a "
          "rank). Events: the allocator's and the program's records in it; dropped: events the "
          "shim could not write in time (the disk was behind), counted but lost; damaged parts: "
          "pieces of the file that could not be read (a torn end, a bad checksum), "
          "skipped.</p>\n<table>\n<tr><th>trace</th><th>file</th><th>pid</th><th>host</th>"
          "<th>program</th><th>events</th><th>time span (s)</th><th>events dropped</th>"
          "<th>damaged parts skipped</th></tr>\n",
          f);
    for (size_t i = 0; i < h->ntraces; i++) {
        const fs_html_trace *p = &h->traces[i];
        fputs("<tr>", f);
        td_trace(f, p);
        td_text(f, p->path);
        td_count(f, p->header.pid);
        td_text(f, p->header.host);
        td_text(f, p->header.exe);
        td_count(f, p->fig.events);
        td_seconds(f, p->fig.last_ns - p->fig.first_ns);
        td_count(f, p->damage.dropped_events);
        td_count(f, p->damage.skipped_blocks);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void peak_row(FILE *f, const char *who, int d, const fs_report_device *x, bool total)
{
    tr_begin(f, total);
    td_text(f, who);
    td_count(f, (uint64_t)d);
    td_bytes(f, x->peak_allocated);
    td_seconds(f, x->peak_allocated_at);
    td_bytes(f, x->reserved_at_peak);
    if (x->reserved_at_peak >= x->peak_allocated && x->peak_allocated) {
        td_bytes(f, x->reserved_at_peak - x->peak_allocated);
        fprintf(f, "<td class=\"n\">%.1f%%</td>",
                100.0 * (double)(x->reserved_at_peak - x->peak_allocated) /
                    (double)x->peak_allocated);
    } else {
        fputs("<td class=\"n\">-</td><td class=\"n\">-</td>", f);
    }
    td_bytes(f, x->peak_reserved);
    td_seconds(f, x->peak_reserved_at);
    td_count(f, x->allocs);
    td_bytes(f, x->alloc_bytes);
    td_count(f, x->segments);
    td_bytes(f, x->segment_bytes);
    td_count(f, x->segment_frees);
    td_bytes(f, x->last_allocated);
    td_count(f, x->ooms);
    fputs("</tr>\n", f);
}

static void peaks_table(fs_report_html *h, const fs_report_figures *total)
{
    FILE *f = h->f;
    char name[32], all[64];
    fputs("<h2 id=\"peaks\">Peaks</h2>\n<p class=\"note\">Per rank and device. Allocated: "
          "the bytes of the blocks the program holds (allocated and not yet freed); reserved: "
          "what the cache holds from CUDA, in segments (one <code>cudaMalloc</code> or mapping "
          "each), allocated blocks and free ones. The peak of allocated bytes and when (seconds "
          "into the trace), what was reserved then and how much of it the cache held free "
          "(the cache's overhead at the peak, fragmentation included), the peak of reserved "
          "bytes, the allocations and the segments.",
          f);
    if (total) fputs(" The totals sum the ranks' devices; each rank's peak is its own moment.", f);
    fputs("</p>\n<table>\n<tr><th>trace</th><th>device</th><th>peak allocated</th><th>at "
          "(s)</th><th>reserved then</th><th>free in the cache then</th><th>the cache's "
          "overhead (% of allocated)</th><th>peak reserved</th><th>at (s)</th><th>allocations"
          "</th><th>their bytes</th><th>segments reserved</th><th>their bytes</th><th>segments "
          "released</th><th>allocated when the trace ended</th><th>out-of-memory events</th>"
          "</tr>\n",
          f);
    for (size_t i = 0; i < h->ntraces; i++) {
        fs_html_trace_name(&h->traces[i], name, sizeof name);
        for (int d = 0; d < FS_REPORT_MAX_DEVICES; d++)
            if (h->traces[i].fig.dev[d].seen) peak_row(f, name, d, &h->traces[i].fig.dev[d], false);
    }
    snprintf(all, sizeof all, "all %zu traces", h->ntraces);
    for (int d = 0; total && d < FS_REPORT_MAX_DEVICES; d++)
        if (total->dev[d].seen) peak_row(f, all, d, &total->dev[d], true);
    fputs("</table>\n", f);
}

static void ooms_table(fs_report_html *h)
{
    FILE *f = h->f;
    uint64_t counted = 0, listed = 0;

    fputs("<h2 id=\"ooms\">Out-of-memory events</h2>\n", f);
    for (size_t i = 0; i < h->ntraces; i++) {
        for (int d = 0; d < FS_REPORT_MAX_DEVICES; d++)
            counted += h->traces[i].fig.dev[d].ooms;
        listed += h->traces[i].fig.nooms;
    }
    if (!counted) {
        fputs("<p class=\"note\">None.</p>\n", f);
        return;
    }
    fputs("<p class=\"note\">With the figures the allocator reported when the request failed "
          "(seconds into the trace), and why, as the text explains it.</p>\n<table>\n"
          "<tr><th>trace</th><th>at (s)</th><th>device</th>"
          "<th>stream</th><th>requested</th><th>allocated</th><th>reserved</th><th>free in the "
          "cache</th><th>largest free block</th><th>why</th></tr>\n",
          f);
    for (size_t i = 0; i < h->ntraces; i++)
        for (size_t o = 0; o < h->traces[i].fig.nooms; o++) {
            const fs_fmt_event *ev = &h->traces[i].fig.ooms[o];
            uint64_t spare = ev->reserved > ev->allocated ? ev->reserved - ev->allocated : 0;
            fputs("<tr>", f);
            td_trace(f, &h->traces[i]);
            td_seconds(f, ev->time_ns);
            td_count(f, (uint64_t)ev->device);
            td_stream(f, ev->stream);
            td_bytes(f, ev->size);
            td_bytes(f, ev->allocated);
            td_bytes(f, ev->reserved);
            td_bytes(f, spare);
            td_bytes(f, ev->aux);
            fputs("<td>", f);
            fs_html_esc(f, h->traces[i].fig.oom_why[o], 0);
            fputs("</td></tr>\n", f);
        }
    fputs("</table>\n", f);
    if (counted > listed)
        fprintf(f,
                "<p class=\"note\">%" PRIu64 " more, not listed (the first %d of each trace "
                "are).</p>\n",
                counted - listed, FS_REPORT_MAX_OOMS);
}

static void streams_tables(fs_report_html *h)
{
    FILE *f = h->f;
    fputs("<h2 id=\"streams\">Streams</h2>\n<table>\n<tr><th>trace</th><th>created</th><th>reused "
          "from the shim's stream pool</th><th>destroyed</th></tr>\n",
          f);
    for (size_t i = 0; i < h->ntraces; i++) {
        const fs_report_figures *x = &h->traces[i].fig;
        fputs("<tr>", f);
        td_trace(f, &h->traces[i]);
        td_count(f, x->streams_created);
        td_count(f, x->streams_reused);
        td_count(f, x->streams_destroyed);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n<p class=\"note\">Each stream's memory: its allocations, the most it held "
          "in blocks not yet freed, the most the cache reserved for it (the segments of its "
          "pool: the cache keeps free blocks per stream), and its frees that were held back "
          "until every stream that used the block had finished the work queued before the free "
          "(deferred frees), with how long they waited, from the program's free to the "
          "allocator's release. The colour is its curve's in the chart.</p>\n<table>\n<tr>"
          "<th></th><th>trace</th><th>device</th><th>stream</th><th>created in the trace</th>"
          "<th>allocations</th><th>their bytes</th><th>peak allocated</th><th>peak reserved for "
          "it</th><th>frees held back</th><th>their bytes</th><th>mean wait</th><th>longest "
          "wait</th></tr>\n",
          f);
    uint64_t idle = 0;
    for (size_t i = 0; i < h->ntraces; i++) {
        const fs_tl_rank *r = &h->tl.ranks[i];
        for (size_t s = 0; s < r->nseries; s++) {
            const fs_tl_series *x = &r->series[s], *drawn[FS_HTML_MAX_STREAMS];
            size_t n = x->is_stream ? fs_html_drawn_streams(r, x->device, drawn) : 0, colour = n;
            if (!x->is_stream) continue;
            /* a stream pool creates dozens of streams that never allocate:
             * counted below, not listed */
            if (!x->allocs && !x->peak_reserved && !x->held_back) {
                idle++;
                continue;
            }
            for (size_t k = 0; k < n; k++)
                if (drawn[k] == x) colour = k;
            if (colour < n)
                fprintf(f, "<tr><td><i class=\"sw\" style=\"background:%s\"></i></td>",
                        fs_html_palette[colour]);
            else
                fputs("<tr><td></td>", f);
            td_trace(f, &h->traces[i]);
            td_count(f, (uint64_t)x->device);
            td_stream(f, x->stream);
            if (x->created)
                fprintf(f, "<td>yes, priority %d</td>", x->priority);
            else
                fputs("<td>no</td>", f);
            td_count(f, x->allocs);
            td_bytes(f, x->alloc_bytes);
            td_bytes(f, x->peak_allocated);
            td_bytes(f, x->peak_reserved);
            td_count(f, x->held_back);
            td_bytes(f, x->held_back_bytes);
            td_duration(f, x->held_back ? x->held_back_ns / x->held_back : 0, x->held_back);
            td_duration(f, x->longest_held_back_ns, x->held_back);
            fputs("</tr>\n", f);
        }
    }
    fputs("</table>\n", f);
    if (idle)
        fprintf(f,
                "<p class=\"note\">%" PRIu64 " more stream%s (created, or seen, but never "
                "allocated on and never reserved for) not listed.</p>\n",
                idle, fs_plural(idle));
}

static void deferred_table(fs_report_html *h)
{
    FILE *f = h->f;
    fputs("<h2 id=\"deferred\">Deferred frees</h2>\n<p class=\"note\">Frees the allocator held "
          "back until every stream that used the block had finished the work queued before the "
          "free (a <code>cudaFree</code>, or a <code>cudaFreeAsync</code> of a block used on "
          "other streams): their bytes cannot be reused meanwhile. The wait runs from the "
          "program's free to the allocator's release.</p>\n<table>\n<tr><th>trace</th><th>frees "
          "held back</th><th>their bytes</th>"
          "<th>mean wait</th><th>longest wait</th></tr>\n",
          f);
    for (size_t i = 0; i < h->ntraces; i++) {
        const fs_tl_rank *r = &h->tl.ranks[i];
        uint64_t n = 0, bytes = 0, ns = 0, longest = 0;
        for (size_t s = 0; s < r->nseries; s++) {
            n += r->series[s].held_back;
            bytes += r->series[s].held_back_bytes;
            ns += r->series[s].held_back_ns;
            if (r->series[s].longest_held_back_ns > longest)
                longest = r->series[s].longest_held_back_ns;
        }
        fputs("<tr>", f);
        td_trace(f, &h->traces[i]);
        td_count(f, n);
        td_bytes(f, bytes);
        td_duration(f, n ? ns / n : 0, n);
        td_duration(f, longest, n);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void wait_row(FILE *f, const char *who, const fs_report_figures *x, bool total)
{
    tr_begin(f, total);
    td_text(f, who);
    td_count(f, x->waits);
    fprintf(f, "<td class=\"n\">%.3f</td><td class=\"n\">%.3f</td></tr>\n",
            (double)x->wait_ns / 1e6, (double)x->longest_wait_ns / 1e6);
}

static void rate_limiter_table(fs_report_html *h, const fs_report_figures *total)
{
    FILE *f = h->f;
    char name[64];
    fputs("<h2 id=\"ratelimiter\">Rate limiter</h2>\n<p class=\"note\">All-gathers that waited "
          "for the rate limiter: it holds a new all-gather back while too many are in flight "
          "(<code>ag_limit</code>) or too many bytes (<code>ag_limit_mb</code>), until the "
          "oldest one's output buffer is freed and done with, as FSDP's "
          "<code>limit_all_gathers</code> does.</p>\n<table>\n<tr><th>trace</th><th>all-gathers "
          "that waited</th><th>total wait (ms)</th><th>longest wait (ms)</th></tr>\n",
          f);
    for (size_t i = 0; i < h->ntraces; i++) {
        fs_html_trace_name(&h->traces[i], name, sizeof name);
        wait_row(f, name, &h->traces[i].fig, false);
    }
    snprintf(name, sizeof name, "all %zu traces", h->ntraces);
    if (total) wait_row(f, name, total, true);
    fputs("</table>\n", f);
}

static void collective_rows(FILE *f, const char *who, const fs_report_figures *x, bool total)
{
    for (int k = 0; k < FS_REPORT_MAX_COLL; k++)
        if (x->coll_count[k]) {
            const char *op = fs_fmt_coll_name((unsigned)k);
            tr_begin(f, total);
            td_text(f, who);
            td_text(f, op ? op : "?");
            td_count(f, x->coll_count[k]);
            td_bytes(f, x->coll_bytes[k]);
            fputs("</tr>\n", f);
        }
}

static void collectives_table(fs_report_html *h, const fs_report_figures *total)
{
    FILE *f = h->f;
    char name[64];
    uint64_t any = 0;
    for (size_t i = 0; i < h->ntraces; i++)
        for (int k = 0; k < FS_REPORT_MAX_COLL; k++)
            any += h->traces[i].fig.coll_count[k];
    fputs("<h2 id=\"collectives\">Collectives</h2>\n", f);
    if (!any) {
        fputs("<p class=\"note\">None.</p>\n", f);
        return;
    }
    fputs("<p class=\"note\">NCCL calls by operation, and the bytes of their buffers.</p>\n<table>"
          "\n<tr><th>trace</th><th>operation</th><th>calls</th><th>bytes</th></tr>\n",
          f);
    for (size_t i = 0; i < h->ntraces; i++) {
        fs_html_trace_name(&h->traces[i], name, sizeof name);
        collective_rows(f, name, &h->traces[i].fig, false);
    }
    snprintf(name, sizeof name, "all %zu traces", h->ntraces);
    if (total) collective_rows(f, name, total, true);
    fputs("</table>\n", f);
}

static void site_key(FILE *f, const char *key)
{
    fputs("<td><pre>", f);
    fs_html_esc(f, key, 0);
    fputs("</pre></td>", f);
}

/* A table of sites' heading, as the text words it: "the site" for one,
 * none said in words */
static void top_heading(FILE *f, const char *who, const fs_html_sites *s)
{
    fputs("<h3>", f);
    fs_html_esc(f, who, 0);
    if (!s->ntop)
        fputs(": no allocation, so no site held memory at the peak</h3>\n", f);
    else if (s->ntop == 1)
        fprintf(f, ": the site (by %s) that held the most at the peak</h3>\n",
                fs_site_by_name(s->by));
    else
        fprintf(f, ": the %zu sites (by %s) that held the most at the peak</h3>\n", s->ntop,
                fs_site_by_name(s->by));
}

static void top_rows(FILE *f, const fs_html_sites *s, bool ranks)
{
    fprintf(f,
            "<table>\n<tr><th>held at the peak</th><th>allocations</th><th>their bytes</th>%s"
            "<th>site</th></tr>\n",
            ranks ? "<th>ranks</th>" : "");
    for (size_t i = 0; i < s->ntop; i++) {
        fputs("<tr>", f);
        td_bytes(f, s->top[i].peak);
        td_count(f, s->top[i].count);
        td_bytes(f, s->top[i].total);
        if (ranks) td_count(f, s->top[i].ranks);
        site_key(f, s->top[i].key);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void leak_rows(FILE *f, const fs_html_sites *s, bool ranks)
{
    char b[32];
    fs_human_bytes(s->live_bytes, b, sizeof b);
    fprintf(f, "<p>%" PRIu64 " block%s, %s, still allocated when the trace%s ended", s->live,
            fs_plural(s->live), b, ranks ? "s" : "");
    if (!s->nleaks) {
        fputs(".</p>\n", f);
        return;
    }
    if (s->nleaks == 1)
        fputs("; the site that held the most:</p>\n", f);
    else
        fprintf(f, "; the %zu sites that held the most:</p>\n", s->nleaks);
    fprintf(f,
            "<table>\n<tr><th>still allocated at the end</th><th>blocks</th>%s<th>site</th>"
            "</tr>\n",
            ranks ? "<th>ranks</th>" : "");
    for (size_t i = 0; i < s->nleaks; i++) {
        fputs("<tr>", f);
        td_bytes(f, s->leaks[i].live_bytes);
        td_count(f, s->leaks[i].live);
        if (ranks) td_count(f, s->leaks[i].ranks);
        site_key(f, s->leaks[i].key);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void sites_tables(fs_report_html *h, const fs_html_sites *all)
{
    FILE *f = h->f;
    char name[64];
    bool any = all != NULL;

    for (size_t i = 0; i < h->ntraces; i++)
        any |= h->traces[i].sites.read;
    fputs("<h2 id=\"sites\">Top sites</h2>\n", f);
    if (any)
        fputs("<p class=\"note\">Where the memory held at the peak was allocated: a site is the "
              "allocating stack (<code>--by stack</code>, the Python frames among the native "
              "ones, the Python interpreter's and PyTorch's dispatcher's frames folded unless "
              "<code>--full-stacks</code>), its "
              "first frame, its NVTX ranges or its Python stack; its bytes held at the peak "
              "(the moment its rank's allocated total was highest), and all it allocated.</p>\n",
              f);
    if (!any) {
        fputs("<p class=\"note\">Not read (-n 0).</p>\n<h2 id=\"leaks\">Leaks at exit</h2>\n"
              "<p class=\"note\">Not read (-n 0).</p>\n",
              f);
        return;
    }
    for (size_t i = 0; i < h->ntraces; i++) {
        const fs_html_sites *s = &h->traces[i].sites;
        if (!s->read) continue;
        fs_html_trace_name(&h->traces[i], name, sizeof name);
        top_heading(f, name, s);
        if (s->ntop) top_rows(f, s, false);
    }
    if (all) {
        snprintf(name, sizeof name, "all %zu traces", h->ntraces);
        top_heading(f, name, all);
        if (all->ntop) top_rows(f, all, true);
    }
    fputs("<h2 id=\"leaks\">Leaks at exit</h2>\n<p class=\"note\">Blocks allocated and never "
          "freed by the end of the trace, by site (<code>fsdpshim leaks</code> adds "
          "suppressions).</p>\n",
          f);
    for (size_t i = 0; i < h->ntraces; i++) {
        const fs_html_sites *s = &h->traces[i].sites;
        if (!s->read) continue;
        fs_html_trace_name(&h->traces[i], name, sizeof name);
        fprintf(f, "<h3>%s</h3>\n", name);
        leak_rows(f, s, false);
    }
    if (all) {
        fprintf(f, "<h3>all %zu traces</h3>\n", h->ntraces);
        leak_rows(f, all, true);
    }
}

/* ---- the page ------------------------------------------------------------------------------ */

static const char style_sheet[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;"
    "margin:20px 28px;color:#1f2328;background:#fff}"
    "h1{font-size:22px;margin:0 0 4px}"
    "h2{font-size:18px;margin:30px 0 8px;padding-bottom:3px;border-bottom:1px solid #d8dee4}"
    "h3{font-size:14px;margin:18px 0 4px}"
    "nav{margin:8px 0 4px}nav a{margin-right:14px;color:#0b62c4;text-decoration:none}"
    "table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}"
    "th,td{border:1px solid #d8dee4;padding:3px 8px;vertical-align:top;text-align:left}"
    "th{background:#f3f5f8;font-weight:600}td{white-space:nowrap}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    "tr.total td{font-weight:600;background:#f8f9fb}"
    "pre{margin:0;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap}"
    "code{font:12px ui-monospace,Menlo,Consolas,monospace}"
    ".note{color:#57606a;max-width:1150px;margin:4px 0 8px}"
    ".chart{display:block;margin:2px 0 0}"
    ".chart text{font:11px system-ui,sans-serif;fill:#57606a}"
    ".chart text.range{font-size:10px;fill:#1f2328;pointer-events:none}"
    ".chart text.lane{font-size:10px}"
    ".chart text.caption{font-size:10px}"
    ".grid{stroke:#eceff2}.axis{stroke:#8c959f}.tick{stroke:#8c959f}"
    ".reserved{fill:#b9d3ee;stroke:#6f9fd3;stroke-width:1}"
    ".allocated{fill:#3e7cc0;fill-opacity:.75;stroke:#1c4f8c;stroke-width:1}"
    ".chart path[style]{fill:none;stroke-width:1.5}"
    ".peak{fill:#fff;stroke:#1c4f8c;stroke-width:2}"
    ".oom{stroke:#d00;stroke-width:2;stroke-dasharray:4 2}"
    ".legend{font-size:12px;margin:0 0 20px 104px;max-width:1080px}"
    ".legend span{display:inline-block;margin:0 16px 2px 0}"
    ".sw{display:inline-block;width:12px;height:12px;margin-right:5px;vertical-align:-2px;"
    "border-radius:2px}";

static void page(fs_report_html *h, const fs_report_figures *total, const fs_html_sites *all)
{
    FILE *f = h->f;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>fsdpshim "
          "report",
          f);
    for (size_t i = 0; i < h->ntraces && i < 4; i++) {
        fputs(i ? ", " : ": ", f);
        fs_html_esc(f, h->traces[i].path, 0);
    }
    if (h->ntraces > 4) fputs(", \xe2\x80\xa6", f);
    fprintf(f, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>fsdpshim report</h1>\n",
            style_sheet);
    fprintf(f,
            "<p class=\"note\">%zu trace%s: what <code>fsdpshim report</code> prints, with "
            "the memory over time. docs/cli.md says how each figure is found.</p>\n",
            h->ntraces, h->ntraces == 1 ? "" : "s, the ranks of one job");
    fputs("<nav><a href=\"#timeline\">Timeline</a><a href=\"#traces\">Traces</a><a "
          "href=\"#peaks\">Peaks</a><a href=\"#ooms\">Out of memory</a><a "
          "href=\"#streams\">Streams</a><a href=\"#deferred\">Deferred frees</a><a "
          "href=\"#ratelimiter\">Rate limiter</a><a href=\"#collectives\">Collectives</a><a "
          "href=\"#sites\">Top sites</a><a href=\"#leaks\">Leaks at exit</a></nav>\n",
          f);
    fs_html_timeline(h);
    traces_table(h);
    peaks_table(h, total);
    ooms_table(h);
    streams_tables(h);
    deferred_table(h);
    rate_limiter_table(h, total);
    collectives_table(h, total);
    sites_tables(h, all);
    fputs("</body>\n</html>\n", f);
}

bool fs_report_html_finish(fs_report_html *h, const fs_report_figures *total, const fs_sites *all)
{
    fs_html_sites all_rows = {0};
    bool ok;
    int err;

    if (all) all_rows = rows_of(all, h->limit);
    page(h, total, all ? &all_rows : NULL);
    ok = fflush(h->f) == 0 && !ferror(h->f);
    err = errno;
    if (fclose(h->f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok) fprintf(stderr, "fsdpshim report: writing %s: %s\n", h->path, strerror(err));
    free_rows(&all_rows);
    for (size_t i = 0; i < h->ntraces; i++) {
        free(h->traces[i].path);
        free_rows(&h->traces[i].sites);
    }
    fs_tl_free(&h->tl);
    free(h->traces);
    free(h->path);
    free(h);
    return ok;
}
