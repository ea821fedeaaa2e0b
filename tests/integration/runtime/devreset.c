/* devreset.c - cudaDeviceReset destroys every allocation, stream and event
 * of the device. Afterwards the program starts over: nothing cached before
 * the reset may be handed out again (that memory is gone), and streams and
 * allocations work as on a fresh device. */
#include "probe.h"

#include <string.h>

int main(void)
{
    unsigned char host[4096];
    cudaStream_t s;
    void *a, *b, *c;

    watchdog(30);
    require_device();
    CHECK(cudaMalloc(&a, 4096));
    CHECK(cudaFree(a)); /* cached by an allocator */
    CHECK(cudaMalloc(&b, 3 << 20));
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMallocAsync(&c, 8192, s));
    CHECK(cudaFreeAsync(c, s));
    CHECK(cudaStreamDestroy(s)); /* parked by a stream pool */

    CHECK(cudaDeviceReset());
    /* the shim, if present, holds nothing any more */
    EXPECT(shim_stat("reserved_bytes.all.current", 0) <= 0);

    for (int round = 0; round < 2; round++) {
        CHECK(cudaStreamCreate(&s));
        CHECK(cudaMalloc(&a, 4096));
        CHECK(cudaMallocAsync(&c, 8192, s));
        CHECK(cudaMemsetAsync(a, 0x3C + round, 4096, s));
        CHECK(cudaMemcpyAsync(c, a, 4096, cudaMemcpyDeviceToDevice, s));
        CHECK(cudaMemcpyAsync(host, c, 4096, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        for (size_t i = 0; i < sizeof host; i++)
            EXPECT(host[i] == 0x3C + round);
        CHECK(cudaFreeAsync(c, s));
        CHECK(cudaFree(a));
        CHECK(cudaStreamDestroy(s));
        if (round == 0) CHECK(cudaDeviceReset());
    }
    printf("devreset: ok\n");
    return 0;
}
