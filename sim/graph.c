/* graph.c - CUDA graphs: nodes and their dependencies, executable graphs
 * and their launches, the DOT description, user objects and conditional
 * handles a graph holds.
 *
 * A node is replayable work (struct sim_work) with the nodes it depends on.
 * Nodes are only ever added, each after nodes already in the graph, so the
 * order of addition is a topological order. Instantiation takes that order
 * as it stands; a launch submits the nodes in it, one after the other, on
 * the launch stream: every dependency is met, with less concurrency than a
 * GPU might find (a valid schedule of the same graph). Launches of one
 * executable graph are ordered after each other, as the runtime documents.
 *
 * The nodes (and what their work holds, such as graph memory) live as long
 * as the graph or an executable graph made from it, or a launch of one,
 * still needs them: the graph's body is reference counted. Graph and
 * executable handles are checked, so a stale one is cudaErrorInvalidValue.
 *
 * Conditional nodes are not simulated (no device code sets a condition):
 * cudaGraphAddNode supports empty and host nodes; other kinds of node come
 * from stream capture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct CUgraphNode_st {
    struct CUgraph_st *graph;
    size_t index;
    struct sim_work w;
    cudaGraphNode_t *deps;
    size_t ndeps;
};

struct held_object {
    cudaUserObject_t obj;
    unsigned count;
};

struct CUgraph_st {
    pthread_mutex_t mu;
    int refs; /* the handle's, one per executable graph (under mu) */
    unsigned long long id;
    cudaGraphNode_t *nodes;
    size_t n, cap;
    struct held_object *objects;
    size_t nobjects;
    unsigned nconditionals;
};

struct CUgraphExec_st {
    pthread_mutex_t mu;
    int refs; /* the handle's, one per launch not yet complete (under mu) */
    struct CUgraph_st *graph;
    cudaGraphNode_t *order; /* the nodes at instantiation, in order */
    size_t n;
    struct sim_dep last; /* the end of the latest launch (under mu) */
};

static struct sim_handle_set *live_graphs, *live_execs;
static pthread_once_t graphs_once = PTHREAD_ONCE_INIT;
static unsigned long long next_graph_id = 1;

static void graphs_init(void)
{
    live_graphs = sim_handles_new();
    live_execs = sim_handles_new();
}

static void graph_unref(struct CUgraph_st *g)
{
    pthread_mutex_lock(&g->mu);
    int last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (!last) return;
    for (size_t i = 0; i < g->n; i++) {
        cudaGraphNode_t node = g->nodes[i];
        if (node->w.drop) node->w.drop(node->w.arg);
        free(node->deps);
        free(node);
    }
    for (size_t i = 0; i < g->nobjects; i++)
        cudaUserObjectRelease(g->objects[i].obj, g->objects[i].count);
    free(g->objects);
    free(g->nodes);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

cudaGraph_t sim_graph_new(void)
{
    pthread_once(&graphs_once, graphs_init);
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    pthread_mutex_init(&g->mu, NULL);
    g->refs = 1;
    g->id = __atomic_fetch_add(&next_graph_id, 1, __ATOMIC_RELAXED);
    sim_handles_add(live_graphs, g, g);
    return g;
}

int sim_graph_valid(cudaGraph_t g)
{
    pthread_once(&graphs_once, graphs_init);
    return g && sim_handles_get(live_graphs, g) != NULL;
}

cudaGraph_t sim_graph_of(cudaGraphNode_t node)
{
    return node->graph;
}

int sim_graph_reaches(cudaGraphNode_t from, cudaGraphNode_t to)
{
    if (from == to) return 1;
    /* Dependencies come earlier in the graph: nothing later can lead back. */
    if (from->graph != to->graph || from->index > to->index) return 0;
    for (size_t i = 0; i < to->ndeps; i++)
        if (sim_graph_reaches(from, to->deps[i])) return 1;
    return 0;
}

cudaError_t sim_graph_add(cudaGraph_t g, const struct sim_work *w, const cudaGraphNode_t *deps,
                          size_t n, cudaGraphNode_t *out)
{
    struct CUgraphNode_st *node = calloc(1, sizeof *node);
    cudaGraphNode_t *copy = malloc((n ? n : 1) * sizeof *copy);
    if (!node || !copy) {
        free(node);
        free(copy);
        return cudaErrorMemoryAllocation;
    }
    if (n) memcpy(copy, deps, n * sizeof *copy);
    *node = (struct CUgraphNode_st){.graph = g, .w = *w, .deps = copy, .ndeps = n};
    pthread_mutex_lock(&g->mu);
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        cudaGraphNode_t *nodes = realloc(g->nodes, cap * sizeof *nodes);
        if (!nodes) {
            pthread_mutex_unlock(&g->mu);
            free(copy);
            free(node);
            return cudaErrorMemoryAllocation;
        }
        g->nodes = nodes;
        g->cap = cap;
    }
    node->index = g->n;
    g->nodes[g->n++] = node;
    pthread_mutex_unlock(&g->mu);
    *out = node;
    return cudaSuccess;
}

