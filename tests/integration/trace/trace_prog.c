/* trace_prog.c - an ordinary CUDA program with NVTX ranges, for the trace
 * tests: its allocation sites are known lines (marked SITE_*), found again in
 * the trace's frames through addr2line. It knows nothing of the shim.
 *
 *   trace_prog sites              ranges and allocations at the marked sites
 *   trace_prog loop FILE          allocates forever, 1 per ms; after each one
 *                                 writes its CLOCK_MONOTONIC time to FILE
 *   trace_prog abort N            N allocations, then abort()
 *   trace_prog fork               allocates, forks a child that allocates too
 *   trace_prog flood THREADS N    THREADS threads allocating N times each
 *   trace_prog snapshot           fsdpshim_snapshot / fsdpshim_trace_flush
 *                                 through the loader, around allocations
 *   trace_prog oom                3 MiB allocations until one fails (run it
 *                                 with a small FSDPSHIM_SIM_MEM; with 62M
 *                                 and segment_growth:pytorch, 18 fit in
 *                                 three 20 MiB segments and the 19th fails)
 *   trace_prog leak [ODD]         ends with blocks it never freed (ODD bytes
 *                                 more than a round size in one of them)
 *   trace_prog fragment           7 MiB blocks, every other one freed, then
 *                                 12 MiB ones that no freed hole holds
 *   trace_prog oom_streams        stream A holds 18 blocks of 3 MiB and frees
 *                                 every other one, then stream B asks for
 *                                 3 MiB (run it with FSDPSHIM_SIM_MEM=62M,
 *                                 segment_growth:pytorch and
 *                                 cross_stream_reuse:none: a soft OOM)
 *   trace_prog backward_thread    the main thread allocates 1 MiB, then a
 *                                 thread named as PyTorch names autograd's
 *                                 (pt_autograd_0) 2 MiB twice */
#include "../../../include/fsdpshim/fsdpshim_loader.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static uint64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

__attribute__((noinline)) static void *alloc_in_forward(size_t n)
{
    void *p;
    CHECK(cudaMalloc(&p, n)); /* SITE_FORWARD */
    return p;
}

__attribute__((noinline)) static void *alloc_in_backward(size_t n)
{
    void *p;
    CHECK(cudaMalloc(&p, n)); /* SITE_BACKWARD */
    return p;
}

static int sites(void)
{
    nvtxDomainHandle_t fsdp = nvtxDomainCreateA("fsdp");
    nvtxEventAttributes_t a = {0};
    void *p, *q;

    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "forward";
    nvtxRangePushA("step");
    nvtxDomainRangePushEx(fsdp, &a);
    p = alloc_in_forward(3u << 20);
    nvtxMarkA("after-forward");
    nvtxDomainRangePop(fsdp);
    q = alloc_in_backward(5u << 20);
    nvtxRangePop();
    CHECK(cudaFree(p));
    CHECK(cudaFree(q));
    nvtxDomainDestroy(fsdp);
    printf("sites: ok\n");
    return 0;
}

static int loop(const char *file)
{
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    for (;;) {
        void *p;
        CHECK(cudaMalloc(&p, 4096)); /* SITE_LOOP */
        CHECK(cudaFree(p));
        char line[32];
        int n = snprintf(line, sizeof line, "%020llu\n", (unsigned long long)mono_ns());
        if (pwrite(fd, line, (size_t)n, 0) != n) return 1;
        usleep(1000);
    }
}

static int abort_after(int n)
{
    for (int i = 0; i < n; i++) {
        void *p;
        CHECK(cudaMalloc(&p, 4096 + (size_t)i));
        CHECK(cudaFree(p));
    }
    abort();
}

static int fork_child(void)
{
    void *p;
    int status;
    CHECK(cudaMalloc(&p, 1u << 20));
    pid_t pid = fork();
    if (pid == 0) {
        void *c;
        CHECK(cudaMalloc(&c, 7u << 20));
        CHECK(cudaFree(c));
        exit(0); /* _exit would lose the last flush interval, as SIGKILL does */
    }
    waitpid(pid, &status, 0);
    CHECK(cudaFree(p));
    printf("fork: child %d\n", (int)pid);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static int per_thread;

static void *flood_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < per_thread; i++) {
        void *p;
        CHECK(cudaMalloc(&p, 512));
        CHECK(cudaFree(p));
    }
    return NULL;
}

static int flood(int threads, int n)
{
    pthread_t t[64];
    per_thread = n;
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, flood_thread, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    printf("flood: %d allocations\n", threads * n);
    return 0;
}

static int snapshot(void)
{
    fsdpshim_api api;
    void *p;
    if (fsdpshim_load(&api) != FSDPSHIM_OK) return 1;
    CHECK(cudaMalloc(&p, 1u << 20));
    if (api.snapshot("checkpoint") != FSDPSHIM_OK) return 1;
    if (api.annotation_push("api-range") != FSDPSHIM_OK) return 1;
    CHECK(cudaFree(p));
    if (api.annotation_pop() != FSDPSHIM_OK) return 1;
    if (api.annotation_pop() != FSDPSHIM_ERR_EMPTY) return 1;
    if (api.trace_flush() != FSDPSHIM_OK) return 1;
    printf("snapshot: ok\n");
    return 0;
}

