/* module.c - the driver's module loader and libraries: cuModuleLoad*,
 * cuModuleUnload, cuModuleGetFunction, cuModuleGetGlobal and the rest of
 * cuModule*, and cuLibrary* with cuKernelGetFunction.
 *
 * The sim runs no device code, but it reads what an image declares
 * (../core/image.c: the kernels and variables of a cubin, of PTX text, or of
 * the first uncompressed one in a fat binary), which is all a module needs
 * to be: functions to launch, ordered on their stream and computing nothing
 * (launch.c), and globals with device memory of their own, starting from a
 * cubin's initialised data. So a module is a library of the runtime's
 * (cudaLibraryLoadData, whose work each call here is, through SIM_RT): a
 * CUmodule and a CUlibrary are both a cudaLibrary_t, a CUfunction and a
 * CUkernel both a cudaKernel_t, and a function launches on any device, its
 * module loaded there on first use, as lazy loading does. Options to the
 * JIT compiler are accepted and have nothing to compile: the log buffers
 * they name are left empty. An image the sim cannot read is
 * CUDA_ERROR_INVALID_IMAGE, one whose every entry is compressed (the
 * toolkit's default for large fat binaries) CUDA_ERROR_NOT_SUPPORTED. */
#include <stdlib.h>
#include <string.h>

#include "driver_internal.h"

#define LIB(m) ((cudaLibrary_t)(m))

/* The calls a module and a library share (a CUmodule is a CUlibrary, a
 * CUfunction a CUkernel): each is the runtime's library call once the
 * driver is initialised. */
static CUresult library_unload(cudaLibrary_t lib)
{
    CUresult res = sim_cu_ready();
    return res ? res : SIM_RT(sim_rt_cudaLibraryUnload(lib));
}

static CUresult library_kernel(void *kernel, cudaLibrary_t lib, const char *name)
{
    CUresult res = sim_cu_ready();
    return res ? res : SIM_RT(sim_rt_cudaLibraryGetKernel((cudaKernel_t *)kernel, lib, name));
}

static CUresult library_kernel_count(unsigned int *count, cudaLibrary_t lib)
{
    CUresult res = sim_cu_ready();
    return res ? res : SIM_RT(sim_rt_cudaLibraryGetKernelCount(count, lib));
}

static CUresult library_kernels(void *kernels, unsigned int n, cudaLibrary_t lib)
{
    CUresult res = sim_cu_ready();
    return res ? res : SIM_RT(sim_rt_cudaLibraryEnumerateKernels((cudaKernel_t *)kernels, n, lib));
}

/* A global's (or a managed variable's) address in the current context. */
static CUresult library_global(CUdeviceptr *dptr, size_t *bytes, cudaLibrary_t lib,
                               const char *name, int managed)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    return SIM_RT(managed ? sim_rt_cudaLibraryGetManaged((void **)dptr, bytes, lib, name)
                          : sim_rt_cudaLibraryGetGlobal((void **)dptr, bytes, lib, name));
}

/* What the JIT options given ask to be written back: nothing was compiled,
 * so every log is empty and took no time. */
static CUresult jit_options(unsigned n, CUjit_option *options, void **values)
{
    if (n && (!options || !values)) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        switch (options[i]) {
        case CU_JIT_INFO_LOG_BUFFER:
        case CU_JIT_ERROR_LOG_BUFFER:
            if (values[i]) *(char *)values[i] = '\0';
            break;
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
            values[i] = (void *)(uintptr_t)0; /* bytes written */
            break;
        case CU_JIT_WALL_TIME: {
            float ms = 0;
            memcpy(&values[i], &ms, sizeof ms);
            break;
        }
        default:
            if ((unsigned)options[i] >= CU_JIT_NUM_OPTIONS) return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

/* Loads an image in the current context. */
static CUresult load_data(CUmodule *module, const void *image)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
    return SIM_RT(
        sim_rt_cudaLibraryLoadData((cudaLibrary_t *)module, image, NULL, NULL, 0, NULL, NULL, 0));
}

SIM_API CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    return load_data(module, image);
}

SIM_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n,
                                    CUjit_option *options, void **values)
{
    CUresult res = jit_options(n, options, values);
    return res ? res : load_data(module, image);
}

SIM_API CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatbin)
{
    return load_data(module, fatbin);
}

