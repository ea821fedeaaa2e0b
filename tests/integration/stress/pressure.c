/* pressure.c - a small device (run with FSDPSHIM_SIM_MEM=256M) under load,
 * with every way of freeing a block; run with the default configuration
 * and with expandable_segments:true.
 *
 * Worker threads keep a changing set of live blocks on their own stream A
 * (up to about 40% of the device in all) and free them by every path:
 * cudaFree; cudaFreeAsync on A; cudaFreeAsync on another stream B after B
 * waits for A; and record-stream style, a copy on B of the block (into a
 * block of B) with the block then freed on A once A waits for B's copy.
 * Then the whole device is asked for, three times over: one allocation of
 * most of it with cudaMalloc and one with cudaMallocAsync (an allocator
 * must give its cache back for these), blocks of 16 MiB and of 24 MiB until
 * the device is full (at least as many as the device alone gives); and
 * at last one larger than the device, which fails with
 * cudaErrorMemoryAllocation.
 *
 * With the argument `empty-cache` each fill first does what
 * torch.cuda.empty_cache() does on PyTorch's cudaMallocAsync route
 * (cudaDeviceSynchronize, cudaMemPoolTrimTo(pool, 0)). The default
 * configuration needs it: a caching allocator with plain segments serves a
 * 16 MiB request from a cached 200 or 24 MiB block and keeps the tail, as
 * PyTorch's does, so without emptying the cache the device fills with
 * fewer blocks than the runtime gives. Expandable segments unmap free
 * pages anywhere and must match the runtime without it. */
#include "stress.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define THREADS        3
#define SLOTS          8
#define ROUNDS         160
#define MAX_BLOCK_SIZE (8u << 20)
#define MiB            ((size_t)1 << 20)

struct worker {
    unsigned index, seed;
    struct st_log log;
};

static unsigned rounds;
static bool empty_first; /* `empty-cache`: empty the cache before each fill */

/* Mostly small blocks, some of the large pool, a few large ones. */
static size_t pick_size(unsigned *seed)
{
    unsigned r = st_rand(seed) % 100;
    if (r < 70) return 512 + (size_t)(st_rand(seed) % (1u << 20)) / 512 * 512;
    if (r < 95) return (2 + st_rand(seed) % 3) * MiB;
    return 8 * MiB;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct st_block live[SLOTS] = {{0}}, copy;
    unsigned char *host = st_host_buffer(MAX_BLOCK_SIZE);
    cudaStream_t a, b;
    cudaEvent_t ea, eb;
    unsigned seq = 0;

    st_ok(&w->log, cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), "cudaStreamCreate(A)");
    st_ok(&w->log, cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), "cudaStreamCreate(B)");
    st_ok(&w->log, cudaEventCreateWithFlags(&ea, cudaEventDisableTiming), "cudaEventCreate");
    st_ok(&w->log, cudaEventCreateWithFlags(&eb, cudaEventDisableTiming), "cudaEventCreate");
    for (unsigned r = 0; r < rounds; r++) {
        int slot = (int)(st_rand(&w->seed) % SLOTS);
        struct st_block *blk = &live[slot];

        if (blk->p) {
            if (r % 4 == 0) st_check(&w->log, blk, a, host, "before its free");
            switch (r % 4) {
            case 0:
                st_free(&w->log, blk, NULL, NULL);
                break;
            case 1:
                st_free(&w->log, blk, a, "A, its own stream");
                break;
            case 2:
                st_ok(&w->log, cudaEventRecord(ea, a), "cudaEventRecord(A)");
                st_ok(&w->log, cudaStreamWaitEvent(b, ea, 0), "cudaStreamWaitEvent(B, A)");
                st_free(&w->log, blk, b, "B, after B waits for A");
                break;
            default:
                /* the block used on B, then freed on A behind that use */
                st_ok(&w->log, cudaEventRecord(ea, a), "cudaEventRecord(A)");
                st_ok(&w->log, cudaStreamWaitEvent(b, ea, 0), "cudaStreamWaitEvent(B, A)");
                if (!st_alloc(&w->log, &copy, st_id(r, w->index, seq++), blk->size,
                              ST_ASYNC_CREATED, b)) {
                    st_copy(&w->log, &copy, blk, b);
                    st_ok(&w->log, cudaEventRecord(eb, b), "cudaEventRecord(B)");
                    st_ok(&w->log, cudaStreamWaitEvent(a, eb, 0), "cudaStreamWaitEvent(A, B)");
                }
                st_free(&w->log, blk, a, "A, after its use on B");
                if (copy.p) {
                    st_check(&w->log, &copy, b, host, "copied on B from a block of A");
                    st_free(&w->log, &copy, b, "B");
                }
                break;
            }
        }
        enum st_how how = r % 3 == 0 ? ST_MALLOC : ST_ASYNC_CREATED;
        if (!st_alloc(&w->log, blk, st_id(r, w->index, seq++), pick_size(&w->seed), how, a))
            st_fill(&w->log, blk, a);
    }
    for (int i = 0; i < SLOTS; i++) {
        st_check(&w->log, &live[i], a, host, "at the end");
        st_free(&w->log, &live[i], i % 2 ? a : NULL, "A");
    }
    st_ok(&w->log, cudaStreamSynchronize(a), "cudaStreamSynchronize(A)");
    st_ok(&w->log, cudaStreamSynchronize(b), "cudaStreamSynchronize(B)");
    st_ok(&w->log, cudaEventDestroy(ea), "cudaEventDestroy");
    st_ok(&w->log, cudaEventDestroy(eb), "cudaEventDestroy");
    st_ok(&w->log, cudaStreamDestroy(a), "cudaStreamDestroy(A)");
    st_ok(&w->log, cudaStreamDestroy(b), "cudaStreamDestroy(B)");
    cudaFreeHost(host);
    return NULL;
}

