/* graphs.c - stream capture and CUDA graphs: work captured on streams
 * joined by events becomes nodes with the right dependencies, nothing runs
 * while capturing, and every launch of the instantiated graph replays the
 * copies, sets and host functions with the data of the time of the launch;
 * stream-ordered allocations become graph memory; graphs built by hand,
 * user objects, the DOT file, and the private seam's replayable work. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "require_device.h"
#include "sim.h"

#define N 4096

static void CUDART_CB count(void *p)
{
    __atomic_fetch_add((int *)p, 1, __ATOMIC_SEQ_CST);
}

static int counted(int *p)
{
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

/* Whether `to` lists exactly the nodes want[0..n) as its dependencies. */
static void assert_deps(cudaGraphNode_t to, const cudaGraphNode_t *want, size_t n)
{
    cudaGraphNode_t deps[8];
    size_t got = 8;
    assert_int_equal(cudaGraphNodeGetDependencies(to, deps, NULL, &got), cudaSuccess);
    assert_int_equal(got, n);
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (size_t j = 0; j < got; j++)
            found |= deps[j] == want[i];
        assert_true(found);
    }
}

static size_t count_in_file(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[16384];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    size_t n = 0;
    for (const char *p = buf; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void test_capture_across_two_streams_and_replay(void **state)
{
    (void)state;
    char *a, *b, *c, *h_in, *h_out;
    int calls = 0;
    cudaStream_t s1, s2;
    cudaEvent_t fork, join;
    assert_int_equal(cudaMalloc((void **)&a, N), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&b, N), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&c, N), cudaSuccess);
    assert_int_equal(cudaMallocHost((void **)&h_in, N), cudaSuccess);
    assert_int_equal(cudaMallocHost((void **)&h_out, N), cudaSuccess);
    memset(h_in, 1, N);
    memset(h_out, 0, N);
    assert_int_equal(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
    assert_int_equal(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), cudaSuccess);

    assert_int_equal(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(a, h_in, N, cudaMemcpyHostToDevice, s1), cudaSuccess);
    assert_int_equal(cudaEventRecord(fork, s1), cudaSuccess);
    enum cudaStreamCaptureStatus st;
    assert_int_equal(cudaStreamIsCapturing(s2, &st), cudaSuccess);
    assert_int_equal(st, cudaStreamCaptureStatusNone);
    assert_int_equal(cudaStreamWaitEvent(s2, fork, 0), cudaSuccess);
    assert_int_equal(cudaStreamIsCapturing(s2, &st), cudaSuccess);
    assert_int_equal(st, cudaStreamCaptureStatusActive);
    assert_int_equal(cudaMemcpyAsync(b, a, N, cudaMemcpyDeviceToDevice, s2), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s2, count, &calls), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(c, 0x5a, N, s1), cudaSuccess);
    assert_int_equal(cudaEventRecord(join, s2), cudaSuccess);
    assert_int_equal(cudaStreamWaitEvent(s1, join, 0), cudaSuccess);

    unsigned long long id1, id2;
    cudaGraph_t g1, g2;
    const cudaGraphNode_t *deps;
    size_t ndeps;
    assert_int_equal(cudaStreamGetCaptureInfo(s1, &st, &id1, &g1, &deps, NULL, &ndeps),
                     cudaSuccess);
    assert_int_equal(st, cudaStreamCaptureStatusActive);
    assert_int_equal(ndeps, 2); /* the memset on s1 and the host function joined from s2 */
    assert_int_equal(cudaStreamGetCaptureInfo(s2, &st, &id2, &g2, NULL, NULL, NULL), cudaSuccess);
    assert_true(id1 != 0);
    assert_true(id1 == id2);
    assert_ptr_equal(g1, g2);

    assert_int_equal(cudaMemcpyAsync(h_out, b, N / 2, cudaMemcpyDeviceToHost, s1), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(h_out + N / 2, c, N / 2, cudaMemcpyDeviceToHost, s1),
                     cudaSuccess);
    /* Captured, not run. */
    fs_test_sleep_ms(50);
    assert_int_equal(h_out[0], 0);
    assert_int_equal(h_out[N - 1], 0);
    assert_int_equal(counted(&calls), 0);

    cudaGraph_t g;
    assert_int_equal(cudaStreamEndCapture(s1, &g), cudaSuccess);
    assert_ptr_equal(g, g1);
    assert_int_equal(cudaStreamIsCapturing(s2, &st), cudaSuccess);
    assert_int_equal(st, cudaStreamCaptureStatusNone);
    assert_int_equal(cudaStreamIsCapturing(s1, &st), cudaSuccess);
    assert_int_equal(st, cudaStreamCaptureStatusNone);

    /* h2d; d2d, host on s2; memset on s1; the two d2h after the join. */
    cudaGraphNode_t nodes[8];
    size_t n = 0;
    assert_int_equal(cudaGraphGetNodes(g, NULL, &n), cudaSuccess);
    assert_int_equal(n, 6);
    n = 8;
    assert_int_equal(cudaGraphGetNodes(g, nodes, &n), cudaSuccess);
    assert_int_equal(n, 6);
    assert_null(nodes[6]);
    assert_deps(nodes[0], NULL, 0);
    assert_deps(nodes[1], &nodes[0], 1);
    assert_deps(nodes[2], &nodes[1], 1);
    assert_deps(nodes[3], &nodes[0], 1);
    assert_deps(nodes[4], (cudaGraphNode_t[]){nodes[2], nodes[3]}, 2);
    assert_deps(nodes[5], &nodes[4], 1);

    char path[] = "/tmp/sim_graph_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(cudaGraphDebugDotPrint(g, path, 0), cudaSuccess);
    assert_int_equal(count_in_file(path, "digraph"), 1);
    assert_int_equal(count_in_file(path, "shape=\"rectangle\""), 6);
    assert_int_equal(count_in_file(path, "MEMCPY"), 4);
    assert_int_equal(count_in_file(path, "MEMSET"), 1);
    assert_int_equal(count_in_file(path, "HOST"), 1);
    assert_int_equal(count_in_file(path, " -> "), 6);
    unlink(path);
    assert_int_equal(cudaGraphDebugDotPrint(g, "/nonexistent/dir/x.dot", 0),
                     cudaErrorOperatingSystem);

    cudaGraphExec_t exec;
    assert_int_equal(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    for (int round = 1; round <= 4; round++) {
        /* Each launch moves the data there is at its time. */
        memset(h_in, round, N);
        memset(h_out, 0, N);
        cudaStream_t on = round % 2 ? s1 : s2;
        assert_int_equal(cudaGraphLaunch(exec, on), cudaSuccess);
        assert_int_equal(cudaStreamSynchronize(on), cudaSuccess);
        for (int i = 0; i < N / 2; i++)
            assert_int_equal(h_out[i], round);
        for (int i = N / 2; i < N; i++)
            assert_int_equal((unsigned char)h_out[i], 0x5a);
        assert_int_equal(counted(&calls), round);
    }
    /* Launches on two streams are still ordered after each other. */
    for (int i = 0; i < 8; i++)
        assert_int_equal(cudaGraphLaunch(exec, i % 2 ? s1 : s2), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s1), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s2), cudaSuccess);
    assert_int_equal(counted(&calls), 12);

    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    assert_int_equal(cudaGraphExecDestroy(exec), cudaErrorInvalidValue);
    assert_int_equal(cudaGraphLaunch(exec, s1), cudaErrorInvalidValue);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    cudaEventDestroy(fork);
    cudaEventDestroy(join);
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaFreeHost(h_in);
    cudaFreeHost(h_out);
}

