/* capture.c - stream capture: which streams record their work into which
 * graph, the dependencies of each, the capture interaction modes and the
 * errors of calls a capture prohibits (the entry points are in
 * sim/cudart/stream_capture.c).
 *
 * A capture starts on its origin stream (cudaStreamBeginCapture) and other
 * streams join it by waiting on an event recorded in it. Each member stream
 * keeps its capture dependencies: the nodes the next work on it depends on.
 * Work enqueued on a member (sim_stream_add_work, stream_worker.c) becomes a
 * node after those and replaces them. A prohibited call invalidates the
 * capture, which then records nothing and ends in
 * cudaErrorStreamCaptureInvalidated. At cudaStreamEndCapture every joined
 * stream must have been joined back into the origin (its last nodes must
 * precede the origin's), else the capture ends in
 * cudaErrorStreamCaptureUnjoined.
 *
 * One lock guards every capture and the capture state of every stream (a
 * stream's `cap` pointer is read without it only to learn that the stream
 * is not capturing). Lock order: this lock, then a graph's. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct sim_capture {
    struct sim_capture *next; /* in captures */
    unsigned long long id;
    cudaGraph_t graph;
    int own_graph; /* made by cudaStreamBeginCapture: destroyed if the capture fails */
    enum cudaStreamCaptureMode mode;
    pthread_t thread; /* that began it */
    struct sim_stream *origin;
    int invalidated;
    struct sim_stream **members; /* the origin and every joined stream */
    size_t nmembers;
};

struct sim_capture_state {
    struct sim_capture *c;
    cudaGraphNode_t *deps; /* capture dependencies */
    size_t ndeps;
    cudaGraphEdgeData *edges; /* default edges, for cudaStreamGetCaptureInfo */
};

