/* top.c - `fsdpshim top TRACE...`: where the bytes went, grouped by
 * allocating stack, top frame, annotation or Python stack (docs/cli.md).
 *
 * Each group gets: its bytes live at its rank's peak (the moment the
 * device's allocated total was highest, the figure that decides whether a
 * job fits), the count and total bytes of its allocations, and how many of
 * them were temporary: freed by the thread that made them before it made
 * any other allocation, heaptrack's definition, the allocations a cache or
 * a reordering would save. Several files are ranks of one job: groups are
 * merged by their text (ids differ between files), each rank's peak is
 * named, and the table sums the ranks.
 *
 * Each file is read twice through the one reading loop, in time order
 * (blocks are followed by address, and threads' events reach the file out
 * of order): once to find the peak of every device, once to group, taking
 * the live blocks at that moment. Memory grows with the live blocks and the groups, never with the
 * number of events. */
#include "analysis.h"
#include "reader.h"
#include "render.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 64

enum by { BY_STACK, BY_FRAME, BY_ANNOT, BY_PYTHON };
enum sort_key { SORT_PEAK, SORT_COUNT, SORT_TOTAL, SORT_TEMPORARY };

typedef struct group {
    char *key; /* the group's text: frames one per line, or a path */
    uint64_t peak, count, total, temporary, temporary_bytes;
    uint32_t ranks;     /* how many files contributed */
    uint32_t last_file; /* the file that last counted in ranks, plus one */
} group;

/* Groups by text: open addressing over indexes into `all`. */
typedef struct groups {
    group *all;
    size_t n, cap;
    uint32_t *slots; /* index + 1, 0 empty */
    size_t nslots;
} groups;

/* A live block: in `live`, open addressing by address, deleted by shifting
 * back (no tombstones: millions of frees must not fill the table). */
typedef struct block {
    uint64_t addr, size;
    uint32_t group; /* index + 1; 0: empty slot */
    int device;
} block;

typedef struct thread_last {
    uint32_t tid;
    uint64_t addr; /* its last allocation, still the last thing it did; 0: none */
} thread_last;

typedef struct top_run {
    enum by by;
    enum sort_key sort;
    size_t limit;
    fs_symbols *sym; /* NULL: --no-symbols */
    groups g;
    /* per file */
    uint32_t file;    /* 1-based */
    uint64_t ordinal; /* memory events read so far in this file */
    uint64_t peak_bytes[MAX_DEVICES], peak_at[MAX_DEVICES], peak_time[MAX_DEVICES];
    uint32_t *by_id; /* group index + 1 per definition id, this file */
    size_t by_id_cap;
    block *live;
    size_t live_n, live_cap;
    thread_last *threads;
    size_t nthreads;
    uint64_t allocs;
} top_run;

void usage_top(FILE *out)
{
    fprintf(out, "usage: fsdpshim top [--by stack|frame|annotation|python]\n"
                 "                    [--sort peak|count|total|temporary] [-n N] [--no-symbols]\n"
                 "                    TRACE...\n"
                 "\n"
                 "Allocation sites of one or more traces (ranks of one job are merged), largest\n"
                 "first. For each: bytes live at the rank's peak (the moment the device's\n"
                 "allocated total was highest), the number and total bytes of its allocations,\n"
                 "and the temporary ones (freed by their thread before it allocated again).\n"
                 "\n"
                 "  --by      stack (default): the allocating native stack; frame: its first\n"
                 "            frame; annotation: the NVTX range stack; python: the Python stack\n"
                 "  --sort    peak (default), count, total or temporary\n"
                 "  -n N      print the first N groups [10]; 0 prints all\n"
                 "  --no-symbols  native frames as MODULE+0xOFFSET, not FUNCTION at FILE:LINE\n"
                 "\n"
                 "Native frames are symbolised from the modules on this machine (libdw; separate\n"
                 "debug files by build id); a module that is missing or was rebuilt since the\n"
                 "trace is named once on stderr and its frames stay MODULE+0xOFFSET.\n"
                 "Exit status: 0 ok, 1 a file is not a readable trace, 2 usage.\n");
}

/* ---- groups ----------------------------------------------------------------- */

static uint64_t hash_text(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void die_oom(void)
{
    fprintf(stderr, "fsdpshim top: out of memory\n");
    exit(FS_EXIT_BAD_INPUT);
}

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * size);
    if (!q) die_oom();
    memset((char *)q + *cap * size, 0, (c - *cap) * size);
    *cap = c;
    return q;
}

static void rehash(groups *g, size_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) die_oom();
    for (size_t i = 0; i < g->n; i++) {
        size_t s = hash_text(g->all[i].key) & (nslots - 1);
        while (slots[s])
            s = (s + 1) & (nslots - 1);
        slots[s] = (uint32_t)i + 1;
    }
    free(g->slots);
    g->slots = slots;
    g->nslots = nslots;
}

