/* pool_attrs.c - the default memory pool as PyTorch's cudaMallocAsync
 * backend sees it: cudaMallocFromPoolAsync on the default pool, the used
 * and reserved figures it reads for memory_allocated()/memory_reserved(),
 * reset_peak_memory_stats (0 written to the high-water marks) and
 * empty_cache (cudaDeviceSynchronize + cudaMemPoolTrimTo(pool, 0)). The
 * figures must say the same with and without the shim; with it, the shim's
 * statistics must show that it served the allocations. */
#include "probe.h"

static uint64_t attr(cudaMemPool_t pool, enum cudaMemPoolAttr a)
{
    uint64_t v = 0;
    CHECK(cudaMemPoolGetAttribute(pool, a, &v));
    return v;
}

int main(void)
{
    const uint64_t mib = 1 << 20;
    cudaMemPool_t pool;
    uint64_t zero = 0;
    cudaStream_t s;
    void *p, *q;

    watchdog(30);
    require_device();
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));

    CHECK(cudaMallocFromPoolAsync(&p, 3 * mib, pool, s));
    CHECK(cudaMallocAsync(&q, 5 * mib, s));
    CHECK(cudaMemsetAsync(p, 1, 3 * mib, s));
    EXPECT(attr(pool, cudaMemPoolAttrUsedMemCurrent) >= 8 * mib);
    EXPECT(attr(pool, cudaMemPoolAttrReservedMemCurrent) >= 8 * mib);
    if (shim_stat("allocation.all.current", 0) >= 0)
        EXPECT(shim_stat("allocation.all.current", 0) == 2);

    CHECK(cudaFreeAsync(q, s));
    CHECK(cudaStreamSynchronize(s));
    EXPECT(attr(pool, cudaMemPoolAttrUsedMemCurrent) >= 3 * mib);
    EXPECT(attr(pool, cudaMemPoolAttrUsedMemCurrent) < 8 * mib);
    EXPECT(attr(pool, cudaMemPoolAttrUsedMemHigh) >= 8 * mib);

    /* reset_peak_memory_stats */
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
    EXPECT(attr(pool, cudaMemPoolAttrUsedMemHigh) < 8 * mib);
    EXPECT(attr(pool, cudaMemPoolAttrUsedMemHigh) >= attr(pool, cudaMemPoolAttrUsedMemCurrent));

    /* empty_cache: nothing but the live block stays reserved */
    CHECK(cudaFreeAsync(p, s));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemPoolTrimTo(pool, 0));
    EXPECT(attr(pool, cudaMemPoolAttrUsedMemCurrent) == 0);
    EXPECT(attr(pool, cudaMemPoolAttrReservedMemCurrent) == 0);
    if (shim_stat("reserved_bytes.all.current", 0) >= 0)
        EXPECT(shim_stat("reserved_bytes.all.current", 0) == 0);

    CHECK(cudaStreamDestroy(s));
    printf("pool_attrs: ok\n");
    return 0;
}
