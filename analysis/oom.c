/* oom.c - why an out-of-memory failure happened (oom.h), for `report`.
 *
 * One reading in time order follows the live blocks by address, each under
 * two sites (its stack and its annotation), and at each failure ranks the
 * device's live bytes by site: the holders at that moment. The failure's
 * own record says the rest (from trace format 2: the device's free memory,
 * the cache's free bytes in other streams' pools, the bytes of pending
 * frees; the trace's device record its total). The cause is read from
 * those figures; which setting would have avoided the failure is not
 * guessed but checked: the trace is replayed (replay.h) under its recorded
 * configuration and under each setting that could help, all in one
 * reading, and a setting avoided the failure when its replay served the
 * request that failed. */
#include "oom.h"

#include "analysis.h"
#include "replay.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* expandable_segments, cross_stream_reuse, max_split_size_mb,
 * garbage_collection_threshold, after the recorded configuration */
#define MAX_CONFS 5

typedef struct holder {
    const char *key; /* the site's text, owned by its fs_sites */
    uint64_t bytes;
} holder;

typedef struct failure {
    fs_fmt_event ev;
    uint64_t vmm_bytes; /* the device's cuMemCreate handles not yet released */
    holder *by_stack, *by_annot;
    size_t nstack, nannot;
} failure;

typedef struct explain {
    const fs_oom_options *opt;
    fs_sites stacks, annots;
    fs_live live_stack, live_annot;
    fs_live vmm; /* the program's own cuMemCreate handles, by handle */
    failure f[FS_OOM_EXPLAINED];
    size_t n;
    uint64_t ooms;
    bool snapshot;
} explain;

static int by_bytes(const void *x, const void *y)
{
    const holder *a = x, *b = y;
    return a->bytes < b->bytes ? 1 : a->bytes > b->bytes ? -1 : 0;
}

/* The device's live bytes by site of s, the most first, at most `keep`. */
static holder *rank(const fs_live *live, const fs_sites *s, int device, size_t keep, size_t *n)
{
    uint64_t *bytes = calloc(s->n + 1, sizeof *bytes);
    holder *h = NULL;
    size_t nh = 0;
    if (!bytes) fs_analysis_oom("report");
    for (size_t i = 0; i < live->cap; i++) {
        const fs_live_block *b = &live->slots[i];
        if (b->site && b->device == device) bytes[b->site] += b->size;
    }
    for (size_t i = 1; i <= s->n; i++)
        if (bytes[i]) nh++;
    if (nh && !(h = malloc(nh * sizeof *h))) fs_analysis_oom("report");
    nh = 0;
    for (size_t i = 1; i <= s->n; i++)
        if (bytes[i]) h[nh++] = (holder){s->all[i - 1].key, bytes[i]};
    free(bytes);
    if (nh) qsort(h, nh, sizeof *h, by_bytes); /* none: h is NULL */
    *n = nh < keep ? nh : keep;
    return h;
}

static void take_holders(explain *e, failure *f)
{
    for (size_t i = 0; i < e->vmm.cap; i++)
        if (e->vmm.slots[i].site && e->vmm.slots[i].device == f->ev.device)
            f->vmm_bytes += e->vmm.slots[i].size;
    f->by_stack = rank(&e->live_stack, &e->stacks, f->ev.device, e->opt->holders, &f->nstack);
    f->by_annot = rank(&e->live_annot, &e->annots, f->ev.device, e->opt->holders, &f->nannot);
}

static void block_live(explain *e, fs_reader *t, const fs_fmt_event *ev, uint32_t tid)
{
    fs_live_put(&e->live_stack, ev->addr, ev->size, fs_sites_of(&e->stacks, t, ev, tid),
                ev->device);
    fs_live_put(&e->live_annot, ev->addr, ev->size, fs_sites_of(&e->annots, t, ev, tid),
                ev->device);
}

