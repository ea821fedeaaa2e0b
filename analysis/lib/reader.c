/* reader.c - the trace reader (reader.h): maps the file, checks the header,
 * then walks the blocks, recovering from damage block by block.
 *
 * A block header that does not parse, a checksum that does not match, a
 * zstd frame that does not decode: the block is skipped and the reader
 * scans for the next block magic from the byte after the bad one. A record
 * that does not decode ends its block (the records before it were
 * delivered). A block that runs past the end of the file is the torn tail
 * of a killed writer: everything before it was read. */
#include "reader.h"

#include "u64map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

typedef struct slot {
    void *p; /* the definition, copied */
    uint32_t n;
    uint32_t a, b, c; /* annotations: parent, domain, name */
} slot;

typedef struct table {
    slot *v;
    size_t cap;
    size_t n; /* ids defined */
} table;

struct fs_reader {
    char *path;
    const uint8_t *map;
    size_t size;
    fs_fmt_header header;
    table strings, stacks, pystacks, annots;
    fs_reader_module *modules; /* sorted by base */
    size_t nmodules, capmodules;
    fs_u64map threads; /* tid -> its name's string id (uint32_t) */
    int rank;
    uint32_t config;                           /* string id, 0: not recorded */
    uint64_t device_total[FS_FMT_MAX_DEVICES]; /* 0: not recorded */
    fs_reader_damage damage;
    void *dctx;
    uint8_t *raw; /* one block's payload */
    size_t rawcap;
    size_t forgotten;           /* the map's pages below this were let go */
    _Atomic uint64_t *progress; /* fs_reader_count_into's counter; NULL: none */
    size_t counted;             /* the bytes added to it so far */
};

/* Set once any file read in this process was damaged (fs_reader_saw_damage). */
static atomic_bool damage_seen;

static void count_damage(fs_reader *t, uint64_t blocks, uint64_t bytes)
{
    t->damage.skipped_blocks += blocks;
    t->damage.skipped_bytes += bytes;
    atomic_store_explicit(&damage_seen, true, memory_order_relaxed);
}

bool fs_reader_saw_damage(void)
{
    return atomic_load_explicit(&damage_seen, memory_order_relaxed);
}

static void say(fs_reader_warn warn, void *ctx, const fs_reader *t, uint64_t offset,
                const char *fmt, ...)
{
    char msg[512], line[1024];
    va_list ap;

    if (!warn) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "%s: offset %llu: %s", t->path, (unsigned long long)offset, msg);
    warn(ctx, line);
}

/* The payload buffer's first size: a block of the trace writer's; it grows
 * to the largest block read (FS_FMT_MAX_BLOCK at most). */
#define RAW_START (64u << 10)

fs_reader *fs_reader_open(const char *path, char *err, size_t errlen)
{
    struct stat st;
    fs_reader *t;
    const char *why;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if ((size_t)st.st_size < FS_FMT_HEADER_SIZE) {
        snprintf(err, errlen,
                 "%s: offset 0: not an fsdpshim trace (%lld bytes, shorter than "
                 "its header)",
                 path, (long long)st.st_size);
        close(fd);
        return NULL;
    }
    t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "%s: out of memory", path);
        close(fd);
        return NULL;
    }
    fs_u64map_init(&t->threads, sizeof(uint32_t));
    t->size = (size_t)st.st_size;
    t->map = mmap(NULL, t->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    t->path = strdup(path);
    t->rawcap = RAW_START;
    t->raw = malloc(t->rawcap);
    t->dctx = ZSTD_createDCtx();
    if (t->map == MAP_FAILED || !t->path || !t->raw || !t->dctx) {
        if (t->map == MAP_FAILED) t->map = NULL;
        snprintf(err, errlen, "%s: cannot map or allocate", path);
        fs_reader_close(t);
        return NULL;
    }
    madvise((void *)t->map, t->size, MADV_SEQUENTIAL);
    why = fs_fmt_header_decode(t->map, &t->header);
    if (why) {
        snprintf(err, errlen, "%s: offset 0: %s", path, why);
        fs_reader_close(t);
        return NULL;
    }
    t->rank = t->header.rank;
    return t;
}

static void table_free(table *tb)
{
    for (size_t i = 0; i < tb->cap; i++)
        free(tb->v[i].p);
    free(tb->v);
}

