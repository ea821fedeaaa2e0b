/* report_svg.c - the charts of `report --html`'s page (report_html.h):
 * per rank and device, the device's reserved and allocated bytes as areas
 * and each stream's as lines, with NVTX ranges, rate-limiter waits and
 * collectives in lanes above the plot, the peak and the out-of-memory
 * events marked; for several ranks or devices, one chart of them all. All
 * share one clock: the ranks' wall clocks.
 *
 * A chart's size is bounded whatever the trace's length: it has COLUMNS
 * pixel columns onto which report_timeline.c's buckets are mapped, a
 * series is at most two points per column (its lowest and highest there,
 * so no peak is lost), a lane at most one element per column. Hover
 * tooltips are SVG <title> elements: no script. */
#include "report_html.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define SVG_W   1200
#define PLOT_X  104  /* the plot's left edge: the bytes axis' labels before it */
#define COLUMNS 1072 /* the plot's width: one column per pixel */
#define PLOT_H  220
#define LANE_H  16
#define COLL_H  14
#define AXIS_H  42  /* the ticks' labels, then the axis' caption */
#define CHAR_W  6.2 /* the lanes' 10px labels: an average character's width */

const char *const fs_html_palette[FS_HTML_MAX_STREAMS] = {
    "#e8710a", "#d33f49", "#2e9e5b", "#8e5cc4", "#c9a100", "#1aa3b8", "#e46fae", "#7f6045"};
/* by fs_fmt_coll: gathers green, reductions red and purple, the rest */
static const char *const op_colour[FS_TL_OPS] = {"#777",    "#2e9e5b", "#d33f49", "#8e5cc4",
                                                 "#c9a100", "#c9a100", "#1aa3b8", "#7f6045",
                                                 "#7f6045", "#1aa3b8", "#1aa3b8", "#777"};

/* ---- the charts' geometry ---------------------------------------------------------------- */

static size_t column_of(const fs_report_html *h, uint64_t wall)
{
    if (wall <= h->t0) return 0;
    double c = (double)(wall - h->t0) / (double)h->span * COLUMNS;
    return c < COLUMNS ? (size_t)c : COLUMNS - 1;
}

/* Bucket k of rank r as columns [*c0, *c1]; false past the rank's end */
static bool bucket_columns(const fs_report_html *h, const fs_tl_rank *r, size_t k, size_t *c0,
                           size_t *c1)
{
    uint64_t from, to, end = r->base + r->last_ns + 1;
    fs_tl_bucket_span(r, k, &from, &to);
    if (from >= end) return false;
    *c0 = column_of(h, from);
    *c1 = column_of(h, (to < end ? to : end) - 1);
    return true;
}

/* Series s of rank r over the columns: the lowest and highest values in
 * each; a column without an event holds what the one before it ended
 * with, from the series' first event to the rank's last. Columns outside
 * are empty (fs_tl_empty_point). */
static void series_columns(const fs_report_html *h, const fs_tl_rank *r, const fs_tl_series *s,
                           fs_tl_point *out)
{
    bool ends[COLUMNS] = {false}; /* a bucket ends in the column: its last value carries on */
    fs_tl_point now = fs_tl_empty_point;
    size_t c0, c1;

    for (size_t c = 0; c < COLUMNS; c++)
        out[c] = fs_tl_empty_point;
    for (size_t k = 0; k < r->used; k++) {
        const fs_tl_point *p = &s->points[k];
        if (p->amin > p->amax || !bucket_columns(h, r, k, &c0, &c1)) continue;
        for (size_t c = c0; c <= c1; c++)
            out[c] = fs_tl_merge_points(out[c], *p); /* out[c1] ends with p's last values */
        ends[c1] = true;
    }
    size_t last = column_of(h, r->base + r->last_ns);
    for (size_t c = 0; c <= last; c++) {
        fs_tl_point carried = out[c];
        if (now.amin <= now.amax) out[c] = fs_tl_merge_points(now, out[c]);
        if (ends[c])
            now = (fs_tl_point){carried.alast, carried.alast, carried.alast,
                                carried.rlast, carried.rlast, carried.rlast};
    }
}

/* One chart's vertical layout and scale */
typedef struct chart {
    int plot_top;  /* y of the plot's top */
    int height;    /* the whole SVG's */
    uint64_t ymax; /* bytes at the plot's top */
} chart;