SIM_API CUresult cuModuleLoad(CUmodule *module, const char *path)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    if (!module || !path) return CUDA_ERROR_INVALID_VALUE;
    return SIM_RT(sim_rt_cudaLibraryLoadFromFile((cudaLibrary_t *)module, path, NULL, NULL, 0, NULL,
                                                 NULL, 0));
}

/* Waits for the devices the module was loaded on (its globals may still be
 * in use there), as the runtime's unload does. */
SIM_API CUresult cuModuleUnload(CUmodule module)
{
    return library_unload(LIB(module));
}

SIM_API CUresult cuModuleGetFunction(CUfunction *func, CUmodule module, const char *name)
{
    return library_kernel(func, LIB(module), name);
}

SIM_API CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule module)
{
    return library_kernel_count(count, LIB(module));
}

SIM_API CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int n, CUmodule module)
{
    return library_kernels(functions, n, LIB(module));
}

/* A global's address in the current context (its module's storage on that
 * device, made on first use). */
SIM_API CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule module,
                                      const char *name)
{
    return library_global(dptr, bytes, LIB(module), name, 0);
}

/* Lazy unless CUDA_MODULE_LOADING=EAGER, the default since CUDA 12.2; the
 * sim loads a module's globals on first use either way. */
SIM_API CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!mode) return CUDA_ERROR_INVALID_VALUE;
    const char *env = getenv("CUDA_MODULE_LOADING");
    *mode = env && strcmp(env, "EAGER") == 0 ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

/* ---- libraries: the runtime's, context-independent ---- */

static CUresult library_options(unsigned njit, CUjit_option *jit, void **jit_values, unsigned nlib,
                                CUlibraryOption *lib, void **lib_values)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (nlib && (!lib || !lib_values)) return CUDA_ERROR_INVALID_VALUE;
    return jit_options(njit, jit, jit_values);
}

SIM_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jit,
                                   void **jit_values, unsigned int njit, CUlibraryOption *lib,
                                   void **lib_values, unsigned int nlib)
{
    CUresult res = library_options(njit, jit, jit_values, nlib, lib, lib_values);
    if (res) return res;
    return SIM_RT(
        sim_rt_cudaLibraryLoadData((cudaLibrary_t *)library, code, NULL, NULL, 0, NULL, NULL, 0));
}

SIM_API CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *path, CUjit_option *jit,
                                       void **jit_values, unsigned int njit, CUlibraryOption *lib,
                                       void **lib_values, unsigned int nlib)
{
    CUresult res = library_options(njit, jit, jit_values, nlib, lib, lib_values);
    if (res) return res;
    return SIM_RT(sim_rt_cudaLibraryLoadFromFile((cudaLibrary_t *)library, path, NULL, NULL, 0,
                                                 NULL, NULL, 0));
}

SIM_API CUresult cuLibraryUnload(CUlibrary library)
{
    return library_unload(LIB(library));
}

SIM_API CUresult cuLibraryGetKernel(CUkernel *kernel, CUlibrary library, const char *name)
{
    return library_kernel(kernel, LIB(library), name);
}

SIM_API CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary library)
{
    return library_kernel_count(count, LIB(library));
}

SIM_API CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int n, CUlibrary library)
{
    return library_kernels(kernels, n, LIB(library));
}

SIM_API CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
                                    const char *name)
{
    return library_global(dptr, bytes, LIB(library), name, 0);
}

SIM_API CUresult cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
                                     const char *name)
{
    return library_global(dptr, bytes, LIB(library), name, 1);
}

SIM_API CUresult cuLibraryGetUnifiedFunction(void **fptr, CUlibrary library, const char *symbol)
{
    CUresult res = sim_cu_ready();
    return res ? res : SIM_RT(sim_rt_cudaLibraryGetUnifiedFunction(fptr, LIB(library), symbol));
}

/* A kernel's function in the current context: the same handle here. */
SIM_API CUresult cuKernelGetFunction(CUfunction *func, CUkernel kernel)
{
    struct sim_device *dev;
    CUresult res = sim_cu_ready_in_context(&dev);
    if (res) return res;
    if (!func) return CUDA_ERROR_INVALID_VALUE;
    struct cudaFuncAttributes attr;
    if ((res = sim_cu_result(sim_drv_func_attributes(&attr, kernel, dev->ordinal)))) return res;
    *func = (CUfunction)kernel;
    return CUDA_SUCCESS;
}
