/* stall_free.c - the allocation path does not stall the host while a
 * stream is busy (SPEC section 4: the host waits for device work in malloc
 * and free only when the device is full).
 *
 * The compute stream is held by a host function until the main thread
 * opens it (a long kernel, on a GPU). Meanwhile another thread does what
 * FSDP's all-gather thread does, STEPS times: allocate a block, write it
 * on a comm stream that is ordered after the compute stream (the
 * collective), free it device-ordered (cudaFree), and go on. Each free stays
 * pending behind the held stream, so each allocation misses with a free
 * that would serve it a moment later. The thread must issue all its steps
 * while the compute stream is still held; a shim that waited on the host
 * for the pending free (100 ms) and for the device to drain (100 ms) at
 * each miss issued 3 of 6.
 *
 *   stall_free malloc   cudaMalloc: no stream to order, so the miss takes
 *                       the pending block and every stream waits for its
 *                       free on the GPU (malloc_reuse:wait, the default;
 *                       docs/allocator.md): one block's segment too
 *   stall_free async    cudaMallocAsync on the comm stream: the miss takes
 *                       the pending block and the comm stream waits for
 *                       its free on the GPU, so the reserved peak stays at
 *                       one block's segment
 *
 * Prints the steps issued and the reserved peak under the shim. */
#include "probe.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define STEPS 6
#define MIB   ((size_t)1 << 20)
#define BLOCK (8 * MIB)

static atomic_int gate_open, issued;
static cudaStream_t compute, comm;
static int async_mode;

static void CUDART_CB hold(void *unused)
{
    struct timespec ms1 = {0, 1000000};

    (void)unused;
    while (!atomic_load(&gate_open))
        nanosleep(&ms1, NULL);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *gatherer(void *unused)
{
    (void)unused;
    for (int i = 0; i < STEPS; i++) {
        void *p;
        if (async_mode)
            CHECK(cudaMallocAsync(&p, BLOCK, comm));
        else
            CHECK(cudaMalloc(&p, BLOCK));
        CHECK(cudaMemsetAsync(p, i + 1, BLOCK, comm)); /* the all-gather */
        CHECK(cudaFree(p));                            /* device-ordered: behind compute */
        atomic_fetch_add(&issued, 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    cudaEvent_t started;
    pthread_t t;
    void *first;

    async_mode = argc > 1 && !strcmp(argv[1], "async");
    watchdog(30);
    require_device();
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&started, cudaEventDisableTiming));
    /* some work of the compute stream's own, then the hold */
    CHECK(cudaMalloc(&first, BLOCK));
    CHECK(cudaMemsetAsync(first, 0, BLOCK, compute));
    CHECK(cudaLaunchHostFunc(compute, hold, NULL));
    CHECK(cudaEventRecord(started, compute));
    CHECK(cudaStreamWaitEvent(comm, started, 0)); /* the collective follows compute */

    double t0 = now_s();
    if (pthread_create(&t, NULL, gatherer, NULL) != 0) return 1;
    while (atomic_load(&issued) < STEPS && now_s() - t0 < 2.0) {
        struct timespec ms1 = {0, 1000000};
        nanosleep(&ms1, NULL);
    }
    int n = atomic_load(&issued);
    double took = now_s() - t0;
    atomic_store(&gate_open, 1);
    pthread_join(t, NULL);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(first));
    int64_t peak = shim_stat("reserved_bytes.all.peak", 0);
    printf("stall_free %s: %d of %d steps issued while the compute stream was held (%.3f s)",
           async_mode ? "async" : "malloc", n, STEPS, took);
    if (peak >= 0) printf("; reserved peak %.1f MiB", (double)peak / (double)MIB);
    printf("\n");
    EXPECT(n == STEPS && took < 0.5);
    /* one block's segment, reused behind GPU-side waits, beside `first`'s */
    if (peak >= 0) EXPECT(peak <= (int64_t)(2 * BLOCK));
    CHECK(cudaEventDestroy(started));
    CHECK(cudaStreamDestroy(compute));
    CHECK(cudaStreamDestroy(comm));
    return 0;
}
