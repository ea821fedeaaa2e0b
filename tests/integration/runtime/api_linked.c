/* api_linked.c - a program linked with libfsdpshim.so after libcudart and
 * run without LD_PRELOAD. Its CUDA calls bind to the runtime, which comes
 * first, so the shim sees none of them: the public API must say
 * FSDPSHIM_ERR_INACTIVE for every function and count nothing, and the test
 * (expect_stderr.sh) wants one line on stderr saying why. */
#include "probe.h"

#include <fsdpshim/fsdpshim.h>

static void expect_inactive(void)
{
    char buf[64] = "";
    void *stream = (void *)1;
    int64_t v = -1;

    EXPECT(fsdpshim_active() == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fsdpshim_stat("allocation.all.allocated", 0, &v) == FSDPSHIM_ERR_INACTIVE && v == -1);
    EXPECT(fsdpshim_record_stream(NULL, NULL) == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fsdpshim_set_stream(NULL) == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fsdpshim_get_stream(&stream) == FSDPSHIM_ERR_INACTIVE && stream == (void *)1);
    EXPECT(fsdpshim_empty_cache(-1) == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fsdpshim_reset_peak_stats(-1) == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fsdpshim_memory_summary(0, buf, sizeof buf, NULL) == FSDPSHIM_ERR_INACTIVE);
    EXPECT(buf[0] == '\0');
    EXPECT(fsdpshim_annotation_push("x") == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fsdpshim_annotation_pop() == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fsdpshim_snapshot("s") == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fsdpshim_trace_flush() == FSDPSHIM_ERR_INACTIVE);
}

int main(void)
{
    void *p;

    watchdog(30);
    require_device();
    CHECK(cudaMalloc(&p, 1 << 20));
    expect_inactive();
    CHECK(cudaFree(p));
    expect_inactive();
    printf("api_linked: ok\n");
    return 0;
}
