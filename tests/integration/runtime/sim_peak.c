/* sim_peak.c - a program whose device use `fsdpshim sim` reports (cli_sim.sh):
 *   sim_peak DEVICE BYTES EXIT [set]
 * allocates BYTES on DEVICE, frees them, allocates BYTES/2 (so the peak is
 * BYTES, not the sum), optionally memsets the first block in full (a dry run
 * must not touch it), and exits with EXIT; 10 when an allocation fails. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    void *a, *b;
    cudaError_t err;

    if (argc < 4) {
        fprintf(stderr, "usage: sim_peak DEVICE BYTES EXIT [set]\n");
        return 2;
    }
    size_t bytes = strtoull(argv[2], NULL, 10);
    if (cudaSetDevice(atoi(argv[1])) != cudaSuccess) return 11;
    if ((err = cudaMalloc(&a, bytes)) != cudaSuccess) {
        fprintf(stderr, "sim_peak: cudaMalloc(%zu): %s\n", bytes, cudaGetErrorString(err));
        return 10;
    }
    if (argc > 4 && !strcmp(argv[4], "set") &&
        (cudaMemset(a, 1, bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess))
        return 12;
    if (cudaFree(a) != cudaSuccess || cudaMalloc(&b, bytes / 2) != cudaSuccess) return 13;
    return atoi(argv[3]);
}
