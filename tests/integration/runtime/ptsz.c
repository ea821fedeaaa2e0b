/* ptsz.c - a program built for the per-thread default stream
 * (CUDA_API_PER_THREAD_DEFAULT_STREAM): its calls reach the runtime's _ptsz
 * entry points, and stream 0 means each thread's own stream. Under the shim
 * those variants must be served too (its statistics say so). */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include "probe.h"

#include <pthread.h>
#include <string.h>

static void *worker(void *arg)
{
    unsigned char *d, h[4096];
    int id = (int)(intptr_t)arg;

    for (int r = 0; r < 50; r++) {
        CHECK(cudaMallocAsync((void **)&d, sizeof h, 0));
        CHECK(cudaMemsetAsync(d, id + r, sizeof h, 0));
        CHECK(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, 0));
        CHECK(cudaStreamSynchronize(0));
        for (size_t i = 0; i < sizeof h; i++)
            EXPECT(h[i] == (unsigned char)(id + r));
        CHECK(cudaFreeAsync(d, 0));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int expect_shim = argc > 1 && !strcmp(argv[1], "--expect-shim");
    pthread_t t[3];

    watchdog(30);
    require_device();
    for (intptr_t i = 0; i < 3; i++)
        EXPECT(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    for (int i = 0; i < 3; i++)
        EXPECT(pthread_join(t[i], NULL) == 0);
    CHECK(cudaDeviceSynchronize());
    if (expect_shim) EXPECT(shim_stat("allocation.all.allocated", -1) == 150);
    printf("ptsz: ok\n");
    return 0;
}
