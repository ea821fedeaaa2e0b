/* passthrough.c - memory the runtime handed out before the shim took over
 * (here: taken from the runtime directly, as a library with its own route
 * to it would) is freed by the real runtime when the program frees it
 * through the normal API, and bad frees still fail as the runtime says. */
#include "probe.h"

int main(void)
{
    cudaError_t (*real_malloc)(void **, size_t);
    cudaError_t (*real_meminfo)(size_t *, size_t *);
    size_t after, freed, total;
    void *h, *p = NULL, *q = NULL;

    watchdog(30);
    require_device();
    /* the runtime's own entry points, bypassing any interposer */
    h = dlopen("libcudart.so.13", RTLD_NOLOAD | RTLD_LAZY);
    EXPECT(h != NULL);
    real_malloc = (cudaError_t(*)(void **, size_t))libc_dlsym()(h, "cudaMalloc");
    real_meminfo = (cudaError_t(*)(size_t *, size_t *))libc_dlsym()(h, "cudaMemGetInfo");
    EXPECT(real_malloc && real_meminfo);

    CHECK(real_malloc(&p, 256u << 20));
    /* the program's ordinary allocations meanwhile: the shim takes over */
    CHECK(cudaMalloc(&q, 1 << 20));
    CHECK(cudaFree(q));

    CHECK(real_meminfo(&after, &total));

    CHECK(cudaFree(p)); /* passed through: the runtime really frees it */
    CHECK(real_meminfo(&freed, &total));
    EXPECT(freed >= after + (256u << 20));

    /* a second free of it is the runtime's business, and its error */
    EXPECT(cudaFree(p) == cudaErrorInvalidValue);
    EXPECT(cudaGetLastError() == cudaErrorInvalidValue);
    EXPECT(cudaGetLastError() == cudaSuccess);
    printf("passthrough: ok\n");
    return 0;
}