SIM_API cudaError_t cudaGraphCreate(cudaGraph_t *out, unsigned int flags)
{
    if (!out || flags) return sim_record_error(cudaErrorInvalidValue);
    cudaGraph_t g = sim_graph_new();
    if (!g) return sim_record_error(cudaErrorMemoryAllocation);
    *out = g;
    return cudaSuccess;
}

SIM_API cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    pthread_once(&graphs_once, graphs_init);
    if (!g || !sim_handles_remove(live_graphs, g)) return sim_record_error(cudaErrorInvalidValue);
    graph_unref(g);
    return cudaSuccess;
}

struct host_call {
    cudaHostFn_t fn;
    void *user;
};

static void run_host_call(void *p)
{
    struct host_call *h = p;
    h->fn(h->user);
}

SIM_API cudaError_t cudaGraphAddNode(cudaGraphNode_t *out, cudaGraph_t g,
                                     const cudaGraphNode_t *deps, const cudaGraphEdgeData *edges,
                                     size_t n, struct cudaGraphNodeParams *params)
{
    if (!out || !params || (n && !deps) || !sim_graph_valid(g))
        return sim_record_error(cudaErrorInvalidValue);
    static const cudaGraphEdgeData none;
    for (size_t i = 0; i < n; i++) {
        if (!deps[i] || deps[i]->graph != g) return sim_record_error(cudaErrorInvalidValue);
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i]) return sim_record_error(cudaErrorInvalidValue);
        if (edges && memcmp(&edges[i], &none, sizeof none))
            return sim_record_error(cudaErrorNotSupported);
    }
    struct sim_work w = {.type = params->type};
    switch (params->type) {
    case cudaGraphNodeTypeEmpty:
        break;
    case cudaGraphNodeTypeHost: {
        if (!params->host.fn) return sim_record_error(cudaErrorInvalidValue);
        struct host_call *h = malloc(sizeof *h);
        if (!h) return sim_record_error(cudaErrorMemoryAllocation);
        *h = (struct host_call){params->host.fn, params->host.userData};
        w = (struct sim_work){cudaGraphNodeTypeHost, run_host_call, free, h, 1};
        break;
    }
    default:
        return sim_record_error(cudaErrorNotSupported);
    }
    cudaError_t err = sim_graph_add(g, &w, deps, n, out);
    if (err && w.drop) w.drop(w.arg);
    return err ? sim_record_error(err) : cudaSuccess;
}

/* Fills the runtime's list queries from src[0..n): with dst NULL only the
 * count; else up to *count entries, the rest NULLed, and *count becomes the
 * number returned. Edges, when asked for, are all default. */
static void list_out(cudaGraphNode_t *dst, cudaGraphEdgeData *edges, const cudaGraphNode_t *src,
                     size_t n, size_t *count)
{
    if (!dst) {
        *count = n;
        return;
    }
    size_t k = n < *count ? n : *count;
    for (size_t i = 0; i < *count; i++) {
        dst[i] = i < k ? src[i] : NULL;
        if (edges) memset(&edges[i], 0, sizeof edges[i]);
    }
    *count = k;
}

SIM_API cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *count)
{
    if (!count || !sim_graph_valid(g)) return sim_record_error(cudaErrorInvalidValue);
    pthread_mutex_lock(&g->mu);
    list_out(nodes, NULL, g->nodes, g->n, count);
    pthread_mutex_unlock(&g->mu);
    return cudaSuccess;
}

SIM_API cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t *deps,
                                                 cudaGraphEdgeData *edges, size_t *count)
{
    if (!node || !count || (edges && !deps)) return sim_record_error(cudaErrorInvalidValue);
    list_out(deps, edges, node->deps, node->ndeps, count);
    return cudaSuccess;
}

SIM_API cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *type)
{
    if (!node || !type) return sim_record_error(cudaErrorInvalidValue);
    *type = node->w.type;
    return cudaSuccess;
}

