/* sites.c - sites and live blocks (sites.h). */
#include "sites.h"

#include "parallel.h"
#include "progress.h"

#include "cmdline.h"
#include "fold.h"
#include "render.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char *const by_names[] = {"stack", "frame", "annotation", "python"};

int fs_site_choice(const char *arg, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(arg, names[i])) return i;
    return -1;
}

bool fs_site_by_parse(const char *arg, enum fs_site_by *out)
{
    int i = fs_site_choice(arg, by_names, 4);
    if (i < 0) return false;
    *out = (enum fs_site_by)i;
    return true;
}

int fs_site_getopt(int argc, char *const *argv, const struct option *longopts, enum fs_site_by *by,
                   size_t *limit, bool *symbols, bool *full)
{
    uint64_t n;
    int c;
    while ((c = fs_getopt(argc, argv, "hn:", longopts)) != -1) {
        switch (c) {
        case 'b':
            if (!fs_site_by_parse(optarg, by)) {
                fs_site_bad(argv[0], "--by", optarg, by_names, 4);
                return FS_GETOPT_BAD;
            }
            break;
        case 'n':
            if (!fs_parse_count(optarg, SIZE_MAX, &n)) {
                fs_usage_error(argv[0], "-n '%s': not a count", optarg);
                return FS_GETOPT_BAD;
            }
            *limit = (size_t)n;
            break;
        case 'N':
            *symbols = false;
            break;
        case 'W':
            *full = true;
            break;
        default:
            return c;
        }
    }
    return -1;
}

int fs_site_bad(const char *command, const char *option, const char *arg, const char *const *names,
                int n)
{
    char list[256];
    size_t at = 0;
    for (int i = 0; i < n && at < sizeof list; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s",
                               i ? (i + 1 < n ? ", " : " or ") : "", names[i]);
    return fs_usage_error(command, "%s '%s': not %s", option, arg, list);
}

const char *fs_site_by_name(enum fs_site_by by)
{
    return by_names[by];
}

/* ---- sites by text --------------------------------------------------------------- */

static const char *site_text(const void *owner, uint32_t i)
{
    return ((const fs_sites *)owner)->all[i].key;
}

static uint32_t site_by_text(fs_sites *s, const char *key)
{
    uint64_t hash = fs_hash_text(key);
    uint32_t at = fs_text_index_find(&s->by_text, key, hash, site_text, s);
    if (at) return at;
    s->all = fs_grow(s->all, &s->cap, s->n + 1, sizeof *s->all);
    s->all[s->n] = (fs_site){.key = strdup(key), .hash = hash};
    if (!s->all[s->n].key) fs_analysis_oom("analysis");
    fs_text_index_add(&s->by_text, (uint32_t)s->n, hash);
    return (uint32_t)++s->n;
}

