/* pool_steps.c - a program that creates and destroys its streams every step,
 * as many training loops do.
 *
 * Each step creates two streams, allocates stream-ordered buffers on them,
 * uses and frees them, destroys the streams and synchronises. With stream
 * pools the next step gets the same streams back and their cached blocks
 * with them, so the device allocation count (printed by the simulated
 * device at exit, FSDPSHIM_SIM_STATS=1) stays flat whatever the number of
 * steps. It also checks that a pooled stream answers cudaStreamGetFlags and
 * cudaStreamGetPriority as requested. */
#include "probe.h"

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 50;
    int least, greatest;

    watchdog(60);
    require_device();
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int step = 0; step < steps; step++) {
        cudaStream_t s[2];
        void *buf[2][3];
        unsigned flags;
        int prio;

        CHECK(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
        CHECK(cudaStreamCreateWithPriority(&s[1], cudaStreamDefault, greatest - 5));
        CHECK(cudaStreamGetFlags(s[0], &flags));
        EXPECT(flags == cudaStreamNonBlocking);
        CHECK(cudaStreamGetFlags(s[1], &flags));
        EXPECT(flags == cudaStreamDefault);
        CHECK(cudaStreamGetPriority(s[1], &prio));
        EXPECT(prio == greatest); /* clamped, as the runtime does */
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                CHECK(cudaMallocAsync(&buf[i][j], (size_t)(j + 1) << 20, s[i]));
                CHECK(cudaMemsetAsync(buf[i][j], j, (size_t)(j + 1) << 20, s[i]));
            }
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                CHECK(cudaFreeAsync(buf[i][j], s[i]));
        CHECK(cudaStreamDestroy(s[0]));
        CHECK(cudaStreamDestroy(s[1]));
        CHECK(cudaDeviceSynchronize());
    }
    printf("pool_steps: %d steps done\n", steps);
    return 0;
}
