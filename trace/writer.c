/* writer.c - the trace writer: per-thread event buffers, the definitions
 * log and the write cycle run by one writer thread (trace.h).
 *
 * Each thread encodes its events into a buffer of its own under a mutex
 * that only it and the writer take, so the hot path is an uncontended lock,
 * a clock read and a few varints. A full buffer is swapped for an empty one
 * from a bounded pool and queued; with the pool empty the event is dropped
 * and counted (FS_REC_DROPPED), so memory stays bounded whatever the event
 * rate. Every FLUSH_MS the writer takes the queued buffers and what each
 * thread holds, then the definitions appended so far, and writes the
 * definitions first: an event is encoded after the definitions it names
 * were appended, so they are always in the file ahead of it.
 *
 * Definitions are kept for the life of the process (memory proportional to
 * unique stacks and strings), so that a forked child, or a later trace of
 * the same process (`fsdpshim attach` after a detach), can start its own
 * file with all of them (session.c). In a signal handler the cycle takes no lock
 * another thread may hold and compresses nothing (zstd may allocate). */
#include "trace_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zstd.h>

#define BUF_SIZE   (64u << 10) /* raw bytes of one buffer, so of one block */
#define EVENT_ROOM 256         /* an encoded event is shorter */
#define ZSTD_LEVEL 1

typedef struct buffer {
    struct buffer *next;
    uint32_t tid;
    size_t len;
    uint64_t t0; /* time of the first event */
    fs_fmt_enc enc;
    uint8_t data[BUF_SIZE];
} buffer;

/* One per thread that produced an event. When the thread exits it becomes
 * the writer's (`orphan`), freed once its last events are written. */
typedef struct thread_buf {
    struct thread_buf *next;
    pthread_mutex_t lock;
    buffer *cur;
    bool orphan;
} thread_buf;

/* Bytes staged for one write: packed blocks. */
typedef struct staging {
    uint8_t *p;
    size_t len, cap;
} staging;

/* Lock order: a producer takes its thread's lock, then `lock` (to swap a
 * full buffer); the writer takes `list_lock`, then each thread's lock, then
 * `lock` (to take the buffers that thread queued meanwhile): the producer's
 * own order. */
static struct {
    pthread_mutex_t lock; /* pool, queue */
    pthread_cond_t wake;
    pthread_mutex_t list_lock; /* threads */
    thread_buf *threads;
    buffer *pool;
    unsigned pool_made;
    buffer *queue, **queue_tail;
    atomic_uint_fast64_t dropped;

    pthread_mutex_t cycle_lock; /* one write cycle at a time */
    bool write_failed;          /* this trace's file: the rest of it is lost */
    void *zctx;
    staging defs_out, events_out;

    pthread_mutex_t defs_lock;
    uint8_t *defs; /* every definition ever appended */
    size_t defs_len, defs_cap, defs_written;
} W = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .list_lock = PTHREAD_MUTEX_INITIALIZER,
    .cycle_lock = PTHREAD_MUTEX_INITIALIZER,
    .defs_lock = PTHREAD_MUTEX_INITIALIZER,
    .queue_tail = &W.queue,
};

static pthread_key_t thread_key;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
static FS_TLS thread_buf *self;
/* The id of a thread's name as a string (fs_trace_writer_name_threads). */
static uint32_t (*thread_name_id)(const char *s, size_t len);

/* ---- definitions ------------------------------------------------------------ */

void fs_trace_define(const uint8_t *rec, size_t len)
{
    if (!fs_trace_defs_level()) return;
    pthread_mutex_lock(&W.defs_lock);
    if (W.defs_len + len > W.defs_cap) {
        size_t cap = W.defs_cap ? W.defs_cap * 2 : BUF_SIZE;
        while (cap < W.defs_len + len)
            cap *= 2;
        uint8_t *p = realloc(W.defs, cap);
        if (!p) { /* a definition cannot be dropped: tracing stops instead */
            pthread_mutex_unlock(&W.defs_lock);
            fs_trace_log("out of memory for trace definitions: tracing stops");
            atomic_store(&fs_trace_g.level, FS_TRACE_OFF);
            return;
        }
        W.defs = p;
        W.defs_cap = cap;
    }
    memcpy(W.defs + W.defs_len, rec, len);
    W.defs_len += len;
    pthread_mutex_unlock(&W.defs_lock);
}

