/* report_timeline.h - the memory timeline of `report --html`: what one
 * reading of each trace keeps for the page's SVG. report_timeline.c
 * gathers it while report.c reads; report_html.c draws it.
 *
 * A trace of hours holds billions of events and the page must stay small
 * and the memory bounded, so nothing here grows with the events: each
 * rank's time is cut into FS_TL_BUCKETS equal buckets whose width doubles,
 * neighbours merged, whenever an event falls past the last one. A bucket
 * keeps, per series, the lowest, highest and last values reached in it, so
 * that a peak is never lost whatever the resolution; per annotation depth,
 * the range that covers most of it; and the collectives enqueued in it. The
 * buckets begin at the trace's first memory event, not at its first event
 * (CUDA's initialisation can take most of a short job's trace). The page
 * maps the buckets onto its pixel columns. */
#ifndef FS_REPORT_TIMELINE_H
#define FS_REPORT_TIMELINE_H

#include "reader.h"
#include "text_index.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FS_TL_BUCKETS       2048
#define FS_TL_LANES         4           /* annotation depths drawn, outermost first */
#define FS_TL_WAIT_LANE     FS_TL_LANES /* the rate limiter's waits, after them */
#define FS_TL_STREAM_CURVES 16 /* streams per trace with a curve; the others counted only */
#define FS_TL_OPS           (FS_COLL_OTHER + 1) /* collectives by fs_fmt_coll; 0 unknown */

/* One series in one bucket; empty when amin > amax. */
typedef struct fs_tl_point {
    uint64_t amin, amax, alast; /* allocated bytes */
    uint64_t rmin, rmax, rlast; /* reserved bytes */
} fs_tl_point;

/* A device's totals, as the allocator reported them with each event, or a
 * stream's share, followed block by block: its live blocks (allocated and
 * not yet freed by the program) and its pool's segments. */
typedef struct fs_tl_series {
    int device;
    bool is_stream;
    uint64_t stream;
    /* FS_TL_BUCKETS points; NULL for a stream that held nothing, or that
     * held memory only after FS_TL_STREAM_CURVES others had */
    fs_tl_point *points;
    uint64_t allocated, reserved; /* after the latest event */
    uint64_t peak_allocated, peak_reserved;
    /* streams */
    uint64_t allocs, alloc_bytes;
    bool created; /* the trace saw it created (or handed out by a stream pool) */
    int priority;
    uint64_t held_back, held_back_bytes; /* frees held back until their streams passed them */
    uint64_t held_back_ns, longest_held_back_ns;
} fs_tl_series;

/* An annotation lane in one bucket: the range covering most of it. */
typedef struct fs_tl_cell {
    uint32_t name;  /* fs_timeline.names index + 1; 0: no range in the bucket */
    uint64_t start; /* the range's start and end, ns into the trace */
    uint64_t end;
    uint64_t cover; /* ns of the bucket it covers, + 1 */
} fs_tl_cell;

typedef struct fs_tl_colls {
    uint32_t count[FS_TL_OPS];
    uint64_t bytes;
} fs_tl_colls;

/* One trace (a rank). */
typedef struct fs_tl_rank {
    uint64_t base;          /* wall-clock ns at the trace's time 0: ranks share one clock */
    uint64_t origin, width; /* bucket k: ns [origin + k width, origin + (k + 1) width) */
    size_t used;            /* the latest event's bucket + 1; 0: no memory event yet */
    /* ns into the trace: the first memory event (an allocation, a free, a
     * segment, an out-of-memory), where the buckets begin, and the last
     * event of any kind after it */
    uint64_t first_ns, last_ns;
    fs_tl_series *series; /* the devices' totals and the streams, as first seen */
    size_t nseries;
    fs_tl_cell *lanes[FS_TL_LANES + 1]; /* per bucket; NULL: unused */
    fs_tl_colls *colls;                 /* per bucket; NULL: no collective */
} fs_tl_rank;

/* An annotation range's text, shared by the ranks: its path from the
 * outermost range ("step/forward") and its own name ("forward"). */
typedef struct fs_tl_name {
    char *path, *name;
} fs_tl_name;

typedef struct fs_timeline {
    fs_tl_rank *ranks;
    size_t nranks;
    fs_tl_name *names;
    size_t nnames, capnames;
    fs_text_index by_path;         /* names by path */
    struct fs_tl_reading *reading; /* the trace being read */
} fs_timeline;

/* A trace begins (t open, not read): a new rank. */
void fs_tl_begin(fs_timeline *tl, fs_reader *t);
/* One record of it, in time order. */
void fs_tl_record(fs_timeline *tl, fs_reader *t, const fs_fmt_record *rec, uint32_t tid);
/* It is read: ranges still open end with its last event. */
void fs_tl_end(fs_timeline *tl);
/* src's ranks (read with fs_tl_begin .. fs_tl_end) moved to the end of
 * dst's, their ranges renamed to dst's names; src is freed. A job's ranks
 * are read each into a timeline of its own, side by side (parallel.h), and
 * gathered into the page's in order. */
void fs_tl_adopt(fs_timeline *dst, fs_timeline *src);
void fs_tl_free(fs_timeline *tl);

/* Bucket k of rank r in wall-clock ns: [*from, *to). */
void fs_tl_bucket_span(const fs_tl_rank *r, size_t k, uint64_t *from, uint64_t *to);

/* Two neighbours as one, a the earlier: lowest and highest of both, b's
 * last (an empty one changes nothing); for cells, one range over both, or
 * the one covering more. The page joins buckets into columns this way. */
fs_tl_point fs_tl_merge_points(fs_tl_point a, fs_tl_point b);
fs_tl_cell fs_tl_merge_cells(fs_tl_cell a, fs_tl_cell b);
extern const fs_tl_point fs_tl_empty_point;

#endif /* FS_REPORT_TIMELINE_H */
