/* cupti_first.c - a CUPTI client that subscribes before the program's
 * first CUDA call, as a profiler or compute-sanitizer does: a trace-only
 * attach through CUDA_INJECTION64_PATH then finds CUPTI's one subscriber
 * slot taken.
 *
 *   cupti_first              allocates and frees a little, and exits 0 when
 *                            every call succeeded and its callback saw them
 *   cupti_first loop FILE    allocates forever, 1 per ms, writing the count
 *                            to FILE after each (for `fsdpshim attach`,
 *                            which must then do without CUPTI) */
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int seen;

static void CUPTIAPI count(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                           const void *data)
{
    (void)userdata;
    (void)domain;
    (void)id;
    (void)data;
    seen++;
}

static int loop(const char *file)
{
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    for (unsigned long long n = 1;; n++) {
        void *p;
        char line[32];
        if (cudaMalloc(&p, 8192) != cudaSuccess) return 1; /* SITE_HELD */
        if (cudaFree(p) != cudaSuccess) return 1;
        int len = snprintf(line, sizeof line, "%020llu\n", n);
        if (pwrite(fd, line, (size_t)len, 0) != len) return 1;
        usleep(1000);
    }
}

int main(int argc, char **argv)
{
    CUpti_SubscriberHandle sub;
    void *p;

    if (cuptiSubscribe(&sub, count, NULL) != CUPTI_SUCCESS ||
        cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                            CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) != CUPTI_SUCCESS) {
        fprintf(stderr, "cupti_first: cannot subscribe\n");
        return 1;
    }
    if (argc == 3 && !strcmp(argv[1], "loop")) return loop(argv[2]);
    for (int i = 0; i < 4; i++) {
        if (cudaMalloc(&p, 1u << 20) != cudaSuccess || cudaFree(p) != cudaSuccess) return 1;
    }
    cuptiUnsubscribe(sub);
    if (seen != 8) { /* enter and exit of each cudaMalloc */
        fprintf(stderr, "cupti_first: %d callbacks, not 8\n", seen);
        return 1;
    }
    printf("cupti_first: ok\n");
    return 0;
}
