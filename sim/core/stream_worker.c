/* stream_worker.c - streams as worker threads: submission order, the implicit
 * ordering of the legacy default stream, and the per-thread default stream.
 *
 * Every stream runs its ops on its own worker thread, strictly in submission
 * order. An op may carry dependencies (stream, sequence number) that must be
 * complete before it runs: that is how cudaStreamWaitEvent and the legacy
 * stream's implicit synchronisation are expressed. A dependency always names
 * an op submitted earlier, so the graph of waits cannot have a cycle.
 *
 * Lock order: dev->mu, then any stream's mu. A stream's mu is a leaf lock.
 * Stream objects are never freed (a destroyed stream keeps its few hundred
 * bytes of bookkeeping) so dependencies and events may point at them freely;
 * the thread of a destroyed stream exits once its work has drained.
 *
 * While a stream captures (capture.c) its work is not run but becomes graph
 * nodes: sim_stream_add_work diverts it, and work that cannot be replayed
 * (sim_stream_submit) is refused. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct sim_op {
    struct sim_op *next;
    sim_work_fn fn;   /* NULL: the op only waits for its dependencies */
    sim_work_fn drop; /* frees arg after fn, when set (sim_stream_add_work) */
    void *arg;
    int hostfn;
    uint64_t seq;
    int ndeps;
    struct sim_dep deps[];
};

static struct sim_handle_set *live_streams;

/* Destroyed, drained streams: kept (never reused) so that dependencies and
 * events may still point at them. */
static pthread_mutex_t retired_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_stream *retired;
static atomic_ullong next_stream_id = 1;

/* Per-thread default streams, indexed by device, made on first use and
 * destroyed when the thread exits. */
static pthread_key_t pt_key;
static pthread_once_t pt_once = PTHREAD_ONCE_INIT;
static __thread struct sim_stream **pt_streams;

static void pt_release(void *p)
{
    struct sim_stream **arr = p;
    for (int d = 0; d < sim_cfg.ndevices; d++)
        if (arr[d]) sim_stream_destroy(arr[d]);
    free(arr);
    pt_streams = NULL; /* a later call on this thread starts afresh */
}

static void pt_key_init(void)
{
    pthread_key_create(&pt_key, pt_release);
    live_streams = sim_handles_new();
}

static void streams_init(void)
{
    pthread_once(&pt_once, pt_key_init);
}

/* Moves a destroyed stream with no work left from its device to the
 * retired list. */
static void retire(struct sim_stream *s)
{
    struct sim_device *dev = s->dev;
    pthread_mutex_lock(&dev->mu);
    for (struct sim_stream **pp = &dev->streams; *pp; pp = &(*pp)->dev_next) {
        if (*pp == s) {
            *pp = s->dev_next;
            break;
        }
    }
    pthread_mutex_unlock(&dev->mu);
    pthread_mutex_lock(&retired_mu);
    s->dev_next = retired;
    retired = s;
    pthread_mutex_unlock(&retired_mu);
}

static void *worker_main(void *p)
{
    struct sim_stream *s = p;
    char name[16];
    snprintf(name, sizeof name, "fs-sim-s%llu", s->id);
    pthread_setname_np(pthread_self(), name);

    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->destroyed)
            pthread_cond_wait(&s->work_cv, &s->mu);
        if (!s->head) break;
        struct sim_op *op = s->head;
        pthread_mutex_unlock(&s->mu);

        for (int i = 0; i < op->ndeps; i++)
            sim_stream_wait(op->deps[i].stream, op->deps[i].seq);
        if (op->fn) {
            if (op->hostfn) pthread_mutex_lock(&s->dev->hostfn_mu);
            op->fn(op->arg);
            if (op->hostfn) pthread_mutex_unlock(&s->dev->hostfn_mu);
        }
        if (op->drop) op->drop(op->arg);

        pthread_mutex_lock(&s->mu);
        s->head = op->next;
        if (!s->head) s->tail = NULL;
        s->completed = op->seq;
        pthread_cond_broadcast(&s->done_cv);
        free(op);
    }
    s->worker_running = 0;
    pthread_mutex_unlock(&s->mu);
    retire(s);
    return NULL;
}