/* Strings are interned above the writer (strings.c defines each through
 * fs_trace_define), so the writer names a thread through the function it
 * is given here (session.c gives fs_trace_string) rather than calling up. */
void fs_trace_writer_name_threads(uint32_t (*string_id)(const char *s, size_t len))
{
    thread_name_id = string_id;
}

/* ---- buffers ---------------------------------------------------------------- */

static buffer *buffer_new(void)
{
    buffer *b = malloc(sizeof *b);
    if (b) {
        b->next = NULL;
        b->len = 0;
    }
    return b;
}

/* An empty buffer from the pool, made if the pool may still grow; NULL
 * when the writer is behind. Under W.lock. */
static buffer *pool_take(void)
{
    buffer *b = W.pool;
    if (b) {
        W.pool = b->next;
        b->len = 0;
        return b;
    }
    if (W.pool_made >= fs_trace_g.buffers) return NULL;
    b = buffer_new();
    if (b) W.pool_made++;
    return b;
}

static void thread_exit(void *arg)
{
    thread_buf *t = arg;
    pthread_mutex_lock(&t->lock);
    t->orphan = true;
    pthread_mutex_unlock(&t->lock);
    self = NULL;
}

static void make_thread_key(void)
{
    pthread_key_create(&thread_key, thread_exit);
}

static thread_buf *thread_register(void)
{
    thread_buf *t = calloc(1, sizeof *t);
    char name[32] = "";
    uint8_t rec[64];

    if (!t) return NULL;
    t->cur = buffer_new();
    if (!t->cur) {
        free(t);
        return NULL;
    }
    t->cur->tid = (uint32_t)syscall(SYS_gettid);
    pthread_mutex_init(&t->lock, NULL);
    pthread_once(&thread_key_once, make_thread_key);
    pthread_setspecific(thread_key, t);
    pthread_getname_np(pthread_self(), name, sizeof name);
    uint32_t name_id = thread_name_id ? thread_name_id(name, strlen(name)) : 0;
    fs_trace_define(rec, fs_fmt_put_thread(t->cur->tid, name_id, rec));
    pthread_mutex_lock(&W.list_lock);
    t->next = W.threads;
    W.threads = t;
    pthread_mutex_unlock(&W.list_lock);
    return t;
}

/* Queues the thread's full buffer and gives it an empty one; false (the
 * event dropped) when none is left. Under t->lock. */
static bool buffer_swap(thread_buf *t)
{
    buffer *b;
    pthread_mutex_lock(&W.lock);
    b = pool_take();
    if (b) {
        b->tid = t->cur->tid;
        t->cur->next = NULL;
        *W.queue_tail = t->cur;
        W.queue_tail = &t->cur->next;
        t->cur = b;
        pthread_cond_signal(&W.wake);
    }
    pthread_mutex_unlock(&W.lock);
    return b != NULL;
}

void fs_trace_event(const fs_fmt_event *ev)
{
    thread_buf *t = self;
    fs_fmt_event e;
    buffer *b;

    if (!fs_trace_level()) return;
    if (fs_unlikely(!t)) {
        t = self = thread_register();
        if (!t) goto drop;
    }
    e = *ev;
    if (!e.time_ns) e.time_ns = fs_trace_now();
    pthread_mutex_lock(&t->lock);
    b = t->cur;
    if (fs_unlikely(b->len + EVENT_ROOM > BUF_SIZE) && !buffer_swap(t)) {
        pthread_mutex_unlock(&t->lock);
        goto drop;
    }
    b = t->cur;
    if (!b->len) {
        b->t0 = e.time_ns;
        fs_fmt_enc_reset(&b->enc, e.time_ns);
    }
    b->len += fs_fmt_put_event(&b->enc, &e, b->data + b->len);
    pthread_mutex_unlock(&t->lock);
    return;
drop:
    atomic_fetch_add_explicit(&W.dropped, 1, memory_order_relaxed);
}

/* ---- the write cycle -------------------------------------------------------- */

/* In a signal handler a lock is tried for up to 100 ms: another thread
 * (the writer mid-cycle, a producer swapping buffers) lets go soon, but the
 * interrupted thread itself may hold it, and must not wait forever. */