static int visit(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    explain *e = ctx;
    const fs_fmt_event *ev = &r->ev;
    fs_live_block gone;
    switch (r->kind) {
    case FS_REC_ALLOC:
        block_live(e, t, ev, tid);
        break;
    case FS_REC_SNAP_BLOCK:
        if (ev->aux == FS_BLOCK_LIVE) block_live(e, t, ev, tid);
        break;
    case FS_REC_FREE_REQUESTED:
        fs_live_take(&e->live_stack, ev->addr, &gone);
        fs_live_take(&e->live_annot, ev->addr, &gone);
        break;
    case FS_REC_VMM:
        if (ev->aux == FS_VMM_CREATE) fs_live_put(&e->vmm, ev->aux2, ev->size, 1, ev->device);
        if (ev->aux == FS_VMM_RELEASE) fs_live_take(&e->vmm, ev->aux2, &gone);
        break;
    case FS_REC_OOM:
        e->ooms++;
        if (e->n == FS_OOM_EXPLAINED) break;
        e->f[e->n].ev = *ev;
        /* a snapshot's blocks may follow its failure: ranked at the end */
        if (!e->snapshot) take_holders(e, &e->f[e->n]);
        e->n++;
        break;
    default:
        break;
    }
    return 0;
}

/* ---- the settings, checked by replaying --------------------------------------- */

typedef struct trial {
    const char *conf[MAX_CONFS]; /* [0] NULL: as recorded */
    char text[MAX_CONFS][64];
    size_t n;
    fs_replay_result r;
    bool ran;
    char why_not[160]; /* when no replay ran */
} trial;

/* The settings that could have avoided the failures, each left out when
 * the recording already ran with it. */
static void choose(trial *tr, const fs_alloc_config *rec, const explain *e)
{
    uint64_t most = 0;
    for (size_t i = 0; i < e->n; i++)
        if (e->f[i].ev.size > most) most = e->f[i].ev.size;
    tr->conf[0] = NULL;
    tr->n = 1;
    if (!rec->expandable_segments)
        snprintf(tr->text[tr->n++], sizeof tr->text[0], "expandable_segments:true");
    if (rec->cross_stream_reuse != FS_REUSE_WAIT)
        snprintf(tr->text[tr->n++], sizeof tr->text[0], "cross_stream_reuse:wait");
    /* blocks this big or bigger are kept whole for requests like the one
     * that failed (the allocator takes no value up to 20 MiB) */
    unsigned long long mib = most >> 20;
    if (mib < 21) mib = 21;
    if (rec->max_split_size == SIZE_MAX || rec->max_split_size > (size_t)mib << 20)
        snprintf(tr->text[tr->n++], sizeof tr->text[0], "max_split_size_mb:%llu", mib);
    if (rec->garbage_collection_threshold <= 0.0)
        snprintf(tr->text[tr->n++], sizeof tr->text[0], "garbage_collection_threshold:0.6");
    for (size_t c = 1; c < tr->n; c++)
        tr->conf[c] = tr->text[c];
}

static void run_trial(trial *tr, const char *path, fs_reader *t, const explain *e,
                      const fs_alloc_config *rec, const fs_oom_options *opt)
{
    bool sized = false; /* the devices' memory is recorded */
    char err[4200];

    for (size_t i = 0; i < e->n; i++)
        if (fs_reader_device_total(t, e->f[i].ev.device)) sized = true;
    if (e->snapshot) {
        snprintf(tr->why_not, sizeof tr->why_not,
                 "a snapshot holds no history to replay: trace the run (fsdpshim run --trace) "
                 "to check which setting avoids it");
        return;
    }
    if (!sized) {
        snprintf(tr->why_not, sizeof tr->why_not,
                 "the trace does not record the device's memory (format 1): fsdpshim replay "
                 "--mem SIZE checks settings at a size you give");
        return;
    }
    choose(tr, rec, e);
    fs_replay_options ro = {.warn = opt->warn, .warn_ctx = opt->warn_ctx};
    if (!fs_replay_trace(path, tr->conf, tr->n, &ro, &tr->r, err, sizeof err)) {
        snprintf(tr->why_not, sizeof tr->why_not, "the replay could not read the trace");
        return;
    }
    tr->ran = true;
}

