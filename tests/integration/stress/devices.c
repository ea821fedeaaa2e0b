/* devices.c - several devices (run with FSDPSHIM_SIM_DEVICES=4), threads
 * that switch devices with cudaSetDevice.
 *
 * Each thread works on every device in turn, starting on a different one:
 * it allocates blocks there in every way, fills them on that device's
 * streams, copies some across devices (a block then holds the pattern of a
 * block of another device), and frees blocks of a device while another
 * device is current (cudaFree names no device) or in stream order on a
 * stream of the block's device. Blocks of the previous device stay live
 * while the thread works on the next one and are checked at the end. */
#include "stress.h"

#include <pthread.h>
#include <stdlib.h>

#define DEVICES        4
#define THREADS        6
#define PASSES         6 /* each a round over all devices */
#define PER_DEVICE     6
#define MAX_BLOCK_SIZE (1u << 20)

static const size_t sizes[] = {512, 4096, 65536, 1 << 20};

struct worker {
    unsigned index, seed;
    struct st_log log;
};

static unsigned passes;

static size_t pick_size(unsigned *seed)
{
    return sizes[st_rand(seed) % (sizeof sizes / sizeof sizes[0])];
}

static void free_on_device(struct st_log *log, struct st_block *b, cudaStream_t own, unsigned how)
{
    if (how % 3 == 0)
        st_free(log, b, NULL, NULL); /* from whatever device is current */
    else if (how % 3 == 1)
        st_free(log, b, own, "a stream of the block's device");
    else
        st_free(log, b, cudaStreamPerThread, "the per-thread stream of the current device");
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct st_block blocks[DEVICES][PER_DEVICE] = {{{0}}};
    cudaStream_t streams[DEVICES];
    unsigned char *host = st_host_buffer(MAX_BLOCK_SIZE);
    unsigned seq = 0;

    for (int d = 0; d < DEVICES; d++) {
        st_ok(&w->log, cudaSetDevice(d), "cudaSetDevice(%d)", d);
        st_ok(&w->log, cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking),
              "cudaStreamCreate on device %d", d);
    }
    for (unsigned pass = 0; pass < passes; pass++)
        for (int step = 0; step < DEVICES; step++) {
            int d = (int)(w->index + (unsigned)step) % DEVICES;
            int prev = (d + DEVICES - 1) % DEVICES;
            cudaStream_t s = streams[d];

            st_ok(&w->log, cudaSetDevice(d), "cudaSetDevice(%d)", d);
            /* the previous device's blocks are read here */
            st_ok(&w->log, cudaStreamSynchronize(streams[prev]),
                  "cudaStreamSynchronize(device %d stream)", prev);
            /* last pass's blocks of this device: checked, then freed while
             * this device is current, or still from the previous one */
            for (int i = 0; i < PER_DEVICE; i++) {
                struct st_block *b = &blocks[d][i];
                if (!b->p) continue;
                st_check(&w->log, b, s, host, "from the previous pass");
                free_on_device(&w->log, b, s, (unsigned)i + pass);
            }
            for (int i = 0; i < PER_DEVICE; i++) {
                static const enum st_how kinds[] = {ST_MALLOC, ST_ASYNC_CREATED, ST_ASYNC_PT,
                                                    ST_FROM_POOL};
                enum st_how how = kinds[(unsigned)i % 4];
                cudaStream_t on = how == ST_ASYNC_PT ? cudaStreamPerThread : s;
                struct st_block *b = &blocks[d][i];
                if (!st_alloc(&w->log, b, st_id(pass, w->index, seq++), pick_size(&w->seed), how,
                              on))
                    st_fill(&w->log, b, on);
            }
            st_ok(&w->log, cudaStreamSynchronize(cudaStreamPerThread),
                  "cudaStreamSynchronize(per-thread stream of device %d)", d);
            /* a copy from the previous device's block of the same slot,
             * when the sizes agree */
            for (int i = 0; i < PER_DEVICE; i++) {
                struct st_block *b = &blocks[d][i], *src = &blocks[prev][i];
                if (!b->p || !src->p || b->size != src->size) continue;
                st_copy(&w->log, b, src, s);
            }
            /* half of the previous device's blocks freed from this device */
            for (int i = 0; i < PER_DEVICE; i += 2)
                if (blocks[prev][i].p) {
                    st_check(&w->log, &blocks[prev][i], s, host, "read from another device");
                    st_free(&w->log, &blocks[prev][i], NULL, NULL);
                }
        }
    for (int d = 0; d < DEVICES; d++) {
        st_ok(&w->log, cudaSetDevice(d), "cudaSetDevice(%d)", d);
        for (int i = 0; i < PER_DEVICE; i++) {
            st_check(&w->log, &blocks[d][i], streams[d], host, "at the end");
            free_on_device(&w->log, &blocks[d][i], streams[d], (unsigned)i);
        }
        st_ok(&w->log, cudaStreamSynchronize(streams[d]), "cudaStreamSynchronize");
        st_ok(&w->log, cudaStreamDestroy(streams[d]), "cudaStreamDestroy");
    }
    cudaFreeHost(host);
    return NULL;
}

int main(void)
{
    struct worker w[THREADS];
    pthread_t tids[THREADS];
    struct st_log log;
    int count = 0;

    st_init("devices", 1 << 14);
    st_watchdog(60);
    st_log_init(&log, "main");
    passes = st_scaled(PASSES);
    st_ok(&log, cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (count < DEVICES) {
        st_fail("CALL", "%d devices, %d needed (FSDPSHIM_SIM_DEVICES=%d)", count, DEVICES, DEVICES);
        return st_finish(&log);
    }
    st_mem_start(DEVICES);
    st_phase("threads on %d devices", DEVICES);
    for (unsigned t = 0; t < THREADS; t++) {
        w[t].index = t;
        w[t].seed = st_seed() * 977u + t;
        st_log_init(&w[t].log, "t%u", t);
        if (pthread_create(&tids[t], NULL, worker_main, &w[t]) != 0) abort();
    }
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(tids[t], NULL);
    for (unsigned t = 0; t < THREADS; t++)
        st_log_flush(&w[t].log);
    st_phase("leak check");
    st_mem_end(&log, DEVICES);
    return st_finish(&log);
}