/* The group of text key (created on first use): its index. */
static uint32_t group_of(groups *g, const char *key)
{
    if (2 * (g->n + 1) > g->nslots) rehash(g, g->nslots ? 2 * g->nslots : 1024);
    size_t s = hash_text(key) & (g->nslots - 1);
    for (; g->slots[s]; s = (s + 1) & (g->nslots - 1))
        if (!strcmp(g->all[g->slots[s] - 1].key, key)) return g->slots[s] - 1;
    g->all = grow(g->all, &g->cap, g->n + 1, sizeof *g->all);
    g->all[g->n] = (group){.key = strdup(key)};
    if (!g->all[g->n].key) die_oom();
    g->slots[s] = (uint32_t)++g->n;
    return (uint32_t)g->n - 1;
}

/* ---- the key of an allocation ---------------------------------------------------- */

static void append(char *buf, size_t len, size_t *at, const char *s)
{
    size_t n = strlen(s);
    if (*at + n + 1 >= len) n = len - *at - 1;
    memcpy(buf + *at, s, n);
    *at += n;
    buf[*at] = '\0';
}

static void key_of(top_run *r, fs_reader *t, const fs_fmt_event *ev, char *key, size_t len)
{
    char text[16384];
    size_t at = 0;

    key[0] = '\0';
    switch (r->by) {
    case BY_ANNOT:
        if (!fs_render_annot(t, ev->annot, key, len)) append(key, len, &at, "(no annotation)");
        return;
    case BY_PYTHON: {
        const fs_fmt_pyframe *py;
        uint32_t n = ev->pystack ? fs_reader_pystack(t, ev->pystack, &py) : 0;
        for (uint32_t i = 0; i < n; i++) {
            fs_render_pyframe(t, &py[i], text, sizeof text);
            if (i) append(key, len, &at, "\n");
            append(key, len, &at, text);
        }
        if (!n) append(key, len, &at, "(no Python frames)");
        return;
    }
    case BY_STACK:
    case BY_FRAME: {
        const uint64_t *frames;
        uint32_t n = ev->stack ? fs_reader_stack(t, ev->stack, &frames) : 0;
        if (r->by == BY_FRAME && n > 1) n = 1;
        for (uint32_t i = 0; i < n; i++) {
            fs_render_frame_sym(t, r->sym, frames[i], text, sizeof text);
            if (i) append(key, len, &at, "\n");
            append(key, len, &at, text);
        }
        if (!n) append(key, len, &at, "(no stack)");
        return;
    }
    }
}

/* The definition id an allocation is grouped by in this file. */
static uint32_t id_of(const top_run *r, const fs_fmt_event *ev)
{
    switch (r->by) {
    case BY_ANNOT:
        return ev->annot;
    case BY_PYTHON:
        return ev->pystack;
    default:
        return ev->stack;
    }
}

/* The group of an allocation: rendered once per definition id and file. */
static uint32_t alloc_group(top_run *r, fs_reader *t, const fs_fmt_event *ev)
{
    static char key[1 << 16];
    uint32_t id = id_of(r, ev);

    r->by_id = grow(r->by_id, &r->by_id_cap, (size_t)id + 1, sizeof *r->by_id);
    if (!r->by_id[id]) {
        key_of(r, t, ev, key, sizeof key);
        r->by_id[id] = group_of(&r->g, key) + 1;
    }
    group *g = &r->g.all[r->by_id[id] - 1];
    if (g->last_file != r->file) {
        g->last_file = r->file;
        g->ranks++;
    }
    return r->by_id[id];
}

/* ---- live blocks ------------------------------------------------------------- */

static size_t slot_of(uint64_t addr, size_t cap)
{
    return (size_t)((addr >> 9) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

static void live_put(top_run *r, uint64_t addr, uint64_t size, uint32_t group, int device)
{
    if (2 * (r->live_n + 1) > r->live_cap) {
        block *old = r->live;
        size_t oldcap = r->live_cap, cap = oldcap ? 2 * oldcap : 4096;
        r->live = calloc(cap, sizeof *r->live);
        if (!r->live) die_oom();
        r->live_cap = cap;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].group) {
                size_t s = slot_of(old[i].addr, cap);
                while (r->live[s].group)
                    s = (s + 1) & (cap - 1);
                r->live[s] = old[i];
            }
        free(old);
    }
    size_t s = slot_of(addr, r->live_cap);
    while (r->live[s].group && r->live[s].addr != addr)
        s = (s + 1) & (r->live_cap - 1);
    if (!r->live[s].group) r->live_n++;
    r->live[s] = (block){addr, size, group, device};
}

/* Removes the block at addr; false when it is not live (freed before the
 * trace began, or a snapshot's). */
