/* event.c - events: a record is an op on a stream that stamps the time when
 * the stream reaches it; query, synchronise and cudaStreamWaitEvent look at
 * the most recent record (the runtime's entry points are in
 * sim/cudart/event_management.c, the driver's go through sim_drv_event_*).
 *
 * cudaEventBlockingSync changes nothing (host waits always block on a
 * condition variable); cudaEventInterprocess needs cudaEventDisableTiming,
 * as the runtime requires, and keeps the event's records in state other
 * processes can map (ipc_event.c), which query, synchronise and waits then
 * read instead of the local (stream, sequence). cudaDeviceReset invalidates
 * the events of its device (their handles then fail with
 * cudaErrorInvalidResourceHandle). An event is freed when it is destroyed
 * and no record op of it is still pending.
 *
 * A record on a capturing stream is no op but a mark of the capture
 * (capture.c): a stream that waits on the event joins the capture, and
 * querying, synchronising or timing the event is cudaErrorCapturedEvent
 * until it is recorded outside a capture again. */
#include <stdlib.h>
#include <time.h>

#include "sim.h"

struct sim_event {
    pthread_mutex_t mu;
    unsigned flags;
    int device;
    uint64_t reset_gen; /* the device's reset generation at creation */
    int refs;           /* the handle's own reference + one per pending record op */
    /* Latest record: stream NULL until the event is first recorded. */
    struct sim_stream *stream;
    uint64_t seq;
    uint64_t gen;      /* bumped by every record */
    uint64_t time_gen; /* generation whose time is in time_ns */
    int64_t time_ns;
    struct sim_capture_mark *mark; /* the latest record was in a capture */
    /* cudaEventInterprocess (or opened from a handle): the shared state. */
    struct sim_ipc_event *ipc;
};

struct record {
    struct sim_event *ev;
    uint64_t gen;
    uint64_t ipc_gen; /* the record's generation in ev->ipc */
};

static struct sim_handle_set *live_events;
static pthread_once_t events_once = PTHREAD_ONCE_INIT;

static void events_init(void)
{
    live_events = sim_handles_new();
}

static void unref(struct sim_event *ev)
{
    pthread_mutex_lock(&ev->mu);
    int last = --ev->refs == 0;
    pthread_mutex_unlock(&ev->mu);
    if (last) {
        sim_capture_mark_free(ev->mark);
        if (ev->ipc) sim_ipc_event_free(ev->ipc);
        pthread_mutex_destroy(&ev->mu);
        free(ev);
    }
}

static void ref(void *p)
{
    struct sim_event *ev = p;
    pthread_mutex_lock(&ev->mu);
    ev->refs++;
    pthread_mutex_unlock(&ev->mu);
}

/* The live event behind a handle, with a reference the caller drops with
 * unref: a racing cudaEventDestroy cannot free it in between. */
static struct sim_event *lookup(cudaEvent_t h)
{
    pthread_once(&events_once, events_init);
    struct sim_event *ev = sim_handles_hold(live_events, h, ref);
    /* cudaDeviceReset invalidates the events of its device. */
    if (ev && ev->reset_gen != __atomic_load_n(&sim_dev(ev->device)->reset_gen, __ATOMIC_ACQUIRE)) {
        unref(ev);
        return NULL;
    }
    return ev;
}

/* A new event of dev; it owns ipc (may be NULL) from here on. */
static cudaError_t event_add(struct sim_device *dev, unsigned flags, struct sim_ipc_event *ipc,
                             cudaEvent_t *out)
{
    struct sim_event *ev = calloc(1, sizeof *ev);
    if (!ev) {
        if (ipc) sim_ipc_event_free(ipc);
        return cudaErrorMemoryAllocation;
    }
    pthread_mutex_init(&ev->mu, NULL);
    ev->flags = flags;
    ev->device = dev->ordinal;
    ev->reset_gen = __atomic_load_n(&dev->reset_gen, __ATOMIC_ACQUIRE);
    ev->refs = 1;
    ev->ipc = ipc;
    void *handle = sim_handles_new_key();
    sim_handles_add(live_events, handle, ev);
    *out = (cudaEvent_t)handle;
    return cudaSuccess;
}