static bool take(pthread_mutex_t *m, bool in_signal)
{
    if (!in_signal) return pthread_mutex_lock(m) == 0;
    for (int i = 0; i < 100; i++) {
        if (pthread_mutex_trylock(m) == 0) return true;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    return false;
}

static void write_all(const uint8_t *p, size_t len);

/* Packs one block into `s`. In a signal handler nothing grows (malloc is not
 * async-signal-safe): a full staging area is written out at once, which is
 * right there because the definitions go first (fs_trace_write_cycle). */
static void stage(staging *s, uint32_t tid, uint64_t t0, const uint8_t *raw, size_t len,
                  bool in_signal)
{
    size_t need = fs_fmt_block_bound(len);
    if (!len) return;
    if (s->len + need > s->cap && in_signal && fs_trace_g.fd >= 0) {
        write_all(s->p, s->len);
        s->len = 0;
    }
    if (s->len + need > s->cap) {
        size_t cap = s->cap ? s->cap : 4 * BUF_SIZE;
        if (in_signal) return;
        while (cap < s->len + need)
            cap *= 2;
        uint8_t *p = realloc(s->p, cap);
        if (!p) return;
        s->p = p;
        s->cap = cap;
    }
    s->len += fs_fmt_block_pack(in_signal ? NULL : W.zctx, in_signal ? 0 : ZSTD_LEVEL, tid, t0, raw,
                                len, s->p + s->len);
}

/* Where the block of definitions that starts at `from` ends: at a record
 * boundary (each definition was appended whole) no further than BUF_SIZE. */
static size_t definitions_cut(const uint8_t *defs, size_t from, size_t to)
{
    fs_fmt_dec d;
    fs_fmt_record r;
    const char *err;
    size_t end = from;

    if (to - from <= BUF_SIZE) return to;
    fs_fmt_dec_init(&d, defs + from, to - from, 0);
    while (fs_fmt_next(&d, &r, &err) == 1 && (size_t)(d.p - defs) - from <= BUF_SIZE)
        end = (size_t)(d.p - defs);
    return end == from ? to : end; /* records are far shorter than a block */
}

/* The definitions appended since the last cycle. Under defs_lock. */
static void stage_definitions(bool in_signal)
{
    for (size_t from = W.defs_written, end; from < W.defs_len; from = end) {
        end = definitions_cut(W.defs, from, W.defs_len);
        stage(&W.defs_out, 0, 0, W.defs + from, end - from, in_signal);
    }
    W.defs_written = W.defs_len;
}

void fs_trace_definitions(void (*emit)(void *ctx, const uint8_t *raw, size_t len), void *ctx)
{
    pthread_mutex_lock(&W.defs_lock);
    for (size_t from = 0, end; from < W.defs_len; from = end) {
        end = definitions_cut(W.defs, from, W.defs_len);
        emit(ctx, W.defs + from, end - from);
    }
    pthread_mutex_unlock(&W.defs_lock);
}

static void write_all(const uint8_t *p, size_t len)
{
    while (len && !W.write_failed) {
        ssize_t n = write(fs_trace_g.fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            W.write_failed = true;
            fs_trace_log("writing %s failed (%s): the rest of the trace is lost", fs_trace_g.path,
                         n < 0 ? strerror(errno) : "short write");
            return;
        }
        p += n;
        len -= (size_t)n;
    }
}

/* Takes what every thread holds into events_out; frees the buffers of
 * exited threads once empty. Under W.list_lock. */
static void stage_threads(bool in_signal)
{
    thread_buf **link = &W.threads;

    for (thread_buf *t = *link; t; t = *link) {
        if (!take(&t->lock, in_signal)) {
            link = &t->next;
            continue;
        }
        /* buffers the thread queued after the queue was taken hold events
         * older than its current one's: they go first, so that each
         * thread's events reach the file in order (t->lock keeps it from
         * queueing more meanwhile; t->lock then W.lock is its own order) */
        if (take(&W.lock, in_signal)) {
            for (buffer **pb = &W.queue; *pb;) {
                buffer *b = *pb;
                if (b->tid != t->cur->tid) {
                    pb = &b->next;
                    continue;
                }
                stage(&W.events_out, b->tid, b->t0, b->data, b->len, in_signal);
                *pb = b->next;
                if (!*pb) W.queue_tail = pb;
                if (!in_signal) {
                    b->next = W.pool;
                    W.pool = b;
                }
            }
            pthread_mutex_unlock(&W.lock);
        }
        if (t->cur->len) {
            stage(&W.events_out, t->cur->tid, t->cur->t0, t->cur->data, t->cur->len, in_signal);
            t->cur->len = 0;
        }
        bool gone = t->orphan && !in_signal;
        pthread_mutex_unlock(&t->lock);
        if (gone) {
            *link = t->next;
            pthread_mutex_destroy(&t->lock);
            free(t->cur);
            free(t);
            continue;
        }
        link = &t->next;
    }
}

/* The queued buffers and what every thread holds, into events_out. */
static void stage_events(bool in_signal)
{
    buffer *queued;

    if (!take(&W.lock, in_signal)) return;
    queued = W.queue;
    W.queue = NULL;
    W.queue_tail = &W.queue;
    pthread_mutex_unlock(&W.lock);
    for (buffer *b = queued; b; b = b->next)
        stage(&W.events_out, b->tid, b->t0, b->data, b->len, in_signal);
    if (take(&W.list_lock, in_signal)) {
        stage_threads(in_signal);
        pthread_mutex_unlock(&W.list_lock);
    }
    if (in_signal || !queued) return;
    pthread_mutex_lock(&W.lock);
    while (queued) {
        buffer *b = queued;
        queued = b->next;
        b->next = W.pool;
        W.pool = b;
    }
    pthread_mutex_unlock(&W.lock);
}

static void stage_new_definitions(bool in_signal)
{
    if (fs_trace_g.fd < 0 || !take(&W.defs_lock, in_signal)) return;
    stage_definitions(in_signal);
    pthread_mutex_unlock(&W.defs_lock);
}

/* One write cycle. Normally the events are taken first and the definitions
 * after them, so that every definition an event names is in this cycle or
 * an earlier one, and the definitions are written first. In a signal
 * handler staging cannot grow, so the definitions are written before the
 * events are even taken (one appended meanwhile by another thread may then
 * follow its first use: the reader shows such a frame as unknown). */
void fs_trace_write_cycle(bool in_signal)
{
    uint64_t dropped;
    uint8_t rec[32];

    if (!take(&W.cycle_lock, in_signal)) return;
    if (!in_signal && !W.zctx) W.zctx = ZSTD_createCCtx();
    dropped = atomic_exchange(&W.dropped, 0);
    if (dropped && !in_signal)
        fs_trace_define(rec, fs_fmt_put_dropped(dropped, fs_trace_now(), rec));
    W.defs_out.len = W.events_out.len = 0;
    if (in_signal) {
        stage_new_definitions(true);
        if (fs_trace_g.fd >= 0) write_all(W.defs_out.p, W.defs_out.len);
        W.defs_out.len = 0;
        stage_events(true);
    } else {
        stage_events(false);
        /* a fork child opens its file once it has something to say */
        if (fs_trace_g.fd < 0 && W.events_out.len) fs_trace_open_file();
        stage_new_definitions(false);
    }
    if (fs_trace_g.fd >= 0) {
        write_all(W.defs_out.p, W.defs_out.len);
        write_all(W.events_out.p, W.events_out.len);
        if (fs_trace_g.write_delay_ms && !in_signal) usleep(fs_trace_g.write_delay_ms * 1000u);
    }
    pthread_mutex_unlock(&W.cycle_lock);
}

/* ---- the writer thread ------------------------------------------------------ */

static void *writer_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "fsdpshim-trace");
    pthread_mutex_lock(&W.lock);
    while (!fs_trace_g.stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += FS_TRACE_FLUSH_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (!W.queue) pthread_cond_timedwait(&W.wake, &W.lock, &until);
        if (fs_trace_g.stopping) break;
        pthread_mutex_unlock(&W.lock);
        fs_trace_write_cycle(false);
        pthread_mutex_lock(&W.lock);
    }
    pthread_mutex_unlock(&W.lock);
    return NULL;
}