/* Whether configuration c's replay failed the request of failure f; *sure
 * is false when that replay failed so often that its list of failures
 * (FS_REPLAY_MAX_OOMS) may have left this one out. */
static bool replay_failed(const fs_replay_result *r, size_t c, const fs_fmt_event *f, bool *sure)
{
    size_t kept = 0;
    for (size_t i = 0; i < r->nooms; i++) {
        const fs_replay_oom *o = &r->ooms[i];
        if (o->config != (int)c) continue;
        kept++;
        if (o->device == f->device && o->time_ns == f->time_ns) {
            *sure = true;
            return true;
        }
    }
    *sure = kept < FS_REPLAY_MAX_OOMS;
    return false;
}

static const fs_replay_device *replay_device(const fs_replay_result *r, int device)
{
    for (size_t i = 0; i < r->ndev; i++)
        if (r->dev[i].device == device) return &r->dev[i];
    return NULL;
}

/* ---- printing -------------------------------------------------------------------- */

static void print_holders(FILE *out, const char *by, const holder *h, size_t n)
{
    char b[32];
    if (!n) return;
    fprintf(out, "    live then, by %s:\n", by);
    for (size_t i = 0; i < n; i++) {
        fs_human_bytes(h[i].bytes, b, sizeof b);
        fprintf(out, "      %s", b);
        for (const char *line = h[i].key; *line;) {
            const char *end = strchr(line, '\n');
            int len = end ? (int)(end - line) : (int)strlen(line);
            fprintf(out, "%s%.*s\n", line == h[i].key ? "  " : "        ", len, line);
            line += len + (end ? 1 : 0);
        }
    }
}

/* The cause, from the failure's figures (docs/cli.md lists the order). */
static void print_cause(FILE *out, const failure *f, bool detail, uint64_t capacity,
                        const fs_alloc_config *rec)
{
    const fs_fmt_event *ev = &f->ev;
    char req[32], a[32], b[32], c[32], d[32];
    uint64_t free_cache = ev->reserved > ev->allocated ? ev->reserved - ev->allocated : 0;
    uint64_t dev_free = detail && ev->aux2 != FS_FMT_UNKNOWN ? ev->aux2 : 0;
    uint64_t other = detail ? ev->aux3 : 0, pending = detail ? ev->aux4 : 0;
    uint64_t mine = free_cache > other + pending ? free_cache - other - pending : 0;
    fs_human_bytes(ev->size, req, sizeof req);

    if (capacity && ev->allocated + ev->size > capacity) {
        fs_human_bytes(ev->allocated, a, sizeof a);
        fs_human_bytes(capacity, b, sizeof b);
        fprintf(out,
                "    why: too much is live: %s in live blocks and the %s asked for exceed the "
                "device's %s; no allocator setting makes room, only freeing or shrinking what "
                "holds it (below)\n",
                a, req, b);
    } else if (pending && mine + dev_free < ev->size && mine + dev_free + pending >= ev->size) {
        fs_human_bytes(pending, a, sizeof a);
        fprintf(out,
                "    why: frees still pending: %s freed by the program waited for their streams "
                "to pass the frees, and would have served the request\n",
                a);
    } else if (other && mine < ev->size && mine + other >= ev->size) {
        fs_human_bytes(other, a, sizeof a);
        fs_human_bytes(mine, b, sizeof b);
        fprintf(out,
                "    why: the cache is tagged by stream (a soft OOM): %s lay free in other "
                "streams' pools, which this stream's request did not take, and %s in its own\n",
                a, b);
    } else if (free_cache + dev_free >= ev->size && ev->aux < ev->size) {
        fs_human_bytes(free_cache, a, sizeof a);
        fs_human_bytes(dev_free, b, sizeof b);
        fs_human_bytes(ev->aux, c, sizeof c);
        fprintf(out,
                "    why: fragmentation: %s free in the cache and %s on the device, enough in "
                "total, but the largest free block was %s: no single piece of %s\n",
                a, b, c, req);
    } else if (detail && capacity) {
        uint64_t outside =
            capacity > ev->reserved + dev_free ? capacity - ev->reserved - dev_free : 0;
        fs_human_bytes(outside, a, sizeof a);
        fs_human_bytes(ev->reserved, b, sizeof b);
        fs_human_bytes(capacity, d, sizeof d);
        fprintf(out,
                "    why: memory outside the cache: of the device's %s, the cache held %s and "
                "%s was held outside it (NCCL's buffers, the CUDA context, other processes, "
                "allocations made without the shim)\n",
                d, b, a);
        if (f->vmm_bytes) {
            fs_human_bytes(f->vmm_bytes, c, sizeof c);
            fprintf(out,
                    "    of which %s in the program's own cuMemCreate allocations (traced "
                    "\"vmm\" events: NCCL's buffers among them)\n",
                    c);
        }
    } else {
        fprintf(out, "    why: the device had no %s to give and the cache no free block of it\n",
                req);
    }
    /* requests of 1 to 10 MiB share segments of large_segment_mb: a device
     * with room for the request may have none for the segment */
    if (dev_free >= ev->size && ev->size > (1u << 20) && ev->size <= (10u << 20) &&
        dev_free < rec->large_segment) {
        fs_human_bytes(dev_free, a, sizeof a);
        fs_human_bytes(rec->large_segment, b, sizeof b);
        fprintf(out,
                "    and the device's %s free could not hold the %s segment that a miss of this "
                "size grows the cache by (large_segment_mb)\n",
                a, b);
    }
}

