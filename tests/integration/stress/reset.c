/* reset.c - cudaDeviceReset with live blocks of every kind.
 *
 * The runtime frees a device's cudaMalloc memory at cudaDeviceReset and
 * invalidates its streams and events, but memory from cudaMallocAsync (the
 * default pool) stays: its data survives and freeing it afterwards
 * succeeds. The native run is the ground truth for all of it: the data of
 * the surviving blocks, the codes of freeing them and of freeing the
 * vanished cudaMalloc pointers, and of calls on the old stream and event.
 * Each round runs on one of two devices, with blocks cached (allocated and
 * freed) and frees pending at the reset, then checks that the device works
 * as new. */
#include "stress.h"

#define ROUNDS         6
#define LIVE_MALLOC    6
#define LIVE_ASYNC     8
#define CACHED         6
#define MAX_BLOCK_SIZE (3u << 20)

static const size_t sizes[] = {512, 4096, 65536, 1 << 20, 3 << 20};

static size_t pick_size(unsigned *seed)
{
    return sizes[st_rand(seed) % (sizeof sizes / sizeof sizes[0])];
}

int main(void)
{
    unsigned rounds = st_scaled(ROUNDS), seed = st_seed() * 131u + 3u;
    struct st_block m[LIVE_MALLOC], a[LIVE_ASYNC], c[CACHED], after[LIVE_ASYNC];
    struct st_log log;
    unsigned char *host;

    st_init("reset", 1 << 12);
    st_watchdog(60);
    st_log_init(&log, "main");
    host = st_host_buffer(MAX_BLOCK_SIZE);
    st_mem_start(2);

    for (unsigned r = 0; r < rounds; r++) {
        int dev = (int)(r % 2);
        unsigned seq = 0;
        cudaStream_t s, s2;
        cudaEvent_t e;

        st_phase("round %u: blocks on device %d", r, dev);
        st_ok(&log, cudaSetDevice(dev), "cudaSetDevice(%d)", dev);
        st_ok(&log, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
        st_ok(&log, cudaEventCreate(&e), "cudaEventCreate");
        for (int i = 0; i < LIVE_MALLOC; i++)
            if (!st_alloc(&log, &m[i], st_id(r, 0, seq++), pick_size(&seed), ST_MALLOC, NULL))
                st_fill(&log, &m[i], s);
        for (int i = 0; i < LIVE_ASYNC; i++) {
            enum st_how how = i % 4 == 3   ? ST_FROM_POOL
                              : i % 4 == 2 ? ST_ASYNC_LEGACY
                                           : ST_ASYNC_CREATED;
            cudaStream_t on = how == ST_ASYNC_LEGACY ? cudaStreamLegacy : s;
            if (!st_alloc(&log, &a[i], st_id(r, 1, seq++), pick_size(&seed), how, on))
                st_fill(&log, &a[i], on);
        }
        /* cached by an allocator, some with their frees still pending */
        for (int i = 0; i < CACHED; i++) {
            enum st_how how = i % 2 ? ST_MALLOC : ST_ASYNC_CREATED;
            if (!st_alloc(&log, &c[i], st_id(r, 2, seq++), pick_size(&seed), how, s))
                st_fill(&log, &c[i], s);
        }
        st_ok(&log, cudaStreamSynchronize(s), "cudaStreamSynchronize");
        st_ok(&log, cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize(legacy)");
        for (int i = 0; i < CACHED; i++)
            if (i % 3 == 0)
                st_free(&log, &c[i], NULL, NULL);
            else
                st_free(&log, &c[i], s, "stream");
        st_ok(&log, cudaEventRecord(e, s), "cudaEventRecord");

        st_phase("round %u: cudaDeviceReset on device %d", r, dev);
        st_rec(&log, cudaDeviceReset(), "cudaDeviceReset");

        /* before any new allocation can take the vanished addresses */
        st_rec(&log, cudaStreamQuery(s), "cudaStreamQuery(stream from before the reset)");
        st_rec(&log, cudaEventQuery(e), "cudaEventQuery(event from before the reset)");
        st_rec(&log, cudaStreamDestroy(s), "cudaStreamDestroy(stream from before the reset)");
        for (int i = 0; i < LIVE_MALLOC; i++)
            st_free(&log, &m[i], NULL, NULL);

        st_phase("round %u: the pool blocks after the reset", r);
        st_ok(&log, cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "cudaStreamCreate");
        for (int i = 0; i < LIVE_ASYNC; i++)
            st_check(&log, &a[i], s2, host, "a pool block that outlived cudaDeviceReset");
        /* new blocks, while the old ones are still there */
        for (int i = 0; i < LIVE_ASYNC; i++) {
            enum st_how how = i % 2 ? ST_MALLOC : ST_ASYNC_CREATED;
            if (!st_alloc(&log, &after[i], st_id(r, 3, seq++), pick_size(&seed), how, s2))
                st_fill(&log, &after[i], s2);
        }
        st_ok(&log, cudaStreamSynchronize(s2), "cudaStreamSynchronize");
        for (int i = 0; i < LIVE_ASYNC; i++)
            st_check(&log, &after[i], s2, host, "allocated after cudaDeviceReset");
        for (int i = 0; i < LIVE_ASYNC; i++)
            st_check(&log, &a[i], s2, host, "a pool block that outlived cudaDeviceReset");
        for (int i = 0; i < LIVE_ASYNC; i++)
            if (i % 2)
                st_free(&log, &a[i], NULL, NULL);
            else
                st_free(&log, &a[i], s2, "stream created after the reset");
        for (int i = 0; i < LIVE_ASYNC; i++)
            if (i % 2)
                st_free(&log, &after[i], NULL, NULL);
            else
                st_free(&log, &after[i], s2, "stream created after the reset");
        st_ok(&log, cudaStreamSynchronize(s2), "cudaStreamSynchronize");
        st_ok(&log, cudaStreamDestroy(s2), "cudaStreamDestroy");
    }
    st_phase("leak check");
    st_mem_end(&log, 2);
    return st_finish(&log);
}
