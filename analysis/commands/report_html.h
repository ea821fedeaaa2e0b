/* report_html.h - what the files of `report --html`'s page share:
 * report_html.c writes the page (its frame, the tables), report_svg.c the
 * memory timeline's charts, report_page.c what both write alike (the
 * escaping of every string from a trace, names of ranks and streams).
 * Nothing outside them uses it; report.c sees the page through report.h. */
#ifndef FS_REPORT_HTML_H
#define FS_REPORT_HTML_H

#include "report.h"
#include "report_timeline.h"

#include <stdio.h>

#define FS_HTML_MAX_STREAMS 8 /* stream curves per chart: the streams that held the most */

/* ---- what the page keeps of each trace -------------------------------------------- */

typedef struct fs_html_site {
    char *key;
    uint64_t peak, count, total, live, live_bytes;
    uint32_t ranks;
} fs_html_site;

typedef struct fs_html_sites {
    bool read;
    enum fs_site_by by;
    fs_html_site *top;   /* by bytes at the peak, as the text lists them */
    fs_html_site *leaks; /* by bytes live at the end */
    size_t ntop, nleaks;
    uint64_t live, live_bytes; /* over every site */
} fs_html_sites;

typedef struct fs_html_trace {
    char *path;
    fs_fmt_header header;
    int rank;
    fs_reader_damage damage;
    fs_report_figures fig;
    fs_html_sites sites;
} fs_html_trace;

struct fs_report_html {
    FILE *f;
    char *path;
    size_t limit;
    fs_timeline tl; /* rank i is traces[i] */
    fs_html_trace *traces;
    size_t ntraces;
    /* the charts' clock, in wall-clock ns: the plot's left edge (the first
     * event) and width, and the time its labels count from (the first
     * trace's start, so that a rank's times on the chart are its times in
     * the tables, seconds into its trace) */
    uint64_t t0, span, zero;
};

/* ---- report_page.c ----------------------------------------------------------------- */

/* s as HTML (and XML) text or a quoted attribute's value: the markup
 * characters as entities, a byte that is not valid UTF-8 or a control
 * character other than a newline or a tab as U+FFFD, so that no string of a
 * trace can end an element or an attribute; at most `max` characters then
 * an ellipsis (0: all of it). */
void fs_html_esc(FILE *f, const char *s, size_t max);
/* "rank R", or "pid P" for a trace without one */
void fs_html_trace_name(const fs_html_trace *p, char *buf, size_t len);
/* "legacy stream", "per-thread stream 0x..", "stream 0x.." */
void fs_html_stream_name(uint64_t stream, char *buf, size_t len);
/* calloc, or exit with a message */
void *fs_html_alloc(size_t n, size_t size);

/* ---- report_svg.c ------------------------------------------------------------------ */

/* The streams' colours, also their swatches in the tables */
extern const char *const fs_html_palette[FS_HTML_MAX_STREAMS];

/* The timeline section: its charts, and h's clock (t0, span, zero) */
void fs_html_timeline(fs_report_html *h);

/* The streams of device d of rank r that its chart draws, into out: those
 * with a curve that held the most, at most FS_HTML_MAX_STREAMS, each drawn
 * in fs_html_palette[its index]. Their number. */
size_t fs_html_drawn_streams(const fs_tl_rank *r, int d,
                             const fs_tl_series *out[FS_HTML_MAX_STREAMS]);

#endif /* FS_REPORT_HTML_H */
