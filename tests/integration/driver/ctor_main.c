/* ctor_main.c - libraries that look symbols up from their constructors never
 * deadlock with the shim's dlsym, and get the same answers (ctor_probe.c):
 * the copy linked in is initialised before the preloaded shim; the copy
 * dlopen'ed here runs its constructor under the loader's lock while four
 * threads look the driver's entry points up, by dlsym and cuGetProcAddress,
 * and allocate through them.
 *
 *   ctor_main LATE_PROBE [--expect-shim]   (FSDPSHIM_TEST_LIBCUDA: the driver) */
#include "ctor_probe.h"
#include "driver_test.h"

#include <pthread.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);

static void *lib;
static bool expect_shim;

/* `first`: the probe ran before anything had been allocated. */
static void check(const char *which, const struct ctor_probe *r, bool first)
{
    if (!r->ran || !r->lookups || !r->allocated || r->hooked != expect_shim ||
        (first && !r->shim_before)) {
        fprintf(stderr, "%s probe: ran %d lookups %d allocated %d hooked %d shim_before %d\n",
                which, r->ran, r->lookups, r->allocated, r->hooked, r->shim_before);
        exit(1);
    }
}

static void *look_up(void *arg)
{
    gpa_fn gpa = (gpa_fn)dlsym(lib, "cuGetProcAddress_v2");
    __typeof__(&cuMemFree_v2) release;
    __typeof__(&cuMemAlloc_v2) alloc;
    CUcontext ctx = arg;
    CUdeviceptr p;

    CU_CHECK(((__typeof__(&cuCtxSetCurrent))dlsym(lib, "cuCtxSetCurrent"))(ctx));
    for (int i = 0; i < 200; i++) {
        alloc = (__typeof__(alloc))dlsym(lib, "cuMemAlloc_v2");
        CU_CHECK(gpa("cuMemFree", (void **)&release, 12000, 0, NULL));
        EXPECT(in_shim((void *)alloc) == expect_shim && in_shim((void *)release) == expect_shim);
        EXPECT(dlsym(RTLD_NEXT, "malloc") != NULL);
        CU_CHECK(alloc(&p, 512 + (size_t)i));
        CU_CHECK(release(p));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const struct ctor_probe *(*late_result)(void);
    __typeof__(&cuDevicePrimaryCtxRetain) retain;
    pthread_t threads[4];
    CUcontext ctx;
    void *late;

    watchdog(60);
    if (argc < 2 || !getenv("FSDPSHIM_TEST_LIBCUDA")) return 2;
    expect_shim = argc > 2 && !strcmp(argv[2], "--expect-shim");
    check("linked", fs_ctor_probe_result(), true);
    lib = dlopen(getenv("FSDPSHIM_TEST_LIBCUDA"), RTLD_NOW | RTLD_LOCAL);
    EXPECT(lib != NULL);
    retain = (__typeof__(retain))dlsym(lib, "cuDevicePrimaryCtxRetain");
    CU_CHECK(retain(&ctx, 0));
    for (int i = 0; i < 4; i++)
        EXPECT(pthread_create(&threads[i], NULL, look_up, ctx) == 0);
    late = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    EXPECT(late != NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    late_result = (const struct ctor_probe *(*)(void))dlsym(late, "fs_ctor_probe_result");
    EXPECT(late_result && late_result() != fs_ctor_probe_result());
    check("dlopen'ed", late_result(), false);
    if (expect_shim) EXPECT(shim_stat("allocated_bytes.all.current", -1) == 0);
    printf("ctor_main: ok\n");
    return 0;
}
