/* empty_cache.c - torch.cuda.empty_cache on the cudaMallocAsync route:
 * cudaFree (device-ordered by default under the shim) then
 * cudaDeviceSynchronize then cudaMemPoolTrimTo(pool, 0) must leave nothing
 * reserved, read as PyTorch reads it (cudaMemPoolAttrReservedMemCurrent).
 * The synchronisation alone makes the free reusable: no later allocation
 * or fence is needed first. */
#include "probe.h"

static uint64_t reserved(cudaMemPool_t pool)
{
    uint64_t v = 0;
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v));
    return v;
}

int main(void)
{
    const size_t mib = 1 << 20;
    cudaMemPool_t pool;
    void *p;

    watchdog(30);
    require_device();
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));

    CHECK(cudaMalloc(&p, 64 * mib));
    CHECK(cudaMemset(p, 1, 64 * mib));
    CHECK(cudaFree(p));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemPoolTrimTo(pool, 0));
    EXPECT(reserved(pool) == 0);
    if (shim_stat("reserved_bytes.all.current", 0) >= 0) {
        EXPECT(shim_stat("reserved_bytes.all.current", 0) == 0);
        EXPECT(shim_stat("pending_frees", 0) == 0);
    }

    /* twice in a row, and with a block still live that must stay (the
     * runtime alone serves cudaMalloc outside the pool: then it reads 0) */
    void *keep;
    CHECK(cudaMalloc(&keep, 2 * mib));
    CHECK(cudaMalloc(&p, 64 * mib));
    CHECK(cudaFree(p));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemPoolTrimTo(pool, 0));
    if (shim_stat("reserved_bytes.all.current", 0) >= 0) EXPECT(reserved(pool) >= 2 * mib);
    EXPECT(reserved(pool) < 64 * mib);
    CHECK(cudaFree(keep));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemPoolTrimTo(pool, 0));
    EXPECT(reserved(pool) == 0);

    printf("empty_cache: ok\n");
    return 0;
}
