/* expandable.c - with expandable_segments:true a segment grows by mapping
 * more memory at its end, so a block can span two growth steps (two
 * adjacent mappings of one reservation). Copies and sets over such a block,
 * synchronous and stream-ordered, must work as over any other block, as
 * they do on a GPU. The program checks that its block really spans a seam
 * (the driver names the mapping around an address) before trusting a
 * pass. */
#include "probe.h"

#include <cuda.h>
#include <string.h>

#define MIB ((size_t)1 << 20)

int main(void)
{
    CUresult (*address_range)(CUdeviceptr *, size_t *, CUdeviceptr) = NULL;
    enum cudaDriverEntryPointQueryResult q;
    size_t first_size = 3 * MIB, size = 4 * MIB, range_size;
    unsigned char *first, *block, *host, *back;
    CUdeviceptr range_base;
    cudaStream_t s;

    watchdog(30);
    require_device();
    EXPECT(shim_stat("allocation.all.allocated", -1) >= 0);
    CHECK(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", (void **)&address_range, 12000,
                                           cudaEnableDefault, &q));
    EXPECT(q == cudaDriverEntryPointSuccess && address_range);
    host = malloc(size);
    back = malloc(size);
    EXPECT(host && back);
    CHECK(cudaStreamCreate(&s));

    /* The first block leaves a free tail shorter than the second needs:
     * the segment grows and the second block runs across the seam. */
    CHECK(cudaMalloc((void **)&first, first_size));
    CHECK(cudaMalloc((void **)&block, size));
    EXPECT(address_range(&range_base, &range_size, (CUdeviceptr)(uintptr_t)block) == CUDA_SUCCESS);
    EXPECT(range_base + range_size > (CUdeviceptr)(uintptr_t)block);
    EXPECT(range_base + range_size < (CUdeviceptr)(uintptr_t)(block + size));

    CHECK(cudaMemset(block, 0x5a, size));
    CHECK(cudaMemcpy(back, block, size, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < size; i++)
        EXPECT(back[i] == 0x5a);

    for (size_t i = 0; i < size; i++)
        host[i] = (unsigned char)(i * 31 + 7);
    CHECK(cudaMemcpyAsync(block, host, size, cudaMemcpyHostToDevice, s));
    /* device to device across the seam, and back */
    CHECK(cudaMemcpyAsync(first, block + MIB, first_size, cudaMemcpyDeviceToDevice, s));
    CHECK(cudaMemsetAsync(block, 0, size, s));
    CHECK(cudaMemcpyAsync(block + MIB, first, first_size, cudaMemcpyDeviceToDevice, s));
    CHECK(cudaMemcpyAsync(back, block, size, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (size_t i = 0; i < size; i++)
        EXPECT(back[i] == (i < MIB ? 0 : host[i]));

    CHECK(cudaFree(block));
    CHECK(cudaFree(first));
    CHECK(cudaStreamDestroy(s));
    EXPECT(cudaGetLastError() == cudaSuccess);
    free(host);
    free(back);
    printf("expandable: ok\n");
    return 0;
}
