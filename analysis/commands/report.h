/* report.h - what `fsdpshim report` computes from a job's traces, shared by
 * its two outputs: the text (report.c) and the page of --html
 * (report_html.c). Both print the same figures, computed once by report.c's
 * reading loop: the page adds a timeline of its own, gathered in the same
 * reading (report_timeline.h), and never recomputes a figure the text
 * prints. */
#ifndef FS_REPORT_H
#define FS_REPORT_H

#include "oom.h"
#include "reader.h"
#include "report_timeline.h"
#include "sites.h"

#include <stdbool.h>
#include <stdint.h>

#define FS_REPORT_MAX_DEVICES FS_SITES_MAX_DEVICES
#define FS_REPORT_MAX_COLL    32
#define FS_REPORT_MAX_WAITERS 256
#define FS_REPORT_MAX_OOMS    16 /* kept per trace; the rest counted */

/* One device of one rank (or, in the totals, summed over the ranks). */
typedef struct fs_report_device {
    bool seen;
    uint64_t peak_allocated, peak_allocated_at, reserved_at_peak; /* at: ns into the trace */
    uint64_t peak_reserved, peak_reserved_at;
    uint64_t allocs, alloc_bytes, segments, segment_bytes, segment_frees, ooms;
    uint64_t last_allocated, last_reserved;
} fs_report_device;

/* One trace's figures, or the job's. */
typedef struct fs_report_figures {
    fs_report_device dev[FS_REPORT_MAX_DEVICES];
    uint64_t coll_count[FS_REPORT_MAX_COLL], coll_bytes[FS_REPORT_MAX_COLL]; /* by fs_fmt_coll */
    uint64_t streams_created, streams_reused, streams_destroyed;
    uint64_t frees_before_trace;              /* of blocks allocated before a trace-only attach */
    uint64_t waits, wait_ns, longest_wait_ns; /* the all-gather rate limiter's */
    struct fs_report_waiter {                 /* reading: the threads waiting now */
        uint32_t tid;
        uint64_t since;
    } waiting[FS_REPORT_MAX_WAITERS];
    size_t nwaiting;
    uint64_t first_ns, last_ns, events;
    fs_fmt_event ooms[FS_REPORT_MAX_OOMS]; /* the first ones */
    size_t nooms;
    /* each one's cause, as the text's explanation says it (oom.c), for the
     * page; "" when not known */
    char oom_why[FS_REPORT_MAX_OOMS][FS_OOM_WHY_LEN];
} fs_report_figures;

/* One trace as report read it, for the page: copies of what the reader
 * knew, since the reader is closed by the time its sites are read. */
typedef struct fs_report_trace {
    const char *path;
    fs_fmt_header header;
    int rank; /* -1: not known */
    fs_reader_damage damage;
    const fs_report_figures *fig;
} fs_report_trace;

/* ---- the page (report_html.c) ----------------------------------------------------- */

typedef struct fs_report_html fs_report_html;

/* Opens the page's file at path (written at fs_report_html_finish, so that
 * a report that cannot write it says so before reading anything). NULL
 * after a message on stderr. `limit` is report's -n: the rows of each
 * table of sites. */
fs_report_html *fs_report_html_open(const char *path, size_t limit);

/* A trace is read, the next in the page's order: its figures, its sites
 * sorted by peak as the text prints them (NULL: no sites, -n 0 or
 * unreadable), and its timeline (report_timeline.h: one rank, gathered in
 * report's reading), which the page takes over. The page copies what else
 * it shows; tr and sites may go once this returns. */
void fs_report_html_end(fs_report_html *h, const fs_report_trace *tr, const fs_sites *sites,
                        fs_timeline *tl);

/* Writes the page and frees h, once every trace has ended. For a job of
 * several traces, total is their figures summed as the text sums them, and
 * all their sites merged and sorted by peak; both NULL for one trace, all
 * also without sites. False after a message on stderr when the page could
 * not be written. */
bool fs_report_html_finish(fs_report_html *h, const fs_report_figures *total, const fs_sites *all);

#endif /* FS_REPORT_H */
