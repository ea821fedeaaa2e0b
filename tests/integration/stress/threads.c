/* threads.c - threads that exit while their streams still have work.
 *
 * Each round, worker threads hold their streams (cudaStreamPerThread, a
 * stream they create and never destroy, or both) with a host function,
 * queue fills behind the hold, free some blocks there with cudaFreeAsync
 * (pending: the fills have not run), hand the other blocks (live, their
 * fills pending too), the created streams and an event recorded after
 * their work to the main thread, and exit. They come in two waves, the
 * second started once the first has ended (so its threads get the first
 * one's stacks and thread-local storage), and the main thread allocates
 * and fills blocks of the same sizes while the second wave runs and after
 * it has gone, frees one live block of each worker on its own stream
 * behind that worker's event and allocates again, and destroys some of the
 * orphaned streams, all with every worker's work still held. Only then are
 * the holds released. A block handed out again before a pending fill of
 * its previous owner ran ends up with that owner's data; a live block
 * handed out twice ends up with its second owner's. Every live block is
 * checked after the release, some survive into later rounds and are
 * checked again, and every block is freed by one of cudaFree, cudaFreeAsync
 * on the main thread's stream or on its per-thread stream. */
#include "stress.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS        8 /* two waves */
#define PENDING_FREES  4 /* per held stream */
#define LIVE           3 /* per held stream */
#define MAIN_BLOCKS    32
#define EARLY          8 /* allocated after main's early frees */
#define KEEP           6 /* blocks carried into later rounds, at most */
#define MAX_ROUNDS     12
#define MAX_BLOCK_SIZE (3u << 20)

static const size_t sizes[] = {512, 4096, 65536, 1 << 20, 3 << 20};

struct worker {
    unsigned round, index, seed;
    struct st_log log;
    struct st_hold holds[2];
    /* handed to the main thread */
    cudaStream_t created; /* NULL when the worker used none */
    cudaEvent_t done[2];  /* recorded after the worker's work on each stream */
    int streams;
    struct st_block live[2 * LIVE + 1];
    int live_k[2 * LIVE + 1]; /* the stream (0, 1) each was filled on */
    int nlive;
};

static size_t pick_size(unsigned *seed)
{
    return sizes[st_rand(seed) % (sizeof sizes / sizeof sizes[0])];
}

/* Work on one held stream: blocks that stay live for the main thread and
 * blocks freed there, all allocated and filled before the first free (so
 * that the freed ones are not simply taken again by the next allocation on
 * the stream), all of it pending behind the hold. */
static void work_on(struct worker *w, cudaStream_t s, enum st_how how, int k, unsigned *seq)
{
    struct st_block doomed[PENDING_FREES];
    int first_live = w->nlive;

    st_hold(&w->log, &w->holds[k], s);
    for (int i = 0; i < LIVE; i++) {
        struct st_block *l = &w->live[w->nlive];
        if (!st_alloc(&w->log, l, st_id(w->round, w->index, (*seq)++), pick_size(&w->seed), how, s))
            w->nlive++;
    }
    for (int i = 0; i < PENDING_FREES; i++) {
        /* now and then a cudaMalloc block, freed in stream order */
        enum st_how h = st_rand(&w->seed) % 5 == 0 ? ST_MALLOC : how;
        st_alloc(&w->log, &doomed[i], st_id(w->round, w->index, (*seq)++), pick_size(&w->seed), h,
                 s);
        st_fill(&w->log, &doomed[i], s);
    }
    for (int i = first_live; i < w->nlive; i++) {
        st_fill(&w->log, &w->live[i], s);
        w->live_k[i] = k;
    }
    for (int i = 0; i < PENDING_FREES; i++)
        st_free(&w->log, &doomed[i], s,
                how == ST_ASYNC_PT ? "own per-thread stream" : "own stream");
    st_ok(&w->log, cudaEventCreateWithFlags(&w->done[k], cudaEventDisableTiming),
          "cudaEventCreate");
    st_ok(&w->log, cudaEventRecord(w->done[k], s), "cudaEventRecord after the work");
    w->streams = k + 1;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    unsigned seq = 0;
    int kind = (int)(w->index % 3);

    if (kind != 1) work_on(w, cudaStreamPerThread, ST_ASYNC_PT, w->streams, &seq);
    if (kind != 0) {
        unsigned flags = w->round % 2 ? cudaStreamNonBlocking : cudaStreamDefault;
        st_ok(&w->log, cudaStreamCreateWithFlags(&w->created, flags), "cudaStreamCreate(%s)",
              flags ? "non-blocking" : "blocking");
        work_on(w, w->created, ST_ASYNC_CREATED, w->streams, &seq);
    }
    /* exit owning the streams, with all their work still held */
    return NULL;
}

