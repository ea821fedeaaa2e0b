/* probe.h - what the integration programs share: a checked-call macro, a
 * watchdog, and an optional look at the shim's statistics.
 *
 * The programs are ordinary CUDA host programs; they do not link the shim.
 * A test that must prove the shim served it (rather than passing because the
 * runtime did the work) reads a statistic through dlsym(RTLD_DEFAULT), which
 * finds the preloaded library's public API or nothing. */
#ifndef FS_RUNTIME_TEST_PROBE_H
#define FS_RUNTIME_TEST_PROBE_H

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Built against NVIDIA's runtime, for a GPU (fs_cuda_program REAL or STATIC) */
#ifdef FSDPSHIM_REAL_RUNTIME
#define ON_REAL_RUNTIME true
#else
#define ON_REAL_RUNTIME false
#endif

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,              \
                    cudaGetErrorName(e_), (int)e_);                                                \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Exit 77 (ctest: skipped) without a device: the same programs built
 * against the real runtime run in the gpu suite and skip on a machine
 * without a GPU. The simulated device is always there. */
static inline void require_device(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);

    if (e != cudaSuccess || n == 0) {
        fprintf(stderr, "skipped: no CUDA device (%s)\n", cudaGetErrorName(e));
        exit(77);
    }
}

/* A hang is a failure, not a ctest timeout. */
static inline void watchdog(unsigned seconds)
{
    signal(SIGALRM, SIG_DFL);
    alarm(seconds);
}

/* The C library's dlsym (libdl's before glibc 2.34), never an interposer's:
 * the way to the runtime's own entry points, bypassing a preloaded shim,
 * whose dlsym answers a lookup of a function it defines on the runtime's
 * handle with its own, as the loader binds a linked call (docs/interpose.md).
 * "dlsym" itself is no name a CUDA interposer answers. */
typedef void *(*libc_dlsym_fn)(void *, const char *);
static inline libc_dlsym_fn libc_dlsym(void)
{
    libc_dlsym_fn fn = NULL;
    void *libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
    void *libdl = libc ? NULL : dlopen("libdl.so.2", RTLD_LAZY);

    if (libc) *(void **)&fn = dlsym(libc, "dlsym");
    if (!fn && libdl) *(void **)&fn = dlsym(libdl, "dlsym");
    if (!fn) {
        fprintf(stderr, "probe: the C library's dlsym not found\n");
        exit(1);
    }
    return fn;
}

/* One of the shim's statistics, or -1 when the shim is not in the process
 * (or is not active). */
static inline int64_t shim_stat(const char *name, int device)
{
    int (*stat)(const char *, int, int64_t *) =
        (int (*)(const char *, int, int64_t *))dlsym(RTLD_DEFAULT, "fsdpshim_stat");
    int64_t v = -1;

    if (!stat || stat(name, device, &v) != 0) return -1;
    return v;
}

#endif /* FS_RUNTIME_TEST_PROBE_H */