__attribute__((noinline)) static int oom(void)
{
    void *p[4096];
    int n = 0;
    while (n < 4096 && cudaMalloc(&p[n], 3u << 20) == cudaSuccess) /* SITE_OOM */
        n++;
    if (cudaGetLastError() != cudaErrorMemoryAllocation) return 1;
    printf("oom: %d allocations before the failure\n", n);
    while (n > 0)
        CHECK(cudaFree(p[--n]));
    return 0;
}

/* Two streams: A fills 54 of the device's 62 MiB in 20 MiB segments and
 * frees every other block, keeping the holes in its pools; then B asks for
 * a block as big as those holes, which the 2 MiB left on the device cannot
 * hold in a segment of any size. */
__attribute__((noinline)) static int oom_streams(void)
{
    cudaStream_t a, b;
    void *p[18], *q = NULL;
    CHECK(cudaStreamCreate(&a));
    CHECK(cudaStreamCreate(&b));
    nvtxRangePushA("fill");
    for (int i = 0; i < 18; i++)
        CHECK(cudaMallocAsync(&p[i], 3u << 20, a)); /* SITE_FILL */
    nvtxRangePop();
    for (int i = 0; i < 18; i += 2)
        CHECK(cudaFreeAsync(p[i], a));
    CHECK(cudaStreamSynchronize(a));
    cudaError_t e = cudaMallocAsync(&q, 3u << 20, b); /* SITE_SECOND */
    printf("oom_streams: the second stream's request %s\n", e == cudaSuccess ? "served" : "failed");
    if (e == cudaSuccess) CHECK(cudaFreeAsync(q, b));
    cudaGetLastError();
    for (int i = 1; i < 18; i += 2)
        CHECK(cudaFreeAsync(p[i], a));
    CHECK(cudaDeviceSynchronize());
    return 0;
}

__attribute__((noinline)) static void *leak_site(size_t n)
{
    void *p;
    CHECK(cudaMalloc(&p, n)); /* SITE_LEAK */
    return p;
}

__attribute__((noinline)) static void *keep_forever(size_t n)
{
    void *p;
    CHECK(cudaMalloc(&p, n)); /* SITE_KEEP */
    return p;
}

/* Ends with blocks it never freed: two of leak_site (1 MiB, and 2 MiB plus
 * `odd` bytes), one of keep_forever (4 MiB). */
static int leak(size_t odd)
{
    void *a = leak_site(1u << 20);
    (void)leak_site(1u << 20);
    CHECK(cudaFree(a));
    (void)leak_site((2u << 20) + odd);
    (void)keep_forever(4u << 20);
    printf("leak: ok\n");
    return 0;
}

__attribute__((noinline)) static void *fragment_site(size_t n)
{
    void *p;
    CHECK(cudaMalloc(&p, n)); /* SITE_FRAGMENT */
    return p;
}

/* Fragments the caching allocator's plain segments: eight 7 MiB blocks
 * share 20 MiB segments two by two (6 MiB left at each end), every other
 * one is freed (device-ordered: reusable once the device has passed the
 * free, which the synchronisation proves, so the trace's free_completed
 * events come at a known point), and four 12 MiB blocks, which no hole of
 * 7 + 6 MiB holds, get segments of their own: 128 MiB reserved for 76 MiB
 * allocated at the peak. */
static int fragment(void)
{
    void *small[8], *big[4];
    for (int i = 0; i < 8; i++)
        small[i] = fragment_site(7u << 20);
    for (int i = 0; i < 8; i += 2)
        CHECK(cudaFree(small[i]));
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < 4; i++)
        big[i] = fragment_site(12u << 20);
    for (int i = 1; i < 8; i += 2)
        CHECK(cudaFree(small[i]));
    for (int i = 0; i < 4; i++)
        CHECK(cudaFree(big[i]));
    printf("fragment: ok\n");
    return 0;
}

static void *autograd_thread(void *arg)
{
    void **blocks = arg;
    pthread_setname_np(pthread_self(), "pt_autograd_0"); /* before its first allocation */
    CHECK(cudaMalloc(&blocks[0], 2 << 20));
    CHECK(cudaMalloc(&blocks[1], 2 << 20));
    return NULL;
}

static int backward_thread(void)
{
    void *mine, *theirs[2];
    pthread_t t;
    CHECK(cudaMalloc(&mine, 1 << 20));
    if (pthread_create(&t, NULL, autograd_thread, theirs) != 0) return 1;
    pthread_join(t, NULL);
    CHECK(cudaFree(theirs[1]));
    CHECK(cudaFree(theirs[0]));
    CHECK(cudaFree(mine));
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "sites";
    if (!strcmp(mode, "sites")) return sites();
    if (!strcmp(mode, "loop") && argc > 2) return loop(argv[2]);
    if (!strcmp(mode, "abort") && argc > 2) return abort_after(atoi(argv[2]));
    if (!strcmp(mode, "fork")) return fork_child();
    if (!strcmp(mode, "flood") && argc > 3) return flood(atoi(argv[2]), atoi(argv[3]));
    if (!strcmp(mode, "snapshot")) return snapshot();
    if (!strcmp(mode, "oom")) return oom();
    if (!strcmp(mode, "leak")) return leak(argc > 2 ? (size_t)atol(argv[2]) : 0);
    if (!strcmp(mode, "fragment")) return fragment();
    if (!strcmp(mode, "oom_streams")) return oom_streams();
    if (!strcmp(mode, "backward_thread")) return backward_thread();
    fprintf(stderr, "usage: trace_prog sites|loop FILE|abort N|fork|flood T N|snapshot|oom|leak|"
                    "fragment|oom_streams|backward_thread\n");
    return 2;
}