static bool live_take(top_run *r, uint64_t addr, block *out)
{
    if (!r->live_cap) return false;
    size_t mask = r->live_cap - 1, s = slot_of(addr, r->live_cap);
    while (r->live[s].group && r->live[s].addr != addr)
        s = (s + 1) & mask;
    if (!r->live[s].group) return false;
    *out = r->live[s];
    r->live[s].group = 0;
    r->live_n--;
    /* shift the rest of the cluster back into the hole: an entry moves
     * unless its home slot lies cyclically in (hole, i] */
    size_t hole = s;
    for (size_t i = (s + 1) & mask; r->live[i].group; i = (i + 1) & mask) {
        size_t home = slot_of(r->live[i].addr, r->live_cap);
        bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (!stays) {
            r->live[hole] = r->live[i];
            r->live[i].group = 0;
            hole = i;
        }
    }
    return true;
}

static thread_last *thread_of(top_run *r, uint32_t tid)
{
    for (size_t i = 0; i < r->nthreads; i++)
        if (r->threads[i].tid == tid) return &r->threads[i];
    thread_last *more = realloc(r->threads, (r->nthreads + 1) * sizeof *r->threads);
    if (!more) die_oom();
    r->threads = more;
    r->threads[r->nthreads] = (thread_last){tid, 0};
    return &r->threads[r->nthreads++];
}

/* ---- the two passes ------------------------------------------------------------ */

static bool device_ok(int d)
{
    return d >= 0 && d < MAX_DEVICES;
}

static int find_peaks(void *ctx, fs_reader *t, const fs_fmt_record *rec, uint32_t tid)
{
    top_run *r = ctx;
    const fs_fmt_event *ev = &rec->ev;
    (void)t, (void)tid;
    if (rec->kind != FS_REC_ALLOC && rec->kind != FS_REC_FREE_REQUESTED) return 0;
    r->ordinal++;
    if (rec->kind == FS_REC_ALLOC && device_ok(ev->device) &&
        ev->allocated > r->peak_bytes[ev->device]) {
        r->peak_bytes[ev->device] = ev->allocated;
        r->peak_at[ev->device] = r->ordinal;
        r->peak_time[ev->device] = ev->time_ns;
    }
    return 0;
}

static int group_events(void *ctx, fs_reader *t, const fs_fmt_record *rec, uint32_t tid)
{
    top_run *r = ctx;
    const fs_fmt_event *ev = &rec->ev;
    block b;

    if (rec->kind != FS_REC_ALLOC && rec->kind != FS_REC_FREE_REQUESTED) return 0;
    r->ordinal++;
    thread_last *th = thread_of(r, tid);
    if (rec->kind == FS_REC_ALLOC) {
        uint32_t gi = alloc_group(r, t, ev);
        group *g = &r->g.all[gi - 1];
        g->count++;
        g->total += ev->size;
        r->allocs++;
        live_put(r, ev->addr, ev->size, gi, ev->device);
        th->addr = ev->addr;
        if (device_ok(ev->device) && r->ordinal == r->peak_at[ev->device]) {
            for (size_t i = 0; i < r->live_cap; i++)
                if (r->live[i].group && r->live[i].device == ev->device)
                    r->g.all[r->live[i].group - 1].peak += r->live[i].size;
        }
        return 0;
    }
    if (live_take(r, ev->addr, &b)) {
        if (th->addr == ev->addr) {
            group *g = &r->g.all[b.group - 1];
            g->temporary++;
            g->temporary_bytes += b.size;
        }
    }
    th->addr = 0;
    return 0;
}

static void warn(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "fsdpshim top: %s\n", line);
}

/* Reads one file twice; false when it cannot be opened. */
static bool read_file(top_run *r, const char *path)
{
    char err[4200];
    fs_reader *t = fs_reader_open(path, err, sizeof err);
    if (!t) {
        fprintf(stderr, "fsdpshim top: %s\n", err);
        return false;
    }
    r->file++;
    r->ordinal = 0;
    memset(r->peak_bytes, 0, sizeof r->peak_bytes);
    memset(r->peak_at, 0, sizeof r->peak_at);
    fs_reader_read_ordered(t, find_peaks, warn, r);
    fs_reader_close(t);

    t = fs_reader_open(path, err, sizeof err);
    if (!t) {
        fprintf(stderr, "fsdpshim top: %s\n", err);
        return false;
    }
    r->ordinal = 0;
    memset(r->by_id, 0, r->by_id_cap * sizeof *r->by_id);
    r->live_n = 0;
    if (r->live) memset(r->live, 0, r->live_cap * sizeof *r->live);
    r->nthreads = 0;
    fs_reader_read_ordered(t, group_events, NULL, r); /* damage was named by the first pass */
    for (int d = 0; d < MAX_DEVICES; d++)
        if (r->peak_at[d])
            printf("%s: %s %d: device %d peaked at %.1f MiB allocated, %.3f s in\n",
                   fs_reader_file(t), fs_reader_rank(t) >= 0 ? "rank" : "pid",
                   fs_reader_rank(t) >= 0 ? fs_reader_rank(t) : (int)fs_reader_header(t)->pid, d,
                   (double)r->peak_bytes[d] / (1 << 20), (double)r->peak_time[d] / 1e9);
    fs_reader_close(t);
    return true;
}

