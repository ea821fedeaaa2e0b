/* driver_only.c - a program that reaches the CUDA driver only as NCCL and
 * nvcc's static runtime do: it is linked with neither libcudart nor libcuda,
 * dlopens libcuda.so.1 with RTLD_LOCAL and takes its functions by dlsym on
 * that handle and through cuGetProcAddress (both ABIs, with versions and
 * flags). Under the shim (--expect-shim) the memory calls got every way are
 * its hooks and are served by its allocator (driver_test.h), and the
 * driver's sets work on that memory; the
 * virtual-memory calls are its hooks and work as the driver's; anything else
 * (other entry points, unknown and future names, too old a version, bad
 * flags) gets exactly the driver's answer.
 *
 *   driver_only LIBCUDA [--expect-shim] */
#include "driver_test.h"

typedef CUresult (*gpa_v2_fn)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa_v1_fn)(const char *, void **, int, cuuint64_t);

static void *lib;
static gpa_v2_fn gpa_v2;
static gpa_v1_fn gpa_v1;

static void *must_dlsym(const char *name)
{
    void *fn;

    dlerror();
    fn = dlsym(lib, name);
    if (!fn || dlerror() != NULL) {
        fprintf(stderr, "dlsym %s failed\n", name);
        exit(1);
    }
    return fn;
}

/* cuGetProcAddress_v2 of a base name, which must succeed. */
static void *proc(const char *name, int version, cuuint64_t flags)
{
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *fn = NULL;

    CU_CHECK(gpa_v2(name, &fn, version, flags, &status));
    EXPECT(status == CU_GET_PROC_ADDRESS_SUCCESS && fn);
    return fn;
}

static void *proc_v1(const char *name)
{
    void *fn = NULL;

    CU_CHECK(gpa_v1(name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT));
    return fn;
}

/* Reserve, create, map, grant, touch, unmap, release, free: the shim passes
 * each through (its hook when preloaded), and none is an allocation of its. */
