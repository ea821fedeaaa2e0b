/* thread_exit.c - a thread that exits with work still queued on its
 * per-thread default stream: nothing that work touches may be handed out
 * before the work has run, whatever the order in which the thread's exit
 * clean-ups run (the runtime destroys the per-thread stream at thread exit,
 * its queued work still runs).
 *
 *   thread_exit reuse    a thread allocates on cudaStreamPerThread, queues a
 *                        fill of the block behind a held host function, frees
 *                        it there with cudaFreeAsync and exits; main then
 *                        allocates the same size on a stream of its own and
 *                        fills it: the held fill must not land in main's block
 *   thread_exit live     16 threads each create a stream, allocate and fill 8
 *                        blocks on it, free half, then allocate, fill and free
 *                        4 more on cudaStreamPerThread and exit without
 *                        destroying their stream, handing the live blocks to
 *                        main: after cudaDeviceSynchronize every live block
 *                        holds its own fill
 *   thread_exit free     like reuse, with cudaMalloc and a device-ordered
 *                        cudaFree by the thread, main allocating with cudaMalloc
 *   thread_exit record   main's cudaMalloc block is filled by a thread on its
 *                        per-thread stream behind a held host function (a use
 *                        of the block on that stream); after the thread exited
 *                        a second thread frees the block with cudaFree and main
 *                        allocates the same size again
 *   thread_exit key      main's block is filled and freed with cudaFreeAsync
 *                        by a thread on its per-thread stream behind a held
 *                        host function; after that thread exited, a second
 *                        thread allocates the same size on its own per-thread
 *                        stream, which is not the first one's
 * Without the shim a cudaFree waits for the whole device, so in free and
 * record the held host function opens by itself after half a second.
 *
 * In every mode, once everything is freed and the cache emptied
 * (cudaDeviceSynchronize + cudaMemPoolTrimTo, torch.cuda.empty_cache on the
 * cudaMallocAsync route), cudaMemGetInfo reads what it read at the start.
 * The output names no address, so that it is the same with and without the
 * shim. Exit 0 when all is well, 1 otherwise. */
#include "probe.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#define SIZE    (12u << 20) /* reuse, free, record: a segment of its own */
#define THREADS 16
#define PER     8
#define LIVE_SZ (1u << 20)
#define PT_FILL 0xEE /* what a per-thread stream writes in live mode */

static atomic_int gate_open;

/* Holds its stream until main opens the gate. */
static void CUDART_CB gate(void *arg)
{
    struct timespec ts = {0, 1000000};

    (void)arg;
    while (!atomic_load(&gate_open))
        nanosleep(&ts, NULL);
}

/* Holds its stream for half a second: for a thread whose cudaFree waits
 * for the whole device (as it does without the shim), so main cannot open
 * the gate after that free. Main's own work takes far less than that. */
static void CUDART_CB timed_gate(void *arg)
{
    struct timespec ts = {0, 500000000};

    (void)arg;
    nanosleep(&ts, NULL);
}

