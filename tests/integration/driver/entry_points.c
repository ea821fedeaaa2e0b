/* entry_points.c - driver functions the way PyTorch's c10 gets them: through
 * the runtime's cudaGetDriverEntryPoint and cudaGetDriverEntryPointByVersion
 * (the _ptsz forms when built for the per-thread default stream, whose
 * default flags select the driver's per-thread variants). Under the shim
 * (--expect-shim) the memory calls are its hooks, served by its allocator
 * (driver_test.h), and the driver's sets work on that memory; an unknown
 * name and too old a version get the runtime's own answers.
 *
 *   entry_points [--expect-shim] */
#include "driver_test.h"

/* The deprecated form is what PyTorch built for CUDA before 12.5 calls. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static void *entry(const char *name)
{
    enum cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    void *fn = NULL;

    CHECK(cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &status));
    EXPECT(status == cudaDriverEntryPointSuccess && fn);
    return fn;
}

static void *entry_by_version(const char *name)
{
    enum cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    void *fn = NULL;

    CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &status));
    EXPECT(status == cudaDriverEntryPointSuccess && fn);
    return fn;
}

int main(int argc, char **argv)
{
    bool expect_shim = argc > 1 && !strcmp(argv[1], "--expect-shim");
    enum cudaDriverEntryPointQueryResult status;
    cudaStream_t s;
    void *fn = &status;
    const int device = 2;

    watchdog(60);
    require_device();
    CHECK(cudaSetDevice(device));
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    exercise(&(struct driver_memory){"cudaGetDriverEntryPoint", entry("cuMemAlloc"),
                                     entry("cuMemFree"), entry("cuMemAllocAsync"),
                                     entry("cuMemFreeAsync"), entry("cuMemGetInfo")},
             expect_shim, (CUstream)s, device);
    exercise(&(struct driver_memory){"cudaGetDriverEntryPointByVersion",
                                     entry_by_version("cuMemAlloc"), entry_by_version("cuMemFree"),
                                     entry_by_version("cuMemAllocAsync"),
                                     entry_by_version("cuMemFreeAsync"),
                                     entry_by_version("cuMemGetInfo")},
             expect_shim, NULL, device);
    /* the driver's sets work on the allocator's memory; with the runtime
     * loaded the Async set is the driver's own (the runtime's calls tell
     * the shim of stream work) */
    set_and_read_back(&(struct driver_memory){"cudaGetDriverEntryPoint sets", entry("cuMemAlloc"),
                                              entry("cuMemFree"), NULL, NULL, NULL},
                      &(struct driver_sets){entry("cuMemsetD32"), entry("cuMemsetD32Async"),
                                            entry("cuMemcpyDtoH"), entry("cuStreamSynchronize")},
                      expect_shim, false, (CUstream)s, device);
    /* the virtual-memory calls are hooked (and passed through), others not */
    EXPECT(in_shim(entry_by_version("cuMemCreate")) == expect_shim);
    EXPECT(!in_shim(entry_by_version("cuMemSetAccess")));

    CHECK(cudaGetDriverEntryPoint("cuNoSuchEntryPoint", &fn, cudaEnableDefault, &status));
    EXPECT(fn == NULL && status == cudaDriverEntryPointSymbolNotFound);
    fn = &status;
    CHECK(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 2000, cudaEnableDefault, &status));
    EXPECT(fn == NULL && status == cudaDriverEntryPointVersionNotSufficent);
    EXPECT(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, 1 << 10, &status) ==
           cudaErrorInvalidValue);
    EXPECT(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaDeviceSynchronize());
    printf("entry_points: ok\n");
    return 0;
}
