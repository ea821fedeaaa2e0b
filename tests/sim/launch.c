/* launch.c - sim-only: kernel launches. A kernel registered the way nvcc's
 * generated code registers it launches through <<<>>> (push/pop of the call
 * configuration, __cudaGetKernel, __cudaLaunchKernel) and through
 * cudaLaunchKernel, cudaLaunchKernelExC and cudaLaunchCooperativeKernel; a
 * launch is ordered on its stream with host functions, copies and events;
 * bad configurations get the runtime's errors, left as the last error; an
 * unregistered module's kernels are gone. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fake_module.h"
#include "require_device.h"

static void **module;

static void scale(float *p, int n)
{
    FS_STUB_BODY(scale, &p, &n);
}

/* Registered, then unregistered again by test_unregister. */
static void **gone_module;
static void gone(void)
{
    FS_STUB_BODY(gone, NULL);
}

/* Never registered. */
static void unknown(void)
{
    FS_STUB_BODY(unknown, NULL);
}

static void register_module(void)
{
    module = __cudaRegisterFatBinary((void *)&fs_fake_wrapper);
    __cudaRegisterFunction(module, (const char *)scale, "_Z5scalePfi", "_Z5scalePfi", -1, NULL,
                           NULL, NULL, NULL, NULL);
    __cudaRegisterFatBinaryEnd(module);
    gone_module = __cudaRegisterFatBinary((void *)&fs_fake_wrapper);
    __cudaRegisterFunction(gone_module, (const char *)gone, "_Z4gonev", "_Z4gonev", -1, NULL, NULL,
                           NULL, NULL, NULL);
    __cudaRegisterFatBinaryEnd(gone_module);
}

/* Checks that `err` came back and is the last error, and clears it. */
static void expect_error(cudaError_t got, cudaError_t want)
{
    assert_int_equal(got, want);
    assert_int_equal(cudaGetLastError(), want);
}

static const dim3 one = {1, 1, 1};

