/* memory.c - copies and sets (1D, 2D, peer) land the right bytes; copies to
 * pageable memory block the caller while pinned ones do not;
 * cudaPointerGetAttributes and cudaMemGetInfo describe what was allocated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "require_device.h"

static void test_copy_and_set_roundtrip(void **state)
{
    (void)state;
    enum { N = 1 << 20 };
    unsigned char *host = malloc(N), *back = malloc(N);
    void *d1, *d2;
    for (int i = 0; i < N; i++)
        host[i] = (unsigned char)(i * 7);
    assert_int_equal(cudaMalloc(&d1, N), cudaSuccess);
    assert_int_equal(cudaMalloc(&d2, N), cudaSuccess);
    assert_int_equal(cudaMemcpy(d1, host, N, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaMemcpy(d2, d1, N, cudaMemcpyDefault), cudaSuccess);
    assert_int_equal(cudaMemset((char *)d2 + 100, 0xab, 50), cudaSuccess);
    assert_int_equal(cudaMemcpy(back, d2, N, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < N; i++) {
        unsigned char want = (i >= 100 && i < 150) ? 0xab : (unsigned char)(i * 7);
        if (back[i] != want) fail_msg("byte %d: %d != %d", i, back[i], want);
    }
    /* The same on a stream, asynchronously. */
    cudaStream_t s;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(d1, 3, N, s), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(back, d1, N, cudaMemcpyDefault, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    for (int i = 0; i < N; i++)
        if (back[i] != 3) fail_msg("async byte %d: %d", i, back[i]);
    cudaStreamDestroy(s);
    cudaFree(d1);
    cudaFree(d2);
    free(host);
    free(back);
}