/* Sets the first and the last MiB of a big block. */
static void touch_ends(struct st_log *log, const struct st_block *b, cudaStream_t s)
{
    st_ok(log, cudaMemsetAsync(b->p, 0x5a, MiB, s), "cudaMemsetAsync(first MiB)");
    st_ok(log, cudaMemsetAsync((char *)b->p + b->size - MiB, 0xa5, MiB, s),
          "cudaMemsetAsync(last MiB)");
}

/* Allocates blocks of `size` until the device says no, and frees them. */
static void fill_device(struct st_log *log, size_t size, enum st_how how, cudaStream_t s)
{
    void *p[64];
    int n = 0;
    cudaError_t e = cudaSuccess;

    if (empty_first) {
        cudaMemPool_t pool;
        st_ok(log, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        st_ok(log, cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
        st_ok(log, cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo(0)");
    }

    while (n < 64) {
        e = how == ST_MALLOC ? cudaMalloc(&p[n], size) : cudaMallocAsync(&p[n], size, s);
        if (e != cudaSuccess) break;
        n++;
    }
    /* a GPU's memory pool reserves in steps of 32 MiB, so cudaMallocAsync
     * of 24 MiB blocks fills the device with fewer than an allocator that
     * takes only what it hands out: the shim may serve more, never fewer
     * (compare.sh holds it to that) */
    st_logf(log, "%s of %zu MiB until the device is full: %d blocks, at least", st_how_name(how),
            size / MiB, n);
    st_rec(log, e, "the allocation that found it full");
    cudaError_t freed = cudaSuccess;
    while (n--) {
        cudaError_t f = how == ST_MALLOC ? cudaFree(p[n]) : cudaFreeAsync(p[n], s);
        if (freed == cudaSuccess) freed = f;
    }
    st_rec(log, freed, "free of every block");
    st_ok(log, cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

int main(int argc, char **argv)
{
    struct worker w[THREADS];
    pthread_t tids[THREADS];
    struct st_log log;
    struct st_block big;
    size_t free_bytes = 0, total = 0;
    cudaStream_t s;
    void *p;

    empty_first = argc > 1 && strcmp(argv[1], "empty-cache") == 0;
    st_init("pressure", 1 << 14);
    st_watchdog(60);
    st_log_init(&log, "main");
    rounds = st_scaled(ROUNDS);
    st_ok(&log, cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    if (total != 256 * MiB) {
        st_fail("CALL", "the device has %zu bytes, not 256 MiB (FSDPSHIM_SIM_MEM=256M)", total);
        return st_finish(&log);
    }
    st_mem_start(1);
    st_phase("workers under pressure");
    for (unsigned t = 0; t < THREADS; t++) {
        w[t].index = t;
        w[t].seed = st_seed() * 613u + t;
        st_log_init(&w[t].log, "t%u", t);
        if (pthread_create(&tids[t], NULL, worker_main, &w[t]) != 0) abort();
    }
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(tids[t], NULL);
    for (unsigned t = 0; t < THREADS; t++)
        st_log_flush(&w[t].log);

    st_phase("the whole device");
    st_ok(&log, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    st_ok(&log, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    /* three times over: most of the device in one block, twice, then
     * blocks of 16 and 24 MiB until it is full, each way */
    for (unsigned i = 0; i < 3; i++) {
        if (!st_alloc(&log, &big, st_id(i, ST_MAIN, 0), 200 * MiB, ST_MALLOC, NULL)) {
            touch_ends(&log, &big, s);
            st_ok(&log, cudaStreamSynchronize(s), "cudaStreamSynchronize");
            st_free(&log, &big, NULL, NULL);
        }
        if (!st_alloc(&log, &big, st_id(i, ST_MAIN, 1), 200 * MiB, ST_ASYNC_CREATED, s)) {
            touch_ends(&log, &big, s);
            st_free(&log, &big, s, "stream");
            st_ok(&log, cudaStreamSynchronize(s), "cudaStreamSynchronize");
        }
        fill_device(&log, 16 * MiB, ST_ASYNC_CREATED, s);
        fill_device(&log, 24 * MiB, ST_MALLOC, s);
        fill_device(&log, 16 * MiB, ST_MALLOC, s);
        fill_device(&log, 24 * MiB, ST_ASYNC_CREATED, s);
    }
    /* more than the device has */
    st_rec(&log, cudaMalloc(&p, 300 * MiB), "cudaMalloc(300 MiB)");
    st_rec(&log, cudaMallocAsync(&p, 300 * MiB, s), "cudaMallocAsync(300 MiB)");
    st_ok(&log, cudaStreamDestroy(s), "cudaStreamDestroy");
    st_phase("leak check");
    st_mem_end(&log, 1);
    return st_finish(&log);
}