static void print_failure(FILE *out, const failure *f, fs_reader *t, const trial *tr,
                          const fs_alloc_config *rec)
{
    const fs_fmt_event *ev = &f->ev;
    bool detail = fs_reader_header(t)->version >= 2;
    uint64_t capacity = fs_reader_device_total(t, ev->device);
    uint64_t free_cache = ev->reserved > ev->allocated ? ev->reserved - ev->allocated : 0;
    char req[32], a[32], b[32], c[32], d[32], e[32];

    fs_human_bytes(ev->size, req, sizeof req);
    fprintf(out, "  why the %s request at %.3f s on device %d, stream 0x%" PRIx64 " failed:\n", req,
            (double)ev->time_ns / 1e9, ev->device, ev->stream);
    fs_human_bytes(ev->reserved, a, sizeof a);
    fs_human_bytes(ev->allocated, b, sizeof b);
    fs_human_bytes(free_cache, c, sizeof c);
    fs_human_bytes(ev->aux, d, sizeof d);
    fprintf(out, "    the cache: %s reserved, %s allocated, %s free; the largest free block %s\n",
            a, b, c, d);
    if (detail) {
        fs_human_bytes(ev->aux3, a, sizeof a);
        fs_human_bytes(free_cache > ev->aux3 + ev->aux4 ? free_cache - ev->aux3 - ev->aux4 : 0, b,
                       sizeof b);
        fs_human_bytes(ev->aux4, c, sizeof c);
        fprintf(out,
                "    of the free: %s in this stream's pools, %s in other streams' pools; %s in "
                "frees still pending\n",
                b, a, c);
        if (ev->aux2 != FS_FMT_UNKNOWN) {
            fs_human_bytes(ev->aux2, d, sizeof d);
            if (capacity) {
                fs_human_bytes(capacity, e, sizeof e);
                fprintf(out, "    the device: %s free of %s\n", d, e);
            } else {
                fprintf(out, "    the device: %s free\n", d);
            }
        }
    } else {
        fprintf(out, "    (a trace of format 1: the device's free memory, the cache by stream and "
                     "pending frees are not recorded)\n");
    }
    print_cause(out, f, detail, capacity, rec);
    print_holders(out, "stack", f->by_stack, f->nstack);
    print_holders(out, "annotation", f->by_annot, f->nannot);

    if (!tr->ran) {
        fprintf(out, "    settings: not checked: %s\n", tr->why_not);
        return;
    }
    bool sure;
    if (!replay_failed(&tr->r, 0, ev, &sure)) {
        fprintf(out,
                "    settings: not checked: replayed as recorded, the request %s (fsdpshim "
                "replay shows how the replay differs)\n",
                sure ? "did not fail" : "may not have failed");
        return;
    }
    const fs_replay_device *dev = replay_device(&tr->r, ev->device);
    fprintf(out, "    settings, checked by replaying the trace (as recorded, the request fails "
                 "there too):\n");
    for (size_t c = 1; c < tr->n; c++) {
        bool failed = replay_failed(&tr->r, c, ev, &sure);
        uint64_t ooms = dev ? dev->replayed[c].ooms : 0;
        fs_human_bytes(dev ? dev->replayed[c].peak_reserved : 0, a, sizeof a);
        fprintf(out, "      %-36s ", tr->conf[c]);
        if (failed)
            fprintf(out, "fails it too\n");
        else if (!sure)
            fprintf(out, "not known (its replay failed more than %d requests)\n",
                    FS_REPLAY_MAX_OOMS);
        else if (ooms)
            fprintf(out, "serves it, but %" PRIu64 " other requests fail (peak reserved %s)\n",
                    ooms, a);
        else
            fprintf(out, "avoids it: every request served, peak reserved %s\n", a);
    }
}