static void test_exec_outlives_its_handles_while_launched(void **state)
{
    (void)state;
    struct fs_gate gate = FS_GATE_INIT;
    int calls = 0;
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t exec;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s, count, &calls), cudaSuccess);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    assert_int_equal(cudaGraphInstantiateWithFlags(&exec, g, 0), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess);
    assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess);
    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    assert_int_equal(counted(&calls), 0);
    fs_gate_open(&gate);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(counted(&calls), 2);
    cudaStreamDestroy(s);
}

/* One of device 0's graph memory amounts. */
static size_t graph_mem(enum cudaGraphMemAttributeType attr)
{
    uint64_t v = 0;
    assert_int_equal(cudaDeviceGetGraphMemAttribute(0, attr, &v), cudaSuccess);
    return (size_t)v;
}

static size_t pool_used(void)
{
    cudaMemPool_t pool;
    uint64_t used = 0;
    assert_int_equal(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    assert_int_equal(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used),
                     cudaSuccess);
    return (size_t)used;
}

static void test_stream_ordered_allocation_becomes_graph_memory(void **state)
{
    (void)state;
    cudaStream_t s;
    char *h, *p = NULL;
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaMallocHost((void **)&h, N), cudaSuccess);
    size_t before = pool_used();

    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaMallocAsync((void **)&p, N, s), cudaSuccess);
    assert_non_null(p);
    assert_int_equal(cudaMemsetAsync(p, 7, N, s), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(h, p, N, cudaMemcpyDeviceToHost, s), cudaSuccess);
    assert_int_equal(cudaFreeAsync(p, s), cudaSuccess);
    cudaGraph_t g;
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    /* Freed in the graph, the block still belongs to it: not to be freed
     * again. It is graph memory, not the pool's, and nothing is charged
     * before a launch needs it (docs/sim.md, "Graph memory"). */
    assert_int_equal(cudaFreeAsync(p, s), cudaErrorInvalidValue);
    assert_int_equal(pool_used(), before);
    assert_int_equal(graph_mem(cudaGraphMemAttrReservedMemCurrent), 0);

    char path[] = "/tmp/sim_graph_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(cudaGraphDebugDotPrint(g, path, 0), cudaSuccess);
    assert_int_equal(count_in_file(path, "MEM_ALLOC"), 1);
    assert_int_equal(count_in_file(path, "MEM_FREE"), 1);
    assert_int_equal(count_in_file(path, " -> "), 3);
    unlink(path);

    cudaGraphExec_t exec;
    assert_int_equal(cudaGraphInstantiate(&exec, g, cudaGraphInstantiateFlagAutoFreeOnLaunch),
                     cudaSuccess);
    for (int round = 0; round < 3; round++) {
        memset(h, 0, N);
        assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess);
        assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
        for (int i = 0; i < N; i++)
            assert_int_equal(h[i], 7);
    }
    /* Launched, its chunk is charged and in use, whole. */
    size_t chunk = graph_mem(cudaGraphMemAttrReservedMemCurrent);
    assert_true(chunk >= N);
    assert_int_equal(graph_mem(cudaGraphMemAttrUsedMemCurrent), chunk);
    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    assert_int_equal(graph_mem(cudaGraphMemAttrUsedMemCurrent), chunk);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    /* The graph gone, its memory stays reserved, and mapped (used), until
     * trimmed. */
    assert_int_equal(graph_mem(cudaGraphMemAttrUsedMemCurrent), chunk);
    assert_int_equal(graph_mem(cudaGraphMemAttrReservedMemCurrent), chunk);
    assert_int_equal(cudaDeviceGraphMemTrim(0), cudaSuccess);
    assert_int_equal(graph_mem(cudaGraphMemAttrReservedMemCurrent), 0);
    assert_int_equal(graph_mem(cudaGraphMemAttrUsedMemCurrent), 0);
    assert_int_equal(graph_mem(cudaGraphMemAttrReservedMemHigh), chunk);
    assert_int_equal(pool_used(), before);
    cudaFreeHost(h);
    cudaStreamDestroy(s);
}