/* ---- output ------------------------------------------------------------------ */

static enum sort_key sort_by;

static uint64_t metric(const group *g)
{
    switch (sort_by) {
    case SORT_COUNT:
        return g->count;
    case SORT_TOTAL:
        return g->total;
    case SORT_TEMPORARY:
        return g->temporary;
    default:
        return g->peak;
    }
}

static int by_metric(const void *a, const void *b)
{
    const group *x = a, *y = b;
    uint64_t mx = metric(x), my = metric(y);
    if (mx != my) return mx < my ? 1 : -1;
    if (x->total != y->total) return x->total < y->total ? 1 : -1;
    return strcmp(x->key, y->key);
}

static void human(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static void print_table(top_run *r)
{
    static const char *const by_names[] = {"stack", "frame", "annotation", "python"};
    static const char *const sort_names[] = {"peak", "count", "total", "temporary"};
    size_t n = r->limit && r->limit < r->g.n ? r->limit : r->g.n;

    sort_by = r->sort;
    qsort(r->g.all, r->g.n, sizeof *r->g.all, by_metric);
    printf("%" PRIu64 " allocations in %u trace%s, %zu groups by %s, sorted by %s%s\n", r->allocs,
           r->file, r->file == 1 ? "" : "s", r->g.n, by_names[r->by], sort_names[r->sort],
           n < r->g.n ? " (first ones)" : "");
    printf("%12s %12s %10s %16s %6s\n", "peak", "total", "count", "temporary", "ranks");
    for (size_t i = 0; i < n; i++) {
        const group *g = &r->g.all[i];
        char peak[32], total[32], temp[40];
        human(g->peak, peak, sizeof peak);
        human(g->total, total, sizeof total);
        snprintf(temp, sizeof temp, "%" PRIu64 " (%.0f%%)", g->temporary,
                 g->count ? 100.0 * (double)g->temporary / (double)g->count : 0.0);
        printf("%12s %12s %10" PRIu64 " %16s %6u\n", peak, total, g->count, temp, g->ranks);
        for (const char *line = g->key; *line;) {
            const char *end = strchr(line, '\n');
            size_t len = end ? (size_t)(end - line) : strlen(line);
            printf("    %.*s\n", (int)len, line);
            line += len + (end ? 1 : 0);
        }
    }
}

static bool choose(const char *arg, const char *const *names, int n, int *out)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(arg, names[i])) {
            *out = i;
            return true;
        }
    return false;
}

int command_top(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"by", required_argument, NULL, 'b'},
        {"sort", required_argument, NULL, 's'},
        {"no-symbols", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *const by_names[] = {"stack", "frame", "annotation", "python"};
    static const char *const sort_names[] = {"peak", "count", "total", "temporary"};
    top_run r = {.by = BY_STACK, .sort = SORT_PEAK, .limit = 10};
    bool symbols = true;
    int c, v, status = 0;
    char *end;

    optind = 1;
    while ((c = getopt_long(argc, argv, "hn:", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (!choose(optarg, by_names, 4, &v)) goto bad;
            r.by = (enum by)v;
            break;
        case 's':
            if (!choose(optarg, sort_names, 4, &v)) goto bad;
            r.sort = (enum sort_key)v;
            break;
        case 'n':
            r.limit = strtoul(optarg, &end, 10);
            if (!*optarg || *end) goto bad;
            break;
        case 'N':
            symbols = false;
            break;
        case 'h':
            usage_top(stdout);
            return 0;
        default:
            goto bad;
        }
    }
    if (optind >= argc) goto bad;
    if (symbols && !(r.sym = fs_symbols_create(warn, NULL))) {
        fprintf(stderr, "fsdpshim top: out of memory\n");
        return FS_EXIT_BAD_INPUT;
    }
    for (int i = optind; i < argc; i++)
        if (!read_file(&r, argv[i])) status = FS_EXIT_BAD_INPUT;
    print_table(&r);
    for (size_t i = 0; i < r.g.n; i++)
        free(r.g.all[i].key);
    free(r.g.all);
    free(r.g.slots);
    free(r.by_id);
    free(r.live);
    free(r.threads);
    fs_symbols_destroy(r.sym);
    return status;
bad:
    usage_top(stderr);
    return FS_EXIT_USAGE;
}
