/* oom.c - why an out-of-memory failure happened (oom.h), for `report`.
 *
 * One reading in time order follows the live blocks by address, each under
 * two sites (its stack and its annotation), and the cache's segments
 * (oom_layout.h). At each failure it ranks the device's live bytes by site
 * (the holders at that moment), keeps the request's call site, and finds
 * where the cache's free bytes lay: in segments the request could take
 * (its stream's or other streams') or in segments it never takes (the
 * other pool, the other memory). The failure's own record says the rest
 * (from trace format 2: the device's free memory, the cache's free bytes in
 * other streams' pools, the bytes of pending frees; the trace's device
 * record its total). The cause is read from those figures, and names the
 * settings that bear on it; which of them would have avoided the failure
 * is not guessed but checked: the trace is replayed (replay.h) under its
 * recorded configuration and under each setting that bears on a cause,
 * all in one reading, and a setting avoided the failure when its replay
 * served the request that failed. */
#include "oom.h"

#include "analysis.h"
#include "oom_layout.h"
#include "pair_ids.h"
#include "replay.h"
#include "replayer.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MiB           ((uint64_t)1 << 20)
#define SMALL_MAX     MiB        /* the small pool's largest request */
#define SMALL_SEGMENT (2 * MiB)  /* the small pool's segments */
#define OWN_SEGMENT   (10 * MiB) /* from here a request has a segment of its own size */
#define SEGMENT_STEP  (2 * MiB)  /* segments, and expandable segments' pages, come in these */

/* The settings a cause bears on: the candidates replayed, in this order. */
enum setting {
    SET_LARGE_SEGMENT, /* large_segment_mb: what a miss of 1 to 10 MiB grows the cache by */
    SET_EXPANDABLE,    /* expandable_segments:true: growth by pages, free pages given back */
    SET_REUSE_WAIT,    /* cross_stream_reuse:wait: other streams' blocks, pending ones too */
    SET_FREE_SYNC,     /* free_semantics:sync: a cudaFree waits for the device, then reusable */
    SET_MAX_SPLIT,     /* max_split_size_mb: big blocks kept whole */
    SET_GC,            /* garbage_collection_threshold: cached segments released early */
    SET_ROUNDUP,       /* roundup_power2_divisions: sizes that fit each other's blocks */
    NSETTINGS
};
#define BEARS(s)     (1u << (s))
#define ALL_SETTINGS (BEARS(NSETTINGS) - 1)
_Static_assert(NSETTINGS < FS_REPLAY_MAX_CONFIGS,
               "every setting replays beside the recorded configuration, in one reading");

typedef struct holder {
    const char *key; /* the site's text, owned by its fs_sites */
    uint64_t bytes;
} holder;

/* A failure's cause: the sentence after "why: ", lines that add to it,
 * and the settings all of them bear on (BEARS bits; none when no setting
 * makes room, and then `none` says why). */
typedef struct cause {
    char why[FS_OOM_WHY_LEN];
    char note[3][FS_OOM_WHY_LEN];
    size_t nnotes;
    unsigned settings;
    const char *none;
} cause;

typedef struct failure {
    fs_fmt_event ev;
    const char *site;   /* its call site, one frame a line (owned by the stack sites); NULL: none */
    uint64_t vmm_bytes; /* the device's cuMemCreate handles not yet released */
    holder *by_stack, *by_annot;
    size_t nstack, nannot;
    fs_oom_where where;
    cause c;
} failure;

typedef struct explain {
    const fs_oom_options *opt;
    fs_sites stacks, annots;
    /* live blocks (a snapshot's too); a block's site is the id of its pair
     * (stack site, annotation site) in `holders` */
    fs_replayer *rp;
    fs_pair_ids holders;
    fs_live vmm; /* the program's own cuMemCreate handles, by handle */
    fs_oom_layout *layout;
    failure *f; /* the first `keep`: FS_OOM_EXPLAINED explained, the rest given a cause */
    size_t n, keep;
    uint64_t ooms;
    bool snapshot, api_recorded;
} explain;

static int by_bytes(const void *x, const void *y)
{
    const holder *a = x, *b = y;
    return a->bytes < b->bytes ? 1 : a->bytes > b->bytes ? -1 : 0;
}