cudaError_t sim_event_create(cudaEvent_t *out, unsigned flags)
{
    sim_init();
    pthread_once(&events_once, events_init);
    unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (!out || (flags & ~known)) return sim_record_error(cudaErrorInvalidValue);
    if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming))
        return sim_record_error(cudaErrorInvalidValue);
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return sim_record_error(cudaErrorNoDevice);
    struct sim_ipc_event *ipc = NULL;
    if ((flags & cudaEventInterprocess) && !(ipc = sim_ipc_event_new()))
        return sim_record_error(cudaErrorMemoryAllocation);
    cudaError_t err = event_add(dev, flags, ipc, out);
    return err ? sim_record_error(err) : cudaSuccess;
}

cudaError_t sim_event_from_ipc(struct sim_ipc_event *e, cudaEvent_t *out)
{
    pthread_once(&events_once, events_init);
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return cudaErrorNoDevice;
    return event_add(dev, cudaEventDisableTiming | cudaEventInterprocess, e, out);
}

cudaError_t sim_event_ipc_wire(cudaEvent_t h, struct sim_ipc_wire *w)
{
    struct sim_event *ev = lookup(h);
    if (!ev) return cudaErrorInvalidResourceHandle;
    int ipc = ev->ipc != NULL;
    if (ipc) sim_ipc_event_wire(ev->ipc, w);
    unref(ev);
    return ipc ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

cudaError_t sim_event_destroy(cudaEvent_t h)
{
    pthread_once(&events_once, events_init);
    struct sim_event *ev = sim_handles_remove(live_events, h);
    if (!ev) return sim_record_error(cudaErrorInvalidResourceHandle);
    int valid = ev->reset_gen == __atomic_load_n(&sim_dev(ev->device)->reset_gen, __ATOMIC_ACQUIRE);
    unref(ev);
    return valid ? cudaSuccess : sim_record_error(cudaErrorInvalidResourceHandle);
}

static void stamp(void *p)
{
    struct record *r = p;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    pthread_mutex_lock(&r->ev->mu);
    if (r->ev->gen == r->gen) {
        r->ev->time_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        r->ev->time_gen = r->gen;
    }
    pthread_mutex_unlock(&r->ev->mu);
    if (r->ev->ipc) sim_ipc_event_complete(r->ev->ipc, r->ipc_gen);
    unref(r->ev);
    free(r);
}

cudaError_t sim_event_record(cudaEvent_t h, cudaStream_t sh, unsigned flags, int pt)
{
    if (flags & ~(unsigned)cudaEventRecordExternal) return sim_record_error(cudaErrorInvalidValue);
    struct sim_event *ev = lookup(h);
    if (!ev) return sim_record_error(cudaErrorInvalidResourceHandle);
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(sh, pt, &s);
    if (!err && sim_capture_active(s)) {
        struct sim_capture_mark *m = sim_capture_mark_new(s);
        if (m) {
            pthread_mutex_lock(&ev->mu);
            sim_capture_mark_free(ev->mark);
            ev->mark = m;
            pthread_mutex_unlock(&ev->mu);
        }
        unref(ev);
        return m ? cudaSuccess : sim_record_error(cudaErrorStreamCaptureInvalidated);
    }
    struct record *r = err ? NULL : malloc(sizeof *r);
    if (!err && !r) err = cudaErrorMemoryAllocation;
    if (err) {
        unref(ev);
        return sim_record_error(err);
    }

    /* The generation is taken before submitting, so that a stamp from an
     * older record can never be mistaken for this one. The record op owns
     * the reference lookup took. */
    pthread_mutex_lock(&ev->mu);
    uint64_t gen = ++ev->gen;
    sim_capture_mark_free(ev->mark);
    ev->mark = NULL;
    ev->refs++; /* this call's own, until it is done with ev */
    pthread_mutex_unlock(&ev->mu);
    /* Other processes see the record from this call on. */
    uint64_t ipc_gen = ev->ipc ? sim_ipc_event_issue(ev->ipc) : 0;
    *r = (struct record){ev, gen, ipc_gen};
    uint64_t seq = sim_stream_submit(s, stamp, r, 0, NULL);
    if (!seq) {
        /* A record that will never run must not hold its waiters. */
        if (ev->ipc) sim_ipc_event_complete(ev->ipc, ipc_gen);
        unref(ev);
        unref(ev);
        free(r);
        return sim_record_error(cudaErrorInvalidResourceHandle);
    }
    /* Visible to queries as soon as the call returns. */
    pthread_mutex_lock(&ev->mu);
    if (ev->gen == gen) {
        ev->stream = s;
        ev->seq = seq;
    }
    pthread_mutex_unlock(&ev->mu);
    unref(ev);
    return cudaSuccess;
}

/* The latest record as a dependency; returns 0 if never recorded, -1 if it
 * was recorded in a capture. */
static int latest(struct sim_event *ev, struct sim_dep *dep)
{
    pthread_mutex_lock(&ev->mu);
    if (ev->mark) {
        pthread_mutex_unlock(&ev->mu);
        return -1;
    }
    dep->stream = ev->stream;
    dep->seq = ev->seq;
    pthread_mutex_unlock(&ev->mu);
    return dep->stream != NULL;
}

cudaError_t sim_event_query(cudaEvent_t h)
{
    struct sim_event *ev = lookup(h);
    if (!ev) return sim_record_error(cudaErrorInvalidResourceHandle);
    if (ev->ipc) {
        int done = sim_ipc_event_done(ev->ipc, sim_ipc_event_latest(ev->ipc));
        unref(ev);
        return done ? cudaSuccess : cudaErrorNotReady;
    }
    struct sim_dep dep;
    int recorded = latest(ev, &dep);
    unref(ev);
    if (recorded < 0) return sim_record_error(cudaErrorCapturedEvent);
    /* Never recorded: complete. */
    return !recorded || sim_stream_done(dep.stream, dep.seq) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t sim_event_synchronize(cudaEvent_t h)
{
    struct sim_event *ev = lookup(h);
    if (!ev) return sim_record_error(cudaErrorInvalidResourceHandle);
    if (ev->ipc) {
        sim_ipc_event_wait(ev->ipc, sim_ipc_event_latest(ev->ipc));
        sim_mempool_trim_threshold(sim_dev(ev->device)->mempool);
        unref(ev);
        return cudaSuccess;
    }
    struct sim_dep dep;
    int recorded = latest(ev, &dep);
    unref(ev);
    if (recorded < 0) return sim_record_error(cudaErrorCapturedEvent);
    if (recorded) {
        sim_stream_wait(dep.stream, dep.seq);
        sim_mempool_trim_threshold(dep.stream->dev->mempool);
    }
    return cudaSuccess;
}

struct ipc_wait {
    struct sim_event *ev;
    uint64_t gen;
};

/* The op of a stream waiting on an interprocess event: it holds the stream
 * until the record it waits for is reached, in whichever process. */
static void ipc_wait_op(void *p)
{
    struct ipc_wait *w = p;
    sim_ipc_event_wait(w->ev->ipc, w->gen);
    unref(w->ev);
    free(w);
}

/* cudaStreamWaitEvent on an interprocess event; consumes the reference. */
static cudaError_t stream_wait_ipc(struct sim_event *ev, cudaStream_t sh, int pt)
{
    uint64_t gen = sim_ipc_event_latest(ev->ipc);
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(sh, pt, &s);
    struct ipc_wait *w = NULL;
    if (!err && !sim_ipc_event_done(ev->ipc, gen)) {
        w = malloc(sizeof *w);
        if (!w) err = cudaErrorMemoryAllocation;
    }
    if (!w) {
        unref(ev);
        return err ? sim_record_error(err) : cudaSuccess;
    }
    *w = (struct ipc_wait){ev, gen};
    if (!sim_stream_submit(s, ipc_wait_op, w, 0, NULL)) {
        free(w);
        unref(ev);
        return sim_record_error(cudaErrorInvalidResourceHandle);
    }
    return cudaSuccess;
}

cudaError_t sim_stream_wait_event(cudaStream_t sh, cudaEvent_t h, unsigned flags, int pt)
{
    if (flags & ~(unsigned)cudaEventWaitExternal) return sim_record_error(cudaErrorInvalidValue);
    struct sim_event *ev = lookup(h);
    if (!ev) return sim_record_error(cudaErrorInvalidResourceHandle);
    if (ev->ipc) return stream_wait_ipc(ev, sh, pt);
    struct sim_dep dep;
    int recorded = latest(ev, &dep);
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(sh, pt, &s);
    if (!err && recorded < 0) {
        /* Recorded in a capture: s joins it (under ev->mu, so a concurrent
         * record cannot free the mark). */
        pthread_mutex_lock(&ev->mu);
        err = ev->mark ? sim_capture_join(s, ev->mark) : cudaSuccess;
        pthread_mutex_unlock(&ev->mu);
        unref(ev);
        return err ? sim_record_error(err) : cudaSuccess;
    }
    unref(ev);
    if (err) return sim_record_error(err);
    /* A capture may only depend on work inside it. */
    if (sim_capture_active(s) && sim_capture_refuse(s))
        return sim_record_error(cudaErrorStreamCaptureIsolation);
    if (!recorded) return cudaSuccess; /* waiting on a never-recorded event is a no-op */
    if (!sim_stream_submit(s, NULL, NULL, 0, &dep))
        return sim_record_error(cudaErrorInvalidResourceHandle);
    return cudaSuccess;
}

/* ---- the simulated driver's events (sim/cuda/stream.c): the same calls,
 * leaving the runtime's last error as it was ---- */

SIM_SEAM cudaError_t sim_drv_event_create(cudaEvent_t *out, unsigned flags)
{
    return SIM_QUIETLY(sim_event_create(out, flags));
}

SIM_SEAM cudaError_t sim_drv_event_record(cudaEvent_t h, cudaStream_t s, unsigned flags, int pt)
{
    return SIM_QUIETLY(sim_event_record(h, s, flags, pt));
}

SIM_SEAM cudaError_t sim_drv_event_query(cudaEvent_t h)
{
    return SIM_QUIETLY(sim_event_query(h));
}

SIM_SEAM cudaError_t sim_drv_event_synchronize(cudaEvent_t h)
{
    return SIM_QUIETLY(sim_event_synchronize(h));
}

SIM_SEAM cudaError_t sim_drv_event_destroy(cudaEvent_t h)
{
    return SIM_QUIETLY(sim_event_destroy(h));
}

SIM_SEAM cudaError_t sim_drv_stream_wait_event(cudaStream_t s, cudaEvent_t h, unsigned flags,
                                               int pt)
{
    return SIM_QUIETLY(sim_stream_wait_event(s, h, flags, pt));
}

/* The time of the latest record, if it has completed. */
static cudaError_t completed_time(struct sim_event *ev, int64_t *ns)
{
    pthread_mutex_lock(&ev->mu);
    struct sim_stream *s = ev->stream;
    uint64_t seq = ev->seq, gen = ev->gen;
    unsigned flags = ev->flags;
    int captured = ev->mark != NULL;
    pthread_mutex_unlock(&ev->mu);
    if (captured) return cudaErrorCapturedEvent;
    if (!s || (flags & cudaEventDisableTiming)) return cudaErrorInvalidResourceHandle;
    if (!sim_stream_done(s, seq)) return cudaErrorNotReady;
    pthread_mutex_lock(&ev->mu);
    int valid = ev->time_gen == gen;
    *ns = ev->time_ns;
    pthread_mutex_unlock(&ev->mu);
    /* Re-recorded since we looked: the newer record is not complete. */
    return valid ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t sim_event_elapsed_ns(cudaEvent_t start, cudaEvent_t end, int64_t *ns)
{
    struct sim_event *a = lookup(start), *b = lookup(end);
    int64_t ta = 0, tb = 0;
    cudaError_t err = cudaErrorInvalidResourceHandle;
    if (a && b) {
        err = completed_time(a, &ta);
        if (!err) err = completed_time(b, &tb);
    }
    if (a) unref(a);
    if (b) unref(b);
    if (!err) *ns = tb - ta;
    return err;
}

void sim_events_fork(enum sim_fork_phase phase)
{
    pthread_once(&events_once, events_init);
    if (phase == SIM_FORK_PREPARE) {
        sim_handles_lock(live_events);
        return;
    }
    sim_handles_unlock(live_events);
    /* The parent's events were recorded on streams the child does not have. */
    if (phase == SIM_FORK_CHILD) live_events = sim_handles_new();
}
