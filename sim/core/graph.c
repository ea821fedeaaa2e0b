/* graph.c - CUDA graphs: nodes and their dependencies, executable graphs
 * and their launches (the runtime's entry points are in
 * sim/cudart/graph_management.c).
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
 * executable handles are checked, so a stale one is cudaErrorInvalidValue. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

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
        sim_user_object_release(g->objects[i].obj, g->objects[i].count);
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

cudaError_t sim_graph_destroy(cudaGraph_t g)
{
    pthread_once(&graphs_once, graphs_init);
    if (!g || !sim_handles_remove(live_graphs, g)) return cudaErrorInvalidValue;
    graph_unref(g);
    return cudaSuccess;
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

cudaError_t sim_graph_instantiate(cudaGraphExec_t *out, cudaGraph_t g, unsigned long long flags)
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

cudaError_t sim_graph_exec_destroy(cudaGraphExec_t e)
{
    pthread_once(&graphs_once, graphs_init);
    if (!e || !sim_handles_remove(live_execs, e)) return cudaErrorInvalidValue;
    exec_unref(e); /* launches still running hold their own references */
    return cudaSuccess;
}

cudaError_t sim_graph_launch(cudaGraphExec_t h, cudaStream_t sh, int pt)
{
    pthread_once(&graphs_once, graphs_init);
    struct CUgraphExec_st *e = h ? sim_handles_hold(live_execs, h, exec_ref) : NULL;
    if (!e) return sim_record_error(cudaErrorInvalidValue);
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(sh, pt, &s);
    /* A sim_graph_launch into a capture would be a child graph node: not simulated. */
    if (!err && sim_capture_active(s)) err = sim_capture_refuse(s);
    if (!err && s->kind == SIM_STREAM_LEGACY) err = sim_capture_check_legacy(s->dev);
    if (err) {
        exec_unref(e);
        return sim_record_error(err);
    }
    /* Graph memory is charged to the device before the sim_graph_launch that first
     * needs it (sim_graph_alloc_map, mempool.c). */
    for (size_t i = 0; i < e->n && !err; i++)
        if (e->order[i]->w.type == cudaGraphNodeTypeMemAlloc && e->order[i]->w.arg)
            err = sim_graph_alloc_map(e->order[i]->w.arg);
    if (err) {
        exec_unref(e);
        return sim_record_error(err);
    }
    /* The reference lookup took is the sim_graph_launch's: its last op drops it. */
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
