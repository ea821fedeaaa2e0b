/* sites.c - sites and live blocks (sites.h). */
#include "sites.h"

#include "../cli/cli.h"
#include "render.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *const by_names[] = {"stack", "frame", "annotation", "python"};

bool fs_site_by_parse(const char *arg, enum fs_site_by *out)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(arg, by_names[i])) {
            *out = (enum fs_site_by)i;
            return true;
        }
    return false;
}

int fs_site_option(int c, const char *arg, enum fs_site_by *by, size_t *limit, bool *symbols)
{
    char *end;
    switch (c) {
    case 'b':
        return fs_site_by_parse(arg, by) ? 1 : -1;
    case 'n':
        *limit = strtoul(arg, &end, 10);
        return *arg && !*end ? 1 : -1;
    case 'N':
        *symbols = false;
        return 1;
    default:
        return 0;
    }
}

const char *fs_site_by_name(enum fs_site_by by)
{
    return by_names[by];
}

_Noreturn void fs_analysis_oom(const char *command)
{
    fprintf(stderr, "fsdpshim %s: out of memory\n", command);
    exit(FS_EXIT_BAD_INPUT);
}

/* p grown to at least `need` elements of `size` bytes, the new ones zeroed */
static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * size);
    if (!q) fs_analysis_oom("analysis");
    memset((char *)q + *cap * size, 0, (c - *cap) * size);
    *cap = c;
    return q;
}

/* ---- sites by text --------------------------------------------------------------- */

static uint64_t hash_text(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void rehash(fs_sites *s, size_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) fs_analysis_oom("analysis");
    for (size_t i = 0; i < s->n; i++) {
        size_t k = hash_text(s->all[i].key) & (nslots - 1);
        while (slots[k])
            k = (k + 1) & (nslots - 1);
        slots[k] = (uint32_t)i + 1;
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = nslots;
}

static uint32_t site_by_text(fs_sites *s, const char *key)
{
    if (2 * (s->n + 1) > s->nslots) rehash(s, s->nslots ? 2 * s->nslots : 1024);
    size_t k = hash_text(key) & (s->nslots - 1);
    for (; s->slots[k]; k = (k + 1) & (s->nslots - 1))
        if (!strcmp(s->all[s->slots[k] - 1].key, key)) return s->slots[k];
    s->all = grow(s->all, &s->cap, s->n + 1, sizeof *s->all);
    s->all[s->n] = (fs_site){.key = strdup(key)};
    if (!s->all[s->n].key) fs_analysis_oom("analysis");
    s->slots[k] = (uint32_t)++s->n;
    return s->slots[k];
}

fs_site *fs_sites_find(fs_sites *s, const char *key)
{
    if (!s->nslots) return NULL;
    for (size_t k = hash_text(key) & (s->nslots - 1); s->slots[k]; k = (k + 1) & (s->nslots - 1))
        if (!strcmp(s->all[s->slots[k] - 1].key, key)) return &s->all[s->slots[k] - 1];
    return NULL;
}

void fs_sites_add(fs_sites *dst, const fs_site *src)
{
    uint32_t i = site_by_text(dst, src->key); /* may move dst->all */
    fs_site *d = &dst->all[i - 1];
    d->peak += src->peak;
    d->count += src->count;
    d->total += src->total;
    d->temporary += src->temporary;
    d->live += src->live;
    d->live_bytes += src->live_bytes;
    d->ranks += src->ranks;
}

/* ---- an allocation's text ------------------------------------------------------------ */

static void append(char *buf, size_t len, size_t *at, const char *s)
{
    size_t n = strlen(s);
    if (*at + n + 1 >= len) n = len - *at - 1;
    memcpy(buf + *at, s, n);
    *at += n;
    buf[*at] = '\0';
}

static void key_of(fs_sites *s, fs_reader *t, const fs_fmt_event *ev, char *key, size_t len)
{
    static char text[16384];
    size_t at = 0;
    uint32_t n;

    key[0] = '\0';
    switch (s->by) {
    case FS_BY_ANNOT:
        if (!fs_render_annot(t, ev->annot, key, len)) append(key, len, &at, "(no annotation)");
        return;
    case FS_BY_PYTHON: {
        const fs_fmt_pyframe *py;
        n = ev->pystack ? fs_reader_pystack(t, ev->pystack, &py) : 0;
        for (uint32_t i = 0; i < n; i++) {
            fs_render_pyframe(t, &py[i], text, sizeof text);
            if (i) append(key, len, &at, "\n");
            append(key, len, &at, text);
        }
        if (!n) append(key, len, &at, "(no Python frames)");
        return;
    }
    case FS_BY_STACK:
    case FS_BY_FRAME: {
        const uint64_t *frames;
        n = ev->stack ? fs_reader_stack(t, ev->stack, &frames) : 0;
        if (s->by == FS_BY_FRAME && n > 1) n = 1;
        for (uint32_t i = 0; i < n; i++) {
            fs_render_frame_sym(t, s->sym, frames[i], text, sizeof text);
            if (i) append(key, len, &at, "\n");
            append(key, len, &at, text);
        }
        if (!n) append(key, len, &at, "(no stack)");
        return;
    }
    }
}

static uint32_t id_of(const fs_sites *s, const fs_fmt_event *ev)
{
    switch (s->by) {
    case FS_BY_ANNOT:
        return ev->annot;
    case FS_BY_PYTHON:
        return ev->pystack;
    default:
        return ev->stack;
    }
}

void fs_sites_next_file(fs_sites *s)
{
    s->file++;
    if (s->by_id) memset(s->by_id, 0, s->by_id_cap * sizeof *s->by_id);
}

uint32_t fs_sites_of(fs_sites *s, fs_reader *t, const fs_fmt_event *ev)
{
    static char key[1 << 16];
    uint32_t id = id_of(s, ev);

    s->by_id = grow(s->by_id, &s->by_id_cap, (size_t)id + 1, sizeof *s->by_id);
    if (!s->by_id[id]) {
        key_of(s, t, ev, key, sizeof key);
        s->by_id[id] = site_by_text(s, key);
    }
    fs_site *site = &s->all[s->by_id[id] - 1];
    if (site->last_file != s->file) {
        site->last_file = s->file;
        site->ranks++;
    }
    return s->by_id[id];
}

void fs_sites_free(fs_sites *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->all[i].key);
    free(s->all);
    free(s->slots);
    free(s->by_id);
}