static void test_chevrons_launch_in_stream_order(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaEvent_t after;
    struct fs_gate gate = FS_GATE_INIT;
    float *in, *out, *dev;
    size_t bytes = 64 * sizeof(float);
    assert_int_equal(cudaMallocHost((void **)&in, bytes), cudaSuccess);
    assert_int_equal(cudaMallocHost((void **)&out, bytes), cudaSuccess);
    for (int i = 0; i < 64; i++)
        in[i] = (float)i;
    memset(out, 0, bytes);
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaEventCreate(&after), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&dev, bytes), cudaSuccess);

    /* The stream is held by a host function: the copy in, the kernel, the
     * event recorded after it and the copy out all wait behind it. */
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(dev, in, bytes, cudaMemcpyHostToDevice, s), cudaSuccess);
    FS_LAUNCH(scale, ((dim3){4, 1, 1}), ((dim3){16, 1, 1}), 0, s, dev, 64);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaEventRecord(after, s), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(out, dev, bytes, cudaMemcpyDeviceToHost, s), cudaSuccess);
    fs_test_sleep_ms(20);
    assert_int_equal(cudaEventQuery(after), cudaErrorNotReady);
    assert_int_equal(cudaStreamQuery(s), cudaErrorNotReady);
    assert_true(out[63] == 0.0f);
    fs_gate_open(&gate);
    assert_int_equal(cudaEventSynchronize(after), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_false(gate.timed_out);
    /* The data went through in order; the kernel computed nothing. */
    assert_memory_equal(out, in, bytes);
    assert_int_equal(cudaFree(dev), cudaSuccess);
    assert_int_equal(cudaFreeHost(in), cudaSuccess);
    assert_int_equal(cudaFreeHost(out), cudaSuccess);
    assert_int_equal(cudaEventDestroy(after), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

static void test_runtime_launch_entry_points(void **state)
{
    (void)state;
    cudaStream_t s;
    struct fs_gate gate = FS_GATE_INIT;
    float *p = NULL;
    int n = 0;
    void *args[] = {&p, &n};
    cudaKernel_t k;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    /* By host stub, by kernel handle, cooperative, and through ExC. */
    assert_int_equal(cudaLaunchKernel((const void *)scale, one, one, args, 0, s), cudaSuccess);
    assert_int_equal(cudaGetKernel(&k, (const void *)scale), cudaSuccess);
    assert_int_equal(cudaLaunchKernel((const void *)k, one, one, args, 0, s), cudaSuccess);
    assert_int_equal(__cudaLaunchKernel(k, one, one, args, 0, s), cudaSuccess);
    assert_int_equal(cudaLaunchCooperativeKernel((const void *)scale, one, one, args, 0, s),
                     cudaSuccess);
    cudaLaunchAttribute attrs[2];
    memset(attrs, 0, sizeof attrs);
    attrs[0].id = cudaLaunchAttributePriority;
    attrs[0].val.priority = -1;
    attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[1].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {{2, 1, 1}, {128, 1, 1}, 1024, s, attrs, 2};
    assert_int_equal(cudaLaunchKernelExC(&cfg, (const void *)scale, args), cudaSuccess);

    /* A completion event is recorded when the kernel is done. */
    cudaEvent_t done;
    assert_int_equal(cudaEventCreate(&done), cudaSuccess);
    attrs[0].id = cudaLaunchAttributeLaunchCompletionEvent;
    attrs[0].val.launchCompletionEvent.event = done;
    cfg.numAttrs = 1;
    assert_int_equal(cudaLaunchKernelExC(&cfg, (const void *)scale, args), cudaSuccess);
    assert_int_equal(cudaEventQuery(done), cudaErrorNotReady);
    fs_gate_open(&gate);
    assert_int_equal(cudaEventSynchronize(done), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaEventDestroy(done), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);

    /* The legacy stream and the per-thread stream take launches too. */
    assert_int_equal(cudaLaunchKernel((const void *)scale, one, one, args, 0, NULL), cudaSuccess);
    assert_int_equal(cudaLaunchKernel((const void *)scale, one, one, args, 0, cudaStreamPerThread),
                     cudaSuccess);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
}

static void test_bad_configurations(void **state)
{
    (void)state;
    float *p = NULL;
    int n = 0;
    void *args[] = {&p, &n};
    const void *f = (const void *)scale;
    /* Threads per block, block and grid dimensions (maxThreadsDim
     * 1024x1024x64, maxGridSize 2^31-1 x 65535 x 65535), zero dimensions. */
    expect_error(cudaLaunchKernel(f, one, (dim3){1025, 1, 1}, args, 0, NULL),
                 cudaErrorInvalidConfiguration);
    expect_error(cudaLaunchKernel(f, one, (dim3){32, 32, 2}, args, 0, NULL),
                 cudaErrorInvalidConfiguration);
    expect_error(cudaLaunchKernel(f, one, (dim3){1, 1, 65}, args, 0, NULL),
                 cudaErrorInvalidConfiguration);
    expect_error(cudaLaunchKernel(f, (dim3){1, 65536, 1}, one, args, 0, NULL),
                 cudaErrorInvalidConfiguration);
    expect_error(cudaLaunchKernel(f, (dim3){0x80000000u, 1, 1}, one, args, 0, NULL),
                 cudaErrorInvalidConfiguration);
    expect_error(cudaLaunchKernel(f, (dim3){0, 1, 1}, one, args, 0, NULL),
                 cudaErrorInvalidConfiguration);
    assert_int_equal(
        cudaLaunchKernel(f, (dim3){0x7fffffffu, 65535, 65535}, (dim3){1024, 1, 1}, args, 0, NULL),
        cudaSuccess);
    /* Dynamic shared memory over 48 KiB needs the kernel's opt-in. */
    expect_error(cudaLaunchKernel(f, one, one, args, (48 << 10) + 1, NULL), cudaErrorInvalidValue);
    assert_int_equal(cudaLaunchKernel(f, one, one, args, 48 << 10, NULL), cudaSuccess);
    /* Unregistered functions, and NULL. */
    expect_error(cudaLaunchKernel((const void *)unknown, one, one, args, 0, NULL),
                 cudaErrorInvalidDeviceFunction);
    expect_error(cudaLaunchKernel(NULL, one, one, args, 0, NULL), cudaErrorInvalidDeviceFunction);
    cudaKernel_t k;
    expect_error(cudaGetKernel(&k, (const void *)unknown), cudaErrorInvalidDeviceFunction);
    /* The generated stub of an unknown kernel: the error is the last error. */
    FS_LAUNCH(unknown, one, one, 0, NULL);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
    /* A destroyed stream. */
    cudaStream_t s;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
    expect_error(cudaLaunchKernel(f, one, one, args, 0, s), cudaErrorInvalidResourceHandle);
    FS_LAUNCH(scale, one, one, 0, s, p, n);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    /* A cooperative grid must be resident at once: 2 blocks of 1024
     * threads per SM, 132 SMs. */
    dim3 big = {1024, 1, 1};
    assert_int_equal(cudaLaunchCooperativeKernel(f, (dim3){264, 1, 1}, big, args, 0, NULL),
                     cudaSuccess);
    expect_error(cudaLaunchCooperativeKernel(f, (dim3){265, 1, 1}, big, args, 0, NULL),
                 cudaErrorCooperativeLaunchTooLarge);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
}

static void test_launch_attributes(void **state)
{
    (void)state;
    float *p = NULL;
    int n = 0;
    void *args[] = {&p, &n};
    const void *f = (const void *)scale;
    cudaLaunchAttribute a;
    memset(&a, 0, sizeof a);
    cudaLaunchConfig_t cfg = {{8, 1, 1}, {64, 1, 1}, 0, NULL, &a, 1};
    /* Clusters divide the grid and hold at most 8 blocks unless the kernel
     * allows non-portable sizes (16 on this part). */
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = 2;
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = 1;
    assert_int_equal(cudaLaunchKernelExC(&cfg, f, args), cudaSuccess);
    a.val.clusterDim.x = 3;
    expect_error(cudaLaunchKernelExC(&cfg, f, args), cudaErrorInvalidClusterSize);
    cfg.gridDim.x = 32;
    a.val.clusterDim.x = 16;
    expect_error(cudaLaunchKernelExC(&cfg, f, args), cudaErrorInvalidClusterSize);
    assert_int_equal(cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 1),
                     cudaSuccess);
    assert_int_equal(cudaLaunchKernelExC(&cfg, f, args), cudaSuccess);
    a.val.clusterDim.x = 32;
    expect_error(cudaLaunchKernelExC(&cfg, f, args), cudaErrorInvalidClusterSize);
    assert_int_equal(cudaFuncSetAttribute(f, cudaFuncAttributeNonPortableClusterSizeAllowed, 0),
                     cudaSuccess);
    /* The kernel's required cluster dimensions apply to every launch; the
     * launch's own must agree; all three must be set. */
    cudaLaunchConfig_t plain = {{3, 1, 1}, {64, 1, 1}, 0, NULL, NULL, 0};
    assert_int_equal(cudaFuncSetAttribute(f, cudaFuncAttributeRequiredClusterWidth, 2),
                     cudaSuccess);
    expect_error(cudaLaunchKernelExC(&plain, f, args), cudaErrorInvalidClusterSize);
    assert_int_equal(cudaFuncSetAttribute(f, cudaFuncAttributeRequiredClusterHeight, 1),
                     cudaSuccess);
    assert_int_equal(cudaFuncSetAttribute(f, cudaFuncAttributeRequiredClusterDepth, 1),
                     cudaSuccess);
    expect_error(cudaLaunchKernelExC(&plain, f, args), cudaErrorInvalidClusterSize);
    plain.gridDim.x = 4;
    assert_int_equal(cudaLaunchKernelExC(&plain, f, args), cudaSuccess);
    a.val.clusterDim.x = 4;
    cfg.gridDim.x = 32;
    expect_error(cudaLaunchKernelExC(&cfg, f, args), cudaErrorInvalidClusterSize);
    for (int attr = cudaFuncAttributeRequiredClusterWidth;
         attr <= cudaFuncAttributeRequiredClusterDepth; attr++)
        assert_int_equal(cudaFuncSetAttribute(f, (enum cudaFuncAttribute)attr, 0), cudaSuccess);
    /* Cooperative as an attribute; an unknown attribute; a missing array. */
    a.id = cudaLaunchAttributeCooperative;
    a.val.cooperative = 1;
    cfg.gridDim.x = 265;
    cfg.blockDim.x = 1024;
    expect_error(cudaLaunchKernelExC(&cfg, f, args), cudaErrorCooperativeLaunchTooLarge);
    a.id = (cudaLaunchAttributeID)99;
    expect_error(cudaLaunchKernelExC(&cfg, f, args), cudaErrorInvalidValue);
    cfg.attrs = NULL;
    expect_error(cudaLaunchKernelExC(&cfg, f, args), cudaErrorInvalidValue);
    expect_error(cudaLaunchKernelExC(NULL, f, args), cudaErrorInvalidValue);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
}

static void *pop_elsewhere(void *p)
{
    dim3 g, b;
    size_t smem;
    cudaStream_t s;
    *(cudaError_t *)p = __cudaPopCallConfiguration(&g, &b, &smem, &s);
    return NULL;
}

static void test_call_configuration_stack(void **state)
{
    (void)state;
    dim3 g, b;
    size_t smem;
    cudaStream_t s;
    /* Last in, first out, with every field kept. */
    assert_int_equal(__cudaPushCallConfiguration((dim3){1, 2, 3}, (dim3){4, 5, 6}, 7,
                                                 (cudaStream_t)cudaStreamPerThread),
                     0);
    assert_int_equal(__cudaPushCallConfiguration((dim3){8, 1, 1}, one, 9, NULL), 0);
    assert_int_equal(__cudaPopCallConfiguration(&g, &b, &smem, &s), cudaSuccess);
    assert_int_equal(g.x, 8);
    assert_int_equal(smem, 9);
    assert_ptr_equal(s, NULL);
    /* Per thread: another thread has nothing to pop. */
    pthread_t t;
    cudaError_t other;
    assert_int_equal(pthread_create(&t, NULL, pop_elsewhere, &other), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(other, cudaErrorMissingConfiguration);
    assert_int_equal(__cudaPopCallConfiguration(&g, &b, &smem, &s), cudaSuccess);
    assert_int_equal(g.x * 100 + g.y * 10 + g.z, 123);
    assert_int_equal(b.x * 100 + b.y * 10 + b.z, 456);
    assert_int_equal(smem, 7);
    assert_ptr_equal(s, cudaStreamPerThread);
    expect_error(__cudaPopCallConfiguration(&g, &b, &smem, &s), cudaErrorMissingConfiguration);
}

static void test_unregister(void **state)
{
    (void)state;
    cudaKernel_t k;
    assert_int_equal(__cudaGetKernel(&k, (const void *)gone), cudaSuccess);
    assert_int_equal(cudaLaunchKernel((const void *)gone, one, one, NULL, 0, NULL), cudaSuccess);
    __cudaUnregisterFatBinary(gone_module);
    /* Neither the stub nor the handle names a kernel any more; a stale
     * module handle is ignored. */
    expect_error(cudaLaunchKernel((const void *)gone, one, one, NULL, 0, NULL),
                 cudaErrorInvalidDeviceFunction);
    expect_error(__cudaLaunchKernel(k, one, one, NULL, 0, NULL), cudaErrorInvalidDeviceFunction);
    __cudaRegisterFunction(gone_module, (const char *)gone, "x", "x", -1, NULL, NULL, NULL, NULL,
                           NULL);
    __cudaUnregisterFatBinary(gone_module);
    expect_error(cudaLaunchKernel((const void *)gone, one, one, NULL, 0, NULL),
                 cudaErrorInvalidDeviceFunction);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
}

/* Threads launching on their own streams (and through <<<>>>) while
 * another registers and unregisters modules: for TSan. */
static int churn_var;

static void churn(void)
{
    FS_STUB_BODY(churn, NULL);
}

static void *launcher(void *p)
{
    cudaStream_t s;
    float *dev = NULL;
    int n = 0, *fails = p;
    void *args[] = {&dev, &n};
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) {
        (*fails)++;
        return NULL;
    }
    for (int i = 0; i < 300; i++) {
        if (cudaLaunchKernel((const void *)scale, one, one, args, 0, s)) (*fails)++;
        FS_LAUNCH(scale, one, one, 0, s, dev, n);
        if (cudaGetLastError()) (*fails)++;
        struct cudaFuncAttributes a;
        if (cudaFuncGetAttributes(&a, (const void *)scale)) (*fails)++;
    }
    if (cudaStreamSynchronize(s) || cudaStreamDestroy(s)) (*fails)++;
    return NULL;
}

static void test_concurrent_launches(void **state)
{
    (void)state;
    pthread_t t[4];
    int fails[4] = {0};
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, launcher, &fails[i]), 0);
    for (int i = 0; i < 50; i++) {
        void **m = __cudaRegisterFatBinary((void *)&fs_fake_wrapper);
        __cudaRegisterFunction(m, (const char *)churn, "churn", "churn", -1, NULL, NULL, NULL, NULL,
                               NULL);
        __cudaRegisterVar(m, (char *)&churn_var, "churn_var", "churn_var", 0, sizeof churn_var, 0,
                          0);
        __cudaRegisterFatBinaryEnd(m);
        int v = i;
        assert_int_equal(cudaMemcpyToSymbol(&churn_var, &v, sizeof v, 0, cudaMemcpyHostToDevice),
                         cudaSuccess);
        assert_int_equal(cudaLaunchKernel((const void *)churn, one, one, NULL, 0, NULL),
                         cudaSuccess);
        assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
        __cudaUnregisterFatBinary(m);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(fails[i], 0);
    }
}

