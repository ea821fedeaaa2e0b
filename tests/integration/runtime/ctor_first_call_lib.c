/* ctor_first_call_lib.c - a library whose constructor allocates device
 * memory, as CUDA extension modules and plugin libraries may: it runs under
 * glibc's loader lock (ctor_first_call.c). */
#include <cuda_runtime_api.h>

void ctor_first_call_in_ctor(void); /* the program's (exported) */

static cudaError_t result = cudaErrorUnknown;

__attribute__((visibility("default"))) cudaError_t ctor_first_call_lib_result(void)
{
    return result;
}

__attribute__((constructor)) static void allocate(void)
{
    void *p = NULL;

    ctor_first_call_in_ctor();
    result = cudaMalloc(&p, 4096);
    if (result == cudaSuccess) result = cudaFree(p);
}
