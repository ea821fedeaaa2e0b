/* attach_threads.c - a multi-threaded CUDA program for `fsdpshim attach`
 * (attach_threads_test.sh): THREADS threads, each on a stream of its own,
 * allocate device memory in a loop through the synchronous and the
 * stream-ordered API (cudaMalloc at SITE_SYNC, cudaMallocAsync at
 * SITE_ASYNC), with sizes that vary by thread and iteration, fill it with a
 * pattern of their own, read it back, check every byte and free it. The
 * attach and the detach happen while the threads are inside those calls;
 * the results must not change. It knows nothing of the shim.
 *
 *   attach_threads [--hold-cupti] THREADS HEARTBEAT STOP
 *
 * It runs until the file STOP exists (at most MAX_SECONDS), writing the
 * number of iterations done so far to HEARTBEAT every 10 ms, then prints one
 * line with the counts and a checksum of what it read back and exits 0;
 * on a CUDA error or a byte that differs from what was written it says
 * which and exits 1. --hold-cupti subscribes to CUPTI first, as a profiler
 * does, so that `fsdpshim attach` has to use the GOT slots. */
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define MAX_SECONDS 300
#define MAX_A       (97u * 1024 + 32)
#define MAX_B       (512u + 60 * 1536)

typedef struct worker {
    pthread_t thread;
    int index;
    cudaStream_t stream;
    uint8_t *src, *back_a, *back_b; /* host buffers: pageable */
    atomic_ullong iterations;
    unsigned long long sync_allocs, async_allocs, checksum;
} worker;

static atomic_bool stop, failed;
static atomic_uint cupti_seen;

static void CUPTIAPI count_callback(void *userdata, CUpti_CallbackDomain domain,
                                    CUpti_CallbackId id, const void *data)
{
    (void)userdata;
    (void)domain;
    (void)id;
    (void)data;
    atomic_fetch_add(&cupti_seen, 1);
}

/* Says what failed and stops every thread: false, for `return`. */
static bool failure(const worker *w, unsigned long long i, const char *what, cudaError_t e)
{
    fprintf(stderr, "attach_threads: thread %d, iteration %llu: %s: %s\n", w->index, i, what,
            cudaGetErrorString(e));
    atomic_store(&failed, true);
    atomic_store(&stop, true);
    return false;
}

static bool check_bytes(const worker *w, unsigned long long i, const char *what, const uint8_t *got,
                        const uint8_t *want, uint8_t fill, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        uint8_t expected = want ? want[k] : fill;
        if (got[k] != expected) {
            fprintf(stderr,
                    "attach_threads: thread %d, iteration %llu: %s byte %zu of %zu is 0x%02x, "
                    "not 0x%02x\n",
                    w->index, i, what, k, n, got[k], expected);
            atomic_store(&failed, true);
            atomic_store(&stop, true);
            return false;
        }
    }
    return true;
}

/* One iteration: a (cudaMalloc) is set to `fill`, b (cudaMallocAsync)
 * gets src, the first half of b is copied over the start of a; both are
 * read back and checked, then freed. Odd iterations move the data with the
 * synchronous calls, even ones on the thread's stream. */
static bool iteration(worker *w, unsigned long long i)
{
    size_t na = 1024u * (1 + (i * 7 + (unsigned)w->index * 3) % 97) + 8 * (i % 5);
    size_t nb = 512u + ((i * 13 + (unsigned)w->index * 5) % 61) * 1536;
    size_t half = (na < nb ? na : nb) / 2;
    uint8_t fill = (uint8_t)(0x11 + w->index * 29 + i);
    void *a, *b;
    cudaError_t e;

    for (size_t k = 0; k < nb; k++)
        w->src[k] = (uint8_t)(k * 13 + i * 7 + (unsigned)w->index * 101);
    if ((e = cudaMalloc(&a, na)) != cudaSuccess) /* SITE_SYNC */
        return failure(w, i, "cudaMalloc", e);
    if ((e = cudaMallocAsync(&b, nb, w->stream)) != cudaSuccess) /* SITE_ASYNC */
        return failure(w, i, "cudaMallocAsync", e);
    w->sync_allocs++;
    w->async_allocs++;
    if (i % 2) {
        /* b was allocated in stream order: the legacy stream's calls below
         * may use it once the stream is done */
        if ((e = cudaStreamSynchronize(w->stream)) != cudaSuccess)
            return failure(w, i, "cudaStreamSynchronize", e);
        if ((e = cudaMemset(a, fill, na)) != cudaSuccess) return failure(w, i, "cudaMemset", e);
        if ((e = cudaMemcpy(b, w->src, nb, cudaMemcpyHostToDevice)) != cudaSuccess ||
            (e = cudaMemcpy(a, b, half, cudaMemcpyDeviceToDevice)) != cudaSuccess ||
            (e = cudaMemcpy(w->back_a, a, na, cudaMemcpyDeviceToHost)) != cudaSuccess ||
            (e = cudaMemcpy(w->back_b, b, nb, cudaMemcpyDeviceToHost)) != cudaSuccess)
            return failure(w, i, "cudaMemcpy", e);
    } else {
        if ((e = cudaMemsetAsync(a, fill, na, w->stream)) != cudaSuccess)
            return failure(w, i, "cudaMemsetAsync", e);
        if ((e = cudaMemcpyAsync(b, w->src, nb, cudaMemcpyHostToDevice, w->stream)) !=
                cudaSuccess ||
            (e = cudaMemcpyAsync(a, b, half, cudaMemcpyDeviceToDevice, w->stream)) != cudaSuccess ||
            (e = cudaMemcpyAsync(w->back_a, a, na, cudaMemcpyDeviceToHost, w->stream)) !=
                cudaSuccess ||
            (e = cudaMemcpyAsync(w->back_b, b, nb, cudaMemcpyDeviceToHost, w->stream)) !=
                cudaSuccess)
            return failure(w, i, "cudaMemcpyAsync", e);
        if ((e = cudaStreamSynchronize(w->stream)) != cudaSuccess)
            return failure(w, i, "cudaStreamSynchronize", e);
    }
    if (!check_bytes(w, i, "a", w->back_a, w->src, 0, half) ||
        !check_bytes(w, i, "a", w->back_a + half, NULL, fill, na - half) ||
        !check_bytes(w, i, "b", w->back_b, w->src, 0, nb))
        return false;
    for (size_t k = 0; k < na; k++)
        w->checksum = w->checksum * 31 + w->back_a[k];
    if ((e = cudaFreeAsync(b, w->stream)) != cudaSuccess) return failure(w, i, "cudaFreeAsync", e);
    if ((e = cudaFree(a)) != cudaSuccess) return failure(w, i, "cudaFree", e);
    return true;
}