static int y_of(const chart *c, uint64_t bytes)
{
    return c->plot_top + PLOT_H - (int)((double)bytes / (double)c->ymax * PLOT_H + 0.5);
}

/* A polyline's points, drawn as one path; a horizontal run keeps its ends
 * alone, so a flat stretch of a long trace costs two points */
typedef struct points {
    int x[2 * COLUMNS + 2], y[2 * COLUMNS + 2];
    size_t n;
} points;

static void point(points *p, int x, int y)
{
    if (p->n && p->x[p->n - 1] == x && p->y[p->n - 1] == y) return;
    if (p->n >= 2 && p->y[p->n - 1] == y && p->y[p->n - 2] == y) {
        p->x[p->n - 1] = x; /* the run grows: its end moves */
        return;
    }
    p->x[p->n] = x;
    p->y[p->n++] = y;
}

static void path_data(FILE *f, const points *p)
{
    for (size_t i = 0; i < p->n; i++)
        fprintf(f, "%s%d %d", i ? "L" : "M", p->x[i], p->y[i]);
}

/* One path of the chart, with its title as a tooltip: `attr` (class or
 * style) set to `value`, closed back to its start when `closed`. */
static void titled_path(FILE *f, const char *attr, const char *value, const points *p, bool closed,
                        const char *title)
{
    fprintf(f, "<path %s=\"%s\" d=\"", attr, value);
    path_data(f, p);
    fputs(closed ? "Z\"><title>" : "\"><title>", f);
    fs_html_esc(f, title, 0);
    fputs("</title></path>\n", f);
}

/* The highest values per column as an area down to 0 (a device's totals):
 * its outline shows every peak */
static void area(FILE *f, const chart *c, const fs_tl_point *cols, bool reserved, const char *cls,
                 const char *title)
{
    points *p = fs_html_alloc(1, sizeof *p);
    int base = c->plot_top + PLOT_H;
    size_t first = COLUMNS, last = 0;

    for (size_t i = 0; i < COLUMNS; i++)
        if (cols[i].amin <= cols[i].amax) {
            if (first == COLUMNS) {
                first = i;
                point(p, PLOT_X + (int)i, base);
            }
            point(p, PLOT_X + (int)i, y_of(c, reserved ? cols[i].rmax : cols[i].amax));
            point(p, PLOT_X + (int)i + 1, y_of(c, reserved ? cols[i].rmax : cols[i].amax));
            last = i;
        }
    if (first < COLUMNS) {
        point(p, PLOT_X + (int)last + 1, base);
        titled_path(f, "class", cls, p, true, title);
    }
    free(p);
}

/* Each column's lowest and highest values as one line (a stream's): where
 * the value moved within a column, the line spans its whole range */
static void band_line(FILE *f, const chart *c, const fs_tl_point *cols, bool reserved,
                      const char *style, const char *title)
{
    points *p = fs_html_alloc(1, sizeof *p);
    for (size_t i = 0; i < COLUMNS; i++) {
        const fs_tl_point *q = &cols[i];
        if (q->amin > q->amax) continue;
        int lo = y_of(c, reserved ? q->rmin : q->amin), hi = y_of(c, reserved ? q->rmax : q->amax);
        point(p, PLOT_X + (int)i, lo);
        if (hi != lo) point(p, PLOT_X + (int)i, hi);
    }
    if (p->n) titled_path(f, "style", style, p, false, title);
    free(p);
}

/* 1, 2 or 5 times a power of ten, at least raw */
static double nice_step(double raw)
{
    double m = 1;
    while (m * 10 <= raw)
        m *= 10;
    while (m > raw)
        m /= 10;
    return raw <= m ? m : raw <= 2 * m ? 2 * m : raw <= 5 * m ? 5 * m : 10 * m;
}

/* Seconds on the charts' labels at wall-clock ns */
static double seconds(const fs_report_html *h, uint64_t wall)
{
    return (double)(wall - h->zero) / 1e9;
}

