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

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
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
} table;

struct fs_reader {
    char *path;
    const uint8_t *map;
    size_t size;
    fs_fmt_header header;
    table strings, stacks, pystacks, annots;
    fs_reader_module *modules; /* sorted by base */
    size_t nmodules, capmodules;
    int rank;
    uint32_t config;                           /* string id, 0: not recorded */
    uint64_t device_total[FS_FMT_MAX_DEVICES]; /* 0: not recorded */
    fs_reader_damage damage;
    void *dctx;
    uint8_t *raw; /* one block's payload */
};

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
    t->size = (size_t)st.st_size;
    t->map = mmap(NULL, t->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    t->path = strdup(path);
    t->raw = malloc(FS_FMT_MAX_BLOCK);
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

static slot *table_slot(table *tb, uint32_t id)
{
    if (id >= tb->cap) {
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
    free(s->p);
    s->p = copy;
    s->n = n;
    return true;
}

static void add_module(fs_reader *t, const fs_fmt_record *r)
{
    size_t i;
    if (t->nmodules == t->capmodules) {
        size_t cap = t->capmodules ? t->capmodules * 2 : 64;
        fs_reader_module *m = realloc(t->modules, cap * sizeof *m);
        if (!m) return;
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
}

static void define(fs_reader *t, const fs_fmt_record *r)
{
    slot *s;

    switch (r->kind) {
    case FS_REC_STRING:
        store(&t->strings, r->id, r->u.string.bytes, r->u.string.len, r->u.string.len);
        break;
    case FS_REC_STACK:
        store(&t->stacks, r->id, r->u.stack.frames, r->u.stack.n * sizeof(uint64_t), r->u.stack.n);
        break;
    case FS_REC_PYSTACK:
        store(&t->pystacks, r->id, r->u.pystack.frames, r->u.pystack.n * sizeof(fs_fmt_pyframe),
              r->u.pystack.n);
        break;
    case FS_REC_ANNOT:
        s = table_slot(&t->annots, r->id);
        if (!s) break;
        s->n = 1;
        s->a = r->u.annot.parent;
        s->b = r->u.annot.domain;
        s->c = r->u.annot.name;
        break;
    case FS_REC_MODULE:
        add_module(t, r);
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
}

const char *fs_reader_config(const fs_reader *t)
{
    return t->config ? fs_reader_string(t, t->config, NULL) : NULL;
}

uint64_t fs_reader_device_total(const fs_reader *t, int device)
{
    return device >= 0 && device < FS_FMT_MAX_DEVICES ? t->device_total[device] : 0;
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

uint64_t fs_reader_read(fs_reader *t, fs_reader_visit visit, fs_reader_warn warn, void *ctx)
{
    size_t off = FS_FMT_HEADER_SIZE;
    uint64_t records = 0;

    while (off < t->size) {
        fs_fmt_block b;
        const char *why;

        if (t->size - off < FS_FMT_BLOCK_HDR_SIZE) {
            say(warn, ctx, t, off, "the trace ends inside a block header: %zu bytes lost",
                t->size - off);
            t->damage.skipped_bytes += t->size - off;
            break;
        }
        why = fs_fmt_block_parse(t->map + off, &b);
        if (!why && b.stored_len > t->size - off - FS_FMT_BLOCK_HDR_SIZE) {
            say(warn, ctx, t, off, "the trace ends inside a block: %zu bytes lost", t->size - off);
            t->damage.skipped_bytes += t->size - off;
            break;
        }
        if (!why)
            why = fs_fmt_block_unpack(t->dctx, t->map + off, &b,
                                      t->map + off + FS_FMT_BLOCK_HDR_SIZE, t->raw);
        if (why) {
            size_t next = resync(t, off + 1);
            say(warn, ctx, t, off, "%s: skipped %zu bytes to the next block", why, next - off);
            t->damage.skipped_blocks++;
            t->damage.skipped_bytes += next - off;
            off = next;
            continue;
        }

        fs_fmt_dec d;
        fs_fmt_record r;
        int rc;
        fs_fmt_dec_init(&d, t->raw, b.raw_len, b.time_ns);
        while ((rc = fs_fmt_next(&d, &r, &why)) == 1) {
            records++;
            if (r.kind > FS_REC_EVENT_LAST && r.kind != FS_REC_SNAP_SEGMENT &&
                r.kind != FS_REC_SNAP_BLOCK)
                define(t, &r);
            if (visit && visit(ctx, t, &r, b.tid)) return records;
        }
        if (rc < 0) {
            say(warn, ctx, t, off, "%s at payload byte %zu: the rest of the block is skipped", why,
                (size_t)(d.p - t->raw));
            t->damage.skipped_blocks++;
        }
        off += FS_FMT_BLOCK_HDR_SIZE + b.stored_len;
    }
    return records;
}

/* ---- time order ------------------------------------------------------------------
 * Events come in runs that are in time order: a thread's events, block
 * after block, mostly (a thread's buffers can reach the file out of turn).
 * So events are held in one queue per run, a new run starting whenever a
 * thread's event is earlier than the last one held for it, and the queues
 * are merged: the earliest head goes out whenever more than the window is
 * held, and at the end. Only queue heads are compared, a handful. */

typedef struct held {
    uint64_t seq; /* file order, for ties between threads */
    uint32_t tid;
    uint8_t kind;
    fs_fmt_event ev;
} held;

typedef struct queue {
    uint32_t tid;
    held *ring;
    size_t head, n, cap; /* cap a power of two */
} queue;

typedef struct ordered {
    queue *queues;
    size_t nqueues, last; /* last: the queue of the previous event */
    size_t held;
    uint64_t seq;
    fs_reader_visit visit;
    fs_reader_warn warn;
    void *ctx;
    bool stopped, failed;
} ordered;

static void ordered_warn(void *ctx, const char *line)
{
    const ordered *o = ctx;
    if (o->warn) o->warn(o->ctx, line);
}

static const held *tail(const queue *q)
{
    return q->n ? &q->ring[(q->head + q->n - 1) & (q->cap - 1)] : NULL;
}

/* The run an event of thread tid at time_ns joins: the thread's newest run
 * when it does not go back in time, else a new one. Emptied runs are
 * dropped first, so the queues stay few. */
static queue *queue_of(ordered *o, uint32_t tid, uint64_t time_ns)
{
    if (o->nqueues && o->queues[o->last].tid == tid) {
        const held *h = tail(&o->queues[o->last]);
        if (!h || h->ev.time_ns <= time_ns) return &o->queues[o->last];
    } else {
        for (size_t i = o->nqueues; i-- > 0;) /* newest run of tid: the last created */
            if (o->queues[i].tid == tid) {
                const held *h = tail(&o->queues[i]);
                if (!h || h->ev.time_ns <= time_ns) return &o->queues[o->last = i];
                break;
            }
    }
    size_t kept = 0;
    for (size_t i = 0; i < o->nqueues; i++) {
        if (!o->queues[i].n) {
            free(o->queues[i].ring);
            continue;
        }
        o->queues[kept++] = o->queues[i];
    }
    o->nqueues = kept;
    queue *more = realloc(o->queues, (o->nqueues + 1) * sizeof *more);
    if (!more) return NULL;
    o->queues = more;
    o->queues[o->nqueues] = (queue){.tid = tid};
    return &o->queues[o->last = o->nqueues++];
}

static bool queue_push(queue *q, const held *h)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 256;
        held *ring = malloc(cap * sizeof *ring);
        if (!ring) return false;
        for (size_t i = 0; i < q->n; i++)
            ring[i] = q->ring[(q->head + i) & (q->cap - 1)];
        free(q->ring);
        q->ring = ring;
        q->head = 0;
        q->cap = cap;
    }
    q->ring[(q->head + q->n++) & (q->cap - 1)] = *h;
    return true;
}

/* Hands the earliest held event to the caller's visitor. */
static void release_one(ordered *o, fs_reader *t)
{
    queue *best = NULL;
    for (size_t i = 0; i < o->nqueues; i++) {
        queue *q = &o->queues[i];
        if (!q->n) continue;
        const held *h = &q->ring[q->head];
        const held *b = best ? &best->ring[best->head] : NULL;
        if (!b || h->ev.time_ns < b->ev.time_ns ||
            (h->ev.time_ns == b->ev.time_ns && h->seq < b->seq))
            best = q;
    }
    const held *h = &best->ring[best->head];
    fs_fmt_record r = {.kind = h->kind, .ev = h->ev};
    uint32_t tid = h->tid;
    best->head = (best->head + 1) & (best->cap - 1);
    best->n--;
    o->held--;
    if (!o->stopped && o->visit(o->ctx, t, &r, tid)) o->stopped = true;
}

static int hold(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    ordered *o = ctx;
    bool event = r->kind <= FS_REC_EVENT_LAST || r->kind == FS_REC_SNAP_SEGMENT ||
                 r->kind == FS_REC_SNAP_BLOCK;
    if (!event) return o->visit(o->ctx, t, r, tid) || o->stopped;
    held h = {.seq = o->seq++, .tid = tid, .kind = r->kind, .ev = r->ev};
    queue *q = queue_of(o, tid, r->ev.time_ns);
    if (!q || !queue_push(q, &h)) {
        o->failed = true;
        return 1;
    }
    if (++o->held > FS_READER_ORDER_WINDOW) release_one(o, t);
    return o->stopped;
}

uint64_t fs_reader_read_ordered(fs_reader *t, fs_reader_visit visit, fs_reader_warn warn, void *ctx)
{
    ordered o = {.visit = visit, .warn = warn, .ctx = ctx};
    uint64_t records = fs_reader_read(t, hold, ordered_warn, &o);
    if (o.failed) say(warn, ctx, t, 0, "out of memory holding events to order them");
    while (o.held && !o.stopped && !o.failed)
        release_one(&o, t);
    for (size_t i = 0; i < o.nqueues; i++)
        free(o.queues[i].ring);
    free(o.queues);
    return records;
}