/* Every byte of a device block, read back through a host copy. */
static bool holds(const void *dev, unsigned char byte, size_t size)
{
    unsigned char *h = malloc(size);
    bool ok = true;

    EXPECT(h);
    CHECK(cudaMemcpy(h, dev, size, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < size && ok; i++)
        ok = h[i] == byte;
    free(h);
    return ok;
}

static void *spawn_join(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    void *ret;

    EXPECT(pthread_create(&t, NULL, fn, arg) == 0);
    EXPECT(pthread_join(t, &ret) == 0);
    return ret;
}

/* ---- reuse, free ---------------------------------------------------------------- */

static void *held_fill_then_free(void *arg)
{
    bool device_ordered = *(bool *)arg;
    void *x;

    if (device_ordered) {
        CHECK(cudaMalloc(&x, SIZE));
        CHECK(cudaLaunchHostFunc(cudaStreamPerThread, timed_gate, NULL));
    } else {
        CHECK(cudaMallocAsync(&x, SIZE, cudaStreamPerThread));
        CHECK(cudaLaunchHostFunc(cudaStreamPerThread, gate, NULL));
    }
    CHECK(cudaMemsetAsync(x, 0xAA, SIZE, cudaStreamPerThread));
    if (device_ordered) {
        CHECK(cudaFree(x));
    } else {
        CHECK(cudaFreeAsync(x, cudaStreamPerThread));
    }
    return NULL;
}

static int run_reuse(bool device_ordered)
{
    cudaStream_t s;
    void *y;
    bool ok;

    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    spawn_join(held_fill_then_free, &device_ordered);
    if (device_ordered) {
        CHECK(cudaMalloc(&y, SIZE));
    } else {
        CHECK(cudaMallocAsync(&y, SIZE, s));
    }
    CHECK(cudaMemsetAsync(y, 0xBB, SIZE, s));
    CHECK(cudaStreamSynchronize(s));
    atomic_store(&gate_open, 1);
    CHECK(cudaDeviceSynchronize());
    ok = holds(y, 0xBB, SIZE);
    if (device_ordered) {
        CHECK(cudaFree(y));
    } else {
        CHECK(cudaFreeAsync(y, s));
    }
    CHECK(cudaStreamDestroy(s));
    printf("%s: main's block %s\n", device_ordered ? "free" : "reuse",
           ok ? "intact" : "overwritten by the exited thread's work");
    return ok ? 0 : 1;
}

/* ---- live ------------------------------------------------------------------------- */

struct live_thread {
    int id;
    cudaStream_t s;
    void *live[PER / 2];
};

static unsigned char live_fill(int thread, int block)
{
    return (unsigned char)(1 + thread * PER + block); /* never PT_FILL */
}

static void *live_worker(void *arg)
{
    struct live_thread *t = arg;
    void *b[PER], *pt[4];

    CHECK(cudaStreamCreate(&t->s));
    for (int i = 0; i < PER; i++) {
        CHECK(cudaMallocAsync(&b[i], LIVE_SZ, t->s));
        CHECK(cudaMemsetAsync(b[i], live_fill(t->id, i), LIVE_SZ, t->s));
    }
    for (int i = 0; i < PER; i++) {
        if (i % 2) {
            CHECK(cudaFreeAsync(b[i], t->s));
        } else {
            t->live[i / 2] = b[i];
        }
    }
    for (int i = 0; i < 4; i++) {
        CHECK(cudaMallocAsync(&pt[i], LIVE_SZ, cudaStreamPerThread));
        CHECK(cudaMemsetAsync(pt[i], PT_FILL, LIVE_SZ, cudaStreamPerThread));
    }
    for (int i = 0; i < 4; i++)
        CHECK(cudaFreeAsync(pt[i], cudaStreamPerThread));
    return NULL;
}

static int run_live(void)
{
    static struct live_thread t[THREADS];
    pthread_t tid[THREADS];
    int bad = 0;

    for (int i = 0; i < THREADS; i++) {
        t[i].id = i;
        EXPECT(pthread_create(&tid[i], NULL, live_worker, &t[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++)
        EXPECT(pthread_join(tid[i], NULL) == 0);
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < THREADS; i++)
        for (int k = 0; k < PER / 2; k++)
            if (!holds(t[i].live[k], live_fill(i, 2 * k), LIVE_SZ)) bad++;
    for (int i = 0; i < THREADS; i++) {
        for (int k = 0; k < PER / 2; k++)
            CHECK(cudaFreeAsync(t[i].live[k], t[i].s));
        CHECK(cudaStreamDestroy(t[i].s));
    }
    printf("live: %d of %d live blocks lost their data\n", bad, THREADS * PER / 2);
    return bad ? 1 : 0;
}

/* ---- record ----------------------------------------------------------------------- */

static void *held_fill(void *arg)
{
    CHECK(cudaLaunchHostFunc(cudaStreamPerThread, timed_gate, NULL));
    CHECK(cudaMemsetAsync(arg, 0xAA, SIZE, cudaStreamPerThread));
    return NULL;
}

static void *free_it(void *arg)
{
    CHECK(cudaFree(arg));
    return NULL;
}

static int run_record(void)
{
    cudaStream_t s;
    void *x, *y;
    bool ok;

    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&x, SIZE));
    spawn_join(held_fill, x);
    /* The first thread has exited, its fill still waits on its per-thread
     * stream (a use of the block there); a second thread frees the block. */
    spawn_join(free_it, x);
    CHECK(cudaMalloc(&y, SIZE));
    CHECK(cudaMemsetAsync(y, 0xBB, SIZE, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaDeviceSynchronize());
    ok = holds(y, 0xBB, SIZE);
    CHECK(cudaFree(y));
    CHECK(cudaStreamDestroy(s));
    printf("record: main's block %s\n", ok ? "intact" : "overwritten by the exited thread's work");
    return ok ? 0 : 1;
}

/* ---- key -------------------------------------------------------------------------- */

static void *held_fill_free_async(void *arg)
{
    CHECK(cudaLaunchHostFunc(cudaStreamPerThread, gate, NULL));
    CHECK(cudaMemsetAsync(arg, 0xAA, SIZE, cudaStreamPerThread));
    CHECK(cudaFreeAsync(arg, cudaStreamPerThread));
    return NULL;
}

static void *fill_own(void *arg)
{
    void **y = arg;

    CHECK(cudaMallocAsync(y, SIZE, cudaStreamPerThread));
    CHECK(cudaMemsetAsync(*y, 0xBB, SIZE, cudaStreamPerThread));
    CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    return NULL;
}

static int run_key(void)
{
    cudaStream_t s;
    void *x, *y;
    bool ok;

    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMallocAsync(&x, SIZE, s));
    CHECK(cudaStreamSynchronize(s));
    spawn_join(held_fill_free_async, x);
    spawn_join(fill_own, &y);
    atomic_store(&gate_open, 1);
    CHECK(cudaDeviceSynchronize());
    ok = holds(y, 0xBB, SIZE);
    CHECK(cudaFreeAsync(y, s));
    CHECK(cudaStreamDestroy(s));
    printf("key: the second thread's block %s\n",
           ok ? "intact" : "overwritten by the first thread's work");
    return ok ? 0 : 1;
}

/* ---- main ------------------------------------------------------------------------- */

/* cudaFree, then empty the cache as torch.cuda.empty_cache does on the
 * cudaMallocAsync route. */
static size_t free_after_empty_cache(void)
{
    cudaMemPool_t pool;
    size_t free_b, total;

    CHECK(cudaDeviceSynchronize());
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaMemPoolTrimTo(pool, 0));
    CHECK(cudaMemGetInfo(&free_b, &total));
    return free_b;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    size_t start, end;
    int r;

    watchdog(60);
    require_device();
    CHECK(cudaFree(NULL));
    start = free_after_empty_cache();
    if (!strcmp(mode, "reuse"))
        r = run_reuse(false);
    else if (!strcmp(mode, "free"))
        r = run_reuse(true);
    else if (!strcmp(mode, "live"))
        r = run_live();
    else if (!strcmp(mode, "record"))
        r = run_record();
    else if (!strcmp(mode, "key"))
        r = run_key();
    else {
        fprintf(stderr, "usage: thread_exit reuse|live|free|record|key\n");
        return 2;
    }
    end = free_after_empty_cache();
    if (end != start) {
        printf("%s: device memory not given back: %zd bytes\n", mode, (ssize_t)(start - end));
        r = 1;
    }
    if (shim_stat("reserved_bytes.all.current", 0) > 0) {
        printf("%s: the shim still reserves %lld bytes\n", mode,
               (long long)shim_stat("reserved_bytes.all.current", 0));
        r = 1;
    }
    if (!r) printf("%s: all memory given back\n", mode);
    return r;
}
