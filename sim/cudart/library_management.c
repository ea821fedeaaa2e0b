/* library_management.c - modules loaded at run time: the runtime's
 * cudaLibraryLoadData, cudaLibraryLoadFromFile, cudaLibraryUnload and the
 * lookups in a library (kernels, globals, managed variables, unified
 * functions). A library is a module (sim/core/modules.c) filled by the image
 * reader (sim/core/image.c); its kernels launch as any other (ordered,
 * computing nothing) and its variables get device memory on first use.
 * Unified functions are host-callable device code, which the sim never
 * has: every lookup is cudaErrorSymbolNotFound. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct library {
    struct sim_module *mod;
};

static struct sim_handle_set *libraries;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void libraries_init(void)
{
    libraries = sim_handles_new();
}

static cudaError_t load(cudaLibrary_t *out, const void *code, size_t size, unsigned njit,
                        void **jit_values, enum cudaJitOption *jit, unsigned nlib,
                        void **lib_values, enum cudaLibraryOption *lib_opts)
{
    sim_init();
    if (!out || !code || (njit && (!jit || !jit_values)) || (nlib && (!lib_opts || !lib_values)))
        return cudaErrorInvalidValue;
    pthread_once(&once, libraries_init);
    struct library *lib = malloc(sizeof *lib);
    if (!lib) return cudaErrorMemoryAllocation;
    lib->mod = sim_module_new();
    if (!lib->mod) {
        free(lib);
        return cudaErrorMemoryAllocation;
    }
    cudaError_t err = sim_image_read(lib->mod, code, size);
    if (err) {
        sim_module_destroy(lib->mod, 1);
        free(lib);
        return err;
    }
    sim_module_publish(lib->mod);
    void *h = sim_handles_new_key();
    sim_handles_add(libraries, h, lib);
    *out = h;
    return cudaSuccess;
}

SIM_API cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *code,
                                        enum cudaJitOption *jit_options, void **jit_values,
                                        unsigned int njit, enum cudaLibraryOption *lib_options,
                                        void **lib_values, unsigned int nlib)
{
    return sim_record_error(load(library, code, SIZE_MAX, njit, jit_values, jit_options, nlib,
                                 lib_values, lib_options));
}
SIM_RT_ALIAS(cudaLibraryLoadData);

SIM_API cudaError_t cudaLibraryLoadFromFile(cudaLibrary_t *library, const char *file_name,
                                            enum cudaJitOption *jit_options, void **jit_values,
                                            unsigned int njit, enum cudaLibraryOption *lib_options,
                                            void **lib_values, unsigned int nlib)
{
    if (!library || !file_name) return sim_record_error(cudaErrorInvalidValue);
    FILE *f = fopen(file_name, "rb");
    if (!f) return sim_record_error(cudaErrorFileNotFound);
    char *buf = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size + 4096 + 1 > cap) {
            char *nb = realloc(buf, cap = (cap ? cap * 2 : 65536));
            if (!nb) break;
            buf = nb;
        }
        size_t got = fread(buf + size, 1, cap - size - 1, f);
        size += got;
        if (!got) break;
    }
    int failed = ferror(f) || !buf || size < 4;
    fclose(f);
    cudaError_t err = cudaErrorInvalidKernelImage;
    if (!failed) {
        buf[size] = 0; /* PTX is text */
        err =
            load(library, buf, size, njit, jit_values, jit_options, nlib, lib_values, lib_options);
    }
    free(buf);
    return sim_record_error(err);
}
SIM_RT_ALIAS(cudaLibraryLoadFromFile);

static struct library *find(cudaLibrary_t h)
{
    pthread_once(&once, libraries_init);
    return sim_handles_get(libraries, h);
}

SIM_API cudaError_t cudaLibraryUnload(cudaLibrary_t library)
{
    pthread_once(&once, libraries_init);
    struct library *lib = sim_handles_remove(libraries, library);
    if (!lib) return sim_record_error(cudaErrorInvalidResourceHandle);
    sim_module_destroy(lib->mod, 1);
    free(lib);
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaLibraryUnload);