static void x_axis(FILE *f, const fs_report_html *h, const chart *c)
{
    double from = seconds(h, h->t0), span = (double)h->span / 1e9, step = nice_step(span / 9);
    int decimals = 0, base = c->plot_top + PLOT_H;
    for (double d = step; d < 0.9999 && decimals < 9; d *= 10)
        decimals++;
    fprintf(f, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", PLOT_X, base,
            PLOT_X + COLUMNS, base);
    for (double t = step * (double)(uint64_t)(from / step + 0.9999); t <= from + span * 1.0001;
         t += step) {
        int x = PLOT_X + (int)((t - from) / span * COLUMNS + 0.5);
        fprintf(f,
                "<line class=\"tick\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>"
                "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%.*f s</text>\n",
                x, base, x, base + 4, x, base + 16, decimals, t);
    }
    /* where time 0 is, and why the axis does not start there */
    fprintf(f,
            "<text class=\"caption\" x=\"%d\" y=\"%d\">seconds since %s began (0 s: the first "
            "CUDA call traced, as in the tables)",
            PLOT_X, base + 33, h->ntraces > 1 ? "the first trace" : "the trace");
    if (h->t0 > h->zero)
        fprintf(f, "; the chart starts at the first allocation or free, %.3f s", from);
    fputs("</text>\n", f);
}

/* The bytes axis: gridlines at a power of two, the plot's top one step
 * above the highest value */
static void y_axis(FILE *f, chart *c, uint64_t highest)
{
    uint64_t step = 1024;
    char label[32];
    while (step * 4 < highest)
        step *= 2;
    c->ymax = (highest / step + 1) * step;
    for (uint64_t v = 0; v <= c->ymax; v += step) {
        int y = y_of(c, v);
        fs_human_bytes(v, label, sizeof label);
        fprintf(f,
                "<line class=\"grid\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>"
                "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n",
                PLOT_X, y, PLOT_X + COLUMNS, y, PLOT_X - 6, y + 4, label);
    }
}

/* A lane's label, left of the plot */
static void lane_label(FILE *f, int y, int height, const char *text)
{
    fprintf(f, "<text class=\"lane\" x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", PLOT_X - 6,
            y + height / 2 + 4, text);
}

/* s's hue, so that a range keeps its colour in every chart */
static unsigned hue_of(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % 360;
}

/* An annotation (or wait) lane: per column the range covering most of it,
 * a run of columns with the same range one rectangle */
static void lane(FILE *f, const fs_report_html *h, const fs_tl_rank *r, const fs_tl_cell *cells,
                 int y, bool waits)
{
    fs_tl_cell *cols = fs_html_alloc(COLUMNS, sizeof *cols);
    size_t c0, c1;
    char a[32];

    for (size_t k = 0; k < r->used; k++)
        if (cells[k].name && bucket_columns(h, r, k, &c0, &c1))
            for (size_t c = c0; c <= c1; c++)
                cols[c] = fs_tl_merge_cells(cols[c], cells[k]);
    for (size_t c = 0; c < COLUMNS;) {
        size_t end = c + 1;
        if (!cols[c].name) {
            c++;
            continue;
        }
        while (end < COLUMNS && cols[end].name == cols[c].name && cols[end].start == cols[c].start)
            end++;
        const fs_tl_cell *cell = &cols[c];
        const fs_tl_name *name = &h->tl.names[cell->name - 1];
        int width = (int)(end - c);
        unsigned hue = waits ? 0 : hue_of(name->name);
        fs_human_duration(cell->end - cell->start, a, sizeof a);
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
                "style=\"fill:hsl(%u,%s);stroke:hsl(%u,45%%,45%%)\"><title>",
                PLOT_X + (int)c, y + 1, width, LANE_H - 2, hue, waits ? "70%,70%" : "55%,80%", hue);
        fs_html_esc(f, name->path, 0);
        fprintf(f, "\n%.6f s to %.6f s (%s)</title></rect>\n", seconds(h, r->base + cell->start),
                seconds(h, r->base + cell->end), a);
        if (!waits && width >= 4 * CHAR_W) {
            fprintf(f, "<text class=\"range\" x=\"%d\" y=\"%d\">", PLOT_X + (int)c + 3,
                    y + LANE_H - 4);
            fs_html_esc(f, name->name, (size_t)((width - 6) / CHAR_W));
            fputs("</text>\n", f);
        }
        c = end;
    }
    free(cols);
}

/* The collectives enqueued, a run of columns with some one rectangle
 * coloured by its most frequent operation */