static void vmm_roundtrip(bool expect_shim, int device)
{
    __typeof__(&cuMemAddressReserve) reserve = proc("cuMemAddressReserve", 12000, 0);
    __typeof__(&cuMemAddressFree) address_free = proc("cuMemAddressFree", 12000, 0);
    __typeof__(&cuMemCreate) create = must_dlsym("cuMemCreate");
    __typeof__(&cuMemRelease) release = must_dlsym("cuMemRelease");
    __typeof__(&cuMemMap) map = proc_v1("cuMemMap");
    __typeof__(&cuMemUnmap) unmap = proc("cuMemUnmap", 12000, 0);
    __typeof__(&cuMemSetAccess) set_access = proc("cuMemSetAccess", 12000, 0);
    __typeof__(&cuMemGetAllocationGranularity) granularity =
        proc("cuMemGetAllocationGranularity", 12000, 0);
    __typeof__(&cuMemGetAddressRange_v2) range = must_dlsym("cuMemGetAddressRange_v2");
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, device}};
    CUmemAccessDesc access = {.location = prop.location,
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    int64_t served = stat_or_zero("allocation.all.allocated", device);
    CUmemGenericAllocationHandle h;
    CUdeviceptr va, base;
    size_t g = 0, size;

    EXPECT(in_shim((void *)reserve) == expect_shim && in_shim((void *)address_free) == expect_shim);
    EXPECT(in_shim((void *)create) == expect_shim && in_shim((void *)release) == expect_shim);
    EXPECT(in_shim((void *)map) == expect_shim && in_shim((void *)unmap) == expect_shim);
    /* not hooked: the driver's own, under the shim too */
    EXPECT(!in_shim((void *)set_access) && !in_shim((void *)granularity) &&
           !in_shim((void *)range));
    CU_CHECK(granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CU_CHECK(reserve(&va, 2 * g, 0, 0, 0));
    CU_CHECK(create(&h, g, &prop, 0));
    CU_CHECK(map(va + g, g, 0, h, 0));
    CU_CHECK(set_access(va + g, g, &access, 1));
    CU_CHECK(range(&base, &size, va + g + 100));
    EXPECT(base == va + g && size == g);
    memset((void *)(uintptr_t)(va + g), 7, g); /* the simulated device's memory is the host's */
    CU_CHECK(unmap(va + g, g));
    CU_CHECK(release(h));
    CU_CHECK(address_free(va, 2 * g));
    if (expect_shim) EXPECT(shim_stat("allocation.all.allocated", device) == served);
    printf("vmm: ok\n");
}

/* The driver's answers pass through unchanged. */
static void unknown_names(bool expect_shim)
{
    CUdriverProcAddressQueryResult status;
    void *fn = &status;

    EXPECT(gpa_v2("cuNoSuchEntryPoint", &fn, 13000, 0, &status) == CUDA_ERROR_NOT_FOUND);
    EXPECT(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && fn == NULL);
    fn = &status;
    EXPECT(gpa_v1("cuMemNoSuchCall", &fn, 13000, 0) == CUDA_ERROR_NOT_FOUND && fn == NULL);
    /* older than every ABI of the name */
    EXPECT(gpa_v2("cuMemAlloc", &fn, 2000, 0, &status) == CUDA_ERROR_NOT_FOUND);
    EXPECT(status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT && fn == NULL);
    EXPECT(gpa_v2("cuMemAlloc", &fn, 12000, 1 << 10, &status) == CUDA_ERROR_INVALID_VALUE);
    /* a future version gets the newest ABI, which is the one the shim hooks */
    EXPECT(in_shim(proc("cuMemAlloc", 99000, 0)) == expect_shim);
    /* a future ABI name, and the legacy 32-bit ABI, which the sim does not have */
    dlerror();
    EXPECT(dlsym(lib, "cuMemAlloc_v3") == NULL && dlerror() != NULL);
    EXPECT(dlsym(lib, "cuMemAlloc") == NULL && dlerror() != NULL);
    /* names the shim looks at but does not hook */
    EXPECT(!in_shim(must_dlsym("cuMemGetAllocationGranularity")));
    EXPECT(!in_shim(must_dlsym("cuMemsetD32Async")));
    EXPECT(
        !in_shim(proc("cuMemsetD32Async", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)));
    EXPECT(!in_shim(proc("cuCtxGetDevice", 12000, 0)));
    /* the lookup's own functions are hooked, so that what they answer is */
    EXPECT(in_shim(proc("cuGetProcAddress", 12000, 0)) == expect_shim);
    EXPECT(in_shim(must_dlsym("cuGetProcAddress")) == expect_shim);
    printf("unknown names: ok\n");
}

int main(int argc, char **argv)
{
    bool expect_shim = argc > 2 && !strcmp(argv[2], "--expect-shim");
    CUresult (*init)(unsigned);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    CUresult (*sync)(void);
    CUcontext ctx;
    const int device = 1;

    watchdog(60);
    if (argc < 2) return 2;
    EXPECT(dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY) == NULL);
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    /* the driver is loaded, but not in the global scope */
    EXPECT(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2") == NULL);
    gpa_v2 = (gpa_v2_fn)must_dlsym("cuGetProcAddress_v2");
    gpa_v1 = (gpa_v1_fn)must_dlsym("cuGetProcAddress");
    EXPECT(in_shim((void *)gpa_v2) == expect_shim && in_shim((void *)gpa_v1) == expect_shim);
    init = proc("cuInit", 12000, 0);
    retain = proc("cuDevicePrimaryCtxRetain", 12000, 0);
    set_current = proc("cuCtxSetCurrent", 12000, 0);
    sync = proc("cuCtxSynchronize", 12000, 0);
    CU_CHECK(init(0));
    CU_CHECK(retain(&ctx, device));
    CU_CHECK(set_current(ctx));

    exercise(&(struct driver_memory){"dlsym", must_dlsym("cuMemAlloc_v2"),
                                     must_dlsym("cuMemFree_v2"), must_dlsym("cuMemAllocAsync"),
                                     must_dlsym("cuMemFreeAsync"), must_dlsym("cuMemGetInfo_v2")},
             expect_shim, NULL, device);
    exercise(&(struct driver_memory){"cuGetProcAddress_v2", proc("cuMemAlloc", 12000, 0),
                                     proc("cuMemFree", 12000, 0), proc("cuMemAllocAsync", 12000, 0),
                                     proc("cuMemFreeAsync", 12000, 0),
                                     proc("cuMemGetInfo", 12000, 0)},
             expect_shim, CU_STREAM_LEGACY, device);
    exercise(
        &(struct driver_memory){
            "cuGetProcAddress_v2, per-thread", proc("cuMemAlloc", 12000, 0),
            proc("cuMemFree", 12000, 0),
            proc("cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            proc("cuMemFreeAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            proc("cuMemGetInfo", 12000, 0)},
        expect_shim, NULL, device);
    exercise(&(struct driver_memory){"cuGetProcAddress", proc_v1("cuMemAlloc"),
                                     proc_v1("cuMemFree"), proc_v1("cuMemAllocAsync"),
                                     proc_v1("cuMemFreeAsync"), proc_v1("cuMemGetInfo")},
             expect_shim, CU_STREAM_PER_THREAD, device);
    /* Sets on the allocator's memory, the driver's own functions: the sim's
     * libcuda.so.1 brings its runtime in as a dependency, so the shim hands
     * out no hook for stream work (static_runtime.c is the process without
     * one). */
    struct driver_memory route = {"cuGetProcAddress_v2 sets",
                                  proc("cuMemAlloc", 12000, 0),
                                  proc("cuMemFree", 12000, 0),
                                  NULL,
                                  NULL,
                                  NULL};
    set_and_read_back(&route,
                      &(struct driver_sets){
                          proc("cuMemsetD32", 12000, 0), proc("cuMemsetD32Async", 12000, 0),
                          proc("cuMemcpyDtoH", 12000, 0), proc("cuStreamSynchronize", 12000, 0)},
                      expect_shim, false, CU_STREAM_LEGACY, device);
    set_and_read_back(
        &route,
        &(struct driver_sets){
            proc("cuMemsetD32", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            proc("cuMemsetD32Async", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            proc("cuMemcpyDtoH", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            proc("cuStreamSynchronize", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)},
        expect_shim, false, NULL, device);
    vmm_roundtrip(expect_shim, device);
    unknown_names(expect_shim);
    CU_CHECK(sync());
    printf("driver_only: ok\n");
    return 0;
}
