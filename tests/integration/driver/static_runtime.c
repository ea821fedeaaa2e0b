/* static_runtime.c - a program that reaches CUDA as one built with nvcc's
 * default link does: the runtime is inside it (here, inside the simulated
 * driver that carries it privately, build/lib/sim/static/libcuda.so.1), no
 * libcudart.so is loaded, and every CUDA call is a driver call got through
 * dlopen("libcuda.so.1", RTLD_LOCAL), dlsym of cuGetProcAddress_v2 and its
 * answers.
 *
 * It allocates through cuMemAlloc_v2/cuMemFree_v2 and, on streams,
 * cuMemAllocAsync/cuMemFreeAsync, writes and reads back every block, frees
 * blocks that another stream still reads (the three ways the integrity test
 * of the runtime does, tests/integration/runtime/integrity.c), and allocates
 * in a context of its own (cuCtxCreate), whose memory is never the shim's,
 * and sets memory with cuMemsetD32 and cuMemsetD32Async and reads it back.
 * With --expect-shim the shim's statistics must show the primary context's
 * allocations served and the other context's not; the counts are printed
 * for static_runtime_test.sh to compare with the simulated device's.
 *
 *   static_runtime [--expect-shim] */
#include "driver_test.h"

#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define DEVICE 0
#define SIZE   (12u << 20) /* a segment of its own: nothing but the freed block fits */

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);
static gpa_fn gpa;

