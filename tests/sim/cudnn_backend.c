/* cudnn_backend.c - the simulated cuDNN's backend (graph) API, driven the
 * way cudnn_frontend drives it: tensors, a pointwise operation, an
 * operation graph, heuristics, the engine config they return, an execution
 * plan, its workspace size and a variant pack; the plan then runs as device
 * work on the handle's stream, in order between copies. Descriptors are
 * attribute stores: a get answers what was set; a finalized descriptor
 * takes no more sets (NOT_INITIALIZED), an unfinalized one answers no gets;
 * finalize checks the attributes cuDNN requires (BAD_PARAM); execute
 * checks that every non-virtual tensor has a pointer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <cudnn.h>

#include "require_device.h"

#define N 1024

static void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                cudnnBackendAttributeType_t type, int64_t count, const void *v)
{
    assert_int_equal(cudnnBackendSetAttribute(d, name, type, count, v), CUDNN_STATUS_SUCCESS);
}

static cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t type)
{
    cudnnBackendDescriptor_t d = NULL;
    assert_int_equal(cudnnBackendCreateDescriptor(type, &d), CUDNN_STATUS_SUCCESS);
    return d;
}

static cudnnBackendDescriptor_t tensor(int64_t uid, bool is_virtual)
{
    cudnnBackendDescriptor_t t = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    int64_t dims[3] = {1, 1, N}, strides[3] = {N, N, 1}, align = 16;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 3, dims);
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 3, strides);
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    assert_int_equal(cudnnBackendFinalize(t), CUDNN_STATUS_SUCCESS);
    return t;
}

/* y = a + b, as one pointwise operation: its graph and the plan heuristics
 * pick for it. */
struct graph {
    cudnnBackendDescriptor_t a, b, y, pw, op, graph, heur, cfg, plan;
};

