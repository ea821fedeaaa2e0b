/* expandable_release.c - rounds of mixed cudaMalloc and cudaMallocAsync on
 * two streams, each round allocating until the device is out of memory and
 * then freeing everything; afterwards what torch.cuda.empty_cache does on
 * this route (cudaDeviceSynchronize, cudaMemPoolTrimTo(pool, 0)) must give
 * every byte back: cudaMemGetInfo's free returns to its starting figure,
 * the shim's reserved statistic agrees with the device, and a large
 * allocation succeeds. With expandable segments the range grows in steps of
 * many sizes and is released from many places, which must always be whole
 * driver mappings.
 *
 * Run on a small device (FSDPSHIM_SIM_MEM=128M): the same with the shim, in
 * either configuration, as without it. */
#include "probe.h"

#include <string.h>

#define MIB    ((size_t)1 << 20)
#define MAXN   512
#define ROUNDS 8

static const size_t sizes[] = {
    3 * MIB / 2, 5 * MIB, 512 << 10, 13 * MIB, 3 * MIB,  7 * MIB + 4096, 24 * MIB,
    1 * MIB,     9 * MIB, 2 * MIB,   300000,   11 * MIB, 6 * MIB,
};
#define NSIZES (sizeof sizes / sizeof *sizes)

static size_t device_free(void)
{
    size_t free = 0, total = 0;
    CHECK(cudaMemGetInfo(&free, &total));
    return free;
}

/* What the shim's statistics say the device holds matches the device. */
static void expect_agreement(size_t free0)
{
    size_t now = device_free();
    if (now != free0) {
        fprintf(stderr, "expected free %zu, the device has %zu (%zu held)\n", free0, now,
                free0 - now);
        exit(1);
    }
    if (shim_stat("reserved_bytes.all.current", 0) >= 0) {
        EXPECT(shim_stat("reserved_bytes.all.current", 0) == 0);
        EXPECT(shim_stat("num_device_alloc", 0) == shim_stat("num_device_free", 0));
    }
}

static void empty_cache(cudaMemPool_t pool)
{
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemPoolTrimTo(pool, 0));
}

int main(void)
{
    void *ptr[MAXN];
    int how[MAXN]; /* 0: cudaMalloc, 1/2: cudaMallocAsync on stream 1/2 */
    cudaStream_t st[3] = {0};
    cudaEvent_t ev[3];
    cudaMemPool_t pool;
    size_t free0;

    watchdog(60);
    require_device();
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaStreamCreateWithFlags(&st[1], cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&st[2], cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&ev[1], cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&ev[2], cudaEventDisableTiming));
    free0 = device_free();

    for (int round = 0; round < ROUNDS; round++) {
        int n = 0;
        for (; n < MAXN; n++) {
            size_t size = sizes[(size_t)(n * 5 + round * 3) % NSIZES];
            cudaError_t e;
            how[n] = (n + round) % 3;
            if (how[n] == 0)
                e = cudaMalloc(&ptr[n], size);
            else
                e = cudaMallocAsync(&ptr[n], size, st[how[n]]);
            if (e == cudaErrorMemoryAllocation) {
                EXPECT(cudaGetLastError() == cudaErrorMemoryAllocation);
                break;
            }
            CHECK(e);
            /* some work on the block's stream, so that frees have something to wait for */
            CHECK(cudaMemsetAsync(ptr[n], n & 0xff, size < 65536 ? size : 65536, st[how[n]]));
        }
        EXPECT(n > 0 && n < MAXN);
        /* freed in another order than allocated, some on the other stream,
         * which first waits for the work of the one that used the block */
        CHECK(cudaEventRecord(ev[1], st[1]));
        CHECK(cudaEventRecord(ev[2], st[2]));
        CHECK(cudaStreamWaitEvent(st[1], ev[2], 0));
        CHECK(cudaStreamWaitEvent(st[2], ev[1], 0));
        for (int i = 0; i < n; i++) {
            int k = n % 7 ? (i * 7) % n : i, s = how[k];
            if (s == 0)
                CHECK(cudaFree(ptr[k]));
            else
                CHECK(cudaFreeAsync(ptr[k], st[(k & 4) ? 3 - s : s]));
        }
        if (round % 2) CHECK(cudaStreamSynchronize(st[1]));
    }
    empty_cache(pool);
    expect_agreement(free0);
    printf("rounds: everything given back\n");

    /* the whole device is usable again, and given back again */
    void *big;
    CHECK(cudaMalloc(&big, 32 * MIB));
    CHECK(cudaMemset(big, 1, 32 * MIB));
    CHECK(cudaFree(big));
    CHECK(cudaMallocAsync(&big, 96 * MIB, st[1]));
    CHECK(cudaFreeAsync(big, st[1]));
    empty_cache(pool);
    expect_agreement(free0);
    printf("large: ok\n");

    CHECK(cudaEventDestroy(ev[1]));
    CHECK(cudaEventDestroy(ev[2]));
    CHECK(cudaStreamDestroy(st[1]));
    CHECK(cudaStreamDestroy(st[2]));
    EXPECT(cudaGetLastError() == cudaSuccess);
    return 0;
}