static void *run(void *arg)
{
    worker *w = arg;
    char name[16];
    cudaError_t e;

    snprintf(name, sizeof name, "worker%d", w->index);
    pthread_setname_np(pthread_self(), name);
    if ((e = cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        failure(w, 0, "cudaStreamCreateWithFlags", e);
        return NULL;
    }
    for (unsigned long long i = 0; !atomic_load(&stop); i++) {
        if (!iteration(w, i)) break;
        atomic_store(&w->iterations, i + 1);
    }
    if ((e = cudaStreamSynchronize(w->stream)) != cudaSuccess ||
        (e = cudaStreamDestroy(w->stream)) != cudaSuccess)
        failure(w, atomic_load(&w->iterations), "the stream at the end", e);
    return NULL;
}

static uint64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static int usage(void)
{
    fprintf(stderr, "usage: attach_threads [--hold-cupti] THREADS HEARTBEAT STOP\n");
    return 2;
}

int main(int argc, char **argv)
{
    static worker workers[MAX_THREADS];
    bool hold = argc > 1 && !strcmp(argv[1], "--hold-cupti");
    CUpti_SubscriberHandle sub;
    int n, fd;

    if (argc != 4 + hold) return usage();
    n = atoi(argv[1 + hold]);
    if (n < 1 || n > MAX_THREADS) return usage();
    const char *heartbeat = argv[2 + hold], *stop_file = argv[3 + hold];
    if (hold && (cuptiSubscribe(&sub, count_callback, NULL) != CUPTI_SUCCESS ||
                 cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                                     CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) != CUPTI_SUCCESS)) {
        fprintf(stderr, "attach_threads: cannot subscribe to CUPTI\n");
        return 1;
    }
    fd = open(heartbeat, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(heartbeat);
        return 1;
    }
    for (int t = 0; t < n; t++) {
        worker *w = &workers[t];
        w->index = t;
        w->src = malloc(MAX_B);
        w->back_a = malloc(MAX_A);
        w->back_b = malloc(MAX_B);
        if (!w->src || !w->back_a || !w->back_b || pthread_create(&w->thread, NULL, run, w) != 0) {
            fprintf(stderr, "attach_threads: cannot start thread %d\n", t);
            return 1;
        }
    }
    uint64_t deadline = mono_ms() + MAX_SECONDS * 1000u;
    while (!atomic_load(&stop)) {
        unsigned long long total = 0;
        char line[32];
        for (int t = 0; t < n; t++)
            total += atomic_load(&workers[t].iterations);
        int len = snprintf(line, sizeof line, "%020llu\n", total);
        if (pwrite(fd, line, (size_t)len, 0) != len) perror(heartbeat);
        if (access(stop_file, F_OK) == 0) atomic_store(&stop, true);
        if (mono_ms() > deadline) {
            fprintf(stderr, "attach_threads: no %s after %d s\n", stop_file, MAX_SECONDS);
            atomic_store(&failed, true);
            atomic_store(&stop, true);
        }
        usleep(10000);
    }
    unsigned long long iterations = 0, sync_allocs = 0, async_allocs = 0, checksum = 0;
    for (int t = 0; t < n; t++) {
        worker *w = &workers[t];
        pthread_join(w->thread, NULL);
        iterations += atomic_load(&w->iterations);
        sync_allocs += w->sync_allocs;
        async_allocs += w->async_allocs;
        checksum ^= w->checksum;
        if (!atomic_load(&failed) && !atomic_load(&w->iterations)) {
            fprintf(stderr, "attach_threads: thread %d did nothing\n", t);
            atomic_store(&failed, true);
        }
        free(w->src);
        free(w->back_a);
        free(w->back_b);
    }
    close(fd);
    if (hold) {
        cuptiUnsubscribe(sub);
        if (!atomic_load(&cupti_seen)) {
            fprintf(stderr, "attach_threads: the CUPTI callback never ran\n");
            atomic_store(&failed, true);
        }
    }
    if (atomic_load(&failed)) return 1;
    printf("attach_threads: ok: %d threads, %llu iterations, %llu cudaMalloc, %llu "
           "cudaMallocAsync, every byte read back as written, checksum %016llx\n",
           n, iterations, sync_allocs, async_allocs, checksum);
    return 0;
}