static void test_copy_2d(void **state)
{
    (void)state;
    enum { W = 10, H = 6, SP = 16, DP = 32 };
    unsigned char src[SP * H], out[DP * H];
    for (int i = 0; i < SP * H; i++)
        src[i] = (unsigned char)i;
    void *d;
    size_t pitch = DP;
    assert_int_equal(cudaMalloc(&d, DP * H), cudaSuccess);
    assert_int_equal(cudaMemset(d, 0xee, DP * H), cudaSuccess);
    assert_int_equal(cudaMemcpy2D(d, pitch, src, SP, W, H, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaMemset2D((char *)d + W, pitch, 0x11, 2, H), cudaSuccess);
    assert_int_equal(cudaMemcpy(out, d, DP * H, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int r = 0; r < H; r++)
        for (int c = 0; c < DP; c++) {
            int want = c < W ? src[r * SP + c] : c < W + 2 ? 0x11 : 0xee;
            if (out[r * DP + c] != want)
                fail_msg("row %d col %d: %d != %d", r, c, out[r * DP + c], want);
        }
    /* Width beyond the pitch is refused. */
    assert_int_equal(cudaMemcpy2D(d, 8, src, SP, W, H, cudaMemcpyHostToDevice),
                     cudaErrorInvalidPitchValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidPitchValue);
    cudaStream_t s;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaMemset2DAsync(d, pitch, 0, W, H, s), cudaSuccess);
    assert_int_equal(cudaMemcpy2DAsync(out, DP, d, pitch, W, H, cudaMemcpyDefault, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    for (int r = 0; r < H; r++)
        for (int c = 0; c < W; c++)
            assert_int_equal(out[r * DP + c], 0);
    cudaStreamDestroy(s);
    cudaFree(d);
}

static void test_copy_peer(void **state)
{
    (void)state;
    int n;
    assert_int_equal(cudaGetDeviceCount(&n), cudaSuccess);
    if (n < 2) skip();
    void *d0, *d1;
    int v = 0x12345678, out = 0;
    assert_int_equal(cudaSetDevice(1), cudaSuccess);
    assert_int_equal(cudaMalloc(&d1, sizeof v), cudaSuccess);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaMalloc(&d0, sizeof v), cudaSuccess);
    assert_int_equal(cudaMemcpy(d0, &v, sizeof v, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaMemcpyPeer(d1, 1, d0, 0, sizeof v), cudaSuccess);
    assert_int_equal(cudaMemcpy(&out, d1, sizeof v, cudaMemcpyDefault), cudaSuccess);
    assert_int_equal(out, v);
    struct cudaPointerAttributes attr;
    assert_int_equal(cudaPointerGetAttributes(&attr, d1), cudaSuccess);
    assert_int_equal(attr.type, cudaMemoryTypeDevice);
    assert_int_equal(attr.device, 1);
    cudaFree(d0);
    cudaFree(d1);
}

struct opener {
    struct fs_gate *gate;
    int delay_ms;
};

static void *open_later(void *p)
{
    struct opener *o = p;
    fs_test_sleep_ms(o->delay_ms);
    fs_gate_open(o->gate);
    return NULL;
}

static int gate_is_open(struct fs_gate *g)
{
    pthread_mutex_lock(&g->mu);
    int open = g->open;
    pthread_mutex_unlock(&g->mu);
    return open;
}

/* Holds s behind a gate opened 400 ms later, copies d2h on s, and says
 * whether the copy call returned only after the gate opened. */
static int copy_blocks(void *dst, const void *src, size_t n, cudaStream_t s)
{
    struct fs_gate gate = FS_GATE_INIT;
    struct opener o = {&gate, 400};
    pthread_t t;
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    pthread_create(&t, NULL, open_later, &o);
    assert_int_equal(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s), cudaSuccess);
    int blocked = gate_is_open(&gate);
    pthread_join(t, NULL);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_false(gate.timed_out);
    return blocked;
}

static void test_pageable_copies_block_pinned_do_not(void **state)
{
    (void)state;
    enum { N = 4096 };
    void *d, *pinned, *pageable = malloc(N);
    cudaStream_t s;
    assert_int_equal(cudaMalloc(&d, N), cudaSuccess);
    assert_int_equal(cudaMallocHost(&pinned, N), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    /* On s itself: a non-blocking stream is not ordered after legacy work. */
    assert_int_equal(cudaMemsetAsync(d, 5, N, s), cudaSuccess);

    assert_true(copy_blocks(pageable, d, N, s));
    assert_int_equal(((unsigned char *)pageable)[N - 1], 5);
    assert_false(copy_blocks(pinned, d, N, s));
    assert_int_equal(((unsigned char *)pinned)[N - 1], 5);

    /* Registered memory counts as pinned. */
    assert_int_equal(cudaHostRegister(pageable, N, cudaHostRegisterDefault), cudaSuccess);
    assert_false(copy_blocks(pageable, d, N, s));
    assert_int_equal(cudaHostUnregister(pageable), cudaSuccess);

    cudaStreamDestroy(s);
    cudaFreeHost(pinned);
    cudaFree(d);
    free(pageable);
}

static void test_pointer_attributes(void **state)
{
    (void)state;
    void *d, *h;
    char stack_byte = 0;
    struct cudaPointerAttributes attr;
    assert_int_equal(cudaMalloc(&d, 1000), cudaSuccess);
    assert_int_equal(cudaHostAlloc(&h, 1000, cudaHostAllocDefault), cudaSuccess);

    assert_int_equal(cudaPointerGetAttributes(&attr, (char *)d + 10), cudaSuccess);
    assert_int_equal(attr.type, cudaMemoryTypeDevice);
    assert_int_equal(attr.device, 0);
    assert_ptr_equal(attr.devicePointer, (char *)d + 10);
    assert_null(attr.hostPointer);

    assert_int_equal(cudaPointerGetAttributes(&attr, h), cudaSuccess);
    assert_int_equal(attr.type, cudaMemoryTypeHost);
    assert_ptr_equal(attr.hostPointer, h);

    assert_int_equal(cudaPointerGetAttributes(&attr, &stack_byte), cudaSuccess);
    assert_int_equal(attr.type, cudaMemoryTypeUnregistered);

    assert_int_equal(cudaPointerGetAttributes(NULL, d), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    cudaFreeHost(h);
    cudaFree(d);
}

static void test_mem_get_info_tracks_allocations(void **state)
{
    (void)state;
    size_t free0, total, free1, free2;
    void *d;
    assert_int_equal(cudaMemGetInfo(&free0, &total), cudaSuccess);
    assert_true(free0 <= total && total > 0);
    assert_int_equal(cudaMalloc(&d, 64 << 20), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free1, &total), cudaSuccess);
    assert_true(free1 <= free0 - (64 << 20));
    assert_int_equal(cudaFree(d), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free2, &total), cudaSuccess);
    assert_true(free2 > free1);
}

static void test_device_properties(void **state)
{
    (void)state;
    struct cudaDeviceProp p;
    int v;
    size_t free_b, total;
    assert_int_equal(cudaGetDeviceProperties(&p, 0), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    assert_int_equal(p.totalGlobalMem >= total, 1);
    assert_int_equal(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
    assert_int_equal(v, p.major);
    assert_int_equal(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    assert_int_equal(v, p.multiProcessorCount);
    assert_int_equal(cudaDeviceGetAttribute(&v, cudaDevAttrUnifiedAddressing, 0), cudaSuccess);
    assert_int_equal(v, 1);
    char bus[32];
    assert_int_equal(cudaDeviceGetPCIBusId(bus, sizeof bus, 0), cudaSuccess);
    assert_true(strlen(bus) > 5);
    int version;
    assert_int_equal(cudaRuntimeGetVersion(&version), cudaSuccess);
    assert_true(version >= 13000);
    assert_int_equal(cudaDriverGetVersion(&version), cudaSuccess);
    assert_true(version >= 13000);
    assert_int_equal(cudaFree(NULL), cudaSuccess); /* the context-creation idiom */
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_and_set_roundtrip),
        cmocka_unit_test(test_copy_2d),
        cmocka_unit_test(test_copy_peer),
        cmocka_unit_test(test_pageable_copies_block_pinned_do_not),
        cmocka_unit_test(test_pointer_attributes),
        cmocka_unit_test(test_mem_get_info_tracks_allocations),
        cmocka_unit_test(test_device_properties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