void fs_reader_close(fs_reader *t)
{
    if (!t) return;
    if (t->map) munmap((void *)t->map, t->size);
    table_free(&t->strings);
    table_free(&t->stacks);
    table_free(&t->pystacks);
    table_free(&t->annots);
    free(t->modules);
    fs_u64map_free(&t->threads);
    ZSTD_freeDCtx(t->dctx);
    free(t->raw);
    free(t->path);
    free(t);
}

const char *fs_reader_file(const fs_reader *t)
{
    return t->path;
}

const fs_fmt_header *fs_reader_header(const fs_reader *t)
{
    return &t->header;
}

const fs_reader_damage *fs_reader_damage_of(const fs_reader *t)
{
    return &t->damage;
}

int fs_reader_rank(const fs_reader *t)
{
    return t->rank;
}

/* ---- definitions ------------------------------------------------------------- */

/* Ids count from 1 in the order the writer defines them, so a trace's ids
 * stay close to the number defined, a lost block of definitions leaving a
 * gap of at most its own count. An id far beyond is damage: a table sized
 * by it would take memory that nothing in the trace stands for. */
#define ID_SLACK (1u << 16)

static slot *table_slot(table *tb, uint32_t id)
{
    if (id >= tb->cap) {
        if (id > 2 * tb->n + ID_SLACK) return NULL;
        size_t cap = tb->cap ? tb->cap : 256;
        while (cap <= id)
            cap *= 2;
        if (cap > (1u << 28)) return NULL; /* an id no writer hands out */
        slot *v = realloc(tb->v, cap * sizeof *v);
        if (!v) return NULL;
        memset(v + tb->cap, 0, (cap - tb->cap) * sizeof *v);
        tb->v = v;
        tb->cap = cap;
    }
    return &tb->v[id];
}

static bool store(table *tb, uint32_t id, const void *p, size_t bytes, uint32_t n)
{
    slot *s = table_slot(tb, id);
    void *copy = malloc(bytes + 1);
    if (!s || !copy) {
        free(copy);
        return false;
    }
    memcpy(copy, p, bytes);
    ((char *)copy)[bytes] = 0;
    if (!s->p) tb->n++;
    free(s->p);
    s->p = copy;
    s->n = n;
    return true;
}

/* More module records than a process makes (it loads hundreds of objects;
 * it maps at most vm.max_map_count areas, 65530 by default). The cap bounds
 * the sorted insertion below, which moves the modules above each new one,
 * on a hostile trace. */
#define MAX_MODULES (1u << 14)

static bool add_module(fs_reader *t, const fs_fmt_record *r)
{
    size_t i;
    if (t->nmodules == MAX_MODULES) return false;
    if (t->nmodules == t->capmodules) {
        size_t cap = t->capmodules ? t->capmodules * 2 : 64;
        fs_reader_module *m = realloc(t->modules, cap * sizeof *m);
        if (!m) return false;
        t->modules = m;
        t->capmodules = cap;
    }
    for (i = t->nmodules; i > 0 && t->modules[i - 1].base > r->u.module.base; i--)
        t->modules[i] = t->modules[i - 1];
    fs_reader_module *m = &t->modules[i];
    m->base = r->u.module.base;
    m->size = r->u.module.size;
    m->path = r->u.module.path;
    m->build_id_len = r->u.module.build_id_len;
    memcpy(m->build_id, r->u.module.build_id, m->build_id_len);
    t->nmodules++;
    return true;
}

/* A thread's name (FS_REC_THREAD), by tid: a tid seen again is a thread
 * that reused it, which the writer names when it first writes. */
static bool add_thread(fs_reader *t, uint32_t tid, uint32_t name)
{
    uint32_t *slot = fs_u64map_put(&t->threads, tid, NULL);
    if (!slot) return false;
    *slot = name;
    return true;
}

