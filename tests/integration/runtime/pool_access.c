/* pool_access.c - peers granted access to a device's default pool
 * (PyTorch's enablePeerAccess on the cudaMallocAsync route) reach the
 * program's cudaMallocAsync blocks, which the shim keeps in segments of its
 * own (mappings, or a pool where those cannot be made): they must be
 * granted the same, both when the grant comes before the shim's first
 * stream-ordered segment and after it, and a revocation must leave the
 * device's own access (a failure is a warning on stderr). The program
 * prints every return code and what cudaMemPoolGetAccess reports, for
 * comparison with a run without the shim. */
#include "probe.h"

#include <string.h>

static void grant(cudaMemPool_t pool, int peer, enum cudaMemAccessFlags flags)
{
    struct cudaMemAccessDesc d = {.location = {cudaMemLocationTypeDevice, peer}, .flags = flags};
    cudaError_t e = cudaMemPoolSetAccess(pool, &d, 1);
    printf("grant device %d flags %d: %s, last error %s\n", peer, (int)flags, cudaGetErrorName(e),
           cudaGetErrorName(cudaGetLastError()));
}

static void show(cudaMemPool_t pool, int peer)
{
    struct cudaMemLocation loc = {cudaMemLocationTypeDevice, peer};
    enum cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
    CHECK(cudaMemPoolGetAccess(&flags, pool, &loc));
    printf("device %d access: %d\n", peer, (int)flags);
}

/* A cudaMallocAsync block on device 0, copied to device 1 and back. */
static void use_block(cudaStream_t s, int pattern)
{
    unsigned char host[4096], back[4096];
    void *a, *b;
    memset(host, pattern, sizeof host);
    CHECK(cudaMallocAsync(&a, sizeof host, s));
    CHECK(cudaMemcpyAsync(a, host, sizeof host, cudaMemcpyHostToDevice, s));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&b, sizeof host));
    CHECK(cudaSetDevice(0));
    CHECK(cudaMemcpyPeerAsync(b, 1, a, 0, sizeof host, s));
    CHECK(cudaMemsetAsync(a, 0, sizeof host, s));
    CHECK(cudaMemcpyPeerAsync(a, 0, b, 1, sizeof host, s));
    CHECK(cudaMemcpyAsync(back, a, sizeof back, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    EXPECT(memcmp(host, back, sizeof host) == 0);
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaFree(b));
    printf("block 0x%02x: ok\n", pattern);
}

int main(void)
{
    cudaMemPool_t pool;
    cudaStream_t s;
    int n = 0;

    watchdog(30);
    require_device();
    CHECK(cudaGetDeviceCount(&n));
    if (n < 3) {
        fprintf(stderr, "skipped: needs three devices\n");
        return 77;
    }
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaStreamCreate(&s));
    grant(pool, 1, cudaMemAccessFlagsProtReadWrite); /* before any pool block */
    use_block(s, 0x5A);
    grant(pool, 2, cudaMemAccessFlagsProtReadWrite); /* after */
    grant(pool, 0, cudaMemAccessFlagsProtNone);      /* the owner's access cannot go */
    grant(pool, 1, cudaMemAccessFlagsProtNone);
    use_block(s, 0xA5);
    for (int d = 0; d < 3; d++)
        show(pool, d);
    CHECK(cudaStreamDestroy(s));
    return 0;
}