static int destroyed;

static void CUDART_CB on_destroy(void *p)
{
    (void)p;
    __atomic_store_n(&destroyed, 1, __ATOMIC_SEQ_CST);
}

static void test_graph_built_by_hand_and_extended_by_capture(void **state)
{
    (void)state;
    int calls = 0;
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphNode_t root, host, nodes[4];
    char *d, *h;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&d, N), cudaSuccess);
    assert_int_equal(cudaMallocHost((void **)&h, N), cudaSuccess);
    assert_int_equal(cudaGraphCreate(&g, 1), cudaErrorInvalidValue);
    assert_int_equal(cudaGraphCreate(&g, 0), cudaSuccess);

    struct cudaGraphNodeParams empty = {.type = cudaGraphNodeTypeEmpty};
    assert_int_equal(cudaGraphAddNode(&root, g, NULL, NULL, 0, &empty), cudaSuccess);
    struct cudaGraphNodeParams hp = {.type = cudaGraphNodeTypeHost};
    hp.host.fn = count;
    hp.host.userData = &calls;
    assert_int_equal(cudaGraphAddNode(&host, g, &root, NULL, 1, &hp), cudaSuccess);
    assert_int_equal(cudaGraphAddNode(&host, g, NULL, NULL, 1, &hp), cudaErrorInvalidValue);
    assert_int_equal(cudaGraphAddNode(&host, g, (cudaGraphNode_t[]){root, root}, NULL, 2, &hp),
                     cudaErrorInvalidValue);

    /* Capture continues the graph after the host node. */
    assert_int_equal(
        cudaStreamBeginCaptureToGraph(s, g, &host, NULL, 1, cudaStreamCaptureModeGlobal),
        cudaSuccess);
    assert_int_equal(cudaMemsetAsync(d, 3, N, s), cudaSuccess);
    /* From here on the copy depends on nothing before it. */
    assert_int_equal(
        cudaStreamUpdateCaptureDependencies(s, NULL, NULL, 0, cudaStreamSetCaptureDependencies),
        cudaSuccess);
    assert_int_equal(cudaStreamUpdateCaptureDependencies(s, &root, NULL, 1, 7),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpyAsync(h, d, N, cudaMemcpyDeviceToHost, s), cudaSuccess);
    const cudaGraphNode_t *cur;
    size_t ncur;
    assert_int_equal(cudaStreamGetCaptureInfo(s, &(enum cudaStreamCaptureStatus){0}, NULL, NULL,
                                              &cur, NULL, &ncur),
                     cudaSuccess);
    assert_int_equal(ncur, 1);
    cudaGraphNode_t copy = cur[0];
    assert_int_equal(
        cudaStreamUpdateCaptureDependencies(s, &host, NULL, 1, cudaStreamAddCaptureDependencies),
        cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s, count, &calls), cudaSuccess);
    cudaGraph_t same;
    assert_int_equal(cudaStreamEndCapture(s, &same), cudaSuccess);
    assert_ptr_equal(same, g);

    size_t n = 4;
    assert_int_equal(cudaGraphGetNodes(g, nodes, &n), cudaSuccess);
    assert_int_equal(n, 4);
    nodes[0] = nodes[1] = NULL;
    assert_int_equal(cudaGraphGetNodes(g, nodes, &(size_t){2}), cudaSuccess);
    assert_ptr_equal(nodes[0], root);
    assert_ptr_equal(nodes[1], host);
    assert_deps(copy, NULL, 0);
    n = 5;
    cudaGraphNode_t all[5];
    assert_int_equal(cudaGraphGetNodes(g, all, &n), cudaSuccess);
    assert_int_equal(n, 5);
    assert_deps(all[2], &host, 1);                           /* the memset */
    assert_deps(all[4], (cudaGraphNode_t[]){copy, host}, 2); /* the last host function */

    /* The graph keeps the user object alive until it is destroyed. */
    cudaUserObject_t obj;
    destroyed = 0;
    assert_int_equal(
        cudaUserObjectCreate(&obj, NULL, on_destroy, 1, cudaUserObjectNoDestructorSync),
        cudaSuccess);
    assert_int_equal(cudaGraphRetainUserObject(g, obj, 0, 0), cudaErrorInvalidValue);
    assert_int_equal(cudaGraphRetainUserObject(g, obj, 1, 0), cudaSuccess);
    assert_int_equal(cudaUserObjectRelease(obj, 1), cudaSuccess);

    cudaGraphConditionalHandle c1, c2;
    assert_int_equal(cudaGraphConditionalHandleCreate(&c1, g, 1, cudaGraphCondAssignDefault),
                     cudaSuccess);
    assert_int_equal(cudaGraphConditionalHandleCreate(&c2, g, 0, 0), cudaSuccess);
    assert_true(c1 != c2);
    assert_int_equal(cudaGraphConditionalHandleCreate(&c2, g, 0, 2), cudaErrorInvalidValue);

    cudaGraphExec_t exec;
    assert_int_equal(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    for (int round = 1; round <= 3; round++) {
        memset(h, 0, N);
        assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess);
        assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
        assert_int_equal(counted(&calls), 2 * round);
        assert_int_equal(h[N - 1], 3);
    }
    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    fs_test_sleep_ms(20);
    assert_int_equal(__atomic_load_n(&destroyed, __ATOMIC_SEQ_CST), 0);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    for (int i = 0; i < 200 && !__atomic_load_n(&destroyed, __ATOMIC_SEQ_CST); i++)
        fs_test_sleep_ms(5);
    assert_int_equal(__atomic_load_n(&destroyed, __ATOMIC_SEQ_CST), 1);
    cudaFree(d);
    cudaFreeHost(h);
    cudaStreamDestroy(s);
}

