/* driver_test.h - what the driver interposition tests share: the driver's
 * memory functions as a program got them by one route (dlsym on libcuda.so.1,
 * cuGetProcAddress, cudaGetDriverEntryPoint), and the check that they are
 * served by the shim's allocator when it is preloaded, or are the driver's
 * own when it is not.
 *
 * The programs know nothing of the shim: whether a function is its hook is
 * read from the object it lives in (dladdr), whether the allocator served
 * a call from the shim's statistics (probe.h). */
#ifndef FS_DRIVER_TEST_H
#define FS_DRIVER_TEST_H

#include "../runtime/probe.h"

#include <cuda.h>
#include <stdbool.h>
#include <string.h>

#define CU_CHECK(call)                                                                             \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, (int)r_);         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* The driver's memory functions, as one route found them. */
struct driver_memory {
    const char *route;
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
    CUresult (*free_async)(CUdeviceptr, CUstream);
    CUresult (*get_info)(size_t *, size_t *);
};

/* Whether `fn` lives in libfsdpshim.so, i.e. is one of its hooks. */
static inline bool in_shim(void *fn)
{
    Dl_info info;

    return fn && dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "libfsdpshim");
}

static inline int64_t stat_or_zero(const char *name, int device)
{
    int64_t v = shim_stat(name, device);

    return v < 0 ? 0 : v;
}

/* Allocates, frees and allocates again through a route's functions, plain
 * and stream-ordered on `stream`, in the current context (of `device`).
 * Under the shim every function is its hook, every allocation is served by
 * its allocator, a freed block comes back from the cache without a device
 * allocation, nothing stays allocated, and the memory the cache holds
 * unused counts as free. Without it the same calls succeed on the driver. */
static inline void exercise(const struct driver_memory *m, bool expect_shim, CUstream stream,
                            int device)
{
    void *fns[] = {(void *)m->alloc, (void *)m->free, (void *)m->alloc_async, (void *)m->free_async,
                   (void *)m->get_info};
    int64_t served = stat_or_zero("allocation.all.allocated", device);
    int64_t device_allocs = stat_or_zero("num_device_alloc", device);
    size_t free0, free1, total;
    CUdeviceptr a = 0, b = 0;

    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        if (!fns[i] || in_shim(fns[i]) != expect_shim) {
            fprintf(stderr, "%s: function %zu is %s, expected %s\n", m->route, i,
                    !fns[i]           ? "missing"
                    : in_shim(fns[i]) ? "the shim's"
                                      : "the driver's",
                    expect_shim ? "the shim's" : "the driver's");
            exit(1);
        }
    }
    CU_CHECK(m->get_info(&free0, &total));
    CU_CHECK(m->alloc(&a, 1 << 20));
    CU_CHECK(m->free(a));
    CU_CHECK(m->alloc(&b, 1 << 20));
    CU_CHECK(m->free(b));
    CU_CHECK(m->alloc_async(&a, 3 << 20, stream));
    CU_CHECK(m->free_async(a, stream));
    CU_CHECK(m->alloc_async(&b, 3 << 20, stream)); /* reusable at once on its stream */
    CU_CHECK(m->free_async(b, stream));
    CU_CHECK(m->get_info(&free1, &total));
    if (expect_shim) {
        EXPECT(b == a);
        EXPECT(shim_stat("allocation.all.allocated", device) == served + 4);
        /* at most a segment for each kind; none when earlier routes left them cached */
        EXPECT(shim_stat("num_device_alloc", device) <= device_allocs + 2);
        EXPECT(shim_stat("allocated_bytes.all.current", device) == 0);
        EXPECT(free1 == free0);
    }
    printf("%s: ok\n", m->route);
}

/* The driver's sets and a copy, as one route found them. */
struct driver_sets {
    CUresult (*set32)(CUdeviceptr, unsigned int, size_t);
    CUresult (*set32_async)(CUdeviceptr, unsigned int, size_t, CUstream);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*stream_sync)(CUstream);
};

/* Sets memory a route's cuMemAlloc gave (the shim's allocator's under the
 * shim) with cuMemsetD32 and cuMemsetD32Async on `stream`, and reads every
 * byte back. The Async set is the shim's hook where `expect_hook` (a process
 * without the runtime, whose stream work the shim notes: driver_work.c). */
static inline void set_and_read_back(const struct driver_memory *m, const struct driver_sets *d,
                                     bool expect_shim, bool expect_hook, CUstream stream,
                                     int device)
{
    enum { WORDS = 1 << 16 };
    static uint32_t host[WORDS];
    int64_t served = stat_or_zero("allocation.all.allocated", device);
    CUdeviceptr p = 0;

    EXPECT(in_shim((void *)d->set32_async) == expect_hook);
    CU_CHECK(m->alloc(&p, WORDS * 4));
    if (expect_shim) EXPECT(shim_stat("allocation.all.allocated", device) == served + 1);
    CU_CHECK(d->set32(p, 0xdeadbeef, WORDS));
    /* A set of device memory returns before it is done, as on a GPU: the
     * default stream it went to (legacy, or the thread's own for a
     * per-thread route) must finish before another stream's set. */
    CU_CHECK(d->stream_sync(NULL));
    CU_CHECK(d->set32_async(p + 4096, 0x0badf00d, 1024, stream));
    CU_CHECK(d->stream_sync(stream));
    CU_CHECK(d->dtoh(host, p, WORDS * 4));
    for (int i = 0; i < WORDS; i++)
        EXPECT(host[i] == (i >= 1024 && i < 2048 ? 0x0badf00du : 0xdeadbeefu));
    CU_CHECK(m->free(p));
    printf("%s: sets ok\n", m->route);
}

#endif /* FS_DRIVER_TEST_H */