SIM_API cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle *out, cudaGraph_t g,
                                                     unsigned int default_value, unsigned int flags)
{
    if (!out || (flags & ~(unsigned)cudaGraphCondAssignDefault) || !sim_graph_valid(g))
        return sim_record_error(cudaErrorInvalidValue);
    (void)default_value; /* only a conditional node would read it */
    pthread_mutex_lock(&g->mu);
    unsigned k = g->nconditionals++;
    pthread_mutex_unlock(&g->mu);
    /* Unique per graph and across graphs. */
    *out = (cudaGraphConditionalHandle)(g->id << 32 | k);
    return cudaSuccess;
}

SIM_API cudaError_t cudaGraphRetainUserObject(cudaGraph_t g, cudaUserObject_t obj,
                                              unsigned int count, unsigned int flags)
{
    if (!count || (flags & ~(unsigned)cudaGraphUserObjectMove) || !sim_graph_valid(g))
        return sim_record_error(cudaErrorInvalidValue);
    /* Moving takes over the caller's references; the object must still be
     * live either way, which a retain proves. */
    cudaError_t err = cudaUserObjectRetain(obj, flags & cudaGraphUserObjectMove ? 1 : count);
    if (err) return err;
    if (flags & cudaGraphUserObjectMove) {
        err = cudaUserObjectRelease(obj, 1);
        if (err) return err;
    }
    pthread_mutex_lock(&g->mu);
    struct held_object *objects = realloc(g->objects, (g->nobjects + 1) * sizeof *objects);
    if (objects) {
        g->objects = objects;
        g->objects[g->nobjects++] = (struct held_object){obj, count};
    }
    pthread_mutex_unlock(&g->mu);
    if (!objects) {
        if (!(flags & cudaGraphUserObjectMove)) cudaUserObjectRelease(obj, count);
        return sim_record_error(cudaErrorMemoryAllocation);
    }
    return cudaSuccess;
}

static const char *type_name(enum cudaGraphNodeType t)
{
    switch (t) {
    case cudaGraphNodeTypeKernel:
        return "KERNEL";
    case cudaGraphNodeTypeMemcpy:
        return "MEMCPY";
    case cudaGraphNodeTypeMemset:
        return "MEMSET";
    case cudaGraphNodeTypeHost:
        return "HOST";
    case cudaGraphNodeTypeEmpty:
        return "EMPTY";
    case cudaGraphNodeTypeWaitEvent:
        return "WAIT_EVENT";
    case cudaGraphNodeTypeEventRecord:
        return "EVENT_RECORD";
    case cudaGraphNodeTypeMemAlloc:
        return "MEM_ALLOC";
    case cudaGraphNodeTypeMemFree:
        return "MEM_FREE";
    default:
        return "OTHER";
    }
}

SIM_API cudaError_t cudaGraphDebugDotPrint(cudaGraph_t g, const char *path, unsigned int flags)
{
    (void)flags; /* the verbosity: the sim has one level of detail */
    if (!path || !sim_graph_valid(g)) return sim_record_error(cudaErrorInvalidValue);
    FILE *f = fopen(path, "w");
    if (!f) return sim_record_error(cudaErrorOperatingSystem);
    pthread_mutex_lock(&g->mu);
    int ok = fprintf(f,
                     "digraph dot {\nsubgraph cluster_%llu {\nlabel=\"graph_%llu\" "
                     "graph[style=\"dashed\"];\n",
                     g->id, g->id) > 0;
    for (size_t i = 0; ok && i < g->n; i++)
        ok = fprintf(f,
                     "\"graph_%llu_node_%zu\"[style=\"solid\" shape=\"rectangle\" "
                     "label=\"%zu\\n%s\"];\n",
                     g->id, i, i, type_name(g->nodes[i]->w.type)) > 0;
    for (size_t i = 0; ok && i < g->n; i++)
        for (size_t d = 0; ok && d < g->nodes[i]->ndeps; d++)
            ok = fprintf(f, "\"graph_%llu_node_%zu\" -> \"graph_%llu_node_%zu\";\n", g->id,
                         g->nodes[i]->deps[d]->index, g->id, i) > 0;
    pthread_mutex_unlock(&g->mu);
    if (ok) ok = fprintf(f, "}\n}\n") > 0;
    if (fclose(f) != 0) ok = 0;
    return ok ? cudaSuccess : sim_record_error(cudaErrorOperatingSystem);
}

/* ---- executable graphs ---- */

static void exec_ref(void *p)
{
    struct CUgraphExec_st *e = p;
    pthread_mutex_lock(&e->mu);
    e->refs++;
    pthread_mutex_unlock(&e->mu);
}