struct sim_stream *sim_stream_new(struct sim_device *dev, enum sim_stream_kind kind, unsigned flags,
                                  int priority)
{
    streams_init();
    struct sim_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->dev = dev;
    s->kind = kind;
    s->flags = flags;
    s->priority = priority;
    s->id = atomic_fetch_add(&next_stream_id, 1);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);

    pthread_mutex_lock(&dev->mu);
    s->dev_next = dev->streams;
    dev->streams = s;
    pthread_mutex_unlock(&dev->mu);
    sim_handles_add(live_streams, s, s);
    return s;
}

void sim_stream_destroy(struct sim_stream *s)
{
    sim_handles_remove(live_streams, s);
    pthread_mutex_lock(&s->mu);
    int was_destroyed = s->destroyed;
    s->destroyed = 1;
    int idle = !s->worker_running;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    /* A running worker retires the stream itself once it has drained. */
    if (idle && !was_destroyed) retire(s);
}

void sim_stream_forget_device(struct sim_device *dev)
{
    /* Collect first: destroying takes dev->mu to unlink. */
    pthread_mutex_lock(&dev->mu);
    size_t n = 0;
    for (struct sim_stream *s = dev->streams; s; s = s->dev_next)
        n++;
    struct sim_stream **victims = calloc(n ? n : 1, sizeof *victims);
    size_t k = 0;
    for (struct sim_stream *s = dev->streams; s && victims; s = s->dev_next)
        if (s->kind == SIM_STREAM_USER) victims[k++] = s;
    pthread_mutex_unlock(&dev->mu);
    for (size_t i = 0; i < k; i++)
        sim_stream_destroy(victims[i]);
    free(victims);
}

static struct sim_stream *legacy_of(struct sim_device *dev)
{
    pthread_mutex_lock(&dev->mu);
    struct sim_stream *s = dev->legacy;
    pthread_mutex_unlock(&dev->mu);
    if (s) return s;
    s = sim_stream_new(dev, SIM_STREAM_LEGACY, 0, 0);
    pthread_mutex_lock(&dev->mu);
    if (dev->legacy) {
        /* Another thread won the race; ours never ran anything. */
        struct sim_stream *loser = s;
        s = dev->legacy;
        pthread_mutex_unlock(&dev->mu);
        sim_stream_destroy(loser);
        return s;
    }
    dev->legacy = s;
    pthread_mutex_unlock(&dev->mu);
    return s;
}

static struct sim_stream *per_thread_of(struct sim_device *dev)
{
    streams_init();
    if (!pt_streams) {
        pt_streams = calloc((size_t)sim_cfg.ndevices, sizeof *pt_streams);
        if (!pt_streams) return NULL;
        pthread_setspecific(pt_key, pt_streams);
    }
    if (!pt_streams[dev->ordinal])
        pt_streams[dev->ordinal] = sim_stream_new(dev, SIM_STREAM_PER_THREAD, 0, 0);
    return pt_streams[dev->ordinal];
}

cudaError_t sim_stream_resolve(cudaStream_t h, int per_thread, struct sim_stream **out)
{
    sim_init();
    streams_init();
    struct sim_device *dev = sim_cur_dev();
    struct sim_stream *s;
    if (!dev && (h == NULL || h == cudaStreamLegacy || h == cudaStreamPerThread))
        return cudaErrorNoDevice;
    if (h == NULL)
        s = per_thread ? per_thread_of(dev) : legacy_of(dev);
    else if (h == cudaStreamLegacy)
        s = legacy_of(dev);
    else if (h == cudaStreamPerThread)
        s = per_thread_of(dev);
    else if (!(s = sim_handles_get(live_streams, h)))
        return cudaErrorInvalidResourceHandle;
    if (!s) return cudaErrorMemoryAllocation;
    *out = s;
    return cudaSuccess;
}

/* The dependency on t's latest op, if that op is still pending. */
static int pending_dep(struct sim_stream *t, struct sim_dep *dep)
{
    pthread_mutex_lock(&t->mu);
    int pending = t->submitted > t->completed;
    dep->stream = t;
    dep->seq = t->submitted;
    pthread_mutex_unlock(&t->mu);
    return pending;
}

