/* expandable_holes.c - free memory in the middle of an expandable range must
 * be usable for a larger request. Twelve 10 MiB blocks fill most of a
 * 128 MiB device; every other one is freed, leaving 60 MiB in six holes
 * between live blocks; a 30 MiB and then a 15 MiB request must succeed (the
 * holes' pages given back and mapped again where the request fits), as they
 * do without the shim and with plain segments. The live blocks keep their
 * data throughout, and emptying the cache afterwards gives every byte back.
 *
 * Run on a small device (FSDPSHIM_SIM_MEM=128M). */
#include "probe.h"

#include <string.h>

#define MIB ((size_t)1 << 20)
#define N   12

static size_t device_free(void)
{
    size_t free = 0, total = 0;
    CHECK(cudaMemGetInfo(&free, &total));
    return free;
}

static void expect_filled(const void *dev, size_t size, unsigned char v)
{
    unsigned char *host = malloc(size), *want = malloc(size);
    EXPECT(host && want);
    memset(want, v, size);
    CHECK(cudaMemcpy(host, dev, size, cudaMemcpyDeviceToHost));
    if (memcmp(host, want, size) != 0) {
        fprintf(stderr, "%p does not hold %d throughout\n", dev, v);
        exit(1);
    }
    free(host);
    free(want);
}

int main(void)
{
    void *blk[N], *a, *b;
    cudaMemPool_t pool;
    size_t free0;

    watchdog(30);
    require_device();
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    free0 = device_free();

    for (int i = 0; i < N; i++) {
        CHECK(cudaMalloc(&blk[i], 10 * MIB));
        CHECK(cudaMemset(blk[i], i + 1, 10 * MIB));
    }
    for (int i = 0; i < N; i += 2)
        CHECK(cudaFree(blk[i]));

    CHECK(cudaMalloc(&a, 30 * MIB));
    CHECK(cudaMemset(a, 0xa0, 30 * MIB));
    CHECK(cudaMalloc(&b, 15 * MIB));
    CHECK(cudaMemset(b, 0xb0, 15 * MIB));
    printf("30 MiB and 15 MiB in the holes: ok\n");

    for (int i = 1; i < N; i += 2)
        expect_filled(blk[i], 10 * MIB, (unsigned char)(i + 1));
    expect_filled(a, 30 * MIB, 0xa0);
    expect_filled(b, 15 * MIB, 0xb0);
    printf("data kept: ok\n");

    for (int i = 1; i < N; i += 2)
        CHECK(cudaFree(blk[i]));
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemPoolTrimTo(pool, 0));
    if (device_free() != free0) {
        fprintf(stderr, "expected free %zu, the device has %zu\n", free0, device_free());
        return 1;
    }
    if (shim_stat("reserved_bytes.all.current", 0) >= 0) {
        EXPECT(shim_stat("reserved_bytes.all.current", 0) == 0);
        /* the device did allocate, and gave everything back */
        EXPECT(shim_stat("num_device_alloc", 0) > 0);
        EXPECT(shim_stat("num_device_alloc", 0) == shim_stat("num_device_free", 0));
    }
    printf("given back: ok\n");
    EXPECT(cudaGetLastError() == cudaSuccess);
    return 0;
}
