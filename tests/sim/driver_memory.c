/* driver_memory.c - a driver-API program on the simulated libcuda.so.1 that
 * sets memory (cuMemsetD8/D16/D32, their 2-D forms, the Async forms, and
 * the per-thread forms got through cuGetProcAddress), copies it (linear,
 * peer, 2-D, 3-D, batched) and reads it back, checking every byte: values
 * written where asked, nothing outside; Async sets and copies ordered on
 * their stream behind earlier work; stream memory operations holding a
 * stream until a value arrives; the driver's codes for bad arguments, and
 * the runtime's last error untouched by them. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>

#include "require_device.h"

typedef CUresult (*memset_d32_fn)(CUdeviceptr, unsigned int, size_t);
typedef CUresult (*memset_d8_async_fn)(CUdeviceptr, unsigned char, size_t, CUstream);

static int setup(void **state)
{
    (void)state;
    CUcontext ctx;
    CUdevice dev;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

/* The bytes of n device bytes at p, read back with cuMemcpyDtoH. */
static void read_back(void *host, CUdeviceptr p, size_t n)
{
    assert_int_equal(cuMemcpyDtoH(host, p, n), CUDA_SUCCESS);
}

static void test_linear_sets(void **state)
{
    (void)state;
    enum { N = 4096 };
    CUdeviceptr p;
    unsigned char host[N];
    assert_int_equal(cuMemAlloc(&p, N), CUDA_SUCCESS);

    assert_int_equal(cuMemsetD8(p, 0x5a, N), CUDA_SUCCESS);
    read_back(host, p, N);
    for (int i = 0; i < N; i++)
        assert_int_equal(host[i], 0x5a);

    /* 16-bit values from byte 2, 100 of them; the rest keeps 0x5a. */
    assert_int_equal(cuMemsetD16(p + 2, 0xbeef, 100), CUDA_SUCCESS);
    read_back(host, p, N);
    for (int i = 0; i < N; i++) {
        unsigned char want = i < 2 || i >= 202 ? 0x5a : (i % 2 == 0 ? 0xef : 0xbe);
        assert_int_equal(host[i], want);
    }

    /* 32-bit values from byte 1024, 300 of them. */
    assert_int_equal(cuMemsetD32(p + 1024, 0xdeadbeef, 300), CUDA_SUCCESS);
    read_back(host, p, N);
    for (int i = 1024; i < 1024 + 1200; i += 4) {
        uint32_t v;
        memcpy(&v, host + i, 4);
        assert_int_equal(v, 0xdeadbeefu);
    }
    assert_int_equal(host[1023], 0x5a);
    assert_int_equal(host[1024 + 1200], 0x5a);

    /* Bad arguments: cuda.h's alignment, the allocation's end, memory the
     * device cannot reach, no context; 0 values is no error. */
    unsigned char pageable[16];
    assert_int_equal(cuMemsetD16(p + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemsetD32(p + 2, 0, 4), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemsetD8(p, 0, N + 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemsetD32(p, 0, N / 4 + 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemsetD8((CUdeviceptr)(uintptr_t)pageable, 0, 16), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemsetD8(p, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32(p, 0, (size_t)1 << 62), CUDA_ERROR_INVALID_VALUE);
    read_back(host, p, 4);
    assert_int_equal(host[0], 0x5a); /* none of them wrote */
    assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8(p, 0, 1), CUDA_ERROR_INVALID_VALUE); /* freed */
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

/* A rectangle of rows at the pitch cuMemAllocPitch chose: set in 8, 16 and
 * 32 bits, read back with a tight cuMemcpy2D. */
static void test_2d_sets(void **state)
{
    (void)state;
    enum { W = 100, H = 7 };
    CUdeviceptr p;
    size_t pitch = 0;
    assert_int_equal(cuMemAllocPitch(&p, &pitch, W, H, 4), CUDA_SUCCESS);
    assert_true(pitch >= W && pitch % 512 == 0);
    assert_int_equal(cuMemsetD2D8(p, pitch, 0x11, pitch, H), CUDA_SUCCESS);
    /* 16 bits, 10 values wide from byte 4 of rows 1..3; 32 bits, 5 wide
     * from byte 40 of rows 4..6. */
    assert_int_equal(cuMemsetD2D16(p + pitch + 4, pitch, 0xa1b2, 10, 3), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD2D32(p + 4 * pitch + 40, pitch, 0x01020304, 5, 3), CUDA_SUCCESS);

    unsigned char host[H][W];
    CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                       .srcDevice = p,
                       .srcPitch = pitch,
                       .dstMemoryType = CU_MEMORYTYPE_HOST,
                       .dstHost = host,
                       .dstPitch = W,
                       .WidthInBytes = W,
                       .Height = H};
    assert_int_equal(cuMemcpy2D(&c), CUDA_SUCCESS);
    for (int r = 0; r < H; r++)
        for (int x = 0; x < W; x++) {
            unsigned char want = 0x11;
            if (r >= 1 && r <= 3 && x >= 4 && x < 24) want = x % 2 == 0 ? 0xb2 : 0xa1;
            if (r >= 4 && x >= 40 && x < 60) want = (unsigned char)(4 - (x - 40) % 4);
            assert_int_equal(host[r][x], want);
        }

    /* cuda.h: a 16- or 32-bit set's pitch is aligned too; rows must fit. */
    assert_int_equal(cuMemsetD2D16(p, pitch + 1, 0, 4, 2), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemsetD2D32(p, pitch + 2, 0, 4, 2), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemsetD2D8(p, 16, 0, 32, 2), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemsetD2D8(p, pitch, 0, W, H + 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemAllocPitch(&p, &pitch, W, H, 3), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
}

/* Async sets on a stream held by a host function: nothing is written until
 * the stream gets there, then all of it, in order (pinned host memory, which
 * the host can watch, and device memory). */
static void test_async_sets_are_ordered(void **state)
{
    (void)state;
    enum { N = 256 };
    CUstream s;
    CUdeviceptr d;
    uint32_t *pinned;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc(&d, N * 4), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocHost((void **)&pinned, N * 4), CUDA_SUCCESS);
    memset(pinned, 0, N * 4);
    CUdeviceptr h = (CUdeviceptr)(uintptr_t)pinned;

    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cuLaunchHostFunc(s, fs_gate_wait, &gate), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32Async(d, 0xcafef00d, N, s), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(d + 8, 0x77, 8, s), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD2D16Async(d + 64, 16, 0x1234, 4, 3, s), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32Async(h, 7, N, s), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD16Async(h, 9, 2, s), CUDA_SUCCESS); /* after the 7s */
    fs_test_sleep_ms(20);
    assert_int_equal(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    for (int i = 0; i < N; i++)
        assert_int_equal(pinned[i], 0); /* held behind the gate */
    fs_gate_open(&gate);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_false(gate.timed_out);
    assert_int_equal(pinned[0], 0x00090009u);
    for (int i = 1; i < N; i++)
        assert_int_equal(pinned[i], 7);

    uint32_t back[N];
    read_back(back, d, N * 4);
    for (int i = 0; i < N; i++) {
        uint32_t want = 0xcafef00d;
        if (i == 2 || i == 3) want = 0x77777777;
        if (i >= 16 && i < 28 && (i - 16) % 4 < 2) want = 0x12341234; /* 8 bytes of each 16 */
        assert_int_equal(back[i], want);
    }

    /* A synchronous set of pinned memory waits for it; Async forms refuse a
     * destroyed stream. */
    assert_int_equal(cuMemsetD8(h, 0xee, 4), CUDA_SUCCESS);
    assert_int_equal(pinned[0], 0xeeeeeeeeu);
    assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(d, 0, 1, s), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuMemFreeHost(pinned), CUDA_SUCCESS);
    assert_int_equal(cuMemFree(d), CUDA_SUCCESS);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

/* Another thread's per-thread stream, held by a gate until the main thread
 * lets it go. */
struct holder {
    CUcontext ctx;
    struct fs_gate gate, launched;
};

static void *hold_own_stream(void *arg)
{
    struct holder *h = arg;
    if (cuCtxSetCurrent(h->ctx) == CUDA_SUCCESS)
        (void)cuLaunchHostFunc(CU_STREAM_PER_THREAD, fs_gate_wait, &h->gate);
    fs_gate_open(&h->launched);
    (void)cuStreamSynchronize(CU_STREAM_PER_THREAD);
    return NULL;
}

/* The per-thread default stream forms, as a program gets them from
 * cuGetProcAddress: stream 0 is then the calling thread's own stream, which
 * does not wait for another thread's, while the legacy stream waits for
 * every blocking stream. */
static void test_per_thread_forms(void **state)
{
    (void)state;
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    assert_int_equal(cuGetProcAddress("cuMemsetD32", &fn, CUDA_VERSION,
                                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
                     CUDA_SUCCESS);
    memset_d32_fn set32_ptds = (memset_d32_fn)fn;
    assert_int_equal(cuGetProcAddress("cuMemsetD32", &fn, CUDA_VERSION,
                                      CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status),
                     CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuMemsetD32);
    assert_ptr_not_equal((void *)set32_ptds, (void *)cuMemsetD32);
    assert_int_equal(cuGetProcAddress("cuMemsetD8Async", &fn, CUDA_VERSION,
                                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
                     CUDA_SUCCESS);
    memset_d8_async_fn set8_async_ptsz = (memset_d8_async_fn)fn;

    uint32_t *pinned;
    assert_int_equal(cuMemAllocHost((void **)&pinned, 64), CUDA_SUCCESS);
    memset(pinned, 0, 64);
    CUdeviceptr h = (CUdeviceptr)(uintptr_t)pinned;
    struct holder holder = {NULL, FS_GATE_INIT, FS_GATE_INIT};
    assert_int_equal(cuCtxGetCurrent(&holder.ctx), CUDA_SUCCESS);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_own_stream, &holder), 0);
    fs_gate_wait(&holder.launched);

    assert_int_equal(set8_async_ptsz(h, 0x42, 4, NULL), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    assert_int_equal(pinned[0], 0x42424242u); /* not held by the other thread's stream */
    assert_int_equal(cuMemsetD8Async(h + 4, 0x24, 4, NULL), CUDA_SUCCESS); /* legacy: held */
    fs_test_sleep_ms(20);
    assert_int_equal(cuStreamQuery(CU_STREAM_LEGACY), CUDA_ERROR_NOT_READY);
    assert_int_equal(pinned[1], 0);
    fs_gate_open(&holder.gate);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_false(holder.gate.timed_out);
    assert_int_equal(cuStreamSynchronize(CU_STREAM_LEGACY), CUDA_SUCCESS);
    assert_int_equal(pinned[1], 0x24242424u);
    assert_int_equal(set32_ptds(h + 8, 0x99, 3), CUDA_SUCCESS); /* pinned: it waits */
    assert_int_equal(pinned[4], 0x99);
    assert_int_equal(cuMemFreeHost(pinned), CUDA_SUCCESS);
}

/* Copies every way the driver names them, each checked byte for byte. */
static void test_copies(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    unsigned char *src = malloc(N), *dst = malloc(N);
    for (int i = 0; i < N; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    CUdeviceptr a, b, peer;
    CUcontext ctx0, ctx1;
    assert_int_equal(cuMemAlloc(&a, N), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc(&b, N), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetCurrent(&ctx0), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRetain(&ctx1, 1), CUDA_SUCCESS);
    assert_int_equal(cuCtxPushCurrent(ctx1), CUDA_SUCCESS);
    assert_int_equal(cuMemAlloc(&peer, N), CUDA_SUCCESS);
    assert_int_equal(cuCtxPopCurrent(NULL), CUDA_SUCCESS);

    assert_int_equal(cuMemcpyHtoD(a, src, N), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoD(b, a, N), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyPeer(peer, ctx1, b, ctx0, N), CUDA_SUCCESS);
    memset(dst, 0, N);
    assert_int_equal(cuMemcpy((CUdeviceptr)(uintptr_t)dst, peer, N), CUDA_SUCCESS);
    assert_memory_equal(dst, src, N);

    /* Async forms on a stream, then a 3-D box out of the middle. */
    CUstream s;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD8Async(b, 0, N, s), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoDAsync(b + 100, a + 100, 1000, s), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyAsync(b + 5000, a + 5000, 10, s), CUDA_SUCCESS);
    memset(dst, 0xff, N);
    assert_int_equal(cuMemcpyDtoHAsync(dst, b, N, s), CUDA_SUCCESS); /* pageable: waits */
    for (int i = 0; i < N; i++) {
        int copied = (i >= 100 && i < 1100) || (i >= 5000 && i < 5010);
        assert_int_equal(dst[i], copied ? src[i] : 0);
    }

    /* The box: 8 bytes wide, 3 rows, 2 slices, from (x 4, y 1, z 1) of a
     * 64 x 16 x 4 volume at a into (0, 0, 0) of a tight 8 x 3 x 2 one. */
    unsigned char box[2][3][8];
    CUDA_MEMCPY3D c = {.srcXInBytes = 4,
                       .srcY = 1,
                       .srcZ = 1,
                       .srcMemoryType = CU_MEMORYTYPE_DEVICE,
                       .srcDevice = a,
                       .srcPitch = 64,
                       .srcHeight = 16,
                       .dstMemoryType = CU_MEMORYTYPE_HOST,
                       .dstHost = box,
                       .dstPitch = 8,
                       .dstHeight = 3,
                       .WidthInBytes = 8,
                       .Height = 3,
                       .Depth = 2};
    assert_int_equal(cuMemcpy3DAsync(&c, s), CUDA_SUCCESS); /* pageable: waits */
    for (int z = 0; z < 2; z++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 8; x++)
                assert_int_equal(box[z][y][x], src[(z + 1) * 64 * 16 + (y + 1) * 64 + x + 4]);

    /* A batch of two copies on the stream, each with its attributes. */
    CUdeviceptr dsts[2] = {b, b + 10}, srcs[2] = {a + 20, a + 40};
    size_t sizes[2] = {10, 10}, idxs[1] = {0};
    CUmemcpyAttributes attr = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    assert_int_equal(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, idxs, 1, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    read_back(dst, b, 20);
    assert_memory_equal(dst, src + 20, 10);
    assert_memory_equal(dst + 10, src + 40, 10);

    /* Bad arguments. */
    c.srcPitch = 2; /* narrower than the row */
    assert_int_equal(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE);
    c.srcPitch = 64;
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY; /* the sim has no CUDA arrays */
    c.srcArray = (CUarray)(uintptr_t)0x1000;
    assert_int_equal(cuMemcpy3D(&c), CUDA_ERROR_INVALID_HANDLE);
    assert_int_equal(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst, src, 16), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemcpyDtoD(a, b, N + 1), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuMemcpyPeer(peer, (CUcontext)dst, b, ctx0, 16), CUDA_ERROR_INVALID_CONTEXT);
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
    assert_int_equal(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, idxs, 1, s),
                     CUDA_ERROR_INVALID_VALUE);
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    assert_int_equal(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, idxs, 1, CU_STREAM_LEGACY),
                     CUDA_ERROR_INVALID_VALUE); /* not the legacy stream */

    assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
    assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
    assert_int_equal(cuMemFree(b), CUDA_SUCCESS);
    assert_int_equal(cuMemFree(peer), CUDA_SUCCESS);
    assert_int_equal(cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
    free(src);
    free(dst);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

/* cuStreamWaitValue32 holds its stream until the host writes the word; the
 * set queued behind it then runs; cuStreamWriteValue64 stores in order. */
static void test_stream_wait_value(void **state)
{
    (void)state;
    CUstream s;
    uint64_t *word;
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuMemAllocHost((void **)&word, 64), CUDA_SUCCESS);
    memset(word, 0, 64);
    CUdeviceptr w = (CUdeviceptr)(uintptr_t)word;
    assert_int_equal(cuStreamWaitValue32(s, w, 5, CU_STREAM_WAIT_VALUE_GEQ), CUDA_SUCCESS);
    assert_int_equal(cuMemsetD32Async(w + 8, 0xabcd, 1, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamWriteValue64(s, w + 16, 0x1122334455667788ull, 0), CUDA_SUCCESS);
    fs_test_sleep_ms(20);
    assert_int_equal(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    assert_int_equal(word[1], 0);
    __atomic_store_n((uint32_t *)word, 4, __ATOMIC_RELEASE); /* not yet >= 5 */
    fs_test_sleep_ms(20);
    assert_int_equal(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    __atomic_store_n((uint32_t *)word, 6, __ATOMIC_RELEASE);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(word[1], 0xabcd);
    assert_int_equal(word[2], 0x1122334455667788ull);

    assert_int_equal(cuStreamWaitValue64(s, w + 4, 1, 0), CUDA_ERROR_INVALID_VALUE); /* align */
    assert_int_equal(cuStreamWaitValue32(s, w, 1, 7), CUDA_ERROR_INVALID_VALUE);     /* cond */
    assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
    assert_int_equal(cuMemFreeHost(word), CUDA_SUCCESS);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_sets),
        cmocka_unit_test(test_2d_sets),
        cmocka_unit_test(test_async_sets_are_ordered),
        cmocka_unit_test(test_per_thread_forms),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_stream_wait_value),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