struct sim_capture_mark {
    unsigned long long id; /* the capture */
    cudaGraphNode_t *nodes;
    size_t n;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_capture *captures;
static unsigned long long next_id = 1;
static atomic_int ncaptures; /* read without mu: no capture at all is the common case */
static __thread enum cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

/* Under mu. */
static struct sim_capture_state *state_of(struct sim_stream *s)
{
    return atomic_load(&s->cap);
}

/* Replaces st's dependencies with nodes[0..n); under mu. */
static int set_deps(struct sim_capture_state *st, const cudaGraphNode_t *nodes, size_t n)
{
    cudaGraphNode_t *deps = malloc((n ? n : 1) * sizeof *deps);
    cudaGraphEdgeData *edges = calloc(n ? n : 1, sizeof *edges);
    if (!deps || !edges) {
        free(deps);
        free(edges);
        return -1;
    }
    if (n) memcpy(deps, nodes, n * sizeof *deps);
    free(st->deps);
    free(st->edges);
    st->deps = deps;
    st->edges = edges;
    st->ndeps = n;
    return 0;
}

/* Makes s a member of c with dependencies nodes[0..n); under mu. */
static cudaError_t attach(struct sim_capture *c, struct sim_stream *s, const cudaGraphNode_t *nodes,
                          size_t n)
{
    struct sim_capture_state *st = calloc(1, sizeof *st);
    struct sim_stream **members = realloc(c->members, (c->nmembers + 1) * sizeof *members);
    if (members) c->members = members;
    if (!st || !members || set_deps(st, nodes, n)) {
        free(st);
        return cudaErrorMemoryAllocation;
    }
    st->c = c;
    c->members[c->nmembers++] = s;
    atomic_store(&s->cap, st);
    return cudaSuccess;
}

/* Ends c: its streams stop capturing; under mu. */
static void finish(struct sim_capture *c)
{
    for (size_t i = 0; i < c->nmembers; i++) {
        struct sim_capture_state *st = state_of(c->members[i]);
        atomic_store(&c->members[i]->cap, NULL);
        free(st->deps);
        free(st->edges);
        free(st);
    }
    for (struct sim_capture **pp = &captures; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    atomic_fetch_sub(&ncaptures, 1);
    free(c->members);
    free(c);
}

cudaError_t sim_capture_begin(cudaStream_t h, int pt, cudaGraph_t graph,
                              const cudaGraphNode_t *deps, const cudaGraphEdgeData *edges,
                              size_t ndeps, enum cudaStreamCaptureMode mode)
{
    if ((unsigned)mode > cudaStreamCaptureModeRelaxed || (ndeps && !deps))
        return cudaErrorInvalidValue;
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (err) return err;
    /* The legacy stream synchronises with every blocking stream: it cannot
     * be captured. */
    if (s->kind == SIM_STREAM_LEGACY) return cudaErrorStreamCaptureUnsupported;
    if (graph && !sim_graph_valid(graph)) return cudaErrorInvalidValue;
    for (size_t i = 0; i < ndeps; i++) {
        if (!deps[i] || sim_graph_of(deps[i]) != graph) return cudaErrorInvalidValue;
        /* Only default edges: the sim has no programmatic dependencies. */
        static const cudaGraphEdgeData none;
        if (edges && memcmp(&edges[i], &none, sizeof none)) return cudaErrorNotSupported;
    }
    struct sim_capture *c = calloc(1, sizeof *c);
    if (!c) return cudaErrorMemoryAllocation;
    c->own_graph = graph == NULL;
    c->graph = graph ? graph : sim_graph_new();
    if (!c->graph) {
        free(c);
        return cudaErrorMemoryAllocation;
    }
    c->mode = mode;
    c->thread = pthread_self();
    c->origin = s;

    pthread_mutex_lock(&mu);
    if (state_of(s)) {
        err = cudaErrorIllegalState;
    } else {
        c->id = next_id++;
        err = attach(c, s, deps, ndeps);
    }
    if (!err) {
        c->next = captures;
        captures = c;
        atomic_fetch_add(&ncaptures, 1);
    }
    pthread_mutex_unlock(&mu);
    if (err) {
        if (c->own_graph) sim_graph_destroy(c->graph);
        free(c->members);
        free(c);
    }
    return err;
}

/* Whether every joined stream of c has been joined back into the origin;
 * under mu. */
static int all_joined(struct sim_capture *c)
{
    struct sim_capture_state *origin = state_of(c->origin);
    for (size_t i = 0; i < c->nmembers; i++) {
        struct sim_capture_state *st = state_of(c->members[i]);
        for (size_t d = 0; d < st->ndeps; d++) {
            int joined = 0;
            for (size_t o = 0; o < origin->ndeps && !joined; o++)
                joined = sim_graph_reaches(st->deps[d], origin->deps[o]);
            if (!joined) return 0;
        }
    }
    return 1;
}

cudaError_t sim_capture_end(cudaStream_t h, int pt, cudaGraph_t *graph_out)
{
    if (!graph_out) return cudaErrorInvalidValue;
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (err) return err;
    pthread_mutex_lock(&mu);
    struct sim_capture_state *st = state_of(s);
    struct sim_capture *c = st ? st->c : NULL;
    cudaGraph_t drop = NULL;
    if (!c) {
        err = cudaErrorIllegalState;
    } else if (c->origin != s) {
        /* Ending on a joined stream ends nothing but spoils the capture. */
        c->invalidated = 1;
        err = cudaErrorStreamCaptureUnmatched;
    } else if (c->mode != cudaStreamCaptureModeRelaxed &&
               !pthread_equal(c->thread, pthread_self())) {
        err = cudaErrorStreamCaptureWrongThread;
    } else {
        if (c->invalidated)
            err = cudaErrorStreamCaptureInvalidated;
        else if (!all_joined(c))
            err = cudaErrorStreamCaptureUnjoined;
        *graph_out = err ? NULL : c->graph;
        if (err && c->own_graph) drop = c->graph;
        finish(c);
    }
    pthread_mutex_unlock(&mu);
    if (drop) sim_graph_destroy(drop);
    return err;
}

cudaError_t sim_capture_add(struct sim_stream *s, const struct sim_work *w)
{
    pthread_mutex_lock(&mu);
    struct sim_capture_state *st = state_of(s);
    cudaError_t err = cudaErrorStreamCaptureInvalidated;
    if (st && !st->c->invalidated) {
        cudaGraphNode_t node;
        err = sim_graph_add(st->c->graph, w, st->deps, st->ndeps, &node);
        /* The node is in the graph: only the dependencies could not move on. */
        if (!err && set_deps(st, &node, 1)) st->c->invalidated = 1;
    }
    pthread_mutex_unlock(&mu);
    return err;
}

int sim_capture_active(struct sim_stream *s)
{
    return state_of(s) != NULL;
}

cudaError_t sim_capture_refuse(struct sim_stream *s)
{
    if (!state_of(s)) return cudaSuccess;
    pthread_mutex_lock(&mu);
    struct sim_capture_state *st = state_of(s);
    if (st) st->c->invalidated = 1;
    pthread_mutex_unlock(&mu);
    return st ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

cudaError_t sim_capture_check_legacy(struct sim_device *dev)
{
    if (atomic_load(&ncaptures) == 0) return cudaSuccess;
    int implicit = 0;
    pthread_mutex_lock(&mu);
    for (struct sim_capture *c = captures; c; c = c->next)
        for (size_t i = 0; i < c->nmembers; i++) {
            struct sim_stream *m = c->members[i];
            if (m->dev == dev && !(m->flags & cudaStreamNonBlocking)) {
                c->invalidated = 1;
                implicit = 1;
            }
        }
    pthread_mutex_unlock(&mu);
    return implicit ? cudaErrorStreamCaptureImplicit : cudaSuccess;
}

cudaError_t sim_capture_check_unsafe(void)
{
    if (atomic_load(&ncaptures) == 0 || thread_mode == cudaStreamCaptureModeRelaxed)
        return cudaSuccess;
    int prohibited = 0;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&mu);
    for (struct sim_capture *c = captures; c; c = c->next) {
        /* The thread's own capture unless relaxed; under the global mode
         * also another thread's global capture. */
        int mine = pthread_equal(c->thread, self);
        if ((mine && c->mode != cudaStreamCaptureModeRelaxed) ||
            (!mine && thread_mode == cudaStreamCaptureModeGlobal &&
             c->mode == cudaStreamCaptureModeGlobal)) {
            c->invalidated = 1;
            prohibited = 1;
        }
    }
    pthread_mutex_unlock(&mu);
    return prohibited ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

struct sim_capture_mark *sim_capture_mark_new(struct sim_stream *s)
{
    struct sim_capture_mark *m = NULL;
    pthread_mutex_lock(&mu);
    struct sim_capture_state *st = state_of(s);
    if (st) {
        m = malloc(sizeof *m);
        cudaGraphNode_t *nodes = malloc((st->ndeps ? st->ndeps : 1) * sizeof *nodes);
        if (m && nodes) {
            memcpy(nodes, st->deps, st->ndeps * sizeof *nodes);
            *m = (struct sim_capture_mark){st->c->id, nodes, st->ndeps};
        } else {
            free(m);
            free(nodes);
            m = NULL;
            st->c->invalidated = 1;
        }
    }
    pthread_mutex_unlock(&mu);
    return m;
}

void sim_capture_mark_free(struct sim_capture_mark *m)
{
    if (!m) return;
    free(m->nodes);
    free(m);
}

cudaError_t sim_capture_join(struct sim_stream *s, const struct sim_capture_mark *m)
{
    cudaError_t err = cudaSuccess;
    pthread_mutex_lock(&mu);
    struct sim_capture *c = captures;
    while (c && c->id != m->id)
        c = c->next;
    struct sim_capture_state *st = state_of(s);
    if (!c) {
        err = cudaErrorCapturedEvent; /* its capture has ended */
    } else if (st && st->c != c) {
        st->c->invalidated = 1;
        c->invalidated = 1;
        err = cudaErrorStreamCaptureMerge;
    } else if (s->kind == SIM_STREAM_LEGACY) {
        c->invalidated = 1;
        err = cudaErrorStreamCaptureImplicit;
    } else if (!st) {
        err = attach(c, s, m->nodes, m->n);
        if (err) c->invalidated = 1;
    } else {
        /* The union of both dependency sets. */
        cudaGraphNode_t *all = malloc((st->ndeps + m->n + 1) * sizeof *all);
        size_t n = st->ndeps;
        if (all) {
            memcpy(all, st->deps, n * sizeof *all);
            for (size_t i = 0; i < m->n; i++) {
                size_t j = 0;
                while (j < n && all[j] != m->nodes[i])
                    j++;
                if (j == n) all[n++] = m->nodes[i];
            }
        }
        if (!all || set_deps(st, all, n)) {
            c->invalidated = 1;
            err = cudaErrorMemoryAllocation;
        }
        free(all);
    }
    pthread_mutex_unlock(&mu);
    return err;
}

/* ---- queries ---- */

cudaError_t sim_capture_info(cudaStream_t h, int pt, enum cudaStreamCaptureStatus *status,
                             unsigned long long *id, cudaGraph_t *graph,
                             const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                             size_t *ndeps)
{
    if (!status) return cudaErrorInvalidValue;
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (err) return err;
    pthread_mutex_lock(&mu);
    struct sim_capture_state *st = state_of(s);
    *status = !st                  ? cudaStreamCaptureStatusNone
              : st->c->invalidated ? cudaStreamCaptureStatusInvalidated
                                   : cudaStreamCaptureStatusActive;
    /* The arrays stay valid until the stream's capture state next changes,
     * as the runtime documents. */
    if (id) *id = st ? st->c->id : 0;
    if (graph) *graph = st ? st->c->graph : NULL;
    if (deps) *deps = st ? st->deps : NULL;
    if (edges) *edges = st ? st->edges : NULL;
    if (ndeps) *ndeps = st ? st->ndeps : 0;
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

/* The simulated driver's cuStreamIsCapturing (sim/cuda/stream.c). */
SIM_SEAM cudaError_t sim_drv_stream_is_capturing(cudaStream_t h, int pt,
                                                 enum cudaStreamCaptureStatus *status)
{
    return SIM_QUIETLY(sim_capture_info(h, pt, status, NULL, NULL, NULL, NULL, NULL));
}

cudaError_t sim_capture_update_deps(cudaStream_t h, int pt, cudaGraphNode_t *deps,
                                    const cudaGraphEdgeData *edges, size_t n, unsigned flags)
{
    if ((n && !deps) ||
        (flags != cudaStreamAddCaptureDependencies && flags != cudaStreamSetCaptureDependencies))
        return cudaErrorInvalidValue;
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(h, pt, &s);
    if (err) return err;
    static const cudaGraphEdgeData none;
    for (size_t i = 0; edges && i < n; i++)
        if (memcmp(&edges[i], &none, sizeof none)) return cudaErrorNotSupported;
    pthread_mutex_lock(&mu);
    struct sim_capture_state *st = state_of(s);
    if (!st) {
        err = cudaErrorIllegalState;
    } else {
        for (size_t i = 0; i < n && !err; i++)
            if (!deps[i] || sim_graph_of(deps[i]) != st->c->graph) err = cudaErrorInvalidValue;
        size_t keep = flags == cudaStreamAddCaptureDependencies ? st->ndeps : 0;
        cudaGraphNode_t *all = err ? NULL : malloc((keep + n + 1) * sizeof *all);
        if (!err && !all) err = cudaErrorMemoryAllocation;
        if (!err) {
            memcpy(all, st->deps, keep * sizeof *all);
            size_t total = keep;
            for (size_t i = 0; i < n; i++) {
                size_t j = 0;
                while (j < total && all[j] != deps[i])
                    j++;
                if (j == total) all[total++] = deps[i];
            }
            if (set_deps(st, all, total)) err = cudaErrorMemoryAllocation;
        }
        free(all);
    }
    pthread_mutex_unlock(&mu);
    return err;
}

enum cudaStreamCaptureMode sim_capture_exchange_mode(enum cudaStreamCaptureMode mode)
{
    enum cudaStreamCaptureMode old = thread_mode;
    thread_mode = mode;
    return old;
}