static void collectives_lane(FILE *f, const fs_report_html *h, const fs_tl_rank *r, int y)
{
    fs_tl_colls *cols = fs_html_alloc(COLUMNS, sizeof *cols);
    size_t c0, c1;

    for (size_t k = 0; k < r->used; k++)
        if (bucket_columns(h, r, k, &c0, &c1)) {
            for (int op = 0; op < FS_TL_OPS; op++)
                cols[c0].count[op] += r->colls[k].count[op];
            cols[c0].bytes += r->colls[k].bytes;
        }
    for (size_t c = 0; c < COLUMNS;) {
        fs_tl_colls run = {{0}, 0};
        uint64_t n = 0;
        size_t end = c;
        char b[32];
        int top = 0;
        for (; end < COLUMNS; end++) {
            uint64_t here = 0;
            for (int op = 0; op < FS_TL_OPS; op++)
                here += cols[end].count[op];
            if (!here) break;
            for (int op = 0; op < FS_TL_OPS; op++)
                run.count[op] += cols[end].count[op];
            run.bytes += cols[end].bytes;
            n += here;
        }
        if (!n) {
            c++;
            continue;
        }
        for (int op = 1; op < FS_TL_OPS; op++)
            if (run.count[op] > run.count[top]) top = op;
        fs_human_bytes(run.bytes, b, sizeof b);
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"><title>%" PRIu64
                " collective%s, %s:",
                PLOT_X + (int)c, y + 2, (int)(end - c), COLL_H - 4, op_colour[top], n,
                n == 1 ? "" : "s", b);
        for (int op = 0; op < FS_TL_OPS; op++)
            if (run.count[op]) {
                const char *name = fs_fmt_coll_name((unsigned)op);
                fprintf(f, " %u %s", run.count[op], name ? name : "other");
            }
        fprintf(f, "\n%.6f s to %.6f s</title></rect>\n",
                seconds(h, h->t0) + (double)c / COLUMNS * (double)h->span / 1e9,
                seconds(h, h->t0) + (double)end / COLUMNS * (double)h->span / 1e9);
        c = end;
    }
    free(cols);
}

/* ---- the charts -------------------------------------------------------------------------- */

static int by_held(const void *a, const void *b)
{
    const fs_tl_series *x = *(const fs_tl_series *const *)a, *y = *(const fs_tl_series *const *)b;
    uint64_t hx = x->peak_allocated + x->peak_reserved, hy = y->peak_allocated + y->peak_reserved;
    if (hx != hy) return hx < hy ? 1 : -1;
    return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/* The streams of device d of rank r drawn in its chart, into out: those
 * with a curve that held the most, at most FS_HTML_MAX_STREAMS. Their number. */
size_t fs_html_drawn_streams(const fs_tl_rank *r, int d,
                             const fs_tl_series *out[FS_HTML_MAX_STREAMS])
{
    const fs_tl_series **all = fs_html_alloc(r->nseries, sizeof *all);
    size_t n = 0;
    for (size_t i = 0; i < r->nseries; i++)
        if (r->series[i].is_stream && r->series[i].device == d && r->series[i].points &&
            (r->series[i].peak_allocated || r->series[i].peak_reserved))
            all[n++] = &r->series[i];
    qsort(all, n, sizeof *all, by_held);
    n = n < FS_HTML_MAX_STREAMS ? n : FS_HTML_MAX_STREAMS;
    memcpy(out, all, n * sizeof *out);
    free(all);
    return n;
}

static const fs_tl_series *device_series(const fs_tl_rank *r, int d)
{
    for (size_t i = 0; i < r->nseries; i++)
        if (!r->series[i].is_stream && r->series[i].device == d) return &r->series[i];
    return NULL;
}

static void svg_open(FILE *f, const chart *c, const char *label)
{
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"",
            SVG_W, c->height, SVG_W, c->height);
    fs_html_esc(f, label, 0);
    fputs("\">\n", f);
}

static void swatch(FILE *f, const char *style, const char *text)
{
    fprintf(f, "<span><i class=\"sw\" style=\"%s\"></i>", style);
    fs_html_esc(f, text, 0);
    fputs("</span>\n", f);
}

