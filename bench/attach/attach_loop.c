/* attach_loop.c - the workload of attach_bench: an ordinary CUDA program that
 * allocates and frees as fast as it can, forever, and says how far it got,
 * so that a run can be measured from outside over a window of time, with
 * the shim preloaded, injected, or attached to it meanwhile.
 *
 *   attach_loop [--hold-cupti] FILE
 *
 * Each pair is cudaMallocAsync and cudaFreeAsync of 1 MiB on a stream of its
 * own (a cached pair under the shim, as trace_alloc's). After every 1024
 * pairs the count is written to FILE (20 digits). --hold-cupti subscribes to
 * CUPTI first, with no callback enabled, as a profiler holding the one
 * subscriber slot would: `fsdpshim attach` then works through the GOT
 * slots. */
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void CUPTIAPI ignore(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                            const void *data)
{
    (void)userdata;
    (void)domain;
    (void)id;
    (void)data;
}

int main(int argc, char **argv)
{
    CUpti_SubscriberHandle sub;
    cudaStream_t s;
    int hold = argc == 3 && !strcmp(argv[1], "--hold-cupti");
    int fd;

    if (argc != 2 + hold) {
        fprintf(stderr, "usage: attach_loop [--hold-cupti] FILE\n");
        return 2;
    }
    if (hold && cuptiSubscribe(&sub, ignore, NULL) != CUPTI_SUCCESS) {
        fprintf(stderr, "attach_loop: cannot subscribe to CUPTI\n");
        return 1;
    }
    fd = open(argv[argc - 1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return 1;
    for (unsigned long long n = 1;; n++) {
        void *p;
        if (cudaMallocAsync(&p, 1u << 20, s) != cudaSuccess || cudaFreeAsync(p, s) != cudaSuccess)
            return 1;
        if (n % 1024 == 0) {
            char line[24];
            int len = snprintf(line, sizeof line, "%020llu\n", n);
            if (pwrite(fd, line, (size_t)len, 0) != len) return 1;
        }
    }
}