/* A launch on a capturing stream runs nothing then: it is a kernel node,
 * and each launch of the graph runs it in order with the copy after it. */
static void test_launch_captured(void **state)
{
    (void)state;
    cudaStream_t s;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t nodes[4];
    enum cudaGraphNodeType type;
    size_t count = 4;
    float *p = NULL;
    int n = 0;
    void *args[] = {&p, &n};
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    assert_int_equal(cudaLaunchKernel((const void *)scale, one, one, args, 0, s), cudaSuccess);
    assert_int_equal(cudaStreamEndCapture(s, &graph), cudaSuccess);
    assert_int_equal(cudaGraphGetNodes(graph, nodes, &count), cudaSuccess);
    assert_int_equal(count, 1);
    assert_int_equal(cudaGraphNodeGetType(nodes[0], &type), cudaSuccess);
    assert_int_equal(type, cudaGraphNodeTypeKernel);
    assert_int_equal(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess);
    assert_int_equal(cudaGraphLaunch(exec, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    assert_int_equal(cudaGraphDestroy(graph), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
}

int main(void)
{
    fs_test_require_device();
    register_module();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chevrons_launch_in_stream_order),
        cmocka_unit_test(test_runtime_launch_entry_points),
        cmocka_unit_test(test_bad_configurations),
        cmocka_unit_test(test_launch_attributes),
        cmocka_unit_test(test_call_configuration_stack),
        cmocka_unit_test(test_unregister),
        cmocka_unit_test(test_concurrent_launches),
        cmocka_unit_test(test_launch_captured),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    __cudaUnregisterFatBinary(module);
    return failed;
}
