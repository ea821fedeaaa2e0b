/* export_chrome.c - `fsdpshim export --chrome`: traces as Chrome trace
 * event JSON, which Perfetto (ui.perfetto.dev) and chrome://tracing open
 * (docs/cli.md).
 *
 * Each trace (rank) is a process: pid the rank (the process id when the
 * trace has none), named "rank R". In it, per device, one counter track
 * "device D memory" with the allocated and reserved bytes, a sample each
 * time either changes; on the threads that did them, the all-gather rate
 * limiter's waits and the NVTX ranges as slices, collectives, marks,
 * snapshots and out-of-memory events as instants (the trace records when a
 * collective was enqueued, not how long it ran). All ranks share one clock,
 * the headers' wall-clock base, as `timeline` puts them.
 *
 * The viewers load the whole JSON into memory and slow down past a few
 * million events, so a first pass counts the records that would become
 * events and the export refuses more than --limit; Perfetto's protobuf
 * format (--perfetto, export_perfetto.c) is the way for larger traces. */
#include "export.h"

#include "exit_status.h"
#include "progress.h"
#include "render.h"
#include "replayer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES FS_SITES_MAX_DEVICES

typedef struct wait_start {
    uint32_t tid;
    uint64_t time_ns, in_flight, bytes;
} wait_start;

typedef struct chrome {
    FILE *f;
    bool first;      /* no event written yet: no comma */
    uint64_t base;   /* the earliest wall-clock start over the traces, ns */
    uint64_t offset; /* this trace's start after base, ns */
    long pid;
    uint64_t allocated[MAX_DEVICES], reserved[MAX_DEVICES];
    bool seen[MAX_DEVICES];
    wait_start *waits;
    size_t nwaits;
    uint64_t events;  /* the first pass: the traces' events, as dump and report count them */
    uint64_t written; /* ... and the JSON events they become, threads' names included */
    uint64_t last_ns; /* this trace's latest event */
} chrome;

/* ---- JSON ---------------------------------------------------------------------- */

/* s as a JSON string: escaped, each byte that is not UTF-8 made '?' */
static void json_str(FILE *f, const char *s)
{
    size_t n = strlen(s);
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = fs_utf8_len((const unsigned char *)s + i, n - i);
        if (!k) {
            fputc('?', f);
            i++;
        } else if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
            i++;
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
            i++;
        } else {
            fwrite(s + i, 1, k, f);
            i += k;
        }
    }
    fputc('"', f);
}

/* Opens an event: its phase, name, time, process and thread; the caller
 * adds its fields and closes it with '}' */
static void event(chrome *c, char ph, const char *name, uint64_t time_ns, uint32_t tid)
{
    fputs(c->first ? "\n" : ",\n", c->f);
    c->first = false;
    fprintf(c->f, "{\"ph\":\"%c\",\"name\":", ph);
    json_str(c->f, name);
    fprintf(c->f, ",\"ts\":%.3f,\"pid\":%ld,\"tid\":%" PRIu32, (double)(c->offset + time_ns) / 1e3,
            c->pid, tid);
}

static void metadata(chrome *c, const char *what, uint32_t tid, const char *name)
{
    event(c, 'M', what, 0, tid);
    fputs(",\"args\":{\"name\":", c->f);
    json_str(c->f, name);
    fputs("}}", c->f);
}

/* ---- the events ------------------------------------------------------------------ */

/* The annotation ranges (replayer.h) as slices on their threads: a range's
 * name, its path from the outermost in its arguments */
static void range_opened(void *ctx, fs_reader *t, const fs_replayer_range *r)
{
    chrome *c = ctx;
    uint32_t parent, domain, name;
    char path[4096];

    fs_reader_annot(t, r->node, &parent, &domain, &name);
    fs_render_annot(t, r->node, path, sizeof path);
    event(c, 'B', fs_render_str(t, name), r->start_ns, r->tid);
    fputs(",\"cat\":\"nvtx\",\"args\":{\"ranges\":", c->f);
    json_str(c->f, path);
    fputs("}}", c->f);
}

static void range_closed(void *ctx, fs_reader *t, const fs_replayer_range *r, uint64_t end_ns)
{
    chrome *c = ctx;
    (void)t;
    event(c, 'E', "", end_ns, r->tid);
    fputc('}', c->f);
}

