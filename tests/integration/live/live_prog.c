/* live_prog.c - an ordinary CUDA program that holds known amounts of device
 * memory while `fsdpshim top --live` looks at it. It knows nothing of the
 * shim.
 *
 *   live_prog hold READY [fork]
 *
 * Device 0: three 4 MiB blocks from alloc_big (cudaMalloc, the legacy
 * stream), two 1 MiB blocks from cudaMallocAsync on a non-blocking stream,
 * one of them freed again with cudaFreeAsync (so 13 MiB live, 14 MiB at the
 * peak, 1 MiB cached free on that stream). Device 1: one 6 MiB block. Then
 * it writes "PID STREAM" (its pid, the stream's handle as %p) to READY and
 * waits until
 * READY is removed (or 120 s), frees everything and exits 0. With `fork`,
 * a child forked after the allocations allocates 2 MiB of its own on device
 * 0, writes its pid to READY.child and waits the same way. alloc_big is
 * exported (the program is linked with -rdynamic) so that the live page's
 * site label can name it. */
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* default visibility: the build hides symbols unless asked */
__attribute__((noinline, visibility("default"))) void *alloc_big(size_t n)
{
    void *p;
    CHECK(cudaMalloc(&p, n));
    return p;
}

/* Writes text to path through a temporary name, so a reader never sees it
 * half written. */
static void publish(const char *path, const char *text)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        perror(path);
        exit(1);
    }
}

/* Until `path` is removed, or 120 s. */
static void wait_removed(const char *path)
{
    for (int i = 0; i < 1200 && access(path, F_OK) == 0; i++)
        usleep(100000);
}

int main(int argc, char **argv)
{
    void *big[3], *small[2], *other, *mine = NULL;
    cudaStream_t s;
    char text[64];
    pid_t child = 0;

    if (argc < 3 || strcmp(argv[1], "hold") != 0) {
        fprintf(stderr, "usage: live_prog hold READY [fork]\n");
        return 2;
    }
    bool forking = argc > 3 && !strcmp(argv[3], "fork");
    for (int i = 0; i < 3; i++)
        big[i] = alloc_big(4 * MiB);
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < 2; i++)
        CHECK(cudaMallocAsync(&small[i], MiB, s));
    CHECK(cudaFreeAsync(small[1], s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&other, 6 * MiB));
    CHECK(cudaSetDevice(0));
    if (forking) {
        fflush(NULL);
        child = fork();
        if (child < 0) return 1;
        if (child == 0) {
            char path[4200];
            CHECK(cudaMalloc(&mine, 2 * MiB));
            snprintf(path, sizeof path, "%s.child", argv[2]);
            snprintf(text, sizeof text, "%d\n", (int)getpid());
            publish(path, text);
            wait_removed(path);
            CHECK(cudaFree(mine));
            return 0;
        }
    }
    snprintf(text, sizeof text, "%d %p\n", (int)getpid(), (void *)s);
    publish(argv[2], text);
    wait_removed(argv[2]);
    if (child > 0) {
        int status;
        waitpid(child, &status, 0);
    }
    for (int i = 0; i < 3; i++)
        CHECK(cudaFree(big[i]));
    CHECK(cudaFreeAsync(small[0], s));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaSetDevice(1));
    CHECK(cudaFree(other));
    return 0;
}
