/* api_c.c - the public C API (include/fsdpshim/fsdpshim.h) from a C
 * program linked with libfsdpshim.so and run with it preloaded (linked
 * alone, the shim may see none of the program's calls: api_linked.c). */
#include "probe.h"

#include <fsdpshim/fsdpshim.h>
#include <string.h>

static int64_t stat_of(const char *name)
{
    int64_t v = -1;
    EXPECT(fsdpshim_stat(name, 0, &v) == FSDPSHIM_OK);
    return v;
}

int main(void)
{
    cudaStream_t s;
    void *p, *q, *got = (void *)1;
    char summary[8192];
    size_t needed = 0;
    int64_t v;

    watchdog(30);
    require_device();
    CHECK(cudaFree(NULL)); /* the runtime is up */
    EXPECT(fsdpshim_active() == FSDPSHIM_OK);
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    /* the thread's current stream: cudaMalloc allocates for it */
    EXPECT(fsdpshim_get_stream(&got) == FSDPSHIM_OK && got == NULL);
    EXPECT(fsdpshim_set_stream(s) == FSDPSHIM_OK);
    EXPECT(fsdpshim_get_stream(&got) == FSDPSHIM_OK && got == (void *)s);
    CHECK(cudaMalloc(&p, 2 << 20));
    CHECK(cudaFree(p));
    /* device-ordered: cached, and pending until the device has passed the
     * free (the next allocation may or may not see it complete) */
    EXPECT(stat_of("pending_frees") > 0);
    CHECK(cudaMallocAsync(&q, 2 << 20, s));
    EXPECT(fsdpshim_set_stream(NULL) == FSDPSHIM_OK);

    /* record_stream */
    EXPECT(fsdpshim_record_stream(q, cudaStreamPerThread) == FSDPSHIM_OK);
    EXPECT(fsdpshim_record_stream((char *)q + 100, s) == FSDPSHIM_OK);
    EXPECT(fsdpshim_record_stream(&v, s) == FSDPSHIM_ERR_NOT_OWNED);

    /* statistics by PyTorch name */
    EXPECT(stat_of("allocated_bytes.all.current") == 2 << 20);
    EXPECT(stat_of("allocated_bytes.large_pool.current") == 2 << 20);
    EXPECT(stat_of("allocated_bytes.small_pool.current") == 0);
    EXPECT(stat_of("allocation.all.allocated") == 2);
    EXPECT(stat_of("segment.all.current") >= 1);
    EXPECT(stat_of("num_device_alloc") >= 1);
    EXPECT(stat_of("num_ooms") == 0);
    EXPECT(fsdpshim_stat("allocated_bytes.all.peak", -1, &v) == FSDPSHIM_OK && v == 2 << 20);
    EXPECT(fsdpshim_stat("allocated_bytes.all.bogus", 0, &v) == FSDPSHIM_ERR_NOT_FOUND);
    EXPECT(fsdpshim_stat("nonsense", 0, &v) == FSDPSHIM_ERR_NOT_FOUND);
    EXPECT(fsdpshim_stat("num_ooms", 1000, &v) == FSDPSHIM_ERR_INVALID);
    EXPECT(fsdpshim_stat(NULL, 0, &v) == FSDPSHIM_ERR_INVALID);

    /* summary */
    EXPECT(fsdpshim_memory_summary(0, summary, sizeof summary, &needed) == FSDPSHIM_OK);
    EXPECT(needed > 0 &&
           strlen(summary) == (needed < sizeof summary ? needed : sizeof summary - 1));
    EXPECT(fsdpshim_memory_summary(0, NULL, 0, &needed) == FSDPSHIM_OK && needed > 0);
    EXPECT(fsdpshim_memory_summary(0, NULL, 10, NULL) == FSDPSHIM_ERR_INVALID);

    /* empty the cache: nothing reserved stays but the live block's segment */
    CHECK(cudaFreeAsync(q, s));
    CHECK(cudaStreamSynchronize(s));
    EXPECT(fsdpshim_empty_cache(-1) == FSDPSHIM_OK);
    EXPECT(stat_of("reserved_bytes.all.current") == 0);
    EXPECT(fsdpshim_empty_cache(1000) == FSDPSHIM_ERR_INVALID);
    EXPECT(fsdpshim_reset_peak_stats(0) == FSDPSHIM_OK);
    EXPECT(stat_of("allocated_bytes.all.peak") == 0);

    /* annotations, snapshot, flush (tracing off: successful no-ops) */
    EXPECT(fsdpshim_annotation_pop() == FSDPSHIM_ERR_EMPTY);
    EXPECT(fsdpshim_annotation_push("forward") == FSDPSHIM_OK);
    EXPECT(fsdpshim_annotation_push("layer.0") == FSDPSHIM_OK);
    EXPECT(fsdpshim_annotation_pop() == FSDPSHIM_OK);
    EXPECT(fsdpshim_annotation_pop() == FSDPSHIM_OK);
    EXPECT(fsdpshim_annotation_pop() == FSDPSHIM_ERR_EMPTY);
    EXPECT(fsdpshim_annotation_push(NULL) == FSDPSHIM_ERR_INVALID);
    EXPECT(fsdpshim_snapshot("step 1") == FSDPSHIM_OK);
    EXPECT(fsdpshim_trace_flush() == FSDPSHIM_OK);

    CHECK(cudaStreamDestroy(s));
    printf("api_c: ok\n");
    return 0;
}
