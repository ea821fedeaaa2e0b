/* dlsym_runtime.c - the runtime reached as ctypes reaches it: this program
 * is not linked with libcudart; it dlopens it with RTLD_LOCAL and takes
 * cudaMalloc, cudaFree, cudaMallocAsync and cudaFreeAsync with dlsym (and
 * cudaMalloc once more with dlvsym, as a versioned lookup) on the runtime's
 * own handle, then allocates through them. Under the shim the lookups must
 * give the shim's definitions, as the global scope does, and every
 * allocation must be served (its statistics count them); without it, the
 * runtime's own.
 *
 *   dlsym_runtime [--expect-shim] */
#include "probe.h"

#include <string.h>

/* probe.h's CHECK names the error with the runtime's cudaGetErrorName,
 * which this program, not linked with the runtime, does not have. */
#define CALL(call)                                                                                 \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s failed: error %d\n", __FILE__, __LINE__, #call, (int)e_);   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* The base name of the object that holds `fn`. */
static const char *object_of(void *fn)
{
    Dl_info info;
    const char *slash;

    if (!dladdr(fn, &info) || !info.dli_fname) return "?";
    slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

int main(int argc, char **argv)
{
    bool expect_shim = argc > 1 && !strcmp(argv[1], "--expect-shim");
    const char *want = expect_shim ? "libfsdpshim.so" : "libcudart.so.13";
    cudaError_t (*malloc_fn)(void **, size_t), (*free_fn)(void *);
    cudaError_t (*malloc_async)(void **, size_t, cudaStream_t), (*free_async)(void *, cudaStream_t);
    cudaError_t (*versioned)(void **, size_t);
    void *h, *p[3];

    watchdog(30);
    EXPECT(dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY) == NULL);
    h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen libcudart.so.13: %s\n", dlerror());
        return 1;
    }
    *(void **)&malloc_fn = dlsym(h, "cudaMalloc");
    *(void **)&free_fn = dlsym(h, "cudaFree");
    *(void **)&malloc_async = dlsym(h, "cudaMallocAsync");
    *(void **)&free_async = dlsym(h, "cudaFreeAsync");
    *(void **)&versioned = dlvsym(h, "cudaMalloc", "libcudart.so.13");
    EXPECT(malloc_fn && free_fn && malloc_async && free_async && versioned);
    void *fns[] = {(void *)malloc_fn, (void *)free_fn, (void *)malloc_async, (void *)free_async,
                   (void *)versioned};
    for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
        if (strcmp(object_of(fns[i]), want) != 0) {
            fprintf(stderr, "lookup %zu: a function of %s, not of %s\n", i, object_of(fns[i]),
                    want);
            return 1;
        }
    /* the runtime's own lookups of the runtime are not replaced */
    EXPECT(dlsym(h, "cudaGetDeviceCount") != NULL);

    CALL(malloc_fn(&p[0], 1 << 20));
    CALL(versioned(&p[1], 3 << 20));
    CALL(malloc_async(&p[2], 2 << 20, 0));
    CALL(free_fn(p[0]));
    CALL(free_fn(p[1]));
    CALL(free_async(p[2], 0));
    if (expect_shim) {
        /* all three through the shim's allocator */
        EXPECT(shim_stat("allocation.all.allocated", -1) == 3);
        EXPECT(shim_stat("allocation.all.freed", -1) == 3);
    }
    printf("dlsym_runtime: ok\n");
    return 0;
}
