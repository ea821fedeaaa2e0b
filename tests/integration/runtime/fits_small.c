/* fits_small.c - a program that fits its device natively fits it under the
 * shim (SPEC section 4: the shim never fails an allocation the device could
 * serve). 8 MiB of weights from cudaMalloc, then steps that each take
 * 4 MiB blocks with cudaMallocAsync on two streams, fill and check them,
 * and free them stream-ordered; run on a 32 MiB simulated device
 * (FSDPSHIM_SIM_MEM=32M) natively and under the shim by same_output.sh.
 * A shim that grows the cache only by whole 20 MiB segments (PyTorch's
 * large_segment_mb) ran out of memory at every step while 12 MiB of the
 * device were free. Under the shim its statistics must show that it served
 * every allocation itself: an allocation the shim cannot serve goes on to
 * the runtime, which may succeed, so equal output alone proves nothing. */
#include "probe.h"

#include <string.h>

#define MiB   ((size_t)1 << 20)
#define STEPS 6
#define BLOCK (4 * MiB)

int main(void)
{
    cudaStream_t s[2];
    unsigned char *weights, *blk[2][2];
    static unsigned char host[BLOCK];

    watchdog(60);
    require_device();
    for (int i = 0; i < 2; i++)
        CHECK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    CHECK(cudaMalloc((void **)&weights, 8 * MiB));
    CHECK(cudaMemset(weights, 7, 8 * MiB));
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < 2; i++) {
            for (int j = 0; j < 2; j++) {
                CHECK(cudaMallocAsync((void **)&blk[i][j], BLOCK, s[i]));
                CHECK(cudaMemsetAsync(blk[i][j], step * 4 + i * 2 + j, BLOCK, s[i]));
            }
        }
        unsigned sum = 0;
        for (int i = 0; i < 2; i++) {
            for (int j = 0; j < 2; j++) {
                CHECK(cudaMemcpyAsync(host, blk[i][j], BLOCK, cudaMemcpyDeviceToHost, s[i]));
                CHECK(cudaStreamSynchronize(s[i]));
                for (size_t k = 0; k < BLOCK; k += 4096)
                    sum += host[k];
                CHECK(cudaFreeAsync(blk[i][j], s[i]));
            }
        }
        printf("step %d: sum %u\n", step, sum);
    }
    CHECK(cudaMemcpy(host, weights, 4096, cudaMemcpyDeviceToHost));
    EXPECT(host[0] == 7 && host[4095] == 7);
    CHECK(cudaFree(weights));
    for (int i = 0; i < 2; i++)
        CHECK(cudaStreamDestroy(s[i]));
    if (shim_stat("num_ooms", 0) >= 0) { /* under the shim */
        int64_t ooms = shim_stat("num_ooms", 0), n = shim_stat("allocation.all.allocated", 0);
        if (ooms != 0 || n != 1 + STEPS * 4) {
            fprintf(stderr, "fits_small: the shim served %lld of %d allocations, %lld OOMs\n",
                    (long long)n, 1 + STEPS * 4, (long long)ooms);
            return 1;
        }
    }
    printf("done\n");
    return 0;
}