/* Trace i's chart of device d */
static void rank_chart(fs_report_html *h, size_t i, int d)
{
    FILE *f = h->f;
    const fs_html_trace *p = &h->traces[i];
    const fs_tl_rank *r = &h->tl.ranks[i];
    const fs_tl_series *dev = device_series(r, d), *streams[FS_HTML_MAX_STREAMS];
    const fs_report_device *fd = &p->fig.dev[d];
    size_t nstreams = fs_html_drawn_streams(r, d, streams), shown = 0;
    fs_tl_point *cols = fs_html_alloc(COLUMNS, sizeof *cols);
    uint64_t highest =
        dev->peak_reserved > dev->peak_allocated ? dev->peak_reserved : dev->peak_allocated;
    char name[32], text[512], a[32], b[32], style[128];
    int lanes = 0, y = 6;
    chart c;

    for (int l = 0; l < FS_TL_LANES; l++)
        lanes += r->lanes[l] != NULL;
    for (size_t s = 0; s < nstreams; s++) {
        if (streams[s]->peak_reserved > highest) highest = streams[s]->peak_reserved;
        if (streams[s]->peak_allocated > highest) highest = streams[s]->peak_allocated;
    }
    for (size_t s = 0; s < r->nseries; s++)
        shown += r->series[s].is_stream && r->series[s].device == d &&
                 (r->series[s].peak_allocated || r->series[s].peak_reserved);
    c.plot_top = y + lanes * LANE_H + (r->lanes[FS_TL_WAIT_LANE] ? LANE_H : 0) +
                 (r->colls ? COLL_H : 0) + (lanes || r->colls || r->lanes[FS_TL_WAIT_LANE] ? 6 : 0);
    c.height = c.plot_top + PLOT_H + AXIS_H;
    fs_html_trace_name(p, name, sizeof name);
    snprintf(text, sizeof text, "%s, device %d: allocated and reserved bytes over time", name, d);
    fprintf(f, "<h3 id=\"chart-%zu-%d\">", i, d);
    fs_html_esc(f, text, 0);
    fputs("</h3>\n", f);
    svg_open(f, &c, text);
    y_axis(f, &c, highest);

    /* the lanes above the plot */
    for (int l = 0; l < FS_TL_LANES; l++)
        if (r->lanes[l]) {
            if (y == 6) lane_label(f, y, LANE_H, "NVTX ranges");
            lane(f, h, r, r->lanes[l], y, false);
            y += LANE_H;
        }
    if (r->lanes[FS_TL_WAIT_LANE]) {
        lane_label(f, y, LANE_H, "rate limiter");
        lane(f, h, r, r->lanes[FS_TL_WAIT_LANE], y, true);
        y += LANE_H;
    }
    if (r->colls) {
        lane_label(f, y, COLL_H, "collectives");
        collectives_lane(f, h, r, y);
    }

    /* the device's totals, then its streams over them */
    series_columns(h, r, dev, cols);
    fs_human_bytes(dev->peak_reserved, a, sizeof a);
    snprintf(text, sizeof text, "%s, device %d: reserved (peak %s)", name, d, a);
    area(f, &c, cols, true, "reserved", text);
    fs_human_bytes(dev->peak_allocated, a, sizeof a);
    snprintf(text, sizeof text, "%s, device %d: allocated (peak %s)", name, d, a);
    area(f, &c, cols, false, "allocated", text);
    for (size_t s = 0; s < nstreams; s++) {
        char sn[64];
        fs_html_stream_name(streams[s]->stream, sn, sizeof sn);
        series_columns(h, r, streams[s], cols);
        fs_human_bytes(streams[s]->peak_reserved, a, sizeof a);
        snprintf(text, sizeof text, "%s: reserved for it (peak %s)", sn, a);
        snprintf(style, sizeof style, "stroke:%s;stroke-dasharray:5 3", fs_html_palette[s]);
        band_line(f, &c, cols, true, style, text);
        fs_human_bytes(streams[s]->peak_allocated, a, sizeof a);
        snprintf(text, sizeof text, "%s: allocated, blocks not yet freed (peak %s)", sn, a);
        snprintf(style, sizeof style, "stroke:%s", fs_html_palette[s]);
        band_line(f, &c, cols, false, style, text);
    }

    /* the peak and the out-of-memory events */
    if (fd->peak_allocated) {
        fs_human_bytes(fd->peak_allocated, a, sizeof a);
        fs_human_bytes(fd->reserved_at_peak, b, sizeof b);
        fprintf(f,
                "<circle class=\"peak\" cx=\"%d\" cy=\"%d\" r=\"4\"><title>peak allocated %s at "
                "%.3f s into the trace, with %s reserved then</title></circle>\n",
                PLOT_X + (int)column_of(h, r->base + fd->peak_allocated_at),
                y_of(&c, fd->peak_allocated), a, (double)fd->peak_allocated_at / 1e9, b);
    }
    for (size_t o = 0; o < p->fig.nooms; o++) {
        const fs_fmt_event *ev = &p->fig.ooms[o];
        if (ev->device != d) continue;
        int x = PLOT_X + (int)column_of(h, r->base + ev->time_ns);
        fs_human_bytes(ev->size, a, sizeof a);
        fs_human_bytes(ev->aux, b, sizeof b);
        fprintf(
            f,
            "<line class=\"oom\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"><title>out of memory "
            "at %.3f s into the trace: %s requested, the largest free block %s</title></line>\n",
            x, c.plot_top, x, c.plot_top + PLOT_H, (double)ev->time_ns / 1e9, a, b);
    }
    x_axis(f, h, &c);
    fputs("</svg>\n<div class=\"legend\">", f);
    swatch(f, "background:#b9d3ee", "reserved (device)");
    swatch(f, "background:#3e7cc0", "allocated (device)");
    for (size_t s = 0; s < nstreams; s++) {
        char sn[64];
        fs_html_stream_name(streams[s]->stream, sn, sizeof sn);
        fs_human_bytes(streams[s]->peak_allocated, a, sizeof a);
        fs_human_bytes(streams[s]->peak_reserved, b, sizeof b);
        snprintf(text, sizeof text, "%s: allocated (peak %s), dashed: reserved for it (peak %s)",
                 sn, a, b);
        snprintf(style, sizeof style, "background:%s", fs_html_palette[s]);
        swatch(f, style, text);
    }
    if (shown > nstreams)
        fprintf(f, "<span>%zu more stream%s, not drawn (see Streams)</span>", shown - nstreams,
                shown - nstreams == 1 ? "" : "s");
    if (fd->ooms) swatch(f, "background:#d00", "out of memory");
    for (int op = 0; r->colls && op < FS_TL_OPS; op++)
        if (p->fig.coll_count[op]) {
            const char *name = fs_fmt_coll_name((unsigned)op);
            snprintf(style, sizeof style, "background:%s", op_colour[op]);
            swatch(f, style, name ? name : "other collectives");
        }
    fputs("</div>\n", f);
    free(cols);
}