void fs_site_print_key(FILE *out, const fs_site *site)
{
    for (const char *line = site->key; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        fprintf(out, "    %.*s\n", (int)len, line);
        line += len + (end ? 1 : 0);
    }
}

/* ---- live blocks ---------------------------------------------------------------------- */

static size_t slot_of(uint64_t addr, size_t cap)
{
    return (size_t)((addr >> 9) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

void fs_live_put(fs_live *l, uint64_t addr, uint64_t size, uint32_t site, int device)
{
    if (2 * (l->n + 1) > l->cap) {
        fs_live_block *old = l->slots;
        size_t oldcap = l->cap, cap = oldcap ? 2 * oldcap : 4096;
        l->slots = calloc(cap, sizeof *l->slots);
        if (!l->slots) fs_analysis_oom("analysis");
        l->cap = cap;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].site) {
                size_t k = slot_of(old[i].addr, cap);
                while (l->slots[k].site)
                    k = (k + 1) & (cap - 1);
                l->slots[k] = old[i];
            }
        free(old);
    }
    size_t k = slot_of(addr, l->cap);
    while (l->slots[k].site && l->slots[k].addr != addr)
        k = (k + 1) & (l->cap - 1);
    if (!l->slots[k].site) l->n++;
    l->slots[k] = (fs_live_block){addr, size, site, device};
}

bool fs_live_take(fs_live *l, uint64_t addr, fs_live_block *out)
{
    if (!l->cap) return false;
    size_t mask = l->cap - 1, k = slot_of(addr, l->cap);
    while (l->slots[k].site && l->slots[k].addr != addr)
        k = (k + 1) & mask;
    if (!l->slots[k].site) return false;
    *out = l->slots[k];
    l->slots[k].site = 0;
    l->n--;
    /* shift the rest of the cluster back into the hole: an entry moves
     * unless its home slot lies cyclically in (hole, i] */
    size_t hole = k;
    for (size_t i = (k + 1) & mask; l->slots[i].site; i = (i + 1) & mask) {
        size_t home = slot_of(l->slots[i].addr, l->cap);
        bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (!stays) {
            l->slots[hole] = l->slots[i];
            l->slots[i].site = 0;
            hole = i;
        }
    }
    return true;
}

void fs_live_clear(fs_live *l)
{
    if (l->slots) memset(l->slots, 0, l->cap * sizeof *l->slots);
    l->n = 0;
}

void fs_live_free(fs_live *l)
{
    free(l->slots);
    *l = (fs_live){0};
}

void fs_human_bytes(uint64_t bytes, char *buf, size_t len)
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

/* ---- one file's allocations into the sites ------------------------------------------ */

