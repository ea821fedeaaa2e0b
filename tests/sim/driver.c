/* driver.c - the simulated driver API (libcuda.so.1), called directly by a
 * program linked to it, and mixed with runtime calls: initialisation,
 * devices, primary and current contexts agreeing with the runtime's current
 * device, memory and pointer attributes from the runtime's address registry,
 * stream memory operations ordered on runtime streams, VMM export/import,
 * cuGetProcAddress, context settings, streams, capture and events, pools,
 * modules loaded from an image and their functions launched (ordered work
 * that computes nothing), and the families answered as unsupported. Sets
 * and copies have a program of their own, driver_memory.c. */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "require_device.h"

/* Runs first, before anything initialised the runtime or the driver. */
static void test_not_initialized(void **state)
{
    (void)state;
    int n = -1, version = 0;
    const char *s = NULL;
    CUcontext ctx;
    assert_int_equal(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(cuCtxGetCurrent(&ctx), CUDA_ERROR_NOT_INITIALIZED);
    /* These work before cuInit, as documented. */
    assert_int_equal(cuDriverGetVersion(&version), CUDA_SUCCESS);
    assert_int_equal(version, CUDA_VERSION);
    assert_int_equal(cuGetErrorName(CUDA_ERROR_NOT_INITIALIZED, &s), CUDA_SUCCESS);
    assert_string_equal(s, "CUDA_ERROR_NOT_INITIALIZED");
    assert_int_equal(cuGetErrorString((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    assert_null(s);
    assert_int_equal(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuInit(0), CUDA_SUCCESS);
    assert_int_equal(cuDeviceGetCount(&n), CUDA_SUCCESS);
    assert_int_equal(n, 8);
}

static void test_devices_match_runtime(void **state)
{
    (void)state;
    CUdevice dev = -1;
    assert_int_equal(cuDeviceGet(&dev, 3), CUDA_SUCCESS);
    assert_int_equal(dev, 3);
    assert_int_equal(cuDeviceGet(&dev, 8), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);

    struct cudaDeviceProp p;
    assert_int_equal(cudaGetDeviceProperties(&p, 3), cudaSuccess);
    char name[256];
    assert_int_equal(cuDeviceGetName(name, sizeof name, 3), CUDA_SUCCESS);
    assert_string_equal(name, p.name);
    assert_int_equal(cuDeviceGetName(name, 0, 3), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuDeviceGetName(name, sizeof name, -1), CUDA_ERROR_INVALID_DEVICE);
    CUuuid uuid;
    assert_int_equal(cuDeviceGetUuid(&uuid, 3), CUDA_SUCCESS);
    assert_memory_equal(uuid.bytes, p.uuid.bytes, 16);
    size_t total = 0;
    assert_int_equal(cuDeviceTotalMem(&total, 3), CUDA_SUCCESS);
    assert_int_equal(total, p.totalGlobalMem);

    const CUdevice_attribute shared[] = {
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID,
        CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED};
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) {
        int drv = -1, rt = -2;
        assert_int_equal(cuDeviceGetAttribute(&drv, shared[i], 3), CUDA_SUCCESS);
        assert_int_equal(cudaDeviceGetAttribute(&rt, (enum cudaDeviceAttr)shared[i], 3),
                         cudaSuccess);
        assert_int_equal(drv, rt);
    }
    int v = -1;
    assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 0),
                     CUDA_SUCCESS);
    assert_int_equal(v, 0);
    /* As an H100 and an H200 answer without IMEX: the device supports
     * fabric handles and GPUDirect RDMA (NVML says there is no fabric), and
     * GPUDirect RDMA with CUDA VMM (the H200, run 7); not Win32 KMT handles. */
    assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, 0),
                     CUDA_SUCCESS);
    assert_int_equal(v, 1);
    assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, 0),
                     CUDA_SUCCESS);
    assert_int_equal(v, 1);
    assert_int_equal(
        cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0),
        CUDA_SUCCESS);
    assert_int_equal(v, 1);
    assert_int_equal(
        cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED, 0),
        CUDA_SUCCESS);
    assert_int_equal(v, 0);
    assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 8),
                     CUDA_ERROR_INVALID_DEVICE);
}

static void test_primary_context_state(void **state)
{
    (void)state;
    unsigned flags = 99;
    int active = -1;
    /* Device 6: nothing has used it yet. */
    assert_int_equal(cuDevicePrimaryCtxGetState(6, &flags, &active), CUDA_SUCCESS);
    assert_int_equal(active, 0);
    CUcontext a = NULL, b = NULL;
    assert_int_equal(cuDevicePrimaryCtxRetain(&a, 6), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRetain(&b, 6), CUDA_SUCCESS);
    assert_non_null(a);
    assert_ptr_equal(a, b); /* one primary context per device */
    assert_int_equal(cuDevicePrimaryCtxGetState(6, &flags, &active), CUDA_SUCCESS);
    assert_int_equal(active, 1);
    assert_int_equal(cuDevicePrimaryCtxRelease(6), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxGetState(6, &flags, &active), CUDA_SUCCESS);
    assert_int_equal(active, 1);
    assert_int_equal(cuDevicePrimaryCtxRelease(6), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxGetState(6, &flags, &active), CUDA_SUCCESS);
    assert_int_equal(active, 0);
    assert_int_equal(cuDevicePrimaryCtxRelease(6), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuDevicePrimaryCtxGetState(6, NULL, &active), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuDevicePrimaryCtxRetain(&a, 9), CUDA_ERROR_INVALID_DEVICE);

    /* The runtime initialising a device's context makes it active. */
    assert_int_equal(cudaSetDevice(7), cudaSuccess);
    assert_int_equal(cuDevicePrimaryCtxGetState(7, &flags, &active), CUDA_SUCCESS);
    assert_int_equal(active, 1);

    /* Flags are the device flags the runtime sets and reads. */
    assert_int_equal(cuDevicePrimaryCtxSetFlags(7, CU_CTX_SCHED_BLOCKING_SYNC), CUDA_SUCCESS);
    unsigned rt_flags = 0;
    assert_int_equal(cudaGetDeviceFlags(&rt_flags), cudaSuccess);
    assert_true(rt_flags & cudaDeviceScheduleBlockingSync);
    assert_int_equal(cuDevicePrimaryCtxSetFlags(7, CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
}

/* cmocka's assertions may only fail on the test's own thread: the thread
 * below returns the line of its first failed check instead. */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) return (void *)(uintptr_t)__LINE__;                                           \
    } while (0)

