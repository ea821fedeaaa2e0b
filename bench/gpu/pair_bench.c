/* pair_bench.c - the cost of one cached device allocation and its free, as
 * an ordinary CUDA program sees it (built against the toolkit's libcudart,
 * so that on a GPU it measures the real thing).
 *
 *   pair_bench async|malloc [PAIRS]
 *
 * async: cudaMallocAsync + cudaFreeAsync on one non-blocking stream, the
 * pattern of a framework's temporary; without a preloaded allocator this is
 * CUDA's default memory pool, under LD_PRELOAD=libfsdpshim.so it is the
 * shim's cache. malloc: cudaMalloc + cudaFree (the driver's own allocation,
 * or the shim's cudaFree route when preloaded). For each size one line:
 *
 *   pair_bench: mode=async size=1048576 pairs=N ns_per_pair=X
 *
 * after a warm-up, timed with the host's monotonic clock over the whole run
 * and ended by a stream synchronisation, so that work the calls left to
 * the device is counted. Every allocation is checked: a failed call exits 1.
 * bench/gpu/gpu_bench.sh runs it interleaved with the other variants. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const size_t sizes[] = {4096, 1u << 20, 64u << 20};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "pair_bench: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

/* PAIRS alloc+free pairs of `size`; returns the wall-clock ns of the run. */
static double run(int async, size_t size, long pairs, cudaStream_t s)
{
    void *p;
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    double t0 = now_ns();
    for (long i = 0; i < pairs; i++) {
        if (async) {
            check(cudaMallocAsync(&p, size, s), "cudaMallocAsync");
            check(cudaFreeAsync(p, s), "cudaFreeAsync");
        } else {
            check(cudaMalloc(&p, size), "cudaMalloc");
            check(cudaFree(p), "cudaFree");
        }
    }
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    return now_ns() - t0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "async") != 0 && strcmp(argv[1], "malloc") != 0)) {
        fprintf(stderr, "usage: pair_bench async|malloc [PAIRS]\n");
        return 2;
    }
    int async = strcmp(argv[1], "async") == 0;
    long pairs = argc > 2 ? atol(argv[2]) : (async ? 200000 : 2000);
    if (pairs < 1) {
        fprintf(stderr, "pair_bench: PAIRS must be positive\n");
        return 2;
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "pair_bench: no CUDA device\n");
        return 77;
    }
    cudaStream_t s;
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        run(async, sizes[i], pairs / 10 + 1, s); /* warm-up: pools, caches, the driver */
        double ns = run(async, sizes[i], pairs, s);
        printf("pair_bench: mode=%s size=%zu pairs=%ld ns_per_pair=%.1f\n", argv[1], sizes[i],
               pairs, ns / (double)pairs);
    }
    check(cudaStreamDestroy(s), "cudaStreamDestroy");
    return 0;
}
