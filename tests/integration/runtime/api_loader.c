/* api_loader.c - the public API through fsdpshim_loader.h, in a program
 * built without the shim.
 *   rt_api_loader               run alone: every function is a stand-in
 *                               that answers FSDPSHIM_ERR_INACTIVE
 *   rt_api_loader --expect-shim run with the shim preloaded: the real API,
 *                               which counts the program's allocations */
#include "probe.h"

#include <fsdpshim/fsdpshim_loader.h>
#include <stdbool.h>
#include <string.h>

static void expect_standins(const fsdpshim_api *fs)
{
    char buf[64] = "";
    void *stream = (void *)1;
    size_t needed = 7;
    int64_t v = -1;

    EXPECT(fs->active() == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fs->record_stream(NULL, NULL) == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fs->set_stream(NULL) == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fs->get_stream(&stream) == FSDPSHIM_ERR_INACTIVE && stream == (void *)1);
    EXPECT(fs->empty_cache(-1) == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fs->stat("allocation.all.current", 0, &v) == FSDPSHIM_ERR_INACTIVE && v == -1);
    EXPECT(fs->reset_peak_stats(-1) == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fs->memory_summary(0, buf, sizeof buf, &needed) == FSDPSHIM_ERR_INACTIVE);
    EXPECT(buf[0] == '\0' && needed == 7);
    EXPECT(fs->annotation_push("x") == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fs->annotation_pop() == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fs->snapshot("s") == FSDPSHIM_ERR_INACTIVE);
    EXPECT(fs->trace_flush() == FSDPSHIM_ERR_INACTIVE);
}

static void expect_shim(const fsdpshim_api *fs, void *p)
{
    cudaStream_t s;
    char summary[4096];
    void *got = NULL;
    int64_t v = -1;

    EXPECT(fs->active() == FSDPSHIM_OK);
    EXPECT(fs->stat("allocation.all.current", 0, &v) == FSDPSHIM_OK && v == 1);
    EXPECT(fs->stat("allocated_bytes.all.current", 0, &v) == FSDPSHIM_OK && v == 1 << 20);
    CHECK(cudaStreamCreate(&s));
    EXPECT(fs->set_stream(s) == FSDPSHIM_OK);
    EXPECT(fs->get_stream(&got) == FSDPSHIM_OK && got == (void *)s);
    EXPECT(fs->set_stream(NULL) == FSDPSHIM_OK);
    EXPECT(fs->record_stream(p, s) == FSDPSHIM_OK);
    EXPECT(fs->memory_summary(0, summary, sizeof summary, NULL) == FSDPSHIM_OK);
    EXPECT(strlen(summary) > 0);
    EXPECT(fs->annotation_push("step") == FSDPSHIM_OK);
    EXPECT(fs->annotation_pop() == FSDPSHIM_OK);
    EXPECT(fs->snapshot("s") == FSDPSHIM_OK);
    EXPECT(fs->trace_flush() == FSDPSHIM_OK);
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamDestroy(s));
}

int main(int argc, char **argv)
{
    bool shim = argc > 1 && !strcmp(argv[1], "--expect-shim");
    fsdpshim_api fs;
    void *p;

    watchdog(30);
    require_device();
    EXPECT(fsdpshim_load(&fs) == (shim ? FSDPSHIM_OK : FSDPSHIM_ERR_INACTIVE));
    CHECK(cudaMalloc(&p, 1 << 20));
    if (shim)
        expect_shim(&fs, p);
    else
        expect_standins(&fs);
    CHECK(cudaFree(p));
    printf("api_loader: ok\n");
    return 0;
}