/* A fresh thread has no current context until something binds one; the
 * runtime's current device and the driver's current context move together. */
static void *current_context_thread(void *arg)
{
    (void)arg;
    CUcontext cur = (CUcontext)1, c1, c2, c5, popped;
    CUdevice dev = -1;
    int rt = -1;
    CHECK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS);
    CHECK(cur == NULL);
    CHECK(cuCtxGetDevice(&dev) == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(cuCtxSynchronize() == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(cuCtxPopCurrent(&popped) == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(cuDevicePrimaryCtxRetain(&c1, 1) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&c2, 2) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&c5, 5) == CUDA_SUCCESS);

    CHECK(cudaSetDevice(2) == cudaSuccess);
    CHECK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS);
    CHECK(cur == c2);
    CHECK(cuCtxGetDevice(&dev) == CUDA_SUCCESS);
    CHECK(dev == 2);

    CHECK(cuCtxSetCurrent(c5) == CUDA_SUCCESS);
    CHECK(cudaGetDevice(&rt) == cudaSuccess);
    CHECK(rt == 5);

    CHECK(cuCtxPushCurrent(c1) == CUDA_SUCCESS);
    CHECK(cudaGetDevice(&rt) == cudaSuccess);
    CHECK(rt == 1);
    CHECK(cuCtxPopCurrent(&popped) == CUDA_SUCCESS);
    CHECK(popped == c1);
    CHECK(cudaGetDevice(&rt) == cudaSuccess);
    CHECK(rt == 5);

    /* NULL pops: the stack below c5 is empty, so no context is left. */
    CHECK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
    CHECK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS);
    CHECK(cur == NULL);
    /* A runtime call binds the current device's context again. */
    CHECK(cudaSetDevice(5) == cudaSuccess);
    CHECK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS);
    CHECK(cur == c5);

    int bogus;
    CHECK(cuCtxSetCurrent((CUcontext)&bogus) == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(cuCtxPushCurrent(NULL) == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(cuCtxGetCurrent(NULL) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuDevicePrimaryCtxRelease(1) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRelease(2) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRelease(5) == CUDA_SUCCESS);
    return NULL;
}

static void test_current_context_follows_runtime(void **state)
{
    (void)state;
    pthread_t t;
    void *failed_line = NULL;
    assert_int_equal(pthread_create(&t, NULL, current_context_thread, NULL), 0);
    assert_int_equal(pthread_join(t, &failed_line), 0);
    assert_int_equal((uintptr_t)failed_line, 0);
}

static void test_memory_and_pointer_attributes(void **state)
{
    (void)state;
    assert_int_equal(cudaSetDevice(3), cudaSuccess);
    CUdeviceptr d = 0;
    assert_int_equal(cuMemAlloc(&d, 1000), CUDA_SUCCESS);
    void *rt = NULL;
    assert_int_equal(cudaMalloc(&rt, 4096), cudaSuccess);

    /* The runtime sees the driver's allocation and the other way round. */
    struct cudaPointerAttributes pa;
    assert_int_equal(cudaPointerGetAttributes(&pa, (void *)(uintptr_t)d), cudaSuccess);
    assert_int_equal(pa.type, cudaMemoryTypeDevice);
    assert_int_equal(pa.device, 3);
    int ordinal = -1;
    assert_int_equal(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                           (CUdeviceptr)(uintptr_t)rt + 100),
                     CUDA_SUCCESS);
    assert_int_equal(ordinal, 3);
    CUcontext ctx = NULL, primary = NULL;
    assert_int_equal(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, d), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetCurrent(&primary), CUDA_SUCCESS);
    assert_ptr_equal(ctx, primary);
    unsigned type = 0;
    assert_int_equal(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d),
                     CUDA_SUCCESS);
    assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
    CUdeviceptr start = 0;
    size_t size = 0;
    assert_int_equal(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 7),
                     CUDA_SUCCESS);
    assert_int_equal(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 7),
                     CUDA_SUCCESS);
    assert_int_equal(start, d);
    assert_int_equal(size, 1000); /* the size asked for, as on a GPU */
    CUdeviceptr base = 0;
    assert_int_equal(cuMemGetAddressRange(&base, &size, d + 999), CUDA_SUCCESS);
    assert_int_equal(base, d);
    void *host = NULL;
    assert_int_equal(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, d),
                     CUDA_ERROR_INVALID_VALUE);

    /* Host memory the sim does not know: an error for one attribute, the
     * "not CUDA memory" answers for several. */
    int local = 0;
    CUdeviceptr plain = (CUdeviceptr)(uintptr_t)&local;
    assert_int_equal(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, plain),
                     CUDA_ERROR_INVALID_VALUE);
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT};
    type = 99;
    ctx = primary;
    void *data[] = {&type, &ctx};
    assert_int_equal(cuPointerGetAttributes(2, attrs, data, plain), CUDA_SUCCESS);
    assert_int_equal(type, 0);
    assert_null(ctx);

    size_t free_bytes = 0, total = 0;
    assert_int_equal(cuMemGetInfo(&free_bytes, &total), CUDA_SUCCESS);
    /* Both share the device's first page, which the device is charged. */
    assert_int_equal(free_bytes, total - (2 << 20));

    assert_int_equal(cuMemAlloc(&d, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFree(start), CUDA_SUCCESS);
    assert_int_equal(cuMemFree(start), CUDA_ERROR_INVALID_VALUE); /* double free */
    assert_int_equal(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, start),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFree((CUdeviceptr)(uintptr_t)rt), CUDA_SUCCESS);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
}

