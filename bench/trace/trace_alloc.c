/* trace_alloc.c - the workload of trace_bench: an ordinary CUDA program that
 * calls cudaMalloc/cudaFree in a loop from a known stack depth, so that a
 * traced run captures stacks of that many frames. It knows nothing of the
 * shim; trace_bench.sh runs it with tracing off and on and compares.
 *
 *   trace_alloc DEPTH ITERS [SIZES]
 *
 * Prints "pairs=<n> ns_per_pair=<t>" for the timed loop. SIZES distinct
 * sizes rotate (default 4), each freed at once, as an FSDP step reuses its
 * buffers: every stack repeats. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long iters;
static int sizes = 4;

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static cudaStream_t stream;

/* Stream-ordered, as PyTorch allocates under the shim: a cached pair never
 * waits for the device, so the loop measures the allocator and the trace. */
static int loop(void)
{
    for (long i = 0; i < iters; i++) {
        void *p;
        if (cudaMallocAsync(&p, (size_t)(1 + i % sizes) << 20, stream) != cudaSuccess) return 1;
        if (cudaFreeAsync(p, stream) != cudaSuccess) return 1;
    }
    return 0;
}

/* One frame per level: noinline, and the addition after the call keeps it
 * from becoming a tail call. */
__attribute__((noinline)) static int descend(int depth)
{
    int rc;
    if (depth <= 0) return loop();
    rc = descend(depth - 1);
    __asm__ volatile("" : : : "memory");
    return rc + 0 * depth;
}

int main(int argc, char **argv)
{
    void *warm;
    double t0, t1;
    int depth;

    if (argc < 3) {
        fprintf(stderr, "usage: trace_alloc DEPTH ITERS [SIZES]\n");
        return 2;
    }
    depth = atoi(argv[1]);
    iters = atol(argv[2]);
    if (argc > 3) sizes = atoi(argv[3]);
    if (depth < 0 || iters <= 0 || sizes <= 0) return 2;
    /* warm up: the context, the cache's segments and every stack */
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return 1;
    if (cudaMalloc(&warm, 1) != cudaSuccess) return 1;
    cudaFree(warm);
    long n = iters;
    iters = n / 10 + 1;
    if (descend(depth)) return 1;
    iters = n;
    t0 = now_ns();
    if (descend(depth)) return 1;
    t1 = now_ns();
    printf("pairs=%ld ns_per_pair=%.1f\n", iters, (t1 - t0) / (double)iters);
    return 0;
}