/* Every rank's devices on one chart: a line each for allocated, dashed
 * for reserved */
static void overview_chart(fs_report_html *h)
{
    FILE *f = h->f;
    fs_tl_point *cols = fs_html_alloc(COLUMNS, sizeof *cols);
    uint64_t highest = 0;
    size_t n = 0;
    char name[32], text[256], a[32], b[32], style[160];
    chart c = {.plot_top = 8, .height = 8 + PLOT_H + AXIS_H};

    for (size_t i = 0; i < h->ntraces; i++)
        for (size_t s = 0; s < h->tl.ranks[i].nseries; s++) {
            const fs_tl_series *x = &h->tl.ranks[i].series[s];
            if (x->is_stream) continue;
            if (x->peak_reserved > highest) highest = x->peak_reserved;
            if (x->peak_allocated > highest) highest = x->peak_allocated;
        }
    fputs("<h3 id=\"chart-all\">All ranks on one clock</h3>\n", f);
    svg_open(f, &c, "allocated and reserved bytes of every rank and device over time");
    y_axis(f, &c, highest);
    for (size_t i = 0; i < h->ntraces; i++) {
        const fs_tl_rank *r = &h->tl.ranks[i];
        fs_html_trace_name(&h->traces[i], name, sizeof name);
        for (size_t s = 0; s < r->nseries; s++) {
            const fs_tl_series *x = &r->series[s];
            if (x->is_stream) continue;
            const char *colour =
                fs_html_palette[n++ % (sizeof fs_html_palette / sizeof *fs_html_palette)];
            series_columns(h, r, x, cols);
            fs_human_bytes(x->peak_reserved, a, sizeof a);
            snprintf(text, sizeof text, "%s, device %d: reserved (peak %s)", name, x->device, a);
            snprintf(style, sizeof style, "stroke:%s;stroke-dasharray:5 3", colour);
            band_line(f, &c, cols, true, style, text);
            fs_human_bytes(x->peak_allocated, a, sizeof a);
            snprintf(text, sizeof text, "%s, device %d: allocated (peak %s)", name, x->device, a);
            snprintf(style, sizeof style, "stroke:%s", colour);
            band_line(f, &c, cols, false, style, text);
        }
    }
    x_axis(f, h, &c);
    fputs("</svg>\n<div class=\"legend\">", f);
    n = 0;
    for (size_t i = 0; i < h->ntraces; i++) {
        fs_html_trace_name(&h->traces[i], name, sizeof name);
        for (size_t s = 0; s < h->tl.ranks[i].nseries; s++) {
            const fs_tl_series *x = &h->tl.ranks[i].series[s];
            if (x->is_stream) continue;
            fs_human_bytes(x->peak_allocated, a, sizeof a);
            fs_human_bytes(x->peak_reserved, b, sizeof b);
            snprintf(text, sizeof text,
                     "%s, device %d: allocated (peak %s), dashed: reserved (peak %s)", name,
                     x->device, a, b);
            snprintf(style, sizeof style, "background:%s",
                     fs_html_palette[n++ % (sizeof fs_html_palette / sizeof *fs_html_palette)]);
            swatch(f, style, text);
        }
    }
    fputs("</div>\n", f);
    free(cols);
}

