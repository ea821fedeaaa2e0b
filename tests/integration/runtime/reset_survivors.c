/* reset_survivors.c - what cudaDeviceReset leaves behind. The runtime
 * destroys cudaMalloc memory, streams and events, but not stream-ordered
 * allocations (cudaMallocAsync, cudaMallocFromPoolAsync): those keep their
 * data and are freed afterwards like any other. The program prints every
 * return code, the last error after each step and cudaMemGetInfo's free
 * bytes (on the sim), so that a run with the shim can be compared with one
 * without (same_output.sh); the data checks fail the run on their own. */
#include "probe.h"

#include <string.h>

#define MiB ((size_t)1 << 20)

struct block {
    const char *name;
    void *p;
    size_t size;
    int pattern;
};

static void report(const char *what, cudaError_t e)
{
    cudaError_t last = cudaGetLastError();
    printf("%s: %s, last error %s\n", what, cudaGetErrorName(e), cudaGetErrorName(last));
}

/* The free bytes are printed on the simulated device only, and exactly only
 * where nothing is live. On a GPU they differ between runs with and without
 * the shim by design: the driver's own pool and the shim's cache keep
 * different amounts, in different granules (up to 20 MiB apart on an H200),
 * and the driver's context memory varies. While blocks live they differ on
 * the sim too: its pools reserve in steps of 32 MiB as a GPU's do, where the
 * shim takes only its segments; both runs must then hold at least the
 * `live` bytes the program has. */
static void mem_info(const char *when, size_t live)
{
    size_t free_bytes = 0, total = 0;
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemGetInfo(&free_bytes, &total));
    if (ON_REAL_RUNTIME)
        printf("%s: cudaMemGetInfo ok\n", when);
    else if (live)
        printf("%s: the device holds the %zu live bytes: %s\n", when, live,
               total - free_bytes >= live ? "yes" : "no");
    else
        printf("%s: free %zu of %zu\n", when, free_bytes, total);
}

static void expect_data(const struct block *b)
{
    unsigned char *host = malloc(b->size), *want = malloc(b->size);
    EXPECT(host && want);
    memset(want, b->pattern, b->size);
    CHECK(cudaMemcpy(host, b->p, b->size, cudaMemcpyDeviceToHost));
    if (memcmp(host, want, b->size) != 0) {
        fprintf(stderr, "%s: its data changed\n", b->name);
        exit(1);
    }
    printf("%s: %zu bytes intact\n", b->name, b->size);
    free(host);
    free(want);
}

/* Allocates the same kinds of blocks again and checks they work. */
static void allocate_again(cudaMemPool_t def, cudaStream_t s)
{
    struct block b[3] = {{"again cudaMalloc", NULL, 2 * MiB, 0x71},
                         {"again cudaMallocAsync", NULL, 4096, 0x72},
                         {"again cudaMallocFromPoolAsync", NULL, 12 * MiB, 0x73}};
    report("again cudaMalloc", cudaMalloc(&b[0].p, b[0].size));
    report("again cudaMallocAsync", cudaMallocAsync(&b[1].p, b[1].size, s));
    report("again cudaMallocFromPoolAsync", cudaMallocFromPoolAsync(&b[2].p, b[2].size, def, s));
    for (int i = 0; i < 3; i++)
        CHECK(cudaMemsetAsync(b[i].p, b[i].pattern, b[i].size, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < 3; i++)
        expect_data(&b[i]);
    mem_info("again, live", b[0].size + b[1].size + b[2].size);
    report("again cudaFree", cudaFree(b[0].p));
    report("again cudaFreeAsync", cudaFreeAsync(b[1].p, s));
    report("again cudaFreeAsync pool", cudaFreeAsync(b[2].p, s));
}

int main(void)
{
    cudaStream_t s1, s2, s3;
    cudaMemPool_t def, own;
    struct cudaMemPoolProps props;
    void *plain[2], *gone[2];

    watchdog(60);
    require_device();
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    CHECK(cudaMemPoolCreate(&own, &props));

    /* Sizes whose blocks end where their segment's free remainder can be
     * split off: a tail too small to split stays with its block (PyTorch's
     * rule), and would make the shim's free figure differ from the
     * runtime's while the block lives. */
    struct block keep[5] = {{"cudaMallocAsync small", NULL, 4096, 0x11},
                            {"cudaMallocAsync 6 MiB", NULL, 6 * MiB, 0x22},
                            {"cudaMallocAsync 12 MiB", NULL, 12 * MiB, 0x33},
                            {"cudaMallocFromPoolAsync default", NULL, 64 * 1024, 0x44},
                            {"cudaMallocFromPoolAsync own", NULL, 8192, 0x55}};
    CHECK(cudaMallocAsync(&keep[0].p, keep[0].size, s1));
    CHECK(cudaMallocAsync(&keep[1].p, keep[1].size, s2));
    CHECK(cudaMallocAsync(&keep[2].p, keep[2].size, s1));
    CHECK(cudaMallocFromPoolAsync(&keep[3].p, keep[3].size, def, s2));
    CHECK(cudaMallocFromPoolAsync(&keep[4].p, keep[4].size, own, s1));
    CHECK(cudaMalloc(&plain[0], MiB));
    CHECK(cudaMalloc(&plain[1], 4096));
    for (int i = 0; i < 5; i++)
        CHECK(cudaMemsetAsync(keep[i].p, keep[i].pattern, keep[i].size, i % 2 ? s2 : s1));
    CHECK(cudaMemset(plain[0], 0x66, MiB));
    /* frees still pending when the device is reset */
    CHECK(cudaMallocAsync(&gone[0], 8192, s1));
    CHECK(cudaMemsetAsync(gone[0], 0x77, 8192, s1));
    CHECK(cudaFreeAsync(gone[0], s2));
    CHECK(cudaMalloc(&gone[1], 4096));
    CHECK(cudaFree(gone[1]));
    size_t kept = 0;
    for (int i = 0; i < 5; i++)
        kept += keep[i].size;
    mem_info("before reset", kept + MiB + 4096);

    report("cudaDeviceReset", cudaDeviceReset());
    mem_info("after reset", kept);
    for (int i = 0; i < 5; i++)
        expect_data(&keep[i]);

    /* cudaMalloc memory is gone: freeing it is an error */
    report("cudaFree of a reset cudaMalloc block", cudaFree(plain[0]));
    report("cudaFreeAsync of a reset cudaMalloc block", cudaFreeAsync(plain[1], 0));

    CHECK(cudaStreamCreate(&s3));
    report("cudaFreeAsync survivor on a new stream", cudaFreeAsync(keep[0].p, s3));
    report("cudaFree survivor", cudaFree(keep[1].p));
    report("cudaFreeAsync survivor on the legacy stream", cudaFreeAsync(keep[2].p, 0));
    report("cudaFreeAsync default pool survivor", cudaFreeAsync(keep[3].p, s3));
    report("cudaFree own pool survivor", cudaFree(keep[4].p));
    report("cudaFreeAsync survivor again", cudaFreeAsync(keep[0].p, s3));
    report("cudaFree survivor again", cudaFree(keep[1].p));
    mem_info("survivors freed", 0);

    allocate_again(def, s3);
    mem_info("allocated again and freed", 0);
    report("cudaMemPoolDestroy", cudaMemPoolDestroy(own));
    CHECK(cudaStreamDestroy(s3));
    mem_info("end", 0);
    return 0;
}
