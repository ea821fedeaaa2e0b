/* stress.c - many threads, each on its own stream, allocating, using,
 * checking and freeing at once (also run in the TSan build). Each thread
 * fills its buffers with its own pattern and reads them back, so a block
 * handed to two owners at once shows up as wrong data. */
#include "probe.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define THREADS 6
#define ROUNDS  300
#define LIVE    8

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg, seed = id * 7919u + 1;
    unsigned char *host, pattern = (unsigned char)(0x10 + id);
    void *live[LIVE] = {0};
    size_t sizes[LIVE] = {0};
    bool ordered[LIVE] = {0}; /* freed the way it was allocated */
    cudaStream_t s;

    CHECK(cudaStreamCreateWithFlags(&s, id % 2 ? cudaStreamNonBlocking : cudaStreamDefault));
    CHECK(cudaMallocHost((void **)&host, 1 << 20));
    for (int r = 0; r < ROUNDS; r++) {
        int slot = (int)((seed = seed * 1103515245u + 12345u) >> 16) % LIVE;
        size_t size = 512 + ((seed >> 8) % (1u << 20));

        if (live[slot]) {
            if (r % 16 == 0) {
                /* read back what this thread wrote */
                CHECK(cudaMemcpyAsync(host, live[slot], sizes[slot], cudaMemcpyDeviceToHost, s));
                CHECK(cudaStreamSynchronize(s));
                for (size_t i = 0; i < sizes[slot]; i++)
                    if (host[i] != pattern) {
                        fprintf(stderr, "stress: thread %u: byte %zu of %p is 0x%02x\n", id, i,
                                live[slot], host[i]);
                        exit(1);
                    }
            }
            if (ordered[slot])
                CHECK(cudaFreeAsync(live[slot], s));
            else
                CHECK(cudaFree(live[slot]));
            live[slot] = NULL;
        }
        if (r % 3)
            CHECK(cudaMallocAsync(&live[slot], size, s));
        else
            CHECK(cudaMalloc(&live[slot], size));
        sizes[slot] = size;
        ordered[slot] = r % 3 != 0;
        CHECK(cudaMemsetAsync(live[slot], pattern, size, s));
    }
    for (int i = 0; i < LIVE; i++)
        if (live[i]) CHECK(ordered[i] ? cudaFreeAsync(live[i], s) : cudaFree(live[i]));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFreeHost(host));
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];

    watchdog(120);
    require_device();
    for (uintptr_t i = 0; i < THREADS; i++)
        EXPECT(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++)
        EXPECT(pthread_join(t[i], NULL) == 0);
    CHECK(cudaDeviceSynchronize());
    printf("stress: %d threads x %d rounds ok\n", THREADS, ROUNDS);
    return 0;
}