static void exec_unref(void *p)
{
    struct CUgraphExec_st *e = p;
    pthread_mutex_lock(&e->mu);
    int last = --e->refs == 0;
    pthread_mutex_unlock(&e->mu);
    if (!last) return;
    graph_unref(e->graph);
    free(e->order);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

static cudaError_t instantiate(cudaGraphExec_t *out, cudaGraph_t g, unsigned long long flags)
{
    unsigned long long known =
        cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUpload |
        cudaGraphInstantiateFlagDeviceLaunch | cudaGraphInstantiateFlagUseNodePriority;
    if (!out || (flags & ~known) || !sim_graph_valid(g))
        return sim_record_error(cudaErrorInvalidValue);
    struct CUgraphExec_st *e = calloc(1, sizeof *e);
    if (!e) return sim_record_error(cudaErrorMemoryAllocation);
    pthread_mutex_init(&e->mu, NULL);
    e->refs = 1;
    e->graph = g;
    pthread_mutex_lock(&g->mu);
    e->order = malloc((g->n ? g->n : 1) * sizeof *e->order);
    if (e->order) {
        g->refs++;
        e->n = g->n;
        if (g->n) memcpy(e->order, g->nodes, g->n * sizeof *e->order);
    }
    pthread_mutex_unlock(&g->mu);
    if (!e->order) {
        pthread_mutex_destroy(&e->mu);
        free(e);
        return sim_record_error(cudaErrorMemoryAllocation);
    }
    sim_handles_add(live_execs, e, e);
    *out = e;
    return cudaSuccess;
}

SIM_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *out, cudaGraph_t g,
                                         unsigned long long flags)
{
    return instantiate(out, g, flags);
}

SIM_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *out, cudaGraph_t g,
                                                  unsigned long long flags)
{
    return instantiate(out, g, flags);
}

SIM_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e)
{
    pthread_once(&graphs_once, graphs_init);
    if (!e || !sim_handles_remove(live_execs, e)) return sim_record_error(cudaErrorInvalidValue);
    exec_unref(e); /* launches still running hold their own references */
    return cudaSuccess;
}

static cudaError_t launch(cudaGraphExec_t h, cudaStream_t sh, int pt)
{
    pthread_once(&graphs_once, graphs_init);
    struct CUgraphExec_st *e = h ? sim_handles_hold(live_execs, h, exec_ref) : NULL;
    if (!e) return sim_record_error(cudaErrorInvalidValue);
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(sh, pt, &s);
    /* A launch into a capture would be a child graph node: not simulated. */
    if (!err && sim_capture_active(s)) err = sim_capture_refuse(s);
    if (!err && s->kind == SIM_STREAM_LEGACY) err = sim_capture_check_legacy(s->dev);
    if (err) {
        exec_unref(e);
        return sim_record_error(err);
    }
    /* Graph memory is charged to the device before the launch that first
     * needs it (graphmem.c). */
    for (size_t i = 0; i < e->n && !err; i++)
        if (e->order[i]->w.type == cudaGraphNodeTypeMemAlloc && e->order[i]->w.arg)
            err = sim_graph_alloc_map(e->order[i]->w.arg);
    if (err) {
        exec_unref(e);
        return sim_record_error(err);
    }
    /* The reference lookup took is the launch's: its last op drops it. */
    pthread_mutex_lock(&e->mu);
    struct sim_dep after = e->last;
    const struct sim_dep *wait = after.stream ? &after : NULL;
    for (size_t i = 0; i < e->n && !err; i++) {
        cudaGraphNode_t node = e->order[i];
        if (!node->w.run) continue; /* empty, memory nodes: nothing to do at run time */
        if (!sim_stream_submit_replay(s, node->w.run, node->w.arg, node->w.hostfn, wait))
            err = cudaErrorInvalidResourceHandle;
        wait = NULL;
    }
    uint64_t end = err ? 0 : sim_stream_submit_replay(s, exec_unref, e, 0, wait);
    if (end) e->last = (struct sim_dep){s, end};
    pthread_mutex_unlock(&e->mu);
    if (!end) {
        exec_unref(e);
        return sim_record_error(cudaErrorInvalidResourceHandle);
    }
    return cudaSuccess;
}

SIM_API cudaError_t cudaGraphLaunch(cudaGraphExec_t h, cudaStream_t s)
{
    return launch(h, s, 0);
}

SIM_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t h, cudaStream_t s)
{
    return launch(h, s, 1);
}