/* Stores a definition or fact: NULL, or why it cannot be. */
static const char *define(fs_reader *t, const fs_fmt_record *r)
{
    static const char *const far =
        "a definition's id is far beyond those defined (or memory ran out)";
    slot *s;

    switch (r->kind) {
    case FS_REC_STRING:
        return store(&t->strings, r->id, r->u.string.bytes, r->u.string.len, r->u.string.len) ? NULL
                                                                                              : far;
    case FS_REC_STACK:
        return store(&t->stacks, r->id, r->u.stack.frames, r->u.stack.n * sizeof(uint64_t),
                     r->u.stack.n)
                   ? NULL
                   : far;
    case FS_REC_PYSTACK:
        return store(&t->pystacks, r->id, r->u.pystack.frames,
                     r->u.pystack.n * sizeof(fs_fmt_pyframe), r->u.pystack.n)
                   ? NULL
                   : far;
    case FS_REC_ANNOT:
        s = table_slot(&t->annots, r->id);
        if (!s) return far;
        if (!s->n) t->annots.n++;
        s->n = 1;
        s->a = r->u.annot.parent;
        s->b = r->u.annot.domain;
        s->c = r->u.annot.name;
        break;
    case FS_REC_MODULE:
        if (!add_module(t, r)) return "more module records than any process makes";
        break;
    case FS_REC_THREAD:
        if (!add_thread(t, r->u.thread.tid, r->u.thread.name))
            return "more thread records than memory holds";
        break;
    case FS_REC_DROPPED:
        t->damage.dropped_events += r->u.dropped.count;
        break;
    case FS_REC_RANK:
        t->rank = r->u.rank.rank;
        break;
    case FS_REC_CONFIG:
        t->config = r->u.config.text;
        break;
    case FS_REC_DEVICE:
        if (r->u.device.device < FS_FMT_MAX_DEVICES)
            t->device_total[r->u.device.device] = r->u.device.total;
        break;
    default:
        break;
    }
    return NULL;
}

const char *fs_reader_config(const fs_reader *t)
{
    return t->config ? fs_reader_string(t, t->config, NULL) : NULL;
}

uint64_t fs_reader_device_total(const fs_reader *t, int device)
{
    return device >= 0 && device < FS_FMT_MAX_DEVICES ? t->device_total[device] : 0;
}

const char *fs_reader_thread_name(const fs_reader *t, uint32_t tid)
{
    const uint32_t *name = fs_u64map_get(&t->threads, tid);
    return name ? fs_reader_string(t, *name, NULL) : NULL;
}

const char *fs_reader_string(const fs_reader *t, uint32_t id, uint32_t *len)
{
    if (id >= t->strings.cap || !t->strings.v[id].p) return NULL;
    if (len) *len = t->strings.v[id].n;
    return t->strings.v[id].p;
}

uint32_t fs_reader_stack(const fs_reader *t, uint32_t id, const uint64_t **frames)
{
    if (id >= t->stacks.cap || !t->stacks.v[id].p) return 0;
    *frames = t->stacks.v[id].p;
    return t->stacks.v[id].n;
}

uint32_t fs_reader_pystack(const fs_reader *t, uint32_t id, const fs_fmt_pyframe **frames)
{
    if (id >= t->pystacks.cap || !t->pystacks.v[id].p) return 0;
    *frames = t->pystacks.v[id].p;
    return t->pystacks.v[id].n;
}

bool fs_reader_annot(const fs_reader *t, uint32_t id, uint32_t *parent, uint32_t *domain,
                     uint32_t *name)
{
    if (id >= t->annots.cap || !t->annots.v[id].n) return false;
    *parent = t->annots.v[id].a;
    *domain = t->annots.v[id].b;
    *name = t->annots.v[id].c;
    return true;
}

int fs_reader_annot_chain(const fs_reader *t, uint32_t id, uint32_t chain[FS_READER_MAX_NESTING])
{
    uint32_t parent, domain, name, up[FS_READER_MAX_NESTING];
    int n = 0;
    for (uint32_t a = id;
         a && n < FS_READER_MAX_NESTING && fs_reader_annot(t, a, &parent, &domain, &name);
         a = parent)
        up[n++] = a;
    for (int i = 0; i < n; i++)
        chain[i] = up[n - 1 - i];
    return n;
}