typedef struct thread_last {
    uint32_t tid;
    uint64_t addr; /* its last allocation, still the last thing it did; 0: none */
} thread_last;

typedef struct reading {
    fs_sites *sites;
    fs_file_peaks *peaks;
    const char *command;
    uint64_t ordinal; /* memory events so far */
    uint64_t peak_at[FS_SITES_MAX_DEVICES];
    fs_live live;
    thread_last *threads;
    size_t nthreads;
} reading;

static bool device_ok(int d)
{
    return d >= 0 && d < FS_SITES_MAX_DEVICES;
}

static thread_last *thread_of(reading *r, uint32_t tid)
{
    for (size_t i = 0; i < r->nthreads; i++)
        if (r->threads[i].tid == tid) return &r->threads[i];
    thread_last *more = realloc(r->threads, (r->nthreads + 1) * sizeof *more);
    if (!more) fs_analysis_oom(r->command);
    r->threads = more;
    r->threads[r->nthreads] = (thread_last){tid, 0};
    return &r->threads[r->nthreads++];
}

static int find_peaks(void *ctx, fs_reader *t, const fs_fmt_record *rec, uint32_t tid)
{
    reading *r = ctx;
    const fs_fmt_event *ev = &rec->ev;
    (void)t, (void)tid;
    if (rec->kind != FS_REC_ALLOC && rec->kind != FS_REC_FREE_REQUESTED) return 0;
    r->ordinal++;
    if (rec->kind == FS_REC_ALLOC && device_ok(ev->device) &&
        ev->allocated > r->peaks->bytes[ev->device]) {
        r->peaks->bytes[ev->device] = ev->allocated;
        r->peaks->time_ns[ev->device] = ev->time_ns;
        r->peak_at[ev->device] = r->ordinal;
    }
    return 0;
}

static int group_events(void *ctx, fs_reader *t, const fs_fmt_record *rec, uint32_t tid)
{
    reading *r = ctx;
    const fs_fmt_event *ev = &rec->ev;
    fs_live_block b;

    if (rec->kind != FS_REC_ALLOC && rec->kind != FS_REC_FREE_REQUESTED) return 0;
    r->ordinal++;
    thread_last *th = thread_of(r, tid);
    if (rec->kind == FS_REC_ALLOC) {
        uint32_t si = fs_sites_of(r->sites, t, ev);
        fs_site *site = &r->sites->all[si - 1];
        site->count++;
        site->total += ev->size;
        r->peaks->allocs++;
        fs_live_put(&r->live, ev->addr, ev->size, si, ev->device);
        th->addr = ev->addr;
        if (device_ok(ev->device) && r->ordinal == r->peak_at[ev->device])
            for (size_t i = 0; i < r->live.cap; i++) {
                const fs_live_block *l = &r->live.slots[i];
                if (l->site && l->device == ev->device) r->sites->all[l->site - 1].peak += l->size;
            }
        return 0;
    }
    if (fs_live_take(&r->live, ev->addr, &b) && th->addr == ev->addr)
        r->sites->all[b.site - 1].temporary++;
    th->addr = 0;
    return 0;
}

static void warn_line(void *ctx, const char *line)
{
    const reading *r = ctx;
    fprintf(stderr, "fsdpshim %s: %s\n", r->command, line);
}

bool fs_sites_read(fs_sites *s, const char *path, const char *command, fs_file_peaks *peaks)
{
    reading r = {.sites = s, .peaks = peaks, .command = command};
    char err[4200];
    bool ok = false;

    *peaks = (fs_file_peaks){.rank = -1};
    for (int pass = 0; pass < 2; pass++) {
        fs_reader *t = fs_reader_open(path, err, sizeof err);
        if (!t) {
            fprintf(stderr, "fsdpshim %s: %s\n", command, err);
            break;
        }
        r.ordinal = 0;
        if (pass == 0) {
            fs_reader_read_ordered(t, find_peaks, warn_line, &r); /* damage named once */
        } else {
            fs_sites_next_file(s);
            fs_reader_read_ordered(t, group_events, NULL, &r);
            peaks->rank = fs_reader_rank(t);
            peaks->pid = fs_reader_header(t)->pid;
            ok = true;
        }
        fs_reader_close(t);
    }
    fs_live_free(&r.live);
    free(r.threads);
    return ok;
}

void fs_file_name(const fs_file_peaks *p, char *buf, size_t len)
{
    if (p->rank >= 0)
        snprintf(buf, len, "rank %d", p->rank);
    else
        snprintf(buf, len, "pid %u", p->pid);
}
