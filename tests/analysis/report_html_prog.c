/* report_html_prog.c - an ordinary CUDA program with NVTX ranges for the
 * report --html tests: allocations inside ranges whose names a page must
 * show as text (markup that would end a <title> and an <svg> and open a
 * script; bytes that are not UTF-8, control characters), then inside ranges
 * nested deeper than the page's lanes. With `late`, it first creates a
 * stream and waits 300 ms, as a job's initialisation does before its first
 * allocation, so that the trace begins long before any memory is used (the
 * chart must start at the first allocation). It knows nothing of the shim.
 *
 *   report_html_prog [late] */
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    static const char *const nested[] = {"step", "layer", "block", "attention", "softmax"};
    void *outer, *inner, *deep;

    if (argc > 1 && !strcmp(argv[1], "late")) { /* the trace begins with the first CUDA call */
        cudaStream_t s;
        CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        usleep(300 * 1000);
        CHECK(cudaStreamDestroy(s));
    }
    CHECK(cudaMalloc(&outer, 1u << 20));
    nvtxRangePushA("</title></svg><script>alert(1)</script>&amp;\"'");
    CHECK(cudaMalloc(&inner, 3u << 20));
    nvtxRangePushA("bad \xff\xfe utf-8 \x01\x1b[31m");
    CHECK(cudaFree(inner));
    nvtxRangePop();
    nvtxRangePop();
    for (int i = 0; i < 5; i++)
        nvtxRangePushA(nested[i]);
    CHECK(cudaMalloc(&deep, 2u << 20));
    CHECK(cudaFree(deep));
    for (int i = 0; i < 5; i++)
        nvtxRangePop();
    CHECK(cudaFree(outer));
    printf("report_html_prog: ok\n");
    return 0;
}