static void graph_build(struct graph *g, cudnnHandle_t h)
{
    g->a = tensor(1, false);
    g->b = tensor(2, false);
    g->y = tensor(3, false);
    g->pw = create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnPointwiseMode_t mode = CUDNN_POINTWISE_ADD;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    set(g->pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    set(g->pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    assert_int_equal(cudnnBackendFinalize(g->pw), CUDNN_STATUS_SUCCESS);
    g->op = create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set(g->op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        &g->pw);
    set(g->op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->a);
    set(g->op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->b);
    set(g->op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->y);
    assert_int_equal(cudnnBackendFinalize(g->op), CUDNN_STATUS_SUCCESS);

    g->graph = create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(g->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    set(g->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g->op);
    assert_int_equal(cudnnBackendFinalize(g->graph), CUDNN_STATUS_SUCCESS);
    int64_t engines = 0, count = 0;
    assert_int_equal(cudnnBackendGetAttribute(g->graph,
                                              CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                                              CUDNN_TYPE_INT64, 1, &count, &engines),
                     CUDNN_STATUS_SUCCESS);
    assert_true(engines >= 1);

    g->heur = create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendHeurMode_t heur_mode = CUDNN_HEUR_MODE_A;
    set(g->heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        &g->graph);
    set(g->heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &heur_mode);
    assert_int_equal(cudnnBackendFinalize(g->heur), CUDNN_STATUS_SUCCESS);
    /* the count first (no array), then the results into descriptors the
     * caller created */
    int64_t results = 0;
    assert_int_equal(cudnnBackendGetAttribute(g->heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &results, NULL),
                     CUDNN_STATUS_SUCCESS);
    assert_true(results >= 1);
    g->cfg = create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    assert_int_equal(cudnnBackendGetAttribute(g->heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &results, &g->cfg),
                     CUDNN_STATUS_SUCCESS);

    /* the config's engine: an index below the graph's engine count, no notes */
    cudnnBackendDescriptor_t engine = create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    assert_int_equal(cudnnBackendGetAttribute(g->cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine),
                     CUDNN_STATUS_SUCCESS);
    int64_t index = -1;
    assert_int_equal(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                              CUDNN_TYPE_INT64, 1, &count, &index),
                     CUDNN_STATUS_SUCCESS);
    assert_true(index >= 0 && index < engines);
    count = -1;
    assert_int_equal(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                              CUDNN_TYPE_NUMERICAL_NOTE,
                                              CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, NULL),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(count, 0);
    assert_int_equal(cudnnBackendDestroyDescriptor(engine), CUDNN_STATUS_SUCCESS);

    g->plan = create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    set(g->plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    set(g->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
        &g->cfg);
    assert_int_equal(cudnnBackendFinalize(g->plan), CUDNN_STATUS_SUCCESS);
}

static void graph_free(struct graph *g)
{
    cudnnBackendDescriptor_t all[] = {g->a,     g->b,    g->y,   g->pw,  g->op,
                                      g->graph, g->heur, g->cfg, g->plan};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        assert_int_equal(cudnnBackendDestroyDescriptor(all[i]), CUDNN_STATUS_SUCCESS);
}

static cudnnBackendDescriptor_t pack(int n, const int64_t *uids, void **ptrs, void *workspace)
{
    cudnnBackendDescriptor_t p = create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    set(p, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    set(p, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    set(p, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    assert_int_equal(cudnnBackendFinalize(p), CUDNN_STATUS_SUCCESS);
    return p;
}

static void test_plan_executes_in_stream_order(void **state)
{
    (void)state;
    cudnnHandle_t h;
    cudaStream_t s;
    cudaEvent_t after_plan, after_copy;
    float *host, *a, *b, *y;
    struct fs_gate gate = FS_GATE_INIT;
    struct graph g;
    assert_int_equal(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
    graph_build(&g, h);

    int64_t ws = -1, count = 0;
    assert_int_equal(cudnnBackendGetAttribute(g.plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                              CUDNN_TYPE_INT64, 1, &count, &ws),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(count, 1);
    assert_true(ws >= 0);
    /* the JSON representation: its length first, then the text */
    assert_int_equal(cudnnBackendGetAttribute(g.plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION,
                                              CUDNN_TYPE_CHAR, 0, &count, NULL),
                     CUDNN_STATUS_SUCCESS);
    assert_true(count > 2);
    char json[256] = "";
    assert_true(count <= (int64_t)sizeof(json));
    assert_int_equal(cudnnBackendGetAttribute(g.plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION,
                                              CUDNN_TYPE_CHAR, count, &count, json),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(json[0], '{');
    assert_int_equal((int64_t)strlen(json), count - 1);

    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaEventCreate(&after_plan), cudaSuccess);
    assert_int_equal(cudaEventCreate(&after_copy), cudaSuccess);
    assert_int_equal(cudaMallocHost((void **)&host, N * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&a, N * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&b, N * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&y, N * sizeof(float)), cudaSuccess);
    for (int i = 0; i < N; i++)
        host[i] = (float)i;
    int64_t uids[3] = {1, 2, 3};
    void *ptrs[3] = {a, b, y};
    void *workspace = NULL;
    if (ws > 0) assert_int_equal(cudaMalloc(&workspace, (size_t)ws), cudaSuccess);
    cudnnBackendDescriptor_t vp = pack(3, uids, ptrs, workspace);

    assert_int_equal(cudnnSetStream(h, s), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(a, host, N * sizeof(float), cudaMemcpyHostToDevice, s),
                     cudaSuccess);
    assert_int_equal(cudnnBackendExecute(h, g.plan, vp), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudaEventRecord(after_plan, s), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(b, a, N * sizeof(float), cudaMemcpyDeviceToDevice, s),
                     cudaSuccess);
    assert_int_equal(cudaEventRecord(after_copy, s), cudaSuccess);
    assert_int_equal(fs_event_poll(after_plan, 100), cudaErrorNotReady);
    fs_gate_open(&gate);
    assert_int_equal(cudaEventSynchronize(after_copy), cudaSuccess);
    assert_int_equal(cudaEventQuery(after_plan), cudaSuccess);
    assert_false(gate.timed_out);
    memset(host, 0, N * sizeof(float));
    assert_int_equal(cudaMemcpy(host, b, N * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < N; i++)
        assert_true(host[i] == (float)i);

    /* a variant pack without y's pointer does not bind the graph */
    cudnnBackendDescriptor_t short_vp = pack(2, uids, ptrs, workspace);
    assert_int_equal(cudnnBackendExecute(h, g.plan, short_vp), CUDNN_STATUS_BAD_PARAM);
    /* the plan and the pack swapped are not a plan and a pack */
    assert_int_equal(cudnnBackendExecute(h, vp, g.plan), CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE);
    assert_int_equal(cudnnBackendExecute(NULL, g.plan, vp), CUDNN_STATUS_BAD_PARAM);

    assert_int_equal(cudnnBackendDestroyDescriptor(vp), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnBackendDestroyDescriptor(short_vp), CUDNN_STATUS_SUCCESS);
    graph_free(&g);
    assert_int_equal(cudnnDestroy(h), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudaFree(a), cudaSuccess);
    assert_int_equal(cudaFree(b), cudaSuccess);
    assert_int_equal(cudaFree(y), cudaSuccess);
    if (workspace) assert_int_equal(cudaFree(workspace), cudaSuccess);
    assert_int_equal(cudaFreeHost(host), cudaSuccess);
    assert_int_equal(cudaEventDestroy(after_plan), cudaSuccess);
    assert_int_equal(cudaEventDestroy(after_copy), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

static void test_attribute_store(void **state)
{
    (void)state;
    cudnnBackendDescriptor_t t = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t dims[4] = {2, 4, 8, 16}, strides[4] = {512, 128, 16, 1}, uid = 7, align = 16;
    cudnnDataType_t type = CUDNN_DATA_BFLOAT16;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    /* gets wait for finalize */
    int64_t got[4] = {0}, count = 0;
    assert_int_equal(
        cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, &count, got),
        CUDNN_STATUS_NOT_INITIALIZED);
    /* finalize needs the unique id and the byte alignment */
    assert_int_equal(cudnnBackendFinalize(t), CUDNN_STATUS_BAD_PARAM);
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    /* an attribute takes only its own type */
    assert_int_equal(
        cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT32, 1, &uid),
        CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(
        cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, NULL),
        CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnBackendFinalize(t), CUDNN_STATUS_SUCCESS);
    /* finalized: no more sets, no second finalize */
    assert_int_equal(
        cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid),
        CUDNN_STATUS_NOT_INITIALIZED);
    assert_int_equal(cudnnBackendFinalize(t), CUDNN_STATUS_NOT_INITIALIZED);
    /* a get answers what was set: all of it, or the first elements asked for */
    assert_int_equal(
        cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, &count, got),
        CUDNN_STATUS_SUCCESS);
    assert_int_equal(count, 4);
    assert_memory_equal(got, dims, sizeof(dims));
    int64_t two[4] = {0};
    assert_int_equal(
        cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 2, &count, two),
        CUDNN_STATUS_SUCCESS);
    assert_int_equal(count, 4);
    assert_int_equal(two[1], 128);
    assert_int_equal(two[2], 0);
    cudnnDataType_t got_type;
    assert_int_equal(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE,
                                              1, &count, &got_type),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(got_type, CUDNN_DATA_BFLOAT16);
    assert_int_equal(
        cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_INT64, 1, &count, got),
        CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnBackendGetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, -1,
                                              &count, got),
                     CUDNN_STATUS_BAD_PARAM);

    /* a descriptor attribute takes finalized descriptors only, and keeps its
     * own copy: the original may go */
    cudnnBackendDescriptor_t unfinal = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    cudnnBackendDescriptor_t op = create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    assert_int_equal(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &unfinal),
                     CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    assert_int_equal(cudnnBackendDestroyDescriptor(t), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnBackendFinalize(op), CUDNN_STATUS_SUCCESS);
    cudnnBackendDescriptor_t back = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    assert_int_equal(cudnnBackendGetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &back),
                     CUDNN_STATUS_SUCCESS);
    int64_t back_uid = 0;
    assert_int_equal(cudnnBackendGetAttribute(back, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64,
                                              1, &count, &back_uid),
                     CUDNN_STATUS_SUCCESS);
    assert_int_equal(back_uid, 7);
    /* any descriptor of the type takes the copy, an unfinalized one too... */
    assert_int_equal(cudnnBackendGetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &unfinal),
                     CUDNN_STATUS_SUCCESS);
    /* ...but one of another type does not */
    cudnnBackendDescriptor_t engine = create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    assert_int_equal(cudnnBackendGetAttribute(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine),
                     CUDNN_STATUS_BAD_PARAM);
    /* required attributes: a graph needs operations, a plan its config,
     * heuristics a graph and a mode; an unknown descriptor type is refused */
    cudnnBackendDescriptor_t graph = create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    assert_int_equal(cudnnBackendFinalize(graph), CUDNN_STATUS_BAD_PARAM);
    cudnnBackendDescriptor_t plan = create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    assert_int_equal(cudnnBackendFinalize(plan), CUDNN_STATUS_BAD_PARAM);
    cudnnBackendDescriptor_t heur = create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    assert_int_equal(cudnnBackendFinalize(heur), CUDNN_STATUS_BAD_PARAM);
    assert_int_equal(cudnnBackendFinalize(engine), CUDNN_STATUS_BAD_PARAM);
    cudnnBackendDescriptor_t none = NULL;
    assert_int_equal(cudnnBackendCreateDescriptor((cudnnBackendDescriptorType_t)1000, &none),
                     CUDNN_STATUS_NOT_SUPPORTED);
    assert_null(none);
    /* variant packs: as many pointers as ids, no id twice */
    int64_t uids[2] = {1, 1};
    void *ptrs[2] = {NULL, NULL};
    cudnnBackendDescriptor_t vp = create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    set(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 2, uids);
    set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 1, ptrs);
    assert_int_equal(cudnnBackendFinalize(vp), CUDNN_STATUS_BAD_PARAM);
    set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 2, ptrs);
    assert_int_equal(cudnnBackendFinalize(vp), CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES);

    cudnnBackendDescriptor_t all[] = {unfinal, op, back, engine, graph, plan, heur, vp};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        assert_int_equal(cudnnBackendDestroyDescriptor(all[i]), CUDNN_STATUS_SUCCESS);
    assert_int_equal(cudnnBackendDestroyDescriptor(NULL), CUDNN_STATUS_BAD_PARAM);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_executes_in_stream_order),
        cmocka_unit_test(test_attribute_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