/* Frees b by one of the main thread's paths, chosen by `path`. */
static void free_somehow(struct st_log *log, struct st_block *b, unsigned path, cudaStream_t ms)
{
    switch (path % 3) {
    case 0:
        st_free(log, b, NULL, NULL);
        break;
    case 1:
        st_free(log, b, ms, "main stream");
        break;
    default:
        st_free(log, b, cudaStreamPerThread, "main per-thread stream");
        break;
    }
}

/* Allocates and fills main's blocks [from, to). */
static void main_allocs(struct st_log *log, struct st_block *mine, int from, int to, unsigned r,
                        unsigned *seed, cudaStream_t ms)
{
    for (int i = from; i < to; i++) {
        enum st_how how = i % 3 == 0 ? ST_MALLOC : i % 3 == 1 ? ST_ASYNC_CREATED : ST_ASYNC_PT;
        cudaStream_t s = how == ST_ASYNC_PT ? cudaStreamPerThread : ms;
        if (!st_alloc(log, &mine[i], st_id(r, ST_MAIN, (unsigned)i), pick_size(seed), how, s))
            st_fill(log, &mine[i], s);
    }
}

static void spawn_wave(struct worker *w, pthread_t *tids, unsigned from, unsigned to, unsigned r,
                       unsigned seed)
{
    for (unsigned t = from; t < to; t++) {
        w[t].round = r;
        w[t].index = t;
        w[t].seed = seed * 7919u + r * THREADS + t;
        st_log_init(&w[t].log, "r%u/t%u", r, t);
        if (pthread_create(&tids[t], NULL, worker_main, &w[t]) != 0) abort();
    }
}