static uint64_t submit_op(struct sim_stream *s, sim_work_fn fn, sim_work_fn drop, void *arg,
                          int hostfn, const struct sim_dep *extra)
{
    struct sim_device *dev = s->dev;
    pthread_mutex_lock(&dev->mu);

    size_t cap = 2;
    if (s->kind == SIM_STREAM_LEGACY)
        for (struct sim_stream *t = dev->streams; t; t = t->dev_next)
            cap++;
    struct sim_op *op = malloc(sizeof *op + cap * sizeof(struct sim_dep));
    if (!op) {
        pthread_mutex_unlock(&dev->mu);
        return 0;
    }
    op->next = NULL;
    op->fn = fn;
    op->drop = drop;
    op->arg = arg;
    op->hostfn = hostfn;
    op->ndeps = 0;

    /* Legacy work waits for everything before it on blocking streams; work
     * on a blocking stream waits for everything before it on legacy. */
    if (s->kind == SIM_STREAM_LEGACY) {
        for (struct sim_stream *t = dev->streams; t; t = t->dev_next)
            if (t != s && !(t->flags & cudaStreamNonBlocking) &&
                pending_dep(t, &op->deps[op->ndeps]))
                op->ndeps++;
    } else if (!(s->flags & cudaStreamNonBlocking) && dev->legacy) {
        if (pending_dep(dev->legacy, &op->deps[op->ndeps])) op->ndeps++;
    }
    if (extra && extra->stream != s && !sim_stream_done(extra->stream, extra->seq))
        op->deps[op->ndeps++] = *extra;

    pthread_mutex_lock(&s->mu);
    if (s->destroyed) {
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_unlock(&dev->mu);
        free(op);
        return 0;
    }
    op->seq = ++s->submitted;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    if (!s->worker_running) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&tid, &attr, worker_main, s);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            fprintf(stderr, "fsdpshim-sim: cannot start a stream worker: %s\n", strerror(rc));
            abort();
        }
        s->worker_running = 1;
    } else {
        pthread_cond_signal(&s->work_cv);
    }
    uint64_t seq = op->seq;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&dev->mu);
    return seq;
}

uint64_t sim_stream_submit(struct sim_stream *s, sim_work_fn fn, void *arg, int hostfn,
                           const struct sim_dep *extra)
{
    if (sim_capture_refuse(s)) return 0;
    if (s->kind == SIM_STREAM_LEGACY && sim_capture_check_legacy(s->dev)) return 0;
    return submit_op(s, fn, NULL, arg, hostfn, extra);
}

uint64_t sim_stream_submit_replay(struct sim_stream *s, sim_work_fn fn, void *arg, int hostfn,
                                  const struct sim_dep *extra)
{
    return submit_op(s, fn, NULL, arg, hostfn, extra);
}

cudaError_t sim_stream_add_work(struct sim_stream *s, const struct sim_work *w,
                                const struct sim_dep *extra, uint64_t *seq)
{
    *seq = 0;
    if (s->kind == SIM_STREAM_LEGACY) {
        cudaError_t err = sim_capture_check_legacy(s->dev);
        if (err) return err;
    }
    /* Capture happens here, on the one path all work takes, so that every
     * kind of work (copies, host functions, collectives, launches) becomes a
     * node without its call site knowing. */
    if (atomic_load(&s->cap)) return sim_capture_add(s, w);
    *seq = submit_op(s, w->run, w->drop, w->arg, w->hostfn, extra);
    return *seq ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

void sim_stream_wait(struct sim_stream *s, uint64_t seq)
{
    pthread_mutex_lock(&s->mu);
    while (s->completed < seq)
        pthread_cond_wait(&s->done_cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

int sim_stream_done(struct sim_stream *s, uint64_t seq)
{
    pthread_mutex_lock(&s->mu);
    int done = s->completed >= seq;
    pthread_mutex_unlock(&s->mu);
    return done;
}

uint64_t sim_stream_last(struct sim_stream *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t seq = s->submitted;
    pthread_mutex_unlock(&s->mu);
    return seq;
}

void sim_streams_fork(enum sim_fork_phase phase)
{
    streams_init();
    if (phase == SIM_FORK_PREPARE) {
        pthread_mutex_lock(&retired_mu);
        sim_handles_lock(live_streams);
        return;
    }
    sim_handles_unlock(live_streams);
    pthread_mutex_unlock(&retired_mu);
    if (phase == SIM_FORK_CHILD) {
        /* Only the forking thread exists now, and no stream worker: the
         * child starts without streams (devices forgot theirs). */
        live_streams = sim_handles_new();
        pt_streams = NULL;
        pthread_setspecific(pt_key, NULL);
    }
}
