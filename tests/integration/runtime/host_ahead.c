/* host_ahead.c - a host that runs ahead of the device keeps running ahead
 * under the shim, and where stream order allows, the shim does not hold
 * freed memory twice: the two patterns behind PyTorch's peaks on the
 * simulated device (docs/allocator.md, "PyTorch's peak").
 *
 * A non-blocking "comm" stream is kept behind the host by a host function
 * that sleeps 5 ms per step, standing for a collective waiting for the
 * other ranks.
 *
 *   host_ahead malloc   PyTorch without caching: each step cudaMalloc's a
 *                       12 MiB block, sets it on comm, and cudaFree's it
 *                       (device-ordered: reusable once comm has passed
 *                       the free)
 *   host_ahead async    FSDP2's all-gather buffer: cudaMallocAsync of
 *                       24 MiB on an "ag" stream, written on comm after an
 *                       event wait (as NCCL writes it, a use the shim
 *                       records), ag waits for comm's event and frees it
 *                       with cudaFreeAsync on ag
 *
 * Each step's block could be the previous one's once the device catches
 * up: the shim's reserved peak must stay within two blocks' segments
 * (before, every step grew a segment: 20 of them). async: without the host
 * waiting (the loop takes less than half the 100 ms the comm stream needs):
 * the miss takes the pending block and ag waits for it on the GPU. malloc:
 * cudaMalloc has no stream to order the reuse after, so the miss takes the
 * pending block and every stream waits for its free on the GPU
 * (malloc_reuse:wait), the host not at all. */
#include "probe.h"

#include <string.h>
#include <time.h>

#define STEPS 20
#define MIB   ((size_t)1 << 20)
#define TOUCH ((size_t)64 << 10) /* bytes set: the 5 ms, not the set, keep comm behind */

static void CUDART_CB behind(void *unused)
{
    struct timespec ms5 = {0, 5000000};

    (void)unused;
    nanosleep(&ms5, NULL);
}

int main(int argc, char **argv)
{
    int async = argc > 1 && !strcmp(argv[1], "async");
    size_t size = async ? 24 * MIB : 12 * MIB;
    cudaStream_t comm, ag;
    cudaEvent_t written, used;
    int64_t peak;
    struct timespec t0, t1;

    watchdog(30);
    require_device();
    EXPECT(shim_stat("reserved_bytes.all.peak", 0) == 0);
    CHECK(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&ag, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&used, cudaEventDisableTiming));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < STEPS; i++) {
        void *p;
        if (async) {
            CHECK(cudaMallocAsync(&p, size, ag));
            CHECK(cudaEventRecord(written, ag));
            CHECK(cudaStreamWaitEvent(comm, written, 0));
            CHECK(cudaMemsetAsync(p, i, TOUCH, comm));
            CHECK(cudaLaunchHostFunc(comm, behind, NULL));
            CHECK(cudaEventRecord(used, comm));
            CHECK(cudaStreamWaitEvent(ag, used, 0));
            CHECK(cudaFreeAsync(p, ag));
        } else {
            CHECK(cudaMalloc(&p, size));
            CHECK(cudaMemsetAsync(p, i, TOUCH, comm));
            CHECK(cudaLaunchHostFunc(comm, behind, NULL));
            CHECK(cudaFree(p));
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double host_ms =
        (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    CHECK(cudaDeviceSynchronize());
    peak = shim_stat("reserved_bytes.all.peak", 0);
    printf("host_ahead %s: %d steps of %zu MiB issued in %.1f ms, reserved peak %.1f MiB\n",
           async ? "async" : "malloc", STEPS, size / MIB, host_ms, (double)peak / (double)MIB);
    EXPECT(host_ms < STEPS * 5 / 2); /* the host ran ahead, both ways */
    EXPECT(peak > 0 && peak <= (int64_t)(2 * size));
    CHECK(cudaEventDestroy(written));
    CHECK(cudaEventDestroy(used));
    CHECK(cudaStreamDestroy(comm));
    CHECK(cudaStreamDestroy(ag));
    return 0;
}