/* cuMemAllocAsync/cuMemFreeAsync are the runtime's current pool with the
 * driver's codes: a block freed on a stream is reused at once there, the
 * runtime's last error is left alone, and the _ptsz variants take stream 0
 * for the per-thread stream (cuda.h declares those only for per-thread
 * default stream builds). */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream);

static void test_stream_ordered_memory(void **state)
{
    (void)state;
    cudaStream_t s;
    CUdeviceptr a = 0, b = 0;
    assert_int_equal(cudaSetDevice(2), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cuMemAllocAsync(&a, 3000, (CUstream)s), CUDA_SUCCESS);
    int ordinal = -1;
    assert_int_equal(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a),
                     CUDA_SUCCESS);
    assert_int_equal(ordinal, 2);
    assert_int_equal(cuMemFreeAsync(a, (CUstream)s), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocAsync(&b, 3000, (CUstream)s), CUDA_SUCCESS);
    assert_int_equal(b, a);
    assert_int_equal(cuMemFreeAsync(b, (CUstream)s), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocAsync_ptsz(&a, 512, NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeAsync_ptsz(a, CU_STREAM_PER_THREAD), CUDA_SUCCESS);

    /* Bad arguments: the driver's codes, no last error. */
    /* Size 0 is no error here, unlike cuMemAlloc (an H100 answered so):
     * a null pointer, as cudaMallocAsync gives. */
    a = 1;
    assert_int_equal(cuMemAllocAsync(&a, 0, (CUstream)s), CUDA_SUCCESS);
    assert_int_equal(a, 0);
    assert_int_equal(cuMemAllocAsync(NULL, 8, (CUstream)s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFreeAsync(b, (CUstream)s), CUDA_ERROR_INVALID_VALUE); /* double */
    assert_int_equal(cuMemFreeAsync(0, (CUstream)s), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocAsync(&a, (size_t)1 << 62, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
    assert_int_equal(cuMemAllocAsync(&a, 8, (CUstream)s), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuMemFreeAsync(b, (CUstream)s), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
}

/* cuMemsetD32Async and cuStreamWriteValue32 are device work on a runtime
 * stream, in its order: held behind a host function, then run in sequence. */
static void test_stream_memory_operations(void **state)
{
    (void)state;
    enum { N = 1024 };
    cudaStream_t s;
    uint32_t *dev = NULL, *host = NULL;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&dev, N * 4), cudaSuccess);
    assert_int_equal(cudaMallocHost((void **)&host, N * 4), cudaSuccess);
    host[0] = 1;
    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)dev;
    assert_int_equal(cuMemsetD32Async(d, 0xdeadbeef, N, (CUstream)s), CUDA_SUCCESS);
    assert_int_equal(cuStreamWriteValue32((CUstream)s, d + 8, 7, 0), CUDA_SUCCESS);
    /* Pinned host memory is reachable too. */
    assert_int_equal(cuStreamWriteValue32((CUstream)s, (CUdeviceptr)(uintptr_t)host, 42,
                                          CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER),
                     CUDA_SUCCESS);
    fs_test_sleep_ms(20);
    assert_int_equal(cudaStreamQuery(s), cudaErrorNotReady);
    assert_int_equal(host[0], 1); /* held behind the gate */
    fs_gate_open(&gate);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(host[0], 42);
    assert_int_equal(cudaMemcpy(host, dev, N * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < N; i++)
        assert_int_equal(host[i], i == 2 ? 7u : 0xdeadbeefu);

    /* Bad arguments. */
    assert_int_equal(cuMemsetD32Async(d + 2, 0, 4, (CUstream)s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemsetD32Async(d, 0, N + 1, (CUstream)s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuStreamWriteValue32((CUstream)s, d, 1, 0x80), CUDA_ERROR_INVALID_VALUE);
    uint32_t plain;
    assert_int_equal(cuStreamWriteValue32((CUstream)s, (CUdeviceptr)(uintptr_t)&plain, 1, 0),
                     CUDA_ERROR_INVALID_VALUE);
    CUcontext ctx = NULL, primary = NULL;
    assert_int_equal(cuStreamGetCtx((CUstream)s, &ctx), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRetain(&primary, 0), CUDA_SUCCESS);
    assert_ptr_equal(ctx, primary);
    assert_int_equal(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
    assert_int_equal(cuMemsetD32Async(d, 0, 4, (CUstream)s), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuStreamGetCtx((CUstream)s, &ctx), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cudaFree(dev), cudaSuccess);
    assert_int_equal(cudaFreeHost(host), cudaSuccess);
}

/* A reset destroys the device's memory and leaves its context inactive. */
static void test_primary_context_reset(void **state)
{
    (void)state;
    assert_int_equal(cudaSetDevice(4), cudaSuccess);
    void *p = NULL;
    assert_int_equal(cudaMalloc(&p, 4096), cudaSuccess);
    assert_int_equal(cuDevicePrimaryCtxReset(4), CUDA_SUCCESS);
    unsigned flags;
    int active = 1, ordinal;
    assert_int_equal(cuDevicePrimaryCtxGetState(4, &flags, &active), CUDA_SUCCESS);
    assert_int_equal(active, 0);
    assert_int_equal(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                           (CUdeviceptr)(uintptr_t)p),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
}

static CUmemAllocationProp exportable(int device)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

static CUdeviceptr map_rw(CUmemGenericAllocationHandle h, size_t size, int device)
{
    CUdeviceptr va = 0;
    assert_int_equal(cuMemAddressReserve(&va, size, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va, size, 0, h, 0), CUDA_SUCCESS);
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, device},
                              CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    assert_int_equal(cuMemSetAccess(va, size, &access, 1), CUDA_SUCCESS);
    return va;
}

/* Export as a file descriptor, import it back: both map the same memory. */
static void test_vmm_export_import_retain(void **state)
{
    (void)state;
    CUmemAllocationProp prop = exportable(1);
    size_t gran = 0;
    assert_int_equal(
        cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
        CUDA_SUCCESS);
    CUmemGenericAllocationHandle h = 0, imported = 0, retained = 0;
    assert_int_equal(cuMemCreate(&h, gran, &prop, 0), CUDA_SUCCESS);
    int fd = -1;
    assert_int_equal(
        cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        CUDA_SUCCESS);
    assert_true(fd >= 0);
    assert_int_equal(cuMemImportFromShareableHandle(&imported, (void *)(uintptr_t)fd,
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                     CUDA_SUCCESS);
    close(fd);
    CUmemAllocationProp got = {0};
    assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&got, imported), CUDA_SUCCESS);
    assert_int_equal(got.location.id, 1);
    assert_int_equal(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);

    CUdeviceptr a = map_rw(h, gran, 1), b = map_rw(imported, gran, 1);
    const char msg[] = "through the other mapping";
    assert_int_equal(cudaMemcpy((void *)(uintptr_t)a + 100, msg, sizeof msg, cudaMemcpyDefault),
                     cudaSuccess);
    char back[sizeof msg];
    assert_int_equal(cudaMemcpy(back, (void *)(uintptr_t)b + 100, sizeof msg, cudaMemcpyDefault),
                     cudaSuccess);
    assert_string_equal(back, msg);

    /* The handle of what is mapped at an address, one more release owed. */
    assert_int_equal(cuMemRetainAllocationHandle(&retained, (void *)(uintptr_t)(a + 4096)),
                     CUDA_SUCCESS);
    assert_int_equal(retained, h);
    assert_int_equal(cuMemRelease(retained), CUDA_SUCCESS);
    assert_int_equal(cuMemRetainAllocationHandle(&retained, back), CUDA_ERROR_INVALID_VALUE);

    /* Released while mapped (the mapping keeps the memory): a retained
     * handle is valid again, and exports (how the shim shares the pages of
     * its expandable segments). */
    assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
    assert_int_equal(cuMemRetainAllocationHandle(&retained, (void *)(uintptr_t)a), CUDA_SUCCESS);
    fd = -1;
    assert_int_equal(
        cuMemExportToShareableHandle(&fd, retained, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        CUDA_SUCCESS);
    assert_true(fd >= 0);
    close(fd);
    h = retained; /* released below, as the handle from cuMemCreate would be */

    assert_int_equal(cuMemUnmap(a, gran), CUDA_SUCCESS);
    assert_int_equal(cuMemUnmap(b, gran), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(a, gran), CUDA_SUCCESS);
    assert_int_equal(cuMemAddressFree(b, gran), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(imported), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);

    /* Not created exportable; fabric handles need an IMEX channel, which
     * the process has not got: not permitted, as an H200 answered. The
     * GPUDirect RDMA flag, which the device says it supports, is taken. */
    CUmemAllocationProp plain = exportable(0);
    plain.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    assert_int_equal(cuMemCreate(&h, gran, &plain, 0), CUDA_SUCCESS);
    assert_int_equal(
        cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
    plain.allocFlags.gpuDirectRDMACapable = 1;
    assert_int_equal(cuMemCreate(&h, gran, &plain, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
    plain.allocFlags.gpuDirectRDMACapable = 0;
    plain.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
    assert_int_equal(cuMemCreate(&h, gran, &plain, 0), CUDA_ERROR_NOT_PERMITTED);
    int not_memfd[2];
    assert_int_equal(pipe(not_memfd), 0);
    assert_int_equal(cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)not_memfd[0],
                                                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                     CUDA_ERROR_INVALID_VALUE);
    close(not_memfd[0]);
    close(not_memfd[1]);
}

/* cuGetProcAddress hands out the library's own functions, the runtime's
 * cudaGetDriverEntryPoint the same ones. */
static void test_get_proc_address(void **state)
{
    (void)state;
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    assert_int_equal(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0, &status), CUDA_SUCCESS);
    assert_int_equal(status, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_ptr_equal(fn, (void *)cuMemAlloc_v2);
    assert_int_equal(cuGetProcAddress("cuMemAlloc", &fn, 2000, 0, &status), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_null(fn);
    assert_int_equal(cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0, &status),
                     CUDA_ERROR_NOT_FOUND);
    assert_int_equal(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_int_equal(cuGetProcAddress("cuInit", &fn, 13000, 8, &status), CUDA_ERROR_INVALID_VALUE);
    /* The stream-taking entry points have a per-thread variant. */
    void *self = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(self);
    assert_int_equal(cuGetProcAddress("cuMemsetD32Async", &fn, 13000,
                                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
                     CUDA_SUCCESS);
    assert_ptr_equal(fn, dlsym(self, "cuMemsetD32Async_ptsz"));
    assert_int_equal(cuGetProcAddress("cuMemFreeAsync", &fn, 13000,
                                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
                     CUDA_SUCCESS);
    assert_ptr_equal(fn, dlsym(self, "cuMemFreeAsync_ptsz"));
    /* cuStreamGetCtx changed its signature in 12.5. */
    assert_int_equal(cuGetProcAddress("cuStreamGetCtx", &fn, 12000, 0, &status), CUDA_SUCCESS);
    assert_ptr_equal(fn, dlsym(self, "cuStreamGetCtx"));
    assert_int_equal(cuGetProcAddress("cuStreamGetCtx", &fn, 12050, 0, &status), CUDA_SUCCESS);
    assert_ptr_equal(fn, dlsym(self, "cuStreamGetCtx_v2"));
    dlclose(self);

    enum cudaDriverEntryPointQueryResult rt_status;
    assert_int_equal(cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000,
                                                      cudaEnableDefault, &rt_status),
                     cudaSuccess);
    assert_int_equal(rt_status, cudaDriverEntryPointSuccess);
    assert_ptr_equal(fn, (void *)cuCtxGetCurrent);
}

static void CUDA_CB on_log(void *data, CUlogLevel level, char *message, size_t length)
{
    (void)data, (void)level, (void)message, (void)length;
}

static void test_unsupported_families(void **state)
{
    (void)state;
    CUmemGenericAllocationHandle mc;
    CUmulticastObjectProp mprop = {.numDevices = 2, .size = 2 << 20};
    assert_int_equal(cuMulticastCreate(&mc, &mprop), CUDA_ERROR_NOT_SUPPORTED);
    CUdevResource res;
    assert_int_equal(cuDeviceGetDevResource(0, &res, CU_DEV_RESOURCE_TYPE_SM),
                     CUDA_ERROR_NOT_SUPPORTED);
    CUmodule mod;
    CUlinkState link;
    assert_int_equal(cuLinkCreate(0, NULL, NULL, &link), CUDA_ERROR_NOT_SUPPORTED);
    CUmemoryPool host_pool;
    CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST};
    assert_int_equal(cuMemGetDefaultMemPool(&host_pool, &host, CU_MEM_ALLOCATION_TYPE_PINNED),
                     CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cuModuleLoadData(&mod, "not an image"), CUDA_ERROR_INVALID_IMAGE);

    /* Logs callbacks register for real. */
    CUlogsCallbackHandle h1, h2;
    assert_int_equal(cuLogsRegisterCallback(on_log, NULL, &h1), CUDA_SUCCESS);
    assert_int_equal(cuLogsRegisterCallback(on_log, NULL, &h2), CUDA_SUCCESS);
    assert_int_equal(cuLogsUnregisterCallback(h1), CUDA_SUCCESS);
    assert_int_equal(cuLogsUnregisterCallback(h1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuLogsUnregisterCallback(h2), CUDA_SUCCESS);
    assert_int_equal(cuLogsRegisterCallback(NULL, NULL, &h1), CUDA_ERROR_INVALID_VALUE);

    /* Tensor maps are encoded after the documented checks. */
    void *p = NULL;
    assert_int_equal(cudaMalloc(&p, 1 << 20), cudaSuccess);
    CUtensorMap map;
    cuuint64_t dims[2] = {256, 256}, strides[1] = {256 * 4};
    cuuint32_t box[2] = {64, 64}, elem[2] = {1, 1};
    assert_int_equal(
        cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, p, dims, strides, box,
                               elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        CUDA_SUCCESS);
    strides[0] = 1000; /* not a multiple of 16 */
    assert_int_equal(
        cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, p, dims, strides, box,
                               elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                               CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cudaFree(p), cudaSuccess);
}

/* A module from PTX text (what an image declares is all the sim reads):
 * its function launches as ordered work on its stream, held behind earlier
 * work, computing nothing; its global has device memory that sets reach;
 * the driver's codes for what is wrong; unloading forgets both. */
static const char ptx[] = ".version 8.0\n"
                          ".target sm_90\n"
                          ".address_size 64\n"
                          ".visible .global .align 4 .b8 table[64];\n"
                          ".visible .entry scale(.param .u64 p)\n"
                          "{\n"
                          "  ret;\n"
                          "}\n";

static void test_modules_and_launches(void **state)
{
    (void)state;
    CUmodule mod;
    CUfunction f, g;
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    char log[64] = "stale";
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[2] = {log, (void *)(uintptr_t)sizeof log};
    assert_int_equal(cuModuleLoadDataEx(&mod, ptx, 2, opts, values), CUDA_SUCCESS);
    assert_string_equal(log, ""); /* nothing compiled, nothing logged */
    assert_int_equal(cuModuleGetFunction(&f, mod, "scale"), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&g, mod, "nope"), CUDA_ERROR_NOT_FOUND);
    unsigned count = 0;
    assert_int_equal(cuModuleGetFunctionCount(&count, mod), CUDA_SUCCESS);
    assert_int_equal(count, 1);
    assert_int_equal(cuModuleEnumerateFunctions(&g, 1, mod), CUDA_SUCCESS);
    assert_ptr_equal(g, f);

    CUdeviceptr table;
    size_t bytes = 0;
    assert_int_equal(cuModuleGetGlobal(&table, &bytes, mod, "table"), CUDA_SUCCESS);
    assert_int_equal(bytes, 64);
    uint32_t words[16];
    assert_int_equal(cuMemcpyDtoH(words, table, 64), CUDA_SUCCESS);
    for (int i = 0; i < 16; i++)
        assert_int_equal(words[i], 0); /* PTX initialisers are zeros here */
    assert_int_equal(cuMemsetD32(table + 4, 0x01020304, 14), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH(words, table, 64), CUDA_SUCCESS);
    assert_int_equal(words[0], 0);
    assert_int_equal(words[1], 0x01020304u);
    assert_int_equal(words[15], 0);
    assert_int_equal(cuModuleGetGlobal(&table, &bytes, mod, "nope"), CUDA_ERROR_NOT_FOUND);

    int v = 0;
    assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f),
                     CUDA_SUCCESS);
    assert_int_equal(v, 1024);
    assert_int_equal(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000),
                     CUDA_SUCCESS);
    assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f),
                     CUDA_SUCCESS);
    assert_int_equal(v, 100000);
    assert_int_equal(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 8),
                     CUDA_ERROR_INVALID_VALUE); /* read-only */
    int blocks = 0;
    assert_int_equal(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0), CUDA_SUCCESS);
    assert_true(blocks > 0);

    /* Ordered: held behind a host function, then done. */
    CUstream s;
    CUevent done;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&done, 0), CUDA_SUCCESS);
    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cuLaunchHostFunc(s, fs_gate_wait, &gate), CUDA_SUCCESS);
    void *param = &table, *params[] = {param};
    assert_int_equal(cuLaunchKernel(f, 4, 1, 1, 128, 1, 1, 60000, s, params, NULL), CUDA_SUCCESS);
    CUlaunchAttribute attr = {.id = CU_LAUNCH_ATTRIBUTE_PRIORITY};
    CUlaunchConfig config = {2, 1, 1, 64, 1, 1, 0, s, &attr, 1};
    assert_int_equal(cuLaunchKernelEx(&config, f, params, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(done, s), CUDA_SUCCESS);
    fs_test_sleep_ms(20);
    assert_int_equal(cuEventQuery(done), CUDA_ERROR_NOT_READY);
    fs_gate_open(&gate);
    assert_int_equal(cuEventSynchronize(done), CUDA_SUCCESS);

    /* What a GPU refuses. */
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, s, NULL, NULL),
                     CUDA_ERROR_INVALID_VALUE); /* over 1024 threads a block */
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 200000, s, NULL, NULL),
                     CUDA_ERROR_INVALID_VALUE); /* over the function's shared memory */
    void *extra[] = {CU_LAUNCH_PARAM_END};
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, extra),
                     CUDA_ERROR_INVALID_VALUE); /* both ways of passing parameters */
    assert_int_equal(cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL),
                     CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuLaunchCooperativeKernel(f, 1u << 20, 1, 1, 1024, 1, 1, 0, s, NULL),
                     CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);

    assert_int_equal(cuModuleUnload(mod), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&g, mod, "scale"), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL),
                     CUDA_ERROR_INVALID_HANDLE); /* its function is gone with it */
    assert_int_equal(cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuModuleLoad(&mod, "/nonexistent/module.cubin"), CUDA_ERROR_FILE_NOT_FOUND);
    CUmoduleLoadingMode mode;
    assert_int_equal(cuModuleGetLoadingMode(&mode), CUDA_SUCCESS);
    assert_int_equal(mode, CU_MODULE_LAZY_LOADING);
    assert_int_equal(cuEventDestroy(done), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

/* What a context keeps: limits, cache preference, its id; and the CUDA 13
 * calls that name the context. */
static void test_context_settings(void **state)
{
    (void)state;
    CUcontext primary, created;
    assert_int_equal(cudaSetDevice(1), cudaSuccess);
    assert_int_equal(cuCtxGetCurrent(&primary), CUDA_SUCCESS);
    size_t value = 0;
    assert_int_equal(cuCtxGetLimit(&value, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
    assert_int_equal(value, 8 << 20);
    assert_int_equal(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 << 20), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetLimit(&value, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
    assert_int_equal(value, 64 << 20);
    assert_int_equal(cuCtxSetLimit(CU_LIMIT_MAX_L2_FETCH_GRANULARITY, 1000), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetLimit(&value, CU_LIMIT_MAX_L2_FETCH_GRANULARITY), CUDA_SUCCESS);
    assert_int_equal(value, 128); /* clamped, as documented */
    assert_int_equal(cuCtxSetLimit(CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH, 4),
                     CUDA_ERROR_UNSUPPORTED_LIMIT); /* compute capability 9.0 */
    assert_int_equal(cuCtxGetLimit(&value, CU_LIMIT_MAX), CUDA_ERROR_INVALID_VALUE);
    CUfunc_cache cache;
    assert_int_equal(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_L1), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetCacheConfig(&cache), CUDA_SUCCESS);
    assert_int_equal(cache, CU_FUNC_CACHE_PREFER_L1);
    int least = 0, greatest = 0;
    assert_int_equal(cuCtxGetStreamPriorityRange(&least, &greatest), CUDA_SUCCESS);
    int rt_least, rt_greatest;
    assert_int_equal(cudaDeviceGetStreamPriorityRange(&rt_least, &rt_greatest), cudaSuccess);
    assert_int_equal(least, rt_least);
    assert_int_equal(greatest, rt_greatest);
    unsigned version = 0;
    assert_int_equal(cuCtxGetApiVersion(NULL, &version), CUDA_SUCCESS);
    assert_int_equal(version, 3020);

    unsigned long long id_primary = 0, id_created = 0, id_again = 0;
    assert_int_equal(cuCtxCreate_v4(&created, NULL, 0, 1), CUDA_SUCCESS); /* now current */
    assert_int_equal(cuCtxGetId(primary, &id_primary), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetId(NULL, &id_created), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetId(created, &id_again), CUDA_SUCCESS);
    assert_true(id_primary != id_created);
    assert_int_equal(id_created, id_again);
    CUdevice dev = -1;
    assert_int_equal(cuCtxGetDevice_v2(&dev, primary), CUDA_SUCCESS);
    assert_int_equal(dev, 1);
    assert_int_equal(cuCtxSynchronize_v2(created), CUDA_SUCCESS);
    assert_int_equal(cuCtxDestroy(created), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetId(created, &id_again), CUDA_ERROR_INVALID_CONTEXT);
    assert_int_equal(cuCtxSynchronize_v2(created), CUDA_ERROR_INVALID_CONTEXT);

    CUexecAffinityParam affinity;
    int sms = 0;
    assert_int_equal(cuCtxGetExecAffinity(&affinity, CU_EXEC_AFFINITY_TYPE_SM_COUNT), CUDA_SUCCESS);
    assert_int_equal(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 1), cudaSuccess);
    assert_int_equal(affinity.param.smCount.val, sms);

    CUcontext peer;
    assert_int_equal(cuDevicePrimaryCtxRetain(&peer, 2), CUDA_SUCCESS);
    assert_int_equal(cuCtxEnablePeerAccess(peer, 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxEnablePeerAccess(peer, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    assert_int_equal(cuCtxDisablePeerAccess(peer), CUDA_SUCCESS);
    assert_int_equal(cuCtxDisablePeerAccess(peer), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    assert_int_equal(cuDevicePrimaryCtxRelease(2), CUDA_SUCCESS);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
}

static void CUDA_CB fs_test_sleep_ms_host(void *data)
{
    (void)data;
    fs_test_sleep_ms(10);
}

static void CUDA_CB on_stream_done(CUstream s, CUresult status, void *data)
{
    (void)s;
    *(int *)data = status == CUDA_SUCCESS ? 1 : -1;
}

/* Streams, their capture into a graph and events, as the runtime's. */
static void test_streams_capture_events(void **state)
{
    (void)state;
    CUstream s;
    int least, greatest, priority = 0;
    assert_int_equal(cuCtxGetStreamPriorityRange(&least, &greatest), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, greatest - 5),
                     CUDA_SUCCESS);
    assert_int_equal(cuStreamGetPriority(s, &priority), CUDA_SUCCESS);
    assert_int_equal(priority, greatest); /* clamped to the range */
    unsigned long long id = 0, rt_id = 0;
    assert_int_equal(cuStreamGetId(s, &id), CUDA_SUCCESS);
    assert_int_equal(cudaStreamGetId((cudaStream_t)s, &rt_id), cudaSuccess);
    assert_int_equal(id, rt_id);
    CUgreenCtx green = (CUgreenCtx)1;
    assert_int_equal(cuStreamGetGreenCtx(s, &green), CUDA_SUCCESS);
    assert_null(green);

    int called = 0;
    assert_int_equal(cuStreamAddCallback(s, on_stream_done, &called, 0), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(called, 1);
    assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);

    /* A set captured, not run, then run by launching the graph. */
    CUdeviceptr d;
    uint32_t word = 0;
    assert_int_equal(cuMemAlloc(&d, 4), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32(d, 0, 1), CUDA_SUCCESS);
    assert_int_equal(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CUstreamCaptureStatus capturing;
    assert_int_equal(cuStreamGetCaptureInfo(s, &capturing, NULL, NULL, NULL, NULL, NULL),
                     CUDA_SUCCESS);
    assert_int_equal(capturing, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_int_equal(cuMemsetD32Async(d, 77, 1, s), CUDA_SUCCESS);
    CUgraph graph = NULL;
    assert_int_equal(cuStreamEndCapture(s, &graph), CUDA_SUCCESS);
    assert_non_null(graph);
    assert_int_equal(cuMemcpyDtoH(&word, d, 4), CUDA_SUCCESS);
    assert_int_equal(word, 0); /* captured, not run */
    cudaGraphExec_t exec;
    assert_int_equal(cudaGraphInstantiate(&exec, (cudaGraph_t)graph, 0), cudaSuccess);
    assert_int_equal(cudaGraphLaunch(exec, (cudaStream_t)s), cudaSuccess);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH(&word, d, 4), CUDA_SUCCESS);
    assert_int_equal(word, 77);
    assert_int_equal(cudaGraphExecDestroy(exec), cudaSuccess);
    assert_int_equal(cudaGraphDestroy((cudaGraph_t)graph), cudaSuccess);

    CUevent a, b;
    float ms = -1;
    assert_int_equal(cuEventCreate(&a, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventCreate(&b, 0), CUDA_SUCCESS);
    assert_int_equal(cuEventRecordWithFlags(a, s, CU_EVENT_RECORD_DEFAULT), CUDA_SUCCESS);
    assert_int_equal(cuLaunchHostFunc(s, (CUhostFn)fs_test_sleep_ms_host, NULL), CUDA_SUCCESS);
    assert_int_equal(cuEventRecord(b, s), CUDA_SUCCESS);
    assert_int_equal(cuEventSynchronize(b), CUDA_SUCCESS);
    assert_int_equal(cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
    assert_true(ms >= 5.0f);
    assert_int_equal(cuEventRecordWithFlags(a, s, 0x40), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuEventDestroy(a), CUDA_SUCCESS);
    assert_int_equal(cuEventDestroy(b), CUDA_SUCCESS);
    assert_int_equal(cuMemFree(d), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
    assert_int_equal(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

/* Pools through the driver are the runtime's; a pointer's pool, managed
 * and host memory, and the one settable pointer attribute. */
static void test_pools_and_pointers(void **state)
{
    (void)state;
    CUmemoryPool pool, def = NULL, rt_def = NULL;
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    assert_int_equal(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
    CUstream s;
    CUdeviceptr p;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocFromPoolAsync(&p, 1 << 20, pool, s), CUDA_SUCCESS);
    CUmemoryPool of = NULL;
    assert_int_equal(cuPointerGetAttribute(&of, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p),
                     CUDA_SUCCESS);
    assert_ptr_equal(of, pool);
    cuuint64_t used = 0;
    assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used),
                     CUDA_SUCCESS);
    assert_int_equal(used, 1 << 20);
    assert_int_equal(cuMemFreeAsync(p, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemPoolDestroy(pool), CUDA_SUCCESS);
    CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    assert_int_equal(cuMemGetDefaultMemPool(&def, &dev0, CU_MEM_ALLOCATION_TYPE_PINNED),
                     CUDA_SUCCESS);
    assert_int_equal(cudaDeviceGetDefaultMemPool((cudaMemPool_t *)&rt_def, 0), cudaSuccess);
    assert_ptr_equal(def, rt_def);
    assert_int_equal(cuMemGetDefaultMemPool(&def, &dev0, (CUmemAllocationType)7),
                     CUDA_ERROR_INVALID_VALUE);

    CUdeviceptr managed;
    unsigned is_managed = 0;
    assert_int_equal(cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(cuPointerGetAttribute(&is_managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, managed),
                     CUDA_SUCCESS);
    assert_int_equal(is_managed, 1);
    ((volatile char *)(uintptr_t)managed)[0] = 1; /* the host may touch it */
    assert_int_equal(cuMemFree(managed), CUDA_SUCCESS);

    void *pinned = NULL;
    unsigned flags = 0;
    assert_int_equal(cuMemHostAlloc(&pinned, 4096, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
    assert_int_equal(cuMemHostGetFlags(&flags, (char *)pinned + 100), CUDA_SUCCESS);
    assert_int_equal(flags, CU_MEMHOSTALLOC_PORTABLE);
    CUdeviceptr mapped = 0;
    assert_int_equal(cuMemHostGetDevicePointer(&mapped, pinned, 0), CUDA_SUCCESS);
    assert_int_equal(mapped, (CUdeviceptr)(uintptr_t)pinned);
    assert_int_equal(cuMemFreeHost(pinned), CUDA_SUCCESS);
    static char plain[8192];
    assert_int_equal(cuMemHostRegister(plain, sizeof plain, CU_MEMHOSTREGISTER_READ_ONLY),
                     CUDA_SUCCESS);
    assert_int_equal(cuMemHostGetFlags(&flags, plain), CUDA_SUCCESS);
    assert_int_equal(flags, CU_MEMHOSTREGISTER_READ_ONLY);
    assert_int_equal(cuMemHostUnregister(plain), CUDA_SUCCESS);
    assert_int_equal(cuMemHostGetFlags(&flags, plain), CUDA_ERROR_INVALID_VALUE);

    /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: set, read back; the others are
     * read-only. */
    int sync = 1, got = 0;
    assert_int_equal(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
    assert_int_equal(cuPointerSetAttribute(&sync, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p),
                     CUDA_SUCCESS);
    assert_int_equal(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p + 8),
                     CUDA_SUCCESS);
    assert_int_equal(got, 1);
    assert_int_equal(cuPointerSetAttribute(&sync, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p),
                     CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_initialized),
        cmocka_unit_test(test_devices_match_runtime),
        cmocka_unit_test(test_primary_context_state),
        cmocka_unit_test(test_current_context_follows_runtime),
        cmocka_unit_test(test_memory_and_pointer_attributes),
        cmocka_unit_test(test_stream_ordered_memory),
        cmocka_unit_test(test_stream_memory_operations),
        cmocka_unit_test(test_primary_context_reset),
        cmocka_unit_test(test_vmm_export_import_retain),
        cmocka_unit_test(test_get_proc_address),
        cmocka_unit_test(test_unsupported_families),
        cmocka_unit_test(test_modules_and_launches),
        cmocka_unit_test(test_context_settings),
        cmocka_unit_test(test_streams_capture_events),
        cmocka_unit_test(test_pools_and_pointers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