SIM_API cudaError_t cudaLibraryGetKernel(cudaKernel_t *kernel, cudaLibrary_t library,
                                         const char *name)
{
    if (!kernel || !name) return sim_record_error(cudaErrorInvalidValue);
    struct library *lib = find(library);
    if (!lib) return sim_record_error(cudaErrorInvalidResourceHandle);
    sim_modules_rdlock();
    struct sim_kernel *k = sim_module_kernel_named(lib->mod, name);
    if (k) *kernel = k->handle;
    sim_modules_unlock();
    return k ? cudaSuccess : sim_record_error(cudaErrorSymbolNotFound);
}
SIM_RT_ALIAS(cudaLibraryGetKernel);

SIM_API cudaError_t cudaLibraryGetKernelCount(unsigned int *count, cudaLibrary_t library)
{
    if (!count) return sim_record_error(cudaErrorInvalidValue);
    struct library *lib = find(library);
    if (!lib) return sim_record_error(cudaErrorInvalidResourceHandle);
    *count = (unsigned)sim_module_kernel_count(lib->mod);
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaLibraryGetKernelCount);

SIM_API cudaError_t cudaLibraryEnumerateKernels(cudaKernel_t *kernels, unsigned int n,
                                                cudaLibrary_t library)
{
    if (!kernels || !n) return sim_record_error(cudaErrorInvalidValue);
    struct library *lib = find(library);
    if (!lib) return sim_record_error(cudaErrorInvalidResourceHandle);
    sim_modules_rdlock();
    int ok = n <= sim_module_kernel_count(lib->mod);
    for (unsigned i = 0; ok && i < n; i++)
        kernels[i] = sim_module_kernel_at(lib->mod, i)->handle;
    sim_modules_unlock();
    return ok ? cudaSuccess : sim_record_error(cudaErrorInvalidValue);
}
SIM_RT_ALIAS(cudaLibraryEnumerateKernels);

/* A variable of the library on the current device; managed: whether a
 * managed one is asked for. */
static cudaError_t get_var(void **dptr, size_t *bytes, cudaLibrary_t library, const char *name,
                           int managed)
{
    sim_init();
    if (!name) return cudaErrorInvalidValue;
    struct library *lib = find(library);
    if (!lib) return cudaErrorInvalidResourceHandle;
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return cudaErrorNoDevice;
    sim_modules_rdlock();
    struct sim_var *v = sim_module_var_named(lib->mod, name);
    char *addr;
    cudaError_t err = !v || v->managed != managed ? cudaErrorSymbolNotFound
                                                  : sim_var_address(v, dev->ordinal, &addr);
    if (!err && dptr) *dptr = addr;
    if (!err && bytes) *bytes = v->size;
    sim_modules_unlock();
    return err;
}

SIM_API cudaError_t cudaLibraryGetGlobal(void **dptr, size_t *bytes, cudaLibrary_t library,
                                         const char *name)
{
    return sim_record_error(get_var(dptr, bytes, library, name, 0));
}
SIM_RT_ALIAS(cudaLibraryGetGlobal);

SIM_API cudaError_t cudaLibraryGetManaged(void **dptr, size_t *bytes, cudaLibrary_t library,
                                          const char *name)
{
    return sim_record_error(get_var(dptr, bytes, library, name, 1));
}
SIM_RT_ALIAS(cudaLibraryGetManaged);

SIM_API cudaError_t cudaLibraryGetUnifiedFunction(void **fptr, cudaLibrary_t library,
                                                  const char *symbol)
{
    if (!fptr || !symbol) return sim_record_error(cudaErrorInvalidValue);
    if (!find(library)) return sim_record_error(cudaErrorInvalidResourceHandle);
    return sim_record_error(cudaErrorSymbolNotFound);
}
SIM_RT_ALIAS(cudaLibraryGetUnifiedFunction);