/* Staging that a signal handler can use without allocating. */
static void staging_reserve(staging *s)
{
    size_t cap = 4 * fs_fmt_block_bound(BUF_SIZE);
    if (s->cap >= cap) return;
    uint8_t *p = realloc(s->p, cap);
    if (!p) return;
    s->p = p;
    s->cap = cap;
}

bool fs_trace_writer_start(void)
{
    pthread_attr_t attr;
    sigset_t all, old;
    int rc;

    staging_reserve(&W.events_out);
    staging_reserve(&W.defs_out);

    /* The writer must not take the program's signals (SIGTERM, SIGINT...). */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_attr_init(&attr);
    rc = pthread_create(&fs_trace_g.writer, &attr, writer_main, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    fs_trace_g.writer_running = rc == 0;
    return rc == 0;
}

void fs_trace_writer_stop(void)
{
    pthread_mutex_lock(&W.lock);
    fs_trace_g.stopping = true;
    pthread_cond_signal(&W.wake);
    pthread_mutex_unlock(&W.lock);
    if (fs_trace_g.writer_running) pthread_join(fs_trace_g.writer, NULL);
    fs_trace_g.writer_running = false;
}

/* Before a later trace of this process (`fsdpshim attach` again after a
 * detach): its file repeats every definition, as a fork child's does (the
 * stack, string and thread ids the events name were defined in the earlier
 * file), the writer thread it starts must run, and events that reached a
 * buffer after the earlier trace's last cycle (a thread past the level
 * check while it stopped) belong to no file. Called with tracing off. */
void fs_trace_writer_reset(void)
{
    pthread_mutex_lock(&W.list_lock);
    for (thread_buf *t = W.threads; t; t = t->next) {
        pthread_mutex_lock(&t->lock);
        t->cur->len = 0;
        pthread_mutex_unlock(&t->lock);
    }
    pthread_mutex_unlock(&W.list_lock);
    pthread_mutex_lock(&W.lock);
    while (W.queue) {
        buffer *b = W.queue;
        W.queue = b->next;
        b->next = W.pool;
        W.pool = b;
    }
    W.queue_tail = &W.queue;
    fs_trace_g.stopping = false;
    pthread_mutex_unlock(&W.lock);
    pthread_mutex_lock(&W.defs_lock);
    W.defs_written = 0;
    pthread_mutex_unlock(&W.defs_lock);
    atomic_store(&W.dropped, 0);
    pthread_mutex_lock(&W.cycle_lock);
    W.write_failed = false; /* a new file */
    pthread_mutex_unlock(&W.cycle_lock);
}

/* In a fork child: the parent's buffers are the parent's to write, the
 * writer thread is gone, and the child's file repeats every definition. */
void fs_trace_writer_after_fork(void)
{
    pthread_mutex_init(&W.lock, NULL);
    pthread_mutex_init(&W.list_lock, NULL);
    pthread_mutex_init(&W.cycle_lock, NULL);
    pthread_mutex_init(&W.defs_lock, NULL);
    pthread_cond_init(&W.wake, NULL);
    for (thread_buf *t = W.threads; t; t = t->next) {
        pthread_mutex_init(&t->lock, NULL);
        t->cur->len = 0;
        if (t != self) t->orphan = true; /* those threads do not exist here */
    }
    if (self) self->cur->tid = (uint32_t)syscall(SYS_gettid);
    W.queue = NULL; /* the parent writes them; their memory is left */
    W.queue_tail = &W.queue;
    W.defs_written = 0;
    W.write_failed = false; /* the child's own file */
    atomic_store(&W.dropped, 0);
    fs_trace_g.writer_running = false;
    fs_trace_g.stopping = false;
}

/* fork's prepare/parent hooks: no cycle may be half done across fork. */
void fs_trace_writer_lock_all(void)
{
    pthread_mutex_lock(&W.cycle_lock);
    pthread_mutex_lock(&W.list_lock);
    pthread_mutex_lock(&W.lock);
    pthread_mutex_lock(&W.defs_lock);
}

void fs_trace_writer_unlock_all(void)
{
    pthread_mutex_unlock(&W.defs_lock);
    pthread_mutex_unlock(&W.lock);
    pthread_mutex_unlock(&W.list_lock);
    pthread_mutex_unlock(&W.cycle_lock);
}