struct replay {
    int runs, drops;
};

static void run_work(void *p)
{
    __atomic_fetch_add(&((struct replay *)p)->runs, 1, __ATOMIC_SEQ_CST);
}

static void drop_work(void *p)
{
    __atomic_fetch_add(&((struct replay *)p)->drops, 1, __ATOMIC_SEQ_CST);
}

static void consume(void *p)
{
    (void)p;
}

static void test_seam_work_is_captured_and_replayed(void **state)
{
    (void)state;
    struct replay r = {0, 0};
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t exec;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    /* Outside a capture: runs once, then dropped. */
    assert_int_equal(
        sim_stream_enqueue_work(s, 0, cudaGraphNodeTypeKernel, run_work, drop_work, &r),
        cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(r.runs, 1);
    assert_int_equal(r.drops, 1);

    r = (struct replay){0, 0};
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(
        sim_stream_enqueue_work(s, 0, cudaGraphNodeTypeKernel, run_work, drop_work, &r),
        cudaSuccess);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    assert_int_equal(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(r.runs, 3);
    assert_int_equal(r.drops, 0);
    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(g), cudaSuccess);
    assert_int_equal(r.drops, 1);

    /* Work that consumes its argument cannot be captured. */
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(sim_stream_enqueue(s, 0, consume, NULL), cudaErrorStreamCaptureUnsupported);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    assert_null(g);
    cudaStreamDestroy(s);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_across_two_streams_and_replay),
        cmocka_unit_test(test_exec_outlives_its_handles_while_launched),
        cmocka_unit_test(test_stream_ordered_allocation_becomes_graph_memory),
        cmocka_unit_test(test_graph_built_by_hand_and_extended_by_capture),
        cmocka_unit_test(test_seam_work_is_captured_and_replayed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
