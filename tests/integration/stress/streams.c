/* streams.c - cudaStreamDestroy while frees and work are pending.
 *
 * Each round creates streams of every kind (blocking, non-blocking, high
 * priority), holds each with a host function, queues fills behind the hold,
 * frees some blocks there with cudaFreeAsync (pending), records an event,
 * and destroys the stream with all of that still pending. New streams
 * (which a stream pool may serve, or the runtime may give the same
 * handles) then allocate blocks of the same sizes and fill them, some on
 * the legacy stream, while the destroyed streams' work is still held. The
 * calls a program may make on a destroyed stream are made too, and their
 * codes compared. After the release every live block is checked: the
 * destroyed streams' surviving blocks and the new ones. */
#include "stress.h"

#include <stdlib.h>

#define STREAMS        6
#define LIVE           3 /* per destroyed stream */
#define DOOMED         4 /* freed on it before its destruction */
#define NEW_BLOCKS     24
#define MAX_ROUNDS     16
#define MAX_BLOCK_SIZE (3u << 20)

static const size_t sizes[] = {512, 4096, 65536, 1 << 20, 3 << 20};

static size_t pick_size(unsigned *seed)
{
    return sizes[st_rand(seed) % (sizeof sizes / sizeof sizes[0])];
}

static void create(struct st_log *log, cudaStream_t *s, int i)
{
    switch (i % 3) {
    case 0:
        st_ok(log, cudaStreamCreate(s), "cudaStreamCreate(blocking)");
        break;
    case 1:
        st_ok(log, cudaStreamCreateWithFlags(s, cudaStreamNonBlocking),
              "cudaStreamCreate(non-blocking)");
        break;
    default:
        st_ok(log, cudaStreamCreateWithPriority(s, cudaStreamNonBlocking, -1),
              "cudaStreamCreate(non-blocking, priority -1)");
        break;
    }
}

int main(void)
{
    unsigned rounds = st_scaled(MAX_ROUNDS), seed = st_seed() * 31u + 7u;
    struct st_block live[STREAMS][LIVE], doomed[DOOMED], fresh[NEW_BLOCKS];
    struct st_hold holds[STREAMS];
    cudaStream_t old[STREAMS], now[STREAMS];
    cudaEvent_t done[STREAMS];
    struct st_log log;
    unsigned char *host;

    st_init("streams", 1 << 14);
    st_watchdog(60);
    st_log_init(&log, "main");
    host = st_host_buffer(MAX_BLOCK_SIZE);
    st_mem_start(1);

    for (unsigned r = 0; r < rounds; r++) {
        unsigned seq = 0;

        st_phase("round %u: streams destroyed with pending work", r);
        for (int i = 0; i < STREAMS; i++) {
            create(&log, &old[i], i + (int)r);
            st_hold(&log, &holds[i], old[i]);
            for (int j = 0; j < LIVE; j++)
                st_alloc(&log, &live[i][j], st_id(r, (unsigned)i, seq++), pick_size(&seed),
                         ST_ASYNC_CREATED, old[i]);
            for (int j = 0; j < DOOMED; j++) {
                /* one in four a cudaMalloc block, freed in stream order */
                enum st_how how = st_rand(&seed) % 4 ? ST_ASYNC_CREATED : ST_MALLOC;
                st_alloc(&log, &doomed[j], st_id(r, (unsigned)i, seq++), pick_size(&seed), how,
                         old[i]);
                st_fill(&log, &doomed[j], old[i]);
            }
            for (int j = 0; j < LIVE; j++)
                st_fill(&log, &live[i][j], old[i]);
            for (int j = 0; j < DOOMED; j++)
                st_free(&log, &doomed[j], old[i], "the stream about to be destroyed");
            st_ok(&log, cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming),
                  "cudaEventCreate");
            st_ok(&log, cudaEventRecord(done[i], old[i]), "cudaEventRecord");
            st_ok(&log, cudaStreamDestroy(old[i]), "cudaStreamDestroy with work and frees held");
        }

        /* what a program may still try on a destroyed stream */
        void *p = NULL;
        st_rec(&log, cudaStreamQuery(old[0]), "cudaStreamQuery(destroyed)");
        st_rec(&log, cudaMallocAsync(&p, 4096, old[1]), "cudaMallocAsync on a destroyed stream");
        st_rec(&log, cudaEventRecord(done[0], old[2]), "cudaEventRecord on a destroyed stream");

        st_phase("round %u: new streams allocate behind the held work", r);
        for (int i = 0; i < STREAMS; i++)
            create(&log, &now[i], i + (int)r + 1);
        for (int i = 0; i < NEW_BLOCKS; i++) {
            cudaStream_t s = now[i % STREAMS];
            enum st_how how = i % 4 == 3 ? ST_MALLOC : ST_ASYNC_CREATED;
            /* the legacy stream waits for the held blocking streams: its
             * allocations are fine, its fills wait with them */
            if (i % 8 == 5) {
                how = ST_ASYNC_LEGACY;
                s = cudaStreamLegacy;
            }
            if (i % 8 == 6) how = ST_FROM_POOL;
            if (!st_alloc(&log, &fresh[i], st_id(r, ST_MAIN, (unsigned)i), pick_size(&seed), how,
                          s))
                st_fill(&log, &fresh[i], s);
        }

        st_phase("round %u: release and check", r);
        for (int i = 0; i < STREAMS; i++)
            st_release(&holds[i]);
        for (int i = 0; i < STREAMS; i++) {
            st_ok(&log, cudaEventSynchronize(done[i]), "cudaEventSynchronize");
            st_ok(&log, cudaEventDestroy(done[i]), "cudaEventDestroy");
        }
        for (int i = 0; i < STREAMS; i++)
            st_ok(&log, cudaStreamSynchronize(now[i]), "cudaStreamSynchronize(new stream)");
        st_ok(&log, cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize(legacy)");
        for (int i = 0; i < NEW_BLOCKS; i++)
            st_check(&log, &fresh[i], now[0], host, "allocated after the destroys");
        for (int i = 0; i < STREAMS; i++)
            for (int j = 0; j < LIVE; j++)
                st_check(&log, &live[i][j], now[0], host, "allocated on a destroyed stream");

        st_phase("round %u: free", r);
        for (int i = 0; i < NEW_BLOCKS; i++)
            switch ((i + (int)r) % 3) {
            case 0:
                st_free(&log, &fresh[i], NULL, NULL);
                break;
            case 1:
                st_free(&log, &fresh[i], now[i % STREAMS], "a new stream");
                break;
            default:
                st_free(&log, &fresh[i], cudaStreamLegacy, "the legacy stream");
                break;
            }
        for (int i = 0; i < STREAMS; i++)
            for (int j = 0; j < LIVE; j++)
                if ((i + j) % 2)
                    st_free(&log, &live[i][j], NULL, NULL);
                else
                    st_free(&log, &live[i][j], now[j], "a new stream");
        /* the new streams go with their frees pending */
        for (int i = 0; i < STREAMS; i++)
            st_ok(&log, cudaStreamDestroy(now[i]), "cudaStreamDestroy(new stream)");
    }
    st_phase("leak check");
    st_mem_end(&log, 1);
    return st_finish(&log);
}