bool fs_oom_explain(FILE *out, const char *path, const fs_oom_options *opt)
{
    explain *e = calloc(1, sizeof *e);
    trial *tr = calloc(1, sizeof *tr);
    char err[4200];
    if (!e || !tr) fs_analysis_oom("report");
    e->opt = opt;
    e->stacks = (fs_sites){.by = FS_BY_STACK, .sym = opt->sym};
    e->annots = (fs_sites){.by = FS_BY_ANNOT};
    fs_reader *t = fs_reader_open(path, err, sizeof err);
    if (!t) {
        if (opt->warn) opt->warn(opt->warn_ctx, err);
        free(e);
        free(tr);
        return false;
    }
    e->snapshot = fs_reader_header(t)->features & FS_FMT_FEAT_SNAPSHOT;
    fs_sites_next_file(&e->stacks);
    fs_sites_next_file(&e->annots);
    fs_reader_read_ordered(t, visit, NULL, e);
    if (e->snapshot)
        for (size_t i = 0; i < e->n; i++)
            take_holders(e, &e->f[i]);
    /* the configuration the trace records, else the defaults */
    fs_alloc_config rec;
    const char *text = fs_reader_config(t);
    fs_alloc_config_default(&rec);
    if (text && !fs_replay_conf_apply(&rec, text, err, sizeof err)) fs_alloc_config_default(&rec);
    if (e->n) run_trial(tr, path, t, e, &rec, opt);
    for (size_t i = 0; i < e->n; i++)
        print_failure(out, &e->f[i], t, tr, &rec);
    if (e->ooms > e->n)
        fprintf(out, "  (%" PRIu64 " more failures; the first %d are explained)\n", e->ooms - e->n,
                FS_OOM_EXPLAINED);
    fs_reader_close(t);
    for (size_t i = 0; i < e->n; i++) {
        free(e->f[i].by_stack);
        free(e->f[i].by_annot);
    }
    if (tr->ran) fs_replay_result_free(&tr->r);
    fs_live_free(&e->live_stack);
    fs_live_free(&e->live_annot);
    fs_live_free(&e->vmm);
    fs_sites_free(&e->stacks);
    fs_sites_free(&e->annots);
    free(e);
    free(tr);
    return true;
}