static void counters(chrome *c, const fs_fmt_event *ev)
{
    int d = ev->device;
    char name[32];
    if (d < 0 || d >= MAX_DEVICES) return;
    if (c->seen[d] && c->allocated[d] == ev->allocated && c->reserved[d] == ev->reserved) return;
    c->seen[d] = true;
    c->allocated[d] = ev->allocated;
    c->reserved[d] = ev->reserved;
    snprintf(name, sizeof name, "device %d memory", d);
    event(c, 'C', name, ev->time_ns, 0);
    fprintf(c->f, ",\"args\":{\"allocated\":%" PRIu64 ",\"reserved\":%" PRIu64 "}}", ev->allocated,
            ev->reserved);
}

/* A wait's start is kept until its thread's end: then one slice */
static void rate_limit(chrome *c, const fs_fmt_record *r, uint32_t tid)
{
    const fs_fmt_event *ev = &r->ev;
    size_t i = 0;

    while (i < c->nwaits && c->waits[i].tid != tid)
        i++;
    if (r->kind == FS_REC_RL_WAIT_START) {
        if (i == c->nwaits) {
            wait_start *more = realloc(c->waits, (c->nwaits + 1) * sizeof *more);
            if (!more) fs_analysis_oom("export");
            c->waits = more;
            c->nwaits++;
        }
        c->waits[i] = (wait_start){tid, ev->time_ns, ev->aux, ev->aux2};
        return;
    }
    if (i == c->nwaits) return; /* it began before the trace */
    wait_start w = c->waits[i];
    c->waits[i] = c->waits[--c->nwaits];
    event(c, 'X', "rate-limiter wait", w.time_ns, tid);
    fprintf(
        c->f,
        ",\"dur\":%.3f,\"cat\":\"fsdpshim\",\"args\":{\"device\":%d,\"gathers_in_flight\":%" PRIu64
        ",\"bytes_in_flight\":%" PRIu64 "}}",
        (double)(ev->time_ns - w.time_ns) / 1e3, ev->device, w.in_flight, w.bytes);
}

static void instant(chrome *c, const char *name, const fs_fmt_event *ev, uint32_t tid)
{
    event(c, 'i', name, ev->time_ns, tid);
    fputs(",\"s\":\"t\"", c->f);
}

static int write_event(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    chrome *c = ctx;
    const fs_fmt_event *ev = &r->ev;
    char text[4200];

    if (r->kind == FS_REC_THREAD) {
        metadata(c, "thread_name", r->u.thread.tid, fs_render_str(t, r->u.thread.name));
        return 0;
    }
    if (r->kind < FS_REC_ALLOC || r->kind > FS_REC_EVENT_LAST) return 0;
    c->last_ns = ev->time_ns;
    switch (r->kind) {
    case FS_REC_ALLOC:
    case FS_REC_FREE_REQUESTED:
    case FS_REC_FREE_COMPLETED:
    case FS_REC_SEGMENT_ALLOC:
    case FS_REC_SEGMENT_FREE:
    case FS_REC_SEGMENT_MAP:
    case FS_REC_SEGMENT_UNMAP:
        counters(c, ev);
        break;
    case FS_REC_OOM:
        counters(c, ev);
        instant(c, "out of memory", ev, tid);
        fprintf(c->f,
                ",\"args\":{\"device\":%d,\"requested\":%" PRIu64 ",\"allocated\":%" PRIu64
                ",\"reserved\":%" PRIu64 ",\"largest_free_block\":%" PRIu64 "}}",
                ev->device, ev->size, ev->allocated, ev->reserved, ev->aux);
        break;
    case FS_REC_COLLECTIVE: {
        const char *op = fs_fmt_coll_name((unsigned)ev->aux);
        instant(c, op ? op : "collective", ev, tid);
        fprintf(c->f,
                ",\"cat\":\"collective\",\"args\":{\"device\":%d,\"bytes\":%" PRIu64
                ",\"stream\":\"0x%" PRIx64 "\",\"communicator\":\"0x%" PRIx64 "\"}}",
                ev->device, ev->size, ev->stream, ev->aux2);
        break;
    }
    case FS_REC_RL_WAIT_START:
    case FS_REC_RL_WAIT_END:
        rate_limit(c, r, tid);
        break;
    case FS_REC_ANNOT_MARK:
        instant(c, ev->name ? fs_render_str(t, ev->name) : "mark", ev, tid);
        fputs(",\"cat\":\"nvtx\"}", c->f);
        break;
    case FS_REC_SNAPSHOT:
        snprintf(text, sizeof text, "snapshot %s", ev->name ? fs_render_str(t, ev->name) : "");
        instant(c, text, ev, tid);
        fputc('}', c->f);
        break;
    }
    return 0;
}

