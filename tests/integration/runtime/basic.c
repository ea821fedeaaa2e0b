/* basic.c - an ordinary CUDA program whose output must be the same with
 * and without the shim: allocations of many sizes on the legacy stream, a
 * created stream and the per-thread stream, copies and sets, frees of
 * every kind, memory pool attribute reads, and the error codes of a few
 * calls that fail. It prints results, not addresses. */
#include "probe.h"

#include <string.h>

static unsigned checksum(const unsigned char *p, size_t n)
{
    unsigned h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

/* The last error twice: the call's error, then none. */
static void print_last_errors(void)
{
    int first = (int)cudaGetLastError();
    int second = (int)cudaGetLastError();
    printf("last error: %d, then %d\n", first, second);
}

int main(void)
{
    static const size_t sizes[] = {1, 511, 512, 4096, 1 << 20, (1 << 20) + 1, 3 << 20, 12 << 20};
    unsigned char *host, *dev[8];
    cudaStream_t s;
    cudaMemPool_t pool;
    uint64_t threshold = 0;
    void *p;

    watchdog(60);
    require_device();
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMallocHost((void **)&host, 12 << 20));
    for (int i = 0; i < 8; i++) {
        CHECK(i % 2 ? cudaMallocAsync((void **)&dev[i], sizes[i], s)
                    : cudaMalloc((void **)&dev[i], sizes[i]));
        CHECK(cudaMemsetAsync(dev[i], 0x11 * (i + 1), sizes[i], s));
    }
    for (int i = 1; i < 8; i++)
        CHECK(cudaMemcpyAsync(dev[i], dev[i - 1], sizes[i - 1] < sizes[i] ? sizes[i - 1] : sizes[i],
                              cudaMemcpyDeviceToDevice, s));
    for (int i = 0; i < 8; i++) {
        CHECK(cudaMemcpyAsync(host, dev[i], sizes[i], cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        printf("buffer %d (%zu bytes): %08x\n", i, sizes[i], checksum(host, sizes[i]));
    }
    for (int i = 0; i < 8; i++)
        CHECK(i % 2 ? cudaFreeAsync(dev[i], s) : cudaFree(dev[i]));

    CHECK(cudaMallocAsync(&p, 1000, cudaStreamPerThread));
    CHECK(cudaMemsetAsync(p, 7, 1000, cudaStreamPerThread));
    CHECK(cudaMemcpyAsync(host, p, 1000, cudaMemcpyDeviceToHost, cudaStreamPerThread));
    CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    printf("per-thread stream: %08x\n", checksum(host, 1000));
    CHECK(cudaFreeAsync(p, cudaStreamPerThread));

    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    printf("release threshold: %llu\n", (unsigned long long)threshold);

    printf("cudaMalloc(NULL): %d\n", (int)cudaMalloc(NULL, 16));
    print_last_errors();
    printf("cudaMalloc(huge): %d\n", (int)cudaMalloc(&p, (size_t)1 << 62));
    print_last_errors();
    printf("cudaFree(interior): %d\n", (int)cudaFree((char *)dev[0] + 4096));
    print_last_errors();

    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFreeHost(host));
    CHECK(cudaDeviceSynchronize());
    printf("done\n");
    return 0;
}