/* The device's live bytes by site of s (the stack sites, or the
 * annotation ones: by_annot), the most first, at most `keep`. */
static holder *rank(const explain *e, const fs_sites *s, bool by_annot, int device, size_t keep,
                    size_t *n)
{
    uint64_t *bytes = calloc(s->n + 1, sizeof *bytes);
    holder *h = NULL;
    size_t nh = 0;
    if (!bytes) fs_analysis_oom("report");
    fs_live_block b;
    uint64_t stack, annot;
    for (size_t pos = 0; fs_live_next(fs_replayer_live(e->rp), &pos, &b);) {
        if (b.device != device) continue;
        fs_pair_of(&e->holders, b.site, &stack, &annot);
        bytes[by_annot ? annot : stack] += b.size;
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
    fs_live_block b;
    for (size_t pos = 0; fs_live_next(&e->vmm, &pos, &b);)
        if (b.device == f->ev.device) f->vmm_bytes += b.size;
    f->by_stack = rank(e, &e->stacks, false, f->ev.device, e->opt->holders, &f->nstack);
    f->by_annot = rank(e, &e->annots, true, f->ev.device, e->opt->holders, &f->nannot);
}

/* A live block (replayer.h) of an allocation or a snapshot: its sites */
static uint32_t block_site(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    explain *e = ctx;
    bool added;
    uint32_t stack = fs_sites_of(&e->stacks, t, &r->ev, tid);
    uint32_t annot = fs_sites_of(&e->annots, t, &r->ev, tid);
    return fs_pair_id(&e->holders, stack, annot, &added);
}

static int visit(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    explain *e = ctx;
    const fs_fmt_event *ev = &r->ev;
    fs_live_block gone;
    fs_oom_layout_see(e->layout, r, e->api_recorded);
    fs_replayer_see(e->rp, t, r, tid); /* allocations, a snapshot's blocks, frees */
    switch (r->kind) {
    case FS_REC_VMM:
        if (ev->aux == FS_VMM_CREATE) fs_live_put(&e->vmm, ev->aux2, ev->size, 1, ev->device);
        if (ev->aux == FS_VMM_RELEASE) fs_live_take(&e->vmm, ev->aux2, &gone);
        break;
    case FS_REC_OOM: {
        /* as report counts them: its i-th listed failure is the i-th here */
        if (ev->device < 0 || ev->device >= FS_SITES_MAX_DEVICES) break;
        e->ooms++;
        if (e->n == e->keep) break;
        failure *f = &e->f[e->n++];
        f->ev = *ev;
        if (e->n <= FS_OOM_EXPLAINED && (ev->stack || ev->pystack)) {
            /* first: it may grow stacks.all, which an index expression
             * around the call could read before the call (unsequenced) */
            uint32_t id = fs_sites_of(&e->stacks, t, ev, tid);
            f->site = e->stacks.all[id - 1].key;
        }
        /* a snapshot's segments and blocks may follow its failure: both
         * are taken at the end */
        if (e->snapshot) break;
        if (e->n <= FS_OOM_EXPLAINED) take_holders(e, f);
        fs_oom_layout_where(e->layout, ev, &f->where);
        break;
    }
    default:
        break;
    }
    return 0;
}

/* ---- the cause ------------------------------------------------------------------- */

static uint64_t round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

/* The least segment that holds a request of `rounded` bytes, and the one
 * the recorded policy grows the cache by for it (SPEC section 4; an
 * expandable segment grows by the pages the request needs). */
static uint64_t least_segment(uint64_t rounded)
{
    return rounded <= SMALL_MAX ? SMALL_SEGMENT : round_up(rounded, SEGMENT_STEP);
}

static uint64_t policy_segment(const fs_alloc_config *rec, uint64_t rounded)
{
    uint64_t least = least_segment(rounded);
    if (rec->expandable_segments || rounded <= SMALL_MAX || rounded >= OWN_SEGMENT) return least;
    return rec->large_segment > least ? rec->large_segment : least;
}

/* "12.0 MiB in cudaMalloc segments (...), 2.0 MiB in the small pool's
 * segments (...)": the free bytes in segments the request never takes. */
static void never_taken(const fs_oom_where *w, char *buf, size_t len)
{
    char m[32], p[32];
    size_t at = 0;
    buf[0] = '\0';
    if (w->other_memory) {
        fs_human_bytes(w->other_memory, m, sizeof m);
        at += (size_t)snprintf(buf, len, "%s in %s", m,
                               w->ordered ? "cudaMalloc segments (a cudaMallocAsync request takes "
                                            "stream-ordered memory only)"
                                          : "stream-ordered segments (a cudaMalloc request takes "
                                            "cudaMalloc's memory only)");
    }
    if (w->other_pool && at < len) {
        fs_human_bytes(w->other_pool, p, sizeof p);
        snprintf(buf + at, len - at, "%s%s in %s", at ? ", " : "", p,
                 w->rounded > SMALL_MAX ? "the small pool's segments (blocks of 1 MiB or less)"
                                        : "the large pool's segments (blocks over 1 MiB)");
    }
}

static void note(cause *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(cause *c, const char *fmt, ...)
{
    va_list ap;
    if (c->nnotes == sizeof c->note / sizeof c->note[0]) return;
    va_start(ap, fmt);
    vsnprintf(c->note[c->nnotes++], sizeof c->note[0], fmt, ap);
    va_end(ap);
}

static void why(cause *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why(cause *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
}

/* The cause of failure f, from its figures (docs/cli.md lists the order):
 * the first that holds, then what else the figures show. */
static void diagnose(failure *f, bool detail, uint64_t capacity, const fs_alloc_config *rec)
{
    const fs_fmt_event *ev = &f->ev;
    const fs_oom_where *w = &f->where;
    cause *c = &f->c;
    char req[32], a[32], b[32], e[32], dev[32], grw[32], never[256];
    uint64_t free_cache = ev->reserved > ev->allocated ? ev->reserved - ev->allocated : 0;
    bool dev_known = detail && ev->aux2 != FS_FMT_UNKNOWN;
    uint64_t dev_free = dev_known ? ev->aux2 : 0;
    uint64_t other = detail ? ev->aux3 : 0, pending = detail ? ev->aux4 : 0;
    uint64_t mine = free_cache > other + pending ? free_cache - other - pending : 0;
    uint64_t least = least_segment(w->rounded), grows = policy_segment(rec, w->rounded);
    /* the device had room for the request, not for the segment it grows by */
    bool segment_short = dev_known && dev_free >= least && dev_free < grows;
    uint64_t never_bytes = w->known ? w->other_memory + w->other_pool : 0;
    bool said_segment = false, said_never = false;

    *c = (cause){0};
    fs_human_bytes(ev->size, req, sizeof req);
    fs_human_bytes(dev_free, dev, sizeof dev);
    fs_human_bytes(grows, grw, sizeof grw);
    never_taken(w, never, sizeof never);

    if (capacity && ev->allocated + ev->size > capacity) {
        fs_human_bytes(ev->allocated, a, sizeof a);
        fs_human_bytes(capacity, b, sizeof b);
        why(c,
            "too much is live: %s in live blocks and the %s asked for exceed the device's %s; no "
            "allocator setting makes room, only freeing or shrinking what holds it (below)",
            a, req, b);
        c->none = "no allocator setting makes room for live blocks";
        return;
    }
    if (w->known && w->own_largest >= w->rounded && pending) {
        fs_human_bytes(w->own_largest, a, sizeof a);
        fs_human_bytes(pending, b, sizeof b);
        why(c,
            "frees still pending: this stream's own pools held a free piece of %s, which the "
            "request could not take until the streams that used its blocks passed their frees "
            "(%s of frees pending in all)",
            a, b);
        c->settings = BEARS(SET_REUSE_WAIT) | BEARS(SET_FREE_SYNC);
    } else if (w->known && w->own_largest >= w->rounded) {
        /* nothing pending, yet a piece big enough: the allocator kept it */
        fs_human_bytes(w->own_largest, a, sizeof a);
        if (rec->max_split_size != SIZE_MAX)
            snprintf(b, sizeof b, "%zu", rec->max_split_size / MiB);
        why(c,
            "this stream's own pools held a free piece of %s, which the allocator did not hand "
            "out for this request%s%s%s",
            a, rec->max_split_size != SIZE_MAX ? " (max_split_size_mb:" : "",
            rec->max_split_size != SIZE_MAX ? b : "",
            rec->max_split_size != SIZE_MAX
                ? " keeps blocks of that size or more for requests of their own size)"
                : "");
        c->settings = ALL_SETTINGS;
    } else if (w->known && w->other_largest >= w->rounded) {
        fs_human_bytes(w->other, a, sizeof a);
        fs_human_bytes(w->other_largest, b, sizeof b);
        if (rec->cross_stream_reuse == FS_REUSE_NONE) {
            fs_human_bytes(w->own, e, sizeof e);
            why(c,
                "the cache is tagged by stream (a soft OOM): %s lay free in other streams' pools, "
                "in segments this request could take (a piece of %s among them), which "
                "cross_stream_reuse:none kept from it, and %s in its own",
                a, b, e);
            c->settings = BEARS(SET_REUSE_WAIT) | BEARS(SET_EXPANDABLE);
        } else {
            why(c,
                "frees still pending in other streams' pools: they held a free piece of %s that "
                "this request could take once those frees completed, which they had not when it "
                "failed (under cross_stream_reuse:%s%s)",
                b, rec->cross_stream_reuse == FS_REUSE_WAIT ? "wait" : "completed",
                w->ordered ? "" : "; a cudaMalloc request never waits for one on the GPU");
            c->settings = BEARS(SET_REUSE_WAIT) | BEARS(SET_FREE_SYNC);
        }
    } else if (segment_short) {
        fs_human_bytes(least, a, sizeof a);
        why(c,
            "the segment size: the device had %s free, room for the %s asked (a segment of %s), "
            "but a miss of this size grows the cache by a whole %s segment (large_segment_mb), "
            "which did not fit",
            dev, req, a, grw);
        c->settings = BEARS(SET_LARGE_SEGMENT) | BEARS(SET_EXPANDABLE);
        said_segment = true;
    } else if (!w->known && pending && mine + dev_free < ev->size &&
               mine + dev_free + pending >= ev->size) {
        fs_human_bytes(pending, a, sizeof a);
        why(c,
            "frees still pending: %s freed by the program waited for their streams to pass the "
            "frees, and would have served the request",
            a);
        c->settings = BEARS(SET_REUSE_WAIT) | BEARS(SET_FREE_SYNC);
    } else if (!w->known && other && mine < ev->size && mine + other >= ev->size) {
        fs_human_bytes(other, a, sizeof a);
        fs_human_bytes(mine, b, sizeof b);
        if (rec->cross_stream_reuse == FS_REUSE_NONE) {
            why(c,
                "the cache is tagged by stream (a soft OOM): %s lay free in other streams' pools, "
                "which this stream's request did not take, and %s in its own",
                a, b);
            c->settings = BEARS(SET_REUSE_WAIT) | BEARS(SET_EXPANDABLE);
        } else {
            why(c,
                "%s lay free in other streams' pools (%s in its own) that this request could not "
                "take: frees not yet complete there, or segments of another pool or memory (the "
                "trace's segments do not add up to its figures, so which is not known)",
                a, b);
            c->settings = BEARS(SET_REUSE_WAIT) | BEARS(SET_EXPANDABLE) | BEARS(SET_LARGE_SEGMENT);
        }
    } else if (w->known ? w->own + w->other + dev_free >= w->rounded
                        : free_cache + dev_free >= ev->size && ev->aux < ev->size) {
        uint64_t usable = w->known ? w->own + w->other : free_cache;
        uint64_t largest = !w->known                           ? ev->aux
                           : w->own_largest > w->other_largest ? w->own_largest
                                                               : w->other_largest;
        fs_human_bytes(usable, a, sizeof a);
        fs_human_bytes(largest, b, sizeof b);
        why(c,
            "fragmentation: %s free in %s and %s on the device, enough in total, but the largest "
            "free piece was %s: no single piece of %s",
            a, w->known ? "segments this request could take" : "the cache", dev, b, req);
        c->settings =
            BEARS(SET_MAX_SPLIT) | BEARS(SET_EXPANDABLE) | BEARS(SET_GC) | BEARS(SET_ROUNDUP);
    } else if (never_bytes && never_bytes + dev_free >= least) {
        fs_human_bytes(never_bytes, a, sizeof a);
        fs_human_bytes(least, b, sizeof b);
        why(c,
            "memory this request never takes: the device's %s free held no segment of %s, and "
            "%s of the cache's free lay in segments it cannot use, kept there by the live blocks "
            "beside it: %s",
            dev, b, a, never);
        c->settings = BEARS(SET_EXPANDABLE) | BEARS(SET_LARGE_SEGMENT);
        said_never = true;
    } else if (detail && capacity) {
        uint64_t outside =
            capacity > ev->reserved + dev_free ? capacity - ev->reserved - dev_free : 0;
        fs_human_bytes(outside, a, sizeof a);
        fs_human_bytes(ev->reserved, b, sizeof b);
        fs_human_bytes(capacity, e, sizeof e);
        why(c,
            "memory outside the cache: of the device's %s, the cache held %s and %s was held "
            "outside it (NCCL's buffers, the CUDA context, other processes, allocations made "
            "without the shim)",
            e, b, a);
        if (f->vmm_bytes) {
            fs_human_bytes(f->vmm_bytes, a, sizeof a);
            note(c,
                 "of which %s in the program's own cuMemCreate allocations (traced \"vmm\" "
                 "events: NCCL's buffers among them)",
                 a);
        }
        c->none = "the memory is held outside the cache, which no allocator setting reaches";
    } else {
        why(c, "the device had no %s to give and the cache no free block of it", req);
        c->settings = ALL_SETTINGS; /* nothing points anywhere: each is worth a try */
    }
    if (segment_short && !said_segment) {
        note(c,
             "and the device's %s free could not hold the %s segment that a miss of this size "
             "grows the cache by (large_segment_mb)",
             dev, grw);
        c->settings |= BEARS(SET_LARGE_SEGMENT) | BEARS(SET_EXPANDABLE);
    }
    if (never_bytes && !said_never) {
        fs_human_bytes(never_bytes, a, sizeof a);
        note(c, "and %s of the cache's free lay in segments this request never takes: %s", a,
             never);
        c->settings |= BEARS(SET_EXPANDABLE) | BEARS(SET_LARGE_SEGMENT);
    }
    if (c->settings) c->none = NULL;
}

/* ---- the settings, checked by replaying --------------------------------------- */

typedef struct trial {
    const char *conf[FS_REPLAY_MAX_CONFIGS]; /* [0] NULL: as recorded */
    char text[FS_REPLAY_MAX_CONFIGS][64];
    enum setting which[FS_REPLAY_MAX_CONFIGS]; /* of each candidate, from [1] */
    size_t n;
    fs_replay_result r;
    bool ran;
    char why_not[160]; /* when no replay ran */
} trial;

/* Setting s as a candidate, in text: false when the recording already ran
 * with it. most: the largest request that failed; shared: the largest of
 * them that shares large_segment_mb's segments, rounded to a segment (0:
 * none). */
static bool candidate(enum setting s, const fs_alloc_config *rec, uint64_t most, uint64_t shared,
                      char *buf, size_t len)
{
    switch (s) {
    case SET_LARGE_SEGMENT: {
        /* segments no bigger than the request that failed: it fits where
         * it fits, and they still serve its size again */
        uint64_t mb = shared ? shared / MiB : SEGMENT_STEP / MiB;
        if (mb * MiB >= rec->large_segment) return false;
        snprintf(buf, len, "large_segment_mb:%" PRIu64, mb);
        return true;
    }
    case SET_EXPANDABLE:
        if (rec->expandable_segments) return false;
        snprintf(buf, len, "expandable_segments:true");
        return true;
    case SET_REUSE_WAIT:
        if (rec->cross_stream_reuse == FS_REUSE_WAIT) return false;
        snprintf(buf, len, "cross_stream_reuse:wait");
        return true;
    case SET_FREE_SYNC:
        if (rec->free_semantics == FS_FREE_SEMANTICS_SYNC) return false;
        snprintf(buf, len, "free_semantics:sync");
        return true;
    case SET_MAX_SPLIT: {
        /* blocks this big or bigger are kept whole for requests like the
         * one that failed (the allocator takes no value up to 20 MiB) */
        uint64_t mb = most / MiB < 21 ? 21 : most / MiB;
        if (rec->max_split_size != SIZE_MAX && rec->max_split_size <= mb * MiB) return false;
        snprintf(buf, len, "max_split_size_mb:%" PRIu64, mb);
        return true;
    }
    case SET_GC:
        if (rec->garbage_collection_threshold > 0.0) return false;
        snprintf(buf, len, "garbage_collection_threshold:0.6");
        return true;
    case SET_ROUNDUP:
        for (int i = 0; i < FS_ROUNDUP_BUCKETS; i++)
            if (rec->roundup_divisions[i] > 1) return false;
        snprintf(buf, len, "roundup_power2_divisions:4");
        return true;
    default:
        return false;
    }
}

/* The settings the explained failures' causes bear on, each left out when
 * the recording already ran with it. */
static void choose(trial *tr, const fs_alloc_config *rec, const explain *e)
{
    unsigned bears = 0;
    uint64_t most = 0, shared = 0;
    for (size_t i = 0; i < e->n && i < FS_OOM_EXPLAINED; i++) {
        const failure *f = &e->f[i];
        uint64_t rounded = f->where.rounded;
        bears |= f->c.settings;
        if (f->ev.size > most) most = f->ev.size;
        if (rounded > SMALL_MAX && rounded < OWN_SEGMENT &&
            round_up(rounded, SEGMENT_STEP) > shared)
            shared = round_up(rounded, SEGMENT_STEP);
    }
    tr->conf[0] = NULL;
    tr->n = 1;
    for (enum setting s = 0; s < NSETTINGS; s++)
        if (bears & BEARS(s) &&
            candidate(s, rec, most, shared, tr->text[tr->n], sizeof tr->text[0])) {
            tr->which[tr->n] = s;
            tr->conf[tr->n] = tr->text[tr->n];
            tr->n++;
        }
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
    if (tr->n == 1) return; /* no cause that a setting bears on */
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

/* Configuration c's failures and peak reserved over every device. */
static uint64_t replay_ooms(const fs_replay_result *r, size_t c, uint64_t *peak)
{
    uint64_t ooms = 0;
    *peak = 0;
    for (size_t i = 0; i < r->ndev; i++) {
        ooms += r->dev[i].replayed[c].ooms;
        *peak += r->dev[i].replayed[c].peak_reserved;
    }
    return ooms;
}

/* ---- printing -------------------------------------------------------------------- */

/* text, one line at a time: the first after `first`, the rest after `rest` */
static void print_lines(FILE *out, const char *first, const char *rest, const char *text)
{
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        int len = end ? (int)(end - line) : (int)strlen(line);
        fprintf(out, "%s%.*s\n", line == text ? first : rest, len, line);
        line += len + (end ? 1 : 0);
    }
}

static void print_holders(FILE *out, const char *by, const holder *h, size_t n)
{
    char b[32], first[48];
    if (!n) return;
    fprintf(out, "    live then, by %s:\n", by);
    for (size_t i = 0; i < n; i++) {
        fs_human_bytes(h[i].bytes, b, sizeof b);
        snprintf(first, sizeof first, "      %s  ", b);
        print_lines(out, first, "        ", h[i].key);
    }
}

/* Where the free bytes lay for the request, when the segments followed add
 * up to the failure's figures. */
static void print_where(FILE *out, const fs_oom_where *w)
{
    char a[32], b[32], c[32], d[32], n[32];
    if (!w->known) {
        fprintf(out, "    (the trace's segments do not add up to the failure's figures: where "
                     "the free bytes lay is not known)\n");
        return;
    }
    fs_human_bytes(w->own, a, sizeof a);
    fs_human_bytes(w->own_largest, b, sizeof b);
    fs_human_bytes(w->other, c, sizeof c);
    fs_human_bytes(w->other_largest, d, sizeof d);
    fs_human_bytes(w->other_memory + w->other_pool, n, sizeof n);
    fprintf(out,
            "    where it lay, for this request%s: %s in segments it could take of its stream (the "
            "largest piece %s) and %s of other streams (the largest %s); %s in segments it "
            "never takes\n",
            !w->memory_known ? ""
            : w->by_stream ? (w->ordered ? " (a cudaMallocAsync, as its stream's allocations were)"
                                         : " (a cudaMalloc, as its stream's allocations were)")
            : w->ordered   ? " (taken for a cudaMallocAsync: not on the legacy stream)"
                           : " (taken for a cudaMalloc: on the legacy stream)",
            a, b, c, d, n);
}

static void print_settings(FILE *out, const failure *f, const trial *tr)
{
    const fs_fmt_event *ev = &f->ev;
    char a[32];
    bool sure;
    if (!f->c.settings) {
        fprintf(out, "    settings: none bears on it: %s\n", f->c.none);
        return;
    }
    if (!tr->ran) {
        fprintf(out, "    settings: not checked: %s\n",
                tr->n == 1 ? "the recording already ran with each that bears on it" : tr->why_not);
        return;
    }
    if (replay_failed(&tr->r, 0, ev, &sure))
        fprintf(out, "    settings, checked by replaying the trace (as recorded, the request "
                     "fails there too):\n");
    else
        fprintf(out,
                "    settings, checked by replaying the trace (as recorded, the request %s "
                "there: this allocator is not the recording's, or the replay differs; fsdpshim "
                "replay shows how):\n",
                sure ? "did not fail" : "may not have failed");
    const fs_replay_device *dev = replay_device(&tr->r, ev->device);
    size_t shown = 0;
    for (size_t c = 1; c < tr->n; c++) {
        if (!(f->c.settings & BEARS(tr->which[c]))) continue;
        bool failed = replay_failed(&tr->r, c, ev, &sure);
        uint64_t ooms = dev ? dev->replayed[c].ooms : 0;
        fs_human_bytes(dev ? dev->replayed[c].peak_reserved : 0, a, sizeof a);
        fprintf(out, "      %-36s ", tr->conf[c]);
        shown++;
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
    if (!shown)
        fprintf(out, "      (the recording already ran with each setting that bears on it)\n");
}

static void print_failure(FILE *out, const failure *f, fs_reader *t, const trial *tr)
{
    const fs_fmt_event *ev = &f->ev;
    bool detail = fs_reader_header(t)->version >= 2;
    uint64_t capacity = fs_reader_device_total(t, ev->device);
    uint64_t free_cache = ev->reserved > ev->allocated ? ev->reserved - ev->allocated : 0;
    char req[32], a[32], b[32], c[32], d[32], e[32];

    fs_human_bytes(ev->size, req, sizeof req);
    fprintf(out, "  why the %s request at %.3f s on device %d, stream 0x%" PRIx64 " failed:\n", req,
            (double)ev->time_ns / 1e9, ev->device, ev->stream);
    if (f->site) {
        fprintf(out, "    requested at:\n");
        print_lines(out, "      ", "      ", f->site);
    } else {
        fprintf(out, "    requested at: not known (the trace records no stack for it)\n");
    }
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
    }
    print_where(out, &f->where);
    if (detail) {
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
    fprintf(out, "    why: %s\n", f->c.why);
    for (size_t i = 0; i < f->c.nnotes; i++)
        fprintf(out, "    %s\n", f->c.note[i]);
    print_holders(out, "stack", f->by_stack, f->nstack);
    print_holders(out, "annotation", f->by_annot, f->nannot);
    print_settings(out, f, tr);
}

/* Of the settings replayed, the one that served every request of the
 * trace with the least memory. */
static void print_best(FILE *out, const trial *tr)
{
    size_t best = 0;
    uint64_t best_peak = 0, peak, recorded_ooms = replay_ooms(&tr->r, 0, &peak);
    char a[32];
    if (!tr->ran) return;
    for (size_t c = 1; c < tr->n; c++)
        if (!replay_ooms(&tr->r, c, &peak) && (!best || peak < best_peak)) {
            best = c;
            best_peak = peak;
        }
    if (!best) {
        fprintf(out, "  of the settings checked, none serves every request of the trace\n");
        return;
    }
    fs_human_bytes(best_peak, a, sizeof a);
    fprintf(out,
            "  of the settings checked, %s serves every request of the trace in the least "
            "memory: peak reserved %s%s\n",
            tr->conf[best], a,
            recorded_ooms ? "" : " (replayed as recorded, every request was served too)");
}

bool fs_oom_explain(FILE *out, const char *path, const fs_oom_options *opt)
{
    explain *e = calloc(1, sizeof *e);
    trial *tr = calloc(1, sizeof *tr);
    char err[4200];
    if (!e || !tr) fs_analysis_oom("report");
    e->opt = opt;
    e->keep = opt->why && opt->nwhy > FS_OOM_EXPLAINED ? opt->nwhy : FS_OOM_EXPLAINED;
    if (!(e->f = calloc(e->keep, sizeof *e->f))) fs_analysis_oom("report");
    e->stacks = (fs_sites){.by = FS_BY_STACK, .sym = opt->sym, .full = opt->full};
    e->annots = (fs_sites){.by = FS_BY_ANNOT};
    e->layout = fs_oom_layout_create();
    fs_reader *t = fs_reader_open(path, err, sizeof err);
    if (!t) {
        if (opt->warn) opt->warn(opt->warn_ctx, err);
        fs_oom_layout_free(e->layout);
        free(e->f);
        free(e);
        free(tr);
        return false;
    }
    e->snapshot = fs_reader_header(t)->features & FS_FMT_FEAT_SNAPSHOT;
    e->api_recorded = fs_reader_header(t)->version >= 2;
    fs_sites_next_file(&e->stacks);
    fs_sites_next_file(&e->annots);
    fs_replayer_ops ops = {.site = block_site, .snapshot_blocks = true};
    e->rp = fs_replayer_create(&ops, e);
    fs_reader_read_ordered(t, visit, NULL, e);
    for (size_t i = 0; e->snapshot && i < e->n; i++) {
        if (i < FS_OOM_EXPLAINED) take_holders(e, &e->f[i]);
        fs_oom_layout_where(e->layout, &e->f[i].ev, &e->f[i].where);
    }
    /* the configuration the trace records, else the defaults */
    fs_alloc_config rec;
    const char *text = fs_reader_config(t);
    fs_alloc_config_default(&rec);
    if (text && !fs_replay_conf_apply(&rec, text, err, sizeof err)) fs_alloc_config_default(&rec);
    bool detail = fs_reader_header(t)->version >= 2;
    for (size_t i = 0; i < e->n; i++)
        diagnose(&e->f[i], detail, fs_reader_device_total(t, e->f[i].ev.device), &rec);
    for (size_t i = 0; opt->why && i < opt->nwhy; i++)
        snprintf(opt->why[i], FS_OOM_WHY_LEN, "%s", i < e->n ? e->f[i].c.why : "");
    if (e->n) run_trial(tr, path, t, e, &rec, opt);
    for (size_t i = 0; i < e->n && i < FS_OOM_EXPLAINED; i++)
        print_failure(out, &e->f[i], t, tr);
    if (e->ooms > FS_OOM_EXPLAINED)
        fprintf(out, "  (%" PRIu64 " more failures; the first %d are explained)\n",
                e->ooms - FS_OOM_EXPLAINED, FS_OOM_EXPLAINED);
    print_best(out, tr);
    fs_reader_close(t);
    for (size_t i = 0; i < e->n; i++) {
        free(e->f[i].by_stack);
        free(e->f[i].by_annot);
    }
    if (tr->ran) fs_replay_result_free(&tr->r);
    fs_oom_layout_free(e->layout);
    fs_replayer_free(e->rp);
    fs_pair_ids_free(&e->holders);
    fs_live_free(&e->vmm);
    fs_sites_free(&e->stacks);
    fs_sites_free(&e->annots);
    free(e->f);
    free(e);
    free(tr);
    return true;
}
