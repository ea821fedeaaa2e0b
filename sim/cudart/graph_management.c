/* graph_management.c - the runtime's graph entry points: cudaGraphCreate,
 * cudaGraphDestroy, cudaGraphAddNode (empty and host nodes), the node
 * queries, conditional handles, user objects a graph retains, the DOT
 * description, cudaGraphInstantiate[WithFlags], cudaGraphExecDestroy and
 * cudaGraphLaunch, onto the graphs of sim/core/graph.c. Conditional nodes
 * are not simulated (no device code sets a condition); other kinds of node
 * come from stream capture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

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
    cudaError_t err = sim_graph_destroy(g);
    return err ? sim_record_error(err) : cudaSuccess;
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
    struct sim_graph_held_object *objects =
        realloc(g->objects, (g->nobjects + 1) * sizeof *objects);
    if (objects) {
        g->objects = objects;
        g->objects[g->nobjects++] = (struct sim_graph_held_object){obj, count};
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

SIM_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *out, cudaGraph_t g,
                                         unsigned long long flags)
{
    return sim_graph_instantiate(out, g, flags);
}

SIM_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *out, cudaGraph_t g,
                                                  unsigned long long flags)
{
    return sim_graph_instantiate(out, g, flags);
}

SIM_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e)
{
    cudaError_t err = sim_graph_exec_destroy(e);
    return err ? sim_record_error(err) : cudaSuccess;
}

SIM_API cudaError_t cudaGraphLaunch(cudaGraphExec_t h, cudaStream_t s)
{
    return sim_graph_launch(h, s, 0);
}

SIM_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t h, cudaStream_t s)
{
    return sim_graph_launch(h, s, 1);
}