int main(void)
{
    unsigned rounds = st_scaled(MAX_ROUNDS), seed = st_seed();
    struct worker *workers = calloc((size_t)MAX_ROUNDS * THREADS, sizeof *workers);
    struct st_block mine[MAIN_BLOCKS], kept[KEEP] = {{0}};
    struct st_log log;
    unsigned char *host;
    cudaStream_t ms;

    if (!workers) abort();
    st_init("threads", 1 << 14);
    st_watchdog(60);
    st_log_init(&log, "main");
    host = st_host_buffer(MAX_BLOCK_SIZE);
    st_mem_start(1);
    st_ok(&log, cudaStreamCreateWithFlags(&ms, cudaStreamNonBlocking), "cudaStreamCreate(main)");

    for (unsigned r = 0; r < rounds && r < MAX_ROUNDS; r++) {
        struct worker *w = &workers[r * THREADS];
        pthread_t tids[THREADS];

        /* two waves, so that the second one's threads start where the
         * first one's ended (stacks and thread-local storage are reused),
         * and main allocates while the second wave runs and exits */
        st_phase("round %u: first wave", r);
        spawn_wave(w, tids, 0, THREADS / 2, r, seed);
        for (unsigned t = 0; t < THREADS / 2; t++)
            pthread_join(tids[t], NULL);
        st_phase("round %u: second wave, main allocates meanwhile", r);
        spawn_wave(w, tids, THREADS / 2, THREADS, r, seed);
        main_allocs(&log, mine, 0, MAIN_BLOCKS / 2, r, &seed, ms);
        for (unsigned t = THREADS / 2; t < THREADS; t++)
            pthread_join(tids[t], NULL);
        for (unsigned t = 0; t < THREADS; t++)
            st_log_flush(&w[t].log);

        /* every worker's fills and frees are still pending */
        st_phase("round %u: main allocates behind the held work", r);
        main_allocs(&log, mine, MAIN_BLOCKS / 2, MAIN_BLOCKS - EARLY, r, &seed, ms);
        /* each worker's first live block freed now on main's stream, after
         * the worker's work (a stream wait), and blocks allocated again */
        for (unsigned t = 0; t < THREADS; t++) {
            if (!w[t].nlive) continue;
            st_ok(&log, cudaStreamWaitEvent(ms, w[t].done[w[t].live_k[0]], 0),
                  "cudaStreamWaitEvent(main, r%u/t%u's work)", r, t);
            st_free(&log, &w[t].live[0], ms, "main stream, behind the held work");
        }
        main_allocs(&log, mine, MAIN_BLOCKS - EARLY, MAIN_BLOCKS, r, &seed, ms);
        /* odd rounds: the orphaned created streams go with their work pending */
        if (r % 2)
            for (unsigned t = 0; t < THREADS; t++)
                if (w[t].created)
                    st_ok(&log, cudaStreamDestroy(w[t].created),
                          "cudaStreamDestroy(r%u/t%u's stream) with its work held", r, t);

        st_phase("round %u: release and check", r);
        for (unsigned t = 0; t < THREADS; t++)
            for (int k = 0; k < 2; k++)
                st_release(&w[t].holds[k]);
        for (unsigned t = 0; t < THREADS; t++)
            for (int k = 0; k < w[t].streams; k++) {
                st_ok(&log, cudaEventSynchronize(w[t].done[k]),
                      "cudaEventSynchronize(r%u/t%u's work %d)", r, t, k);
                st_ok(&log, cudaEventDestroy(w[t].done[k]), "cudaEventDestroy");
            }
        st_ok(&log, cudaStreamSynchronize(ms), "cudaStreamSynchronize(main)");
        st_ok(&log, cudaStreamSynchronize(cudaStreamPerThread),
              "cudaStreamSynchronize(main per-thread)");
        for (int i = 0; i < MAIN_BLOCKS; i++)
            st_check(&log, &mine[i], ms, host,
                     "allocated by main while the workers' work was held");
        for (unsigned t = 0; t < THREADS; t++)
            for (int i = 0; i < w[t].nlive; i++)
                st_check(&log, &w[t].live[i], ms, host, "handed to main by an exited thread");
        for (int i = 0; i < KEEP; i++)
            st_check(&log, &kept[i], ms, host, "kept from an earlier round");

        st_phase("round %u: free", r);
        if (r % 2 == 0)
            for (unsigned t = 0; t < THREADS; t++)
                if (w[t].created)
                    st_ok(&log, cudaStreamDestroy(w[t].created),
                          "cudaStreamDestroy(r%u/t%u's stream)", r, t);
        for (int i = 0; i < MAIN_BLOCKS; i++)
            free_somehow(&log, &mine[i], (unsigned)i + r, ms);
        for (unsigned t = 0; t < THREADS; t++)
            for (int i = 0; i < w[t].nlive; i++) {
                struct st_block *b = &w[t].live[i];
                int slot = (int)((r + t + (unsigned)i) % (2 * KEEP));
                /* some live on: swapped into the kept set, the old one freed */
                if (slot < KEEP) {
                    struct st_block old = kept[slot];
                    kept[slot] = *b;
                    *b = old;
                }
                free_somehow(&log, b, t + (unsigned)i, ms);
            }
    }
    st_phase("final frees");
    for (int i = 0; i < KEEP; i++)
        st_check(&log, &kept[i], ms, host, "kept to the end");
    for (int i = 0; i < KEEP; i++)
        free_somehow(&log, &kept[i], (unsigned)i, ms);
    st_ok(&log, cudaStreamSynchronize(ms), "cudaStreamSynchronize(main)");
    st_ok(&log, cudaStreamDestroy(ms), "cudaStreamDestroy(main)");
    st_phase("leak check");
    st_mem_end(&log, 1);
    free(workers);
    return st_finish(&log);
}