/* ---- the traces ---------------------------------------------------------------------- */

static int count_events(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    chrome *c = ctx;
    (void)t, (void)tid;
    bool event = r->kind >= FS_REC_ALLOC && r->kind <= FS_REC_EVENT_LAST;
    c->events += event;
    c->written += event || r->kind == FS_REC_THREAD;
    return 0;
}

/* Writes trace t as one process, pid its rank (from the first pass) */
static void write_trace(chrome *c, fs_reader *t, int rank)
{
    const fs_fmt_header *h = fs_reader_header(t);
    char name[128];

    c->offset = h->clock_real_ns - c->base;
    c->pid = rank >= 0 ? rank : (long)h->pid;
    memset(c->seen, 0, sizeof c->seen);
    c->nwaits = 0;
    c->last_ns = 0;
    if (rank >= 0)
        snprintf(name, sizeof name, "rank %d (pid %u on %s)", rank, h->pid, h->host);
    else
        snprintf(name, sizeof name, "pid %u on %s", h->pid, h->host);
    metadata(c, "process_name", 0, name);
    fs_replayer_ops ops = {.opened = range_opened, .closed = range_closed, .record = write_event};
    fs_replayer *rp = fs_replayer_create(&ops, c);
    fs_replayer_read(rp, t);
    fs_replayer_end(rp, t, c->last_ns); /* ranges still open end with the trace */
    fs_replayer_free(rp);
}

int fs_export_chrome(const fs_export_opts *o, int ntraces, char **traces)
{
    chrome c = {.first = true, .base = UINT64_MAX};
    int *ranks = malloc((size_t)ntraces * sizeof *ranks), status = 0, nread = 0;
    char path[4096] = "";

    if (!ranks) fs_analysis_oom("export");
    for (int i = 0; i < ntraces; i++) {
        fs_reader *t = fs_export_open(traces[i]);
        ranks[i] = INT32_MIN; /* unreadable */
        if (!t) {
            status = FS_EXIT_BAD_INPUT;
            continue;
        }
        if (fs_reader_header(t)->clock_real_ns < c.base)
            c.base = fs_reader_header(t)->clock_real_ns;
        fs_reader_read_ordered(t, count_events, fs_export_warn, &c);
        ranks[i] = fs_reader_rank(t);
        nread++;
        fs_reader_close(t);
    }
    if (o->limit && c.written > o->limit) {
        fs_progress_printf(
            "fsdpshim export: %" PRIu64 " events: more than a Chrome trace viewer loads well "
            "(--limit %" PRIu64 "; --limit 0 writes them all); --perfetto writes large "
            "traces\n",
            c.written, o->limit);
        free(ranks);
        return FS_EXIT_BAD_INPUT;
    }
    if (o->out && strcmp(o->out, "-")) snprintf(path, sizeof path, "%s", o->out);
    if (!(c.f = fs_export_create(path))) {
        free(ranks);
        return FS_EXIT_BAD_INPUT;
    }
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", c.f);
    for (int i = 0; i < ntraces; i++) {
        fs_reader *t = ranks[i] == INT32_MIN ? NULL : fs_export_open(traces[i]);
        if (!t) continue;
        write_trace(&c, t, ranks[i]);
        fs_reader_close(t);
    }
    fputs("\n]}\n", c.f);
    if (!fs_export_finish(c.f, path))
        status = FS_EXIT_BAD_INPUT;
    else
        fs_progress_printf("fsdpshim export: %d trace%s, %" PRIu64 " event%s read, written to %s\n",
                           nread, fs_plural((uint64_t)nread), c.events, fs_plural(c.events),
                           path[0] ? path : "stdout");
    free(c.waits);
    free(ranks);
    return status;
}
