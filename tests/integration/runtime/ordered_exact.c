/* ordered_exact.c - the shim's stream-ordered segments cost the device what
 * they hold, nothing more. cudaMallocAsync blocks of several sizes on two
 * streams: the runtime's own free memory (read past the shim) must fall by
 * exactly the shim's reserved bytes. Segments from a memory pool would not:
 * a GPU's pools, and the sim's, reserve in steps of 32 MiB (docs/sim.md,
 * "Device memory"; on an H100 the shim's pool held 412 MiB above its
 * segments, docs/gpu-results.md). Run under the shim only. */
#include "probe.h"

#define MiB ((size_t)1 << 20)

int main(void)
{
    static const size_t sizes[] = {4096, 1 * MiB, 3 * MiB, 6 * MiB, 12 * MiB, 40 * MiB, 100 * MiB};
    enum { N = sizeof sizes / sizeof *sizes };
    cudaError_t (*real_meminfo)(size_t *, size_t *);
    size_t free0, free1, total;
    cudaStream_t s[2];
    void *p[N];

    watchdog(30);
    require_device();
    real_meminfo = (cudaError_t(*)(size_t *, size_t *))libc_dlsym()(
        dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY), "cudaMemGetInfo");
    EXPECT(real_meminfo != NULL);
    EXPECT(shim_stat("reserved_bytes.all.current", 0) >= 0); /* the shim is there */
    for (int i = 0; i < 2; i++)
        CHECK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    CHECK(cudaDeviceSynchronize());
    CHECK(real_meminfo(&free0, &total));
    int64_t reserved0 = shim_stat("reserved_bytes.all.current", 0);
    for (int i = 0; i < N; i++)
        CHECK(cudaMallocAsync(&p[i], sizes[i], s[i % 2]));
    CHECK(cudaDeviceSynchronize());
    CHECK(real_meminfo(&free1, &total));
    int64_t reserved = shim_stat("reserved_bytes.all.current", 0) - reserved0;
    printf("ordered_exact: the device gave %zu bytes, the shim reserved %lld\n", free0 - free1,
           (long long)reserved);
    EXPECT(reserved > 0);
    EXPECT(free0 - free1 == (size_t)reserved);
    for (int i = 0; i < N; i++)
        CHECK(cudaFreeAsync(p[i], s[i % 2]));
    for (int i = 0; i < 2; i++)
        CHECK(cudaStreamDestroy(s[i]));
    CHECK(cudaDeviceSynchronize());
    printf("ordered_exact: ok\n");
    return 0;
}