fs_site *fs_sites_find(fs_sites *s, const char *key)
{
    uint32_t at = fs_text_index_find(&s->by_text, key, fs_hash_text(key), site_text, s);
    return at ? &s->all[at - 1] : NULL;
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

/* The group of allocations without Python frames made by thread tid:
 * autograd's backward threads (PyTorch names each pt_autograd_N) run no
 * Python of their own, so theirs are told apart from a Python thread's
 * allocations that lost their frames. */
static const char *no_python_frames(const fs_reader *t, uint32_t tid)
{
    const char *name = fs_reader_thread_name(t, tid);
    if (name && !strncmp(name, "pt_autograd_", 12))
        return "(autograd backward thread: no Python frames)";
    return "(no Python frames)";
}

/* One source frame of a native frame into the stack's text (fold.h) */
static void fold_source(void *ctx, const char *line, const fs_render_source *src)
{
    fs_fold_line(ctx, line, fs_fold_group_of(src->module, src->function, src->file));
}

static void key_of(fs_sites *s, fs_reader *t, const fs_fmt_event *ev, uint32_t tid, char *key,
                   size_t len)
{
    static _Thread_local char text[16384]; /* files are read side by side */
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
        if (!n) append(key, len, &at, no_python_frames(t, tid));
        return;
    }
    case FS_BY_FRAME:
    case FS_BY_STACK: {
        /* a stack: its Python frames merged in where the interpreter runs
         * them (render.h), as PyTorch's mixed stacks, its plumbing folded
         * (fold.h) unless --full-stacks */
        const uint64_t *frames;
        const fs_fmt_pyframe *py;
        fs_fold fold = {.text = key, .len = len, .full = s->full};
        n = ev->stack ? fs_reader_stack(t, ev->stack, &frames) : 0;
        uint32_t npy =
            s->by == FS_BY_STACK && ev->pystack ? fs_reader_pystack(t, ev->pystack, &py) : 0;
        uint32_t python_at = npy ? fs_render_python_at(t, frames, n) : n;
        if (s->by == FS_BY_FRAME && n > 1) n = 1;
        for (uint32_t i = 0; i <= n; i++) {
            for (uint32_t k = 0; i == python_at && k < npy; k++) {
                fs_render_pyframe(t, &py[k], text, sizeof text);
                fs_fold_line(&fold, text, -1);
            }
            if (i == n) break;
            fs_render_frame_sources(t, s->sym, frames[i], fold_source, &fold);
        }
        fs_fold_end(&fold);
        if (!fold.at) append(key, len, &at, "(no stack)");
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
    fs_u64map_clear(&s->pairs);
}

/* Whether the definition an event names is in the file. One that is not
 * reads as none (its text is the same), so that a damaged or hostile
 * trace's ids never size the table of this file's ids. */
static bool defined(const fs_sites *s, const fs_reader *t, uint32_t id)
{
    const uint64_t *frames;
    const fs_fmt_pyframe *py;
    uint32_t parent, domain, name;
    switch (s->by) {
    case FS_BY_ANNOT:
        return fs_reader_annot(t, id, &parent, &domain, &name);
    case FS_BY_PYTHON:
        return fs_reader_pystack(t, id, &py) > 0;
    default:
        return fs_reader_stack(t, id, &frames) > 0;
    }
}

/* A site's ranks: one more when this file first counts in it. */
static uint32_t counted(fs_sites *s, uint32_t site)
{
    fs_site *st = &s->all[site - 1];
    if (st->last_file != s->file) {
        st->last_file = s->file;
        st->ranks++;
    }
    return site;
}

uint32_t fs_sites_of(fs_sites *s, fs_reader *t, const fs_fmt_event *ev, uint32_t tid)
{
    static _Thread_local char key[1 << 16];
    uint32_t id = id_of(s, ev);

    if (s->by == FS_BY_STACK && ev->pystack) {
        uint64_t ids = (uint64_t)ev->stack << 32 | ev->pystack;
        const uint32_t *known = fs_u64map_get(&s->pairs, ids);
        const fs_fmt_pyframe *py;
        const uint64_t *frames;
        /* a pair seen before had its stacks defined then */
        if (known) return counted(s, *known);
        if (fs_reader_pystack(t, ev->pystack, &py) &&
            (!ev->stack || fs_reader_stack(t, ev->stack, &frames))) {
            key_of(s, t, ev, tid, key, sizeof key);
            uint32_t site = site_by_text(s, key);
            if (!s->pairs.stride) fs_u64map_init(&s->pairs, sizeof site);
            uint32_t *slot = fs_u64map_put(&s->pairs, ids, NULL);
            if (!slot) fs_analysis_oom("analysis");
            *slot = site;
            return counted(s, site);
        }
    }

    if (id && id >= s->by_id_cap && !defined(s, t, id)) id = 0;
    /* no Python frames: the group depends on the thread, not on an id */
    if (s->by == FS_BY_PYTHON && !id) return counted(s, site_by_text(s, no_python_frames(t, tid)));

    s->by_id = fs_grow(s->by_id, &s->by_id_cap, (size_t)id + 1, sizeof *s->by_id);
    if (!s->by_id[id]) {
        key_of(s, t, ev, tid, key, sizeof key);
        s->by_id[id] = site_by_text(s, key);
    }
    return counted(s, s->by_id[id]);
}

void fs_sites_free(fs_sites *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->all[i].key);
    free(s->all);
    fs_text_index_free(&s->by_text);
    free(s->by_id);
    fs_u64map_free(&s->pairs);
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

/* ---- one file's allocations into the sites ------------------------------------------ */

typedef struct thread_last {
    uint32_t tid;
    uint64_t addr; /* its last allocation, still the last thing it did; 0: none */
} thread_last;

/* The bytes one site holds on one device. Which moment is the device's
 * peak is known only at the end, so a cell keeps, besides its bytes now,
 * what it held at the latest peak so far, saved when it first changes
 * after that peak: one pass finds the peaks and what each site held then. */
typedef struct site_cell {
    uint32_t site; /* index + 1 */
    int device;
    uint64_t live, at_peak;
    uint64_t changed; /* the ordinal of its last change */
} site_cell;

typedef struct reading {
    fs_sites *sites;
    fs_file_peaks *peaks;
    const char *command;
    uint64_t ordinal;                       /* memory events so far */
    uint64_t peak_at[FS_SITES_MAX_DEVICES]; /* the ordinal of each device's peak; 0: none */
    fs_live live;
    site_cell *cells; /* in the order made */
    size_t ncells, capcells;
    fs_u64map cell_index; /* (site, device) -> index into cells (uint32_t) */
    uint32_t *last_cell;  /* by site and device (CELL_WAYS): its cell last used */
    size_t last_cell_cap;
    thread_last *threads;
    size_t nthreads;
    fs_reader_visit also; /* the caller's visitor, in the same reading */
    void *also_ctx;
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

/* A site's cells on the devices it allocates on: the last one used per
 * site and device (modulo CELL_WAYS) is remembered, which is most often the
 * one, since a job's ranks drive their devices from the same stacks. */
#define CELL_WAYS 4

static site_cell *cell_of(reading *r, uint32_t site, int device)
{
    size_t way = (size_t)(site - 1) * CELL_WAYS + (unsigned)device % CELL_WAYS;
    r->last_cell = fs_grow(r->last_cell, &r->last_cell_cap, way + 1, sizeof *r->last_cell);
    if (r->ncells) {
        site_cell *c = &r->cells[r->last_cell[way]]; /* maybe another site's */
        if (c->site == site && c->device == device) return c;
    }
    bool added;
    uint32_t *index = fs_u64map_put(
        &r->cell_index, (uint64_t)site * FS_SITES_MAX_DEVICES + (uint64_t)device, &added);
    if (!index) fs_analysis_oom(r->command);
    if (added) {
        r->cells = fs_grow(r->cells, &r->capcells, r->ncells + 1, sizeof *r->cells);
        r->cells[r->ncells] = (site_cell){.site = site, .device = device};
        *index = (uint32_t)r->ncells++;
    }
    r->last_cell[way] = *index;
    return &r->cells[*index];
}

/* A block of site's on device comes or goes (bytes: its size, or the size
 * negated, modulo 2^64), at the current ordinal. */
static void cell_change(reading *r, uint32_t site, int device, uint64_t bytes)
{
    if (!device_ok(device)) return;
    site_cell *c = cell_of(r, site, device);
    uint64_t peak = r->peak_at[device];
    if (c->changed <= peak && r->ordinal > peak) c->at_peak = c->live;
    c->live += bytes;
    c->changed = r->ordinal;
}

static int group_events(void *ctx, fs_reader *t, const fs_fmt_record *rec, uint32_t tid)
{
    reading *r = ctx;
    const fs_fmt_event *ev = &rec->ev;
    fs_live_block b;

    if (r->also && r->also(r->also_ctx, t, rec, tid)) return 1;
    if (rec->kind != FS_REC_ALLOC && rec->kind != FS_REC_FREE_REQUESTED) return 0;
    r->ordinal++;
    thread_last *th = thread_of(r, tid);
    if (rec->kind == FS_REC_ALLOC) {
        uint32_t si = fs_sites_of(r->sites, t, ev, tid);
        fs_site *site = &r->sites->all[si - 1];
        site->count++;
        site->total += ev->size;
        r->peaks->allocs++;
        /* an address allocated again without a free (a free lost with a
         * damaged block): the new block replaces the old one */
        if (fs_live_replace(&r->live, ev->addr, ev->size, si, ev->device, &b))
            cell_change(r, b.site, b.device, -b.size);
        cell_change(r, si, ev->device, ev->size);
        th->addr = ev->addr;
        if (device_ok(ev->device) && ev->allocated > r->peaks->bytes[ev->device]) {
            r->peaks->bytes[ev->device] = ev->allocated;
            r->peaks->time_ns[ev->device] = ev->time_ns;
            r->peak_at[ev->device] = r->ordinal;
        }
        return 0;
    }
    if (fs_live_take(&r->live, ev->addr, &b)) {
        cell_change(r, b.site, b.device, -b.size);
        if (th->addr == ev->addr) r->sites->all[b.site - 1].temporary++;
    }
    th->addr = 0;
    return 0;
}

static void warn_line(void *ctx, const char *line)
{
    const reading *r = ctx;
    fs_progress_warn((void *)r->command, line);
}

void fs_sites_read_trace(fs_sites *s, fs_reader *t, const char *command, fs_file_peaks *peaks,
                         fs_reader_visit also, void *ctx)
{
    reading r = {.sites = s, .peaks = peaks, .command = command, .also = also, .also_ctx = ctx};
    fs_u64map_init(&r.cell_index, sizeof(uint32_t));

    *peaks = (fs_file_peaks){.rank = -1};
    fs_sites_next_file(s);
    fs_reader_read_ordered(t, group_events, warn_line, &r);
    for (size_t i = 0; i < r.ncells; i++) { /* each site's bytes at its device's peak */
        const site_cell *c = &r.cells[i];
        uint64_t peak = r.peak_at[c->device];
        if (peak) s->all[c->site - 1].peak += c->changed <= peak ? c->live : c->at_peak;
    }
    fs_live_block l;
    for (size_t pos = 0; fs_live_next(&r.live, &pos, &l);) { /* what the trace ended with */
        s->all[l.site - 1].live++;
        s->all[l.site - 1].live_bytes += l.size;
    }
    peaks->rank = fs_reader_rank(t);
    peaks->pid = fs_reader_header(t)->pid;
    fs_live_free(&r.live);
    fs_u64map_free(&r.cell_index);
    free(r.cells);
    free(r.last_cell);
    free(r.threads);
}

bool fs_sites_read(fs_sites *s, const char *path, const char *command, fs_file_peaks *peaks)
{
    char err[4200];
    fs_reader *t = fs_reader_open(path, err, sizeof err);
    if (!t) {
        *peaks = (fs_file_peaks){.rank = -1};
        fs_progress_warn((void *)command, err);
        return false;
    }
    fs_progress_watch(t);
    fs_sites_read_trace(s, t, command, peaks, NULL, NULL);
    fs_reader_close(t);
    return true;
}

/* fs_sites_read_job's reading: each file into sites of its own */
typedef struct sites_job {
    fs_sites *dst;
    char *const *paths;
    const char *command;
    struct sites_file {
        fs_sites sites;
        fs_file_peaks peaks;
        bool read;
    } * files;
    void (*each)(void *ctx, const char *path, const fs_file_peaks *peaks);
    void *ctx;
    size_t unread;
} sites_job;

static void read_sites(void *ctx, size_t i)
{
    sites_job *job = ctx;
    struct sites_file *f = &job->files[i];
    f->sites = (fs_sites){.by = job->dst->by, .sym = job->dst->sym, .full = job->dst->full};
    f->read = fs_sites_read(&f->sites, job->paths[i], job->command, &f->peaks);
}

static void merge_sites(void *ctx, size_t i)
{
    sites_job *job = ctx;
    struct sites_file *f = &job->files[i];
    if (f->read) {
        for (size_t k = 0; k < f->sites.n; k++)
            fs_sites_add(job->dst, &f->sites.all[k]);
        job->dst->file++;
        if (job->each) job->each(job->ctx, job->paths[i], &f->peaks);
    } else {
        job->unread++;
    }
    fs_sites_free(&f->sites);
}

size_t fs_sites_read_job(fs_sites *dst, size_t n, char *const *paths, const char *command,
                         void (*each)(void *ctx, const char *path, const fs_file_peaks *peaks),
                         void *ctx)
{
    sites_job job = {dst, paths, command, calloc(n ? n : 1, sizeof *job.files), each, ctx, 0};
    if (!job.files) fs_analysis_oom(command);
    fs_par_read(command, n, paths, read_sites, merge_sites, &job);
    free(job.files);
    return job.unread;
}

void fs_file_name(const fs_file_peaks *p, char *buf, size_t len)
{
    if (p->rank >= 0)
        snprintf(buf, len, "rank %d", p->rank);
    else
        snprintf(buf, len, "pid %u", p->pid);
}