const fs_reader_module *fs_reader_module_of(const fs_reader *t, uint64_t pc, uint64_t *offset)
{
    size_t lo = 0, hi = t->nmodules;

    while (lo < hi) { /* the last module whose base <= pc */
        size_t mid = (lo + hi) / 2;
        if (t->modules[mid].base <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* a module loaded again elsewhere keeps its old record too: take the
     * nearest one below pc that contains it */
    for (size_t i = lo; i-- > 0;) {
        const fs_reader_module *m = &t->modules[i];
        if (pc - m->base < m->size) {
            *offset = pc - m->base;
            return m;
        }
        if (lo - i > 8) break;
    }
    return NULL;
}

/* ---- the reading loop ---------------------------------------------------------- */

/* The next block magic at or after `from`, or the file's size. */
static size_t resync(const fs_reader *t, size_t from)
{
    static const uint8_t magic[4] = {'F', 'S', 'B', 'K'};
    const uint8_t *p = from < t->size ? memmem(t->map + from, t->size - from, magic, 4) : NULL;
    return p ? (size_t)(p - t->map) : t->size;
}

/* Pages already read are let go every few MiB: the mapping would otherwise
 * count the whole file in the resident size by the end (the kernel keeps
 * the pages cached all the same). */
#define FORGET_STEP (8u << 20)

static void forget_pages(fs_reader *t, size_t upto)
{
    upto &= ~((size_t)sysconf(_SC_PAGESIZE) - 1);
    if (upto < t->forgotten + FORGET_STEP) return;
    madvise((void *)(t->map + t->forgotten), upto - t->forgotten, MADV_DONTNEED);
    t->forgotten = upto;
}

void fs_reader_count_into(fs_reader *t, _Atomic uint64_t *bytes)
{
    t->progress = bytes;
    t->counted = 0;
}

/* The reading has moved past `upto`: the bytes since the last count go to
 * the progress counter (one relaxed add per block). */
static void count_progress(fs_reader *t, size_t upto)
{
    if (!t->progress || upto <= t->counted) return;
    atomic_fetch_add_explicit(t->progress, upto - t->counted, memory_order_relaxed);
    t->counted = upto;
}

/* The next readable block at or after *off, its payload in t->raw: its
 * header in *b and its offset in *at, *off moved past it. False at the end
 * of the file. Damage on the way is named and counted. */
static bool next_block(fs_reader *t, size_t *off, fs_fmt_block *b, size_t *at, fs_reader_warn warn,
                       void *ctx)
{
    while (*off < t->size) {
        const char *why;

        forget_pages(t, *off);
        count_progress(t, *off);
        if (t->size - *off < FS_FMT_BLOCK_HDR_SIZE) {
            say(warn, ctx, t, *off, "the trace ends inside a block header: %zu bytes lost",
                t->size - *off);
            count_damage(t, 0, t->size - *off);
            count_progress(t, t->size);
            return false;
        }
        why = fs_fmt_block_parse(t->map + *off, b);
        if (!why && b->stored_len > t->size - *off - FS_FMT_BLOCK_HDR_SIZE) {
            say(warn, ctx, t, *off, "the trace ends inside a block: %zu bytes lost",
                t->size - *off);
            count_damage(t, 0, t->size - *off);
            count_progress(t, t->size);
            return false;
        }
        if (!why && b->raw_len > t->rawcap) {
            uint8_t *raw = realloc(t->raw, b->raw_len);
            if (raw) {
                t->raw = raw;
                t->rawcap = b->raw_len;
            } else {
                why = "no memory for the block's payload";
            }
        }
        if (!why)
            why = fs_fmt_block_unpack(t->dctx, t->map + *off, b,
                                      t->map + *off + FS_FMT_BLOCK_HDR_SIZE, t->raw);
        if (why) {
            size_t next = resync(t, *off + 1);
            say(warn, ctx, t, *off, "%s: skipped %zu bytes to the next block", why, next - *off);
            count_damage(t, 1, next - *off);
            *off = next;
            continue;
        }
        *at = *off;
        *off += FS_FMT_BLOCK_HDR_SIZE + b->stored_len;
        return true;
    }
    count_progress(t, t->size);
    return false;
}

static bool is_event(unsigned kind)
{
    return kind <= FS_REC_EVENT_LAST || kind == FS_REC_SNAP_SEGMENT || kind == FS_REC_SNAP_BLOCK;
}

/* Decoding one block's payload: definitions are stored as they come. */
typedef struct cursor {
    fs_fmt_dec d;
    const uint8_t *payload;
    size_t offset;         /* the block's place in the file, to name it */
    uint32_t index;        /* records decoded so far */
    bool skip_definitions; /* they were delivered when the block was read */
    size_t good;           /* payload bytes up to the first that does not decode */
} cursor;

static void cursor_start(cursor *c, const uint8_t *payload, size_t len, uint64_t time_ns,
                         size_t offset, bool skip_definitions)
{
    fs_fmt_dec_init(&c->d, payload, len, time_ns);
    c->payload = payload;
    c->offset = offset;
    c->index = 0;
    c->skip_definitions = skip_definitions;
    c->good = len;
}

/* The block's next record into r: 1, or 0 at its end or at a record that
 * does not decode (named, counted; the records before it stand). */
static int cursor_next(fs_reader *t, cursor *c, fs_fmt_record *r, fs_reader_warn warn, void *ctx)
{
    const char *why;
    for (;;) {
        const uint8_t *start = c->d.p;
        int rc = fs_fmt_next(&c->d, r, &why);
        if (rc == 1 && !is_event(r->kind)) {
            if (c->skip_definitions) continue;
            if ((why = define(t, r))) rc = -1;
        }
        if (rc == 1) {
            c->index++;
            return 1;
        }
        if (rc < 0) {
            say(warn, ctx, t, c->offset, "%s at payload byte %zu: the rest of the block is skipped",
                why, (size_t)(c->d.p - c->payload));
            count_damage(t, 1, 0);
            c->good = (size_t)(start - c->payload);
            c->d.p = c->d.end; /* nothing more from this block */
        }
        return 0;
    }
}

uint64_t fs_reader_read(fs_reader *t, fs_reader_visit visit, fs_reader_warn warn, void *ctx)
{
    size_t off = FS_FMT_HEADER_SIZE, at;
    uint64_t records = 0;
    fs_fmt_block b;
    cursor c;
    fs_fmt_record r;

    t->forgotten = 0;
    while (next_block(t, &off, &b, &at, warn, ctx)) {
        cursor_start(&c, t->raw, b.raw_len, b.time_ns, at, false);
        while (cursor_next(t, &c, &r, warn, ctx)) {
            records++;
            if (visit && visit(ctx, t, &r, b.tid)) return records;
        }
    }
    return records;
}

/* ---- time order ------------------------------------------------------------------
 * A thread's events are in time order within each of its blocks, and its
 * blocks cover times one after another (a block's header has its first
 * event's time); only their order in the file can be wrong, when a
 * thread's buffers reach the file out of turn. So blocks are held as read,
 * payload only, and chained into runs: a block joins a run of its thread
 * whose last block started before it, else it starts a run of its own. The
 * runs are merged event by event, each held block decoded once, when its
 * turn comes, and freed when done: the earliest event goes out whenever
 * more than the window is held, and at the end. A payload's ten-odd bytes
 * an event are all that is held: the window costs little memory and no
 * event is copied twice.
 *
 * Definitions are delivered when read: the writer puts them in blocks of
 * their own (thread 0), ahead of the events that name them. Such a block
 * that also holds events (a snapshot's entries) is held too, and decoded
 * again for those. */

#define MAX_RUNS 64 /* more than the threads of a trace, which a run each needs */

typedef struct held_block {
    struct held_block *next; /* the run's next block */
    uint64_t seq;            /* its place among the file's blocks */
    uint64_t time_ns;        /* its first event's */
    size_t offset, len;
    uint32_t tid;
    bool defined; /* its definitions went out when it was read */
    uint8_t payload[];
} held_block;

typedef struct run {
    held_block *head, *tail; /* head: the block being decoded; NULL: the run is free */
    cursor c;                /* over head */
    fs_fmt_record rec;       /* the run's earliest event, when head is not NULL */
    uint64_t seq;            /* its place in the file: ties go in file order */
} run;

typedef struct ordered {
    run *runs; /* a few: each holds a decoder of some kilobytes */
    size_t nruns, caprun;
    size_t held; /* payload bytes */
    uint64_t blocks, records;
    fs_reader_visit visit;
    fs_reader_warn warn;
    void *ctx;
    bool stopped;
} ordered;

static void deliver(ordered *o, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    o->records++;
    if (!o->stopped && o->visit(o->ctx, t, r, tid)) o->stopped = true;
}

/* Moves run r to its next event, decoding its blocks in turn and freeing
 * each when done; r->head is NULL when the run has no more. */
static void run_advance(ordered *o, fs_reader *t, run *r)
{
    while (r->head) {
        while (cursor_next(t, &r->c, &r->rec, o->warn, o->ctx)) {
            if (is_event(r->rec.kind)) {
                r->seq = r->head->seq << 24 | r->c.index; /* < 2^24 records in 1 MiB */
                return;
            }
            /* a definition among events (no writer puts one there): it
             * goes out when its block's turn comes */
            deliver(o, t, &r->rec, r->head->tid);
        }
        held_block *done = r->head;
        r->head = done->next;
        if (!r->head) r->tail = NULL;
        o->held -= done->len;
        free(done);
        if (r->head)
            cursor_start(&r->c, r->head->payload, r->head->len, r->head->time_ns, r->head->offset,
                         r->head->defined);
    }
}

/* Hands the earliest held event to the visitor. */
static void release_one(ordered *o, fs_reader *t)
{
    run *best = NULL;
    for (size_t i = 0; i < o->nruns; i++) {
        run *r = &o->runs[i];
        if (!r->head) continue;
        if (!best || r->rec.ev.time_ns < best->rec.ev.time_ns ||
            (r->rec.ev.time_ns == best->rec.ev.time_ns && r->seq < best->seq))
            best = r;
    }
    deliver(o, t, &best->rec, best->head->tid);
    run_advance(o, t, best);
}

/* A free run: a new one while there are fewer than MAX_RUNS, else the first
 * to empty while the earliest events go out (a trace with that many runs
 * at once is damaged, or stranger than any writer makes). */
static run *free_run(ordered *o, fs_reader *t)
{
    for (;;) {
        for (size_t i = 0; i < o->nruns; i++)
            if (!o->runs[i].head) return &o->runs[i];
        if (o->nruns < MAX_RUNS) {
            if (o->nruns == o->caprun) {
                size_t cap = o->caprun ? 2 * o->caprun : 8;
                run *more = realloc(o->runs, cap * sizeof *more);
                if (!more) return NULL;
                o->runs = more;
                o->caprun = cap;
            }
            o->runs[o->nruns] = (run){0};
            return &o->runs[o->nruns++];
        }
        release_one(o, t);
    }
}

/* Holds a copy of the payload in t->raw (len bytes of block b, at offset). */
static bool hold(ordered *o, fs_reader *t, const fs_fmt_block *b, size_t offset, size_t len,
                 bool defined)
{
    held_block *hb = malloc(sizeof *hb + len);
    run *r;
    if (!hb) return false;
    *hb = (held_block){.seq = o->blocks,
                       .time_ns = b->time_ns,
                       .offset = offset,
                       .len = len,
                       .tid = b->tid,
                       .defined = defined};
    memcpy(hb->payload, t->raw, len);
    o->held += len;
    for (size_t i = 0; i < o->nruns; i++) {
        r = &o->runs[i];
        /* a block that starts at the very time of the tail's start may
         * be the one before it (the tail's events all at that time) */
        if (r->tail && r->tail->tid == b->tid && r->tail->time_ns < b->time_ns) {
            r->tail->next = hb;
            r->tail = hb;
            return true;
        }
    }
    if (!(r = free_run(o, t))) {
        o->held -= len;
        free(hb);
        return false;
    }
    r->head = r->tail = hb;
    cursor_start(&r->c, hb->payload, len, hb->time_ns, offset, defined);
    run_advance(o, t, r);
    return true;
}

/* A block of definitions: they go out now; true when it holds events too
 * (*len: its payload up to the first record that does not decode). */
static bool define_block(ordered *o, fs_reader *t, const fs_fmt_block *b, size_t offset,
                         size_t *len)
{
    cursor c;
    fs_fmt_record r;
    bool events = false;
    cursor_start(&c, t->raw, b->raw_len, b->time_ns, offset, false);
    while (cursor_next(t, &c, &r, o->warn, o->ctx)) {
        if (is_event(r.kind))
            events = true;
        else
            deliver(o, t, &r, b->tid);
    }
    *len = c.good;
    return events;
}

uint64_t fs_reader_read_ordered(fs_reader *t, fs_reader_visit visit, fs_reader_warn warn, void *ctx)
{
    ordered o = {.visit = visit, .warn = warn, .ctx = ctx};
    size_t off = FS_FMT_HEADER_SIZE, at, len;
    fs_fmt_block b;

    t->forgotten = 0;
    while (!o.stopped && next_block(t, &off, &b, &at, warn, ctx)) {
        len = b.raw_len;
        if (b.tid == 0 && !define_block(&o, t, &b, at, &len)) continue;
        if (!hold(&o, t, &b, at, len, b.tid == 0)) {
            say(warn, ctx, t, at, "out of memory holding the block to order its events");
            count_damage(t, 1, 0);
        }
        o.blocks++;
        while (o.held > FS_READER_ORDER_WINDOW && !o.stopped)
            release_one(&o, t);
    }
    for (size_t i = 0; i < o.nruns; i++)
        while (o.runs[i].head && !o.stopped)
            release_one(&o, t);
    for (size_t i = 0; i < o.nruns; i++)
        for (held_block *hb = o.runs[i].head, *next; hb; hb = next) {
            next = hb->next;
            free(hb);
        }
    free(o.runs);
    return o.records;
}
