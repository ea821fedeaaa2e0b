/* driver_lookup.c - whether a program finds driver functions in the sim's
 * libcuda.so.1 the two ways programs look them up: by dlsym on the library
 * (PyTorch's libtorch_cuda) and by base name through cuGetProcAddress (what
 * cudaGetDriverEntryPoint does, as in PyTorch's c10).
 *
 * Usage: driver_lookup [--proc-address] LIBCUDA NAME...
 *   Prints each NAME found neither way (with --proc-address: not found by
 *   cuGetProcAddress) and exits 1 if there is one. Used by torch_imports.sh. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);

int main(int argc, char **argv)
{
    int proc_only = argc > 1 && strcmp(argv[1], "--proc-address") == 0;
    int first = 1 + proc_only;
    if (argc <= first) {
        fprintf(stderr, "usage: driver_lookup [--proc-address] LIBCUDA NAME...\n");
        return 2;
    }
    void *lib = dlopen(argv[first], RTLD_NOW | RTLD_LOCAL);
    gpa_fn gpa = lib ? (gpa_fn)dlsym(lib, "cuGetProcAddress_v2") : NULL;
    if (!gpa) {
        fprintf(stderr, "driver_lookup: %s: no cuGetProcAddress_v2 (%s)\n", argv[first], dlerror());
        return 2;
    }
    int missing = 0;
    for (int i = first + 1; i < argc; i++) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult status;
        int by_name =
            gpa(argv[i], &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&
            fn && status == CU_GET_PROC_ADDRESS_SUCCESS;
        if (by_name || (!proc_only && dlsym(lib, argv[i]))) continue;
        printf("  %s\n", argv[i]);
        missing = 1;
    }
    return missing;
}
