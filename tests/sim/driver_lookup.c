/* driver_lookup.c - whether a program finds driver functions in the sim's
 * libcuda.so.1 the two ways programs look them up: by dlsym on the library
 * (PyTorch's libtorch_cuda) and by base name through cuGetProcAddress (what
 * cudaGetDriverEntryPoint does, as in PyTorch's c10, and what the static
 * runtime, NCCL, CuPy, Numba and JAX do).
 *
 * Usage: driver_lookup [--proc-address] LIBCUDA NAME...
 *   Prints each NAME found neither way (with --proc-address: not found by
 *   cuGetProcAddress) and exits 1 if there is one. Used by torch_imports.sh.
 * Usage: driver_lookup --abi LIBCUDA < QUERIES
 *   Each line of QUERIES is "BASE VERSION FLAG EXPECT": cuGetProcAddress of
 *   BASE for CUDA VERSION, with FLAG legacy (CU_GET_PROC_ADDRESS_LEGACY_STREAM)
 *   or ptds (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), must answer the
 *   function the library exports as EXPECT, or, for "!EXPECT", must not.
 *   Prints each query that fails, and why, and exits 1 if one does; 2 for a
 *   malformed line. Used by driver_api.sh. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t,
                           CUdriverProcAddressQueryResult *);

/* Checks the queries on stdin; 0 when all hold. */
static int check_abis(void *lib, gpa_fn gpa)
{
    char line[512], base[128], flag[16], expect[130];
    int version, failed = 0, n = 0;
    while (fgets(line, sizeof line, stdin)) {
        n++;
        if (sscanf(line, "%127s %d %15s %129s", base, &version, flag, expect) != 4 ||
            (strcmp(flag, "legacy") != 0 && strcmp(flag, "ptds") != 0)) {
            fprintf(stderr, "driver_lookup: line %d: not BASE VERSION legacy|ptds EXPECT: %s", n,
                    line);
            return 2;
        }
        int negate = expect[0] == '!';
        const char *sym = expect + negate;
        void *want = dlsym(lib, sym), *fn = NULL;
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        cuuint64_t flags = flag[0] == 'p' ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                          : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
        CUresult res = gpa(base, &fn, version, flags, &status);
        if (!want) {
            printf("  %s: not exported\n", sym);
            failed = 1;
        } else if (!negate && (res != CUDA_SUCCESS || fn != want)) {
            Dl_info info;
            const char *got =
                fn && dladdr(fn, &info) && info.dli_sname ? info.dli_sname : "nothing";
            printf("  %s for %d (%s): %s, status %d, not %s\n", base, version, flag, got,
                   (int)status, sym);
            failed = 1;
        } else if (negate && res == CUDA_SUCCESS && fn == want) {
            printf("  %s for %d (%s): %s, an ABI newer than the version\n", base, version, flag,
                   sym);
            failed = 1;
        }
    }
    return failed;
}

int main(int argc, char **argv)
{
    int abi = argc > 1 && strcmp(argv[1], "--abi") == 0;
    int proc_only = argc > 1 && strcmp(argv[1], "--proc-address") == 0;
    int first = 1 + proc_only + abi;
    if (argc <= first || (abi && argc != first + 1)) {
        fprintf(stderr, "usage: driver_lookup [--proc-address] LIBCUDA NAME...\n"
                        "       driver_lookup --abi LIBCUDA < QUERIES\n");
        return 2;
    }
    void *lib = dlopen(argv[first], RTLD_NOW | RTLD_LOCAL);
    gpa_fn gpa = lib ? (gpa_fn)dlsym(lib, "cuGetProcAddress_v2") : NULL;
    if (!gpa) {
        fprintf(stderr, "driver_lookup: %s: no cuGetProcAddress_v2 (%s)\n", argv[first], dlerror());
        return 2;
    }
    if (abi) return check_abis(lib, gpa);
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