void fs_html_timeline(fs_report_html *h)
{
    size_t devices = 0;
    uint64_t t1 = 0;

    h->t0 = h->zero = UINT64_MAX;
    for (size_t i = 0; i < h->ntraces; i++) {
        const fs_tl_rank *r = &h->tl.ranks[i];
        if (!r->used) continue;
        if (r->base < h->zero) h->zero = r->base;
        if (r->base + r->first_ns < h->t0) h->t0 = r->base + r->first_ns;
        if (r->base + r->last_ns > t1) t1 = r->base + r->last_ns;
        for (size_t s = 0; s < r->nseries; s++)
            devices += !r->series[s].is_stream;
    }
    fputs("<h2 id=\"timeline\">Memory timeline</h2>\n", h->f);
    if (!devices) {
        fputs("<p class=\"note\">No memory event in the traces.</p>\n", h->f);
        return;
    }
    h->span = t1 > h->t0 ? t1 - h->t0 : 1;
    fprintf(h->f,
            "<p class=\"note\">Time in seconds since %s began: 0 s is the first CUDA call traced "
            "in %s process, when the shim started tracing it, the clock of the tables below and of "
            "<code>fsdpshim report</code> and <code>timeline</code>%s. The charts start at the "
            "first allocation or free, %.3f s: what came before it (CUDA's initialisation, "
            "imports) held no memory. ",
            h->ntraces > 1 ? "the first trace" : "the trace", h->ntraces > 1 ? "its" : "the",
            h->ntraces > 1 ? ", the ranks on one clock (their wall clocks)" : "",
            (double)(h->t0 - h->zero) / 1e9);
    fputs("Filled: the device's reserved bytes (what the cache holds from CUDA) and allocated "
          "bytes (the blocks the program holds), the allocator's own totals (a block stops "
          "counting as allocated when the program frees it: docs/cli.md); lines: the bytes of "
          "each stream's blocks (allocated on it and not yet freed), and, dashed, the memory the "
          "cache reserved for that stream (the segments of its pool). Each pixel column shows the "
          "lowest and highest values "
          "reached in it, so no peak is lost. Above the plot: NVTX ranges (the one covering "
          "most of a column at each depth), the rate limiter's waits, collectives. Hover over "
          "a curve, a range or a mark for its figures.</p>\n",
          h->f);
    if (devices > 1) overview_chart(h);
    for (size_t i = 0; i < h->ntraces; i++)
        for (size_t s = 0; s < h->tl.ranks[i].nseries; s++)
            if (!h->tl.ranks[i].series[s].is_stream)
                rank_chart(h, i, h->tl.ranks[i].series[s].device);
}