/* The driver's function of a base name, as the static runtime asks. */
static void *proc(const char *name)
{
    CUdriverProcAddressQueryResult status;
    void *fn = NULL;

    CU_CHECK(gpa(name, &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
    EXPECT(status == CU_GET_PROC_ADDRESS_SUCCESS && fn);
    return fn;
}

static struct {
    __typeof__(&cuMemAlloc_v2) alloc;
    __typeof__(&cuMemFree_v2) free;
    __typeof__(&cuMemAllocAsync) alloc_async;
    __typeof__(&cuMemFreeAsync) free_async;
    __typeof__(&cuMemcpyHtoD_v2) htod;
    __typeof__(&cuMemcpyDtoH_v2) dtoh;
    __typeof__(&cuMemcpyHtoDAsync_v2) htod_async;
    __typeof__(&cuMemcpyDtoHAsync_v2) dtoh_async;
    __typeof__(&cuStreamCreate) stream_create;
    __typeof__(&cuStreamDestroy_v2) stream_destroy;
    __typeof__(&cuStreamSynchronize) stream_sync;
    __typeof__(&cuLaunchHostFunc) host_func;
    __typeof__(&cuMemAllocHost_v2) alloc_host;
} cu;

static int libcudart_found(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    return info->dlpi_name && strstr(info->dlpi_name, "libcudart") != NULL;
}

static void fill(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(i * 31 + seed);
}

static bool intact(const unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != (unsigned char)(i * 31 + seed)) return false;
    return true;
}

static unsigned char host[SIZE], back[SIZE];
static int allocations; /* made in the primary context */

/* Plain and stream-ordered blocks, written and read back, freed and made
 * again (the second round comes from the cache under the shim). */
static void round_trips(CUstream s)
{
    for (unsigned round = 0; round < 2; round++) {
        CUdeviceptr a, b;

        fill(host, 1 << 20, round);
        CU_CHECK(cu.alloc(&a, 1 << 20));
        CU_CHECK(cu.htod(a, host, 1 << 20));
        memset(back, 0, 1 << 20);
        CU_CHECK(cu.dtoh(back, a, 1 << 20));
        EXPECT(intact(back, 1 << 20, round));
        CU_CHECK(cu.free(a));

        fill(host, 3 << 20, round + 7);
        CU_CHECK(cu.alloc_async(&b, 3 << 20, s));
        CU_CHECK(cu.htod_async(b, host, 3 << 20, s));
        memset(back, 0, 3 << 20);
        CU_CHECK(cu.dtoh_async(back, b, 3 << 20, s));
        CU_CHECK(cu.stream_sync(s));
        EXPECT(intact(back, 3 << 20, round + 7));
        CU_CHECK(cu.free_async(b, s));
        allocations += 2;
    }
    printf("round trips: ok\n");
}

/* The busy stream's work: wait for the gate, then read the block as a
 * kernel would (the simulated device's memory is the host's). */
static atomic_int gate_open;

/* The gate also opens by itself 300 ms after the new request began: the
 * shim may serve that request with the freed block by making its stream
 * wait for `busy` on the GPU (as CUDA's stream-ordered pools do), and the
 * test's synchronisation of that stream then returns once the gate opens,
 * rather than never; only a block handed out without any wait is
 * overwritten before the read. */
static void *open_later(void *unused)
{
    struct timespec ms300 = {0, 300000000};

    (void)unused;
    nanosleep(&ms300, NULL);
    atomic_store(&gate_open, 1);
    return NULL;
}
static struct {
    CUdeviceptr block;
    bool read_ok;
} gate_work;

static void CUDA_CB gate(void *arg)
{
    const struct timespec nap = {0, 1000000};

    (void)arg;
    while (!atomic_load(&gate_open))
        nanosleep(&nap, NULL);
    gate_work.read_ok =
        !gate_work.block || intact((const unsigned char *)(uintptr_t)gate_work.block, SIZE, 1);
}

/* A block that `busy` still reads is freed (stream-ordered on `busy`
 * itself, or device-ordered by cuMemFree) and memory of the same size is
 * asked for again on `other` and overwritten while the read waits: the read
 * must see the block's own bytes. */
static void integrity(CUstream busy, CUstream other, bool ordered)
{
    CUdeviceptr x, y;

    atomic_store(&gate_open, 0);
    fill(host, SIZE, 1);
    if (ordered)
        CU_CHECK(cu.alloc_async(&x, SIZE, busy));
    else
        CU_CHECK(cu.alloc(&x, SIZE));
    CU_CHECK(cu.htod(x, host, SIZE));
    gate_work.block = x;
    gate_work.read_ok = false;
    CU_CHECK(cu.host_func(busy, gate, NULL));
    if (ordered)
        CU_CHECK(cu.free_async(x, busy));
    else
        CU_CHECK(cu.free(x));
    fill(host, SIZE, 2);
    pthread_t opener;
    if (pthread_create(&opener, NULL, open_later, NULL) != 0) exit(1);
    CU_CHECK(cu.alloc_async(&y, SIZE, other));
    CU_CHECK(cu.htod_async(y, host, SIZE, other));
    CU_CHECK(cu.stream_sync(other));
    atomic_store(&gate_open, 1);
    pthread_join(opener, NULL);
    CU_CHECK(cu.stream_sync(busy));
    EXPECT(gate_work.read_ok);
    CU_CHECK(cu.free_async(y, other));
    CU_CHECK(cu.stream_sync(other));
    allocations += 2;
    printf("integrity (%s free): ok\n", ordered ? "stream-ordered" : "device-ordered");
}

/* A block that a copy queued on `busy` (behind the gate) still reads is
 * freed on `other`, which is idle, and memory of the same size is asked for
 * on `other` again and overwritten: the copy must read the block's own
 * bytes. Only the copy call tells the shim that `busy` uses the block (on a
 * GPU it is the static runtime's cudaMemcpyAsync), so the shim must see the
 * driver's copies as it sees the runtime's. */
static void integrity_copy(CUstream busy, CUstream other)
{
    unsigned char *pinned; /* a copy to pageable memory would wait for the gate */
    CUdeviceptr x, y;

    atomic_store(&gate_open, 0);
    fill(host, SIZE, 1);
    CU_CHECK(cu.alloc_async(&x, SIZE, other));
    CU_CHECK(cu.htod_async(x, host, SIZE, other));
    CU_CHECK(cu.stream_sync(other));
    gate_work.block = 0;
    CU_CHECK(cu.host_func(busy, gate, NULL));
    CU_CHECK(cu.alloc_host((void **)&pinned, SIZE));
    memset(pinned, 0, SIZE);
    CU_CHECK(cu.dtoh_async(pinned, x, SIZE, busy));
    CU_CHECK(cu.free_async(x, other));
    fill(host, SIZE, 2);
    pthread_t opener;
    if (pthread_create(&opener, NULL, open_later, NULL) != 0) exit(1);
    CU_CHECK(cu.alloc_async(&y, SIZE, other));
    CU_CHECK(cu.htod_async(y, host, SIZE, other));
    CU_CHECK(cu.stream_sync(other));
    atomic_store(&gate_open, 1);
    pthread_join(opener, NULL);
    CU_CHECK(cu.stream_sync(busy));
    EXPECT(intact(pinned, SIZE, 1));
    CU_CHECK(((__typeof__(&cuMemFreeHost))proc("cuMemFreeHost"))(pinned));
    CU_CHECK(cu.free_async(y, other));
    CU_CHECK(cu.stream_sync(other));
    allocations += 2;
    printf("integrity (free on an idle stream, a copy on another reads): ok\n");
}

/* A context of the program's own: its memory is the driver's, never served
 * from the shim's cache (which holds the primary context's). */
static void other_context(bool expect_shim)
{
    __typeof__(&cuCtxCreate_v4) create = proc("cuCtxCreate");
    __typeof__(&cuCtxDestroy_v2) destroy = proc("cuCtxDestroy");
    int64_t served = stat_or_zero("allocation.all.allocated", DEVICE);
    CUcontext ctx;
    CUdeviceptr p;

    CU_CHECK(create(&ctx, NULL, 0, DEVICE));
    fill(host, 1 << 20, 3);
    CU_CHECK(cu.alloc(&p, 1 << 20));
    CU_CHECK(cu.htod(p, host, 1 << 20));
    CU_CHECK(cu.dtoh(back, p, 1 << 20));
    EXPECT(intact(back, 1 << 20, 3));
    CU_CHECK(cu.free(p));
    CU_CHECK(destroy(ctx)); /* pops it: the primary context is current again */
    if (expect_shim) EXPECT(shim_stat("allocation.all.allocated", DEVICE) == served);
    printf("other context: ok\n");
}

int main(int argc, char **argv)
{
    bool expect_shim = argc > 1 && !strcmp(argv[1], "--expect-shim");
    CUresult (*init)(unsigned);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    CUstream busy, other;
    CUcontext primary;
    void *lib;

    watchdog(60);
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
        return 1;
    }
    gpa = (gpa_fn)dlsym(lib, "cuGetProcAddress_v2");
    EXPECT(gpa && in_shim((void *)gpa) == expect_shim);
    init = proc("cuInit");
    retain = proc("cuDevicePrimaryCtxRetain");
    set_current = proc("cuCtxSetCurrent");
    cu.alloc = proc("cuMemAlloc");
    cu.free = proc("cuMemFree");
    cu.alloc_async = proc("cuMemAllocAsync");
    cu.free_async = proc("cuMemFreeAsync");
    cu.htod = proc("cuMemcpyHtoD");
    cu.dtoh = proc("cuMemcpyDtoH");
    cu.htod_async = proc("cuMemcpyHtoDAsync");
    cu.dtoh_async = proc("cuMemcpyDtoHAsync");
    cu.stream_create = proc("cuStreamCreate");
    cu.stream_destroy = proc("cuStreamDestroy");
    cu.stream_sync = proc("cuStreamSynchronize");
    cu.host_func = proc("cuLaunchHostFunc");
    cu.alloc_host = proc("cuMemAllocHost");
    EXPECT(in_shim((void *)cu.alloc) == expect_shim && in_shim((void *)cu.free) == expect_shim);
    /* before cuInit the shim has nothing to serve with: the driver answers */
    EXPECT(cu.alloc(&(CUdeviceptr){0}, 1 << 20) == CUDA_ERROR_NOT_INITIALIZED);

    CU_CHECK(init(0));
    CU_CHECK(retain(&primary, DEVICE));
    CU_CHECK(set_current(primary));
    CU_CHECK(cu.stream_create(&busy, CU_STREAM_NON_BLOCKING));
    CU_CHECK(cu.stream_create(&other, CU_STREAM_NON_BLOCKING));

    round_trips(busy);
    round_trips(CU_STREAM_LEGACY);
    round_trips(CU_STREAM_PER_THREAD);
    integrity(busy, other, true);
    /* the driver's own cuMemFree waits for the whole device, the gate too */
    if (expect_shim) integrity(busy, other, false);
    /* CUDA's pool hands the block out again on the same stream at once */
    if (expect_shim) integrity_copy(busy, other);
    /* The driver's sets on the allocator's memory; the Async one is the
     * shim's hook here, which notes the stream's work (no runtime to). */
    set_and_read_back(
        &(struct driver_memory){"cuGetProcAddress sets", cu.alloc, cu.free, NULL, NULL, NULL},
        &(struct driver_sets){proc("cuMemsetD32"), proc("cuMemsetD32Async"), cu.dtoh,
                              cu.stream_sync},
        expect_shim, expect_shim, busy, DEVICE);
    allocations++;
    other_context(expect_shim);
    if (expect_shim) {
        EXPECT(shim_stat("allocation.all.allocated", DEVICE) == allocations);
        EXPECT(shim_stat("allocated_bytes.all.current", DEVICE) == 0);
        EXPECT(shim_stat("num_device_alloc", DEVICE) < allocations);
    }
    CU_CHECK(cu.stream_destroy(busy));
    CU_CHECK(cu.stream_destroy(other));
    EXPECT(!dl_iterate_phdr(libcudart_found, NULL)); /* no runtime came in on the way */
    printf("allocations: %d\nstatic_runtime: ok\n", allocations);
    return 0;
}
