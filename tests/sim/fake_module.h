/* fake_module.h - what nvcc's generated host code does for a .cu file with
 * kernels and __device__ variables, written out in C for the sim's tests:
 * the registration ABI (crt/host_runtime.h, which is C++ only, so its
 * prototypes are repeated here), a fat binary wrapper as nvcc emits it, and
 * host stubs that pop the <<<>>> configuration and launch through
 * __cudaGetKernel/__cudaLaunchKernel. The sim reads no device code, so the
 * fat binary carries none. */
#ifndef FS_TEST_FAKE_MODULE_H
#define FS_TEST_FAKE_MODULE_H

#include <stddef.h>

#include <cuda_runtime_api.h>
#include <fatbinary_section.h>

void **__cudaRegisterFatBinary(void *fat_cubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                            const char *device_name, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bdim, dim3 *gdim, int *wsize);
void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *device_name,
                       int ext, size_t size, int constant, int global);
char __cudaInitModule(void **handle);
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem,
                                     struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *smem, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t smem,
                               cudaStream_t stream);

/* kernel<<<grid, block, smem, stream>>>(args...), as nvcc expands it. */
#define FS_LAUNCH(stub, grid, block, smem, stream, ...)                                            \
    (__cudaPushCallConfiguration((grid), (block), (smem), (stream)) ? (void)0 : stub(__VA_ARGS__))

/* The body of a host stub: pop the configuration, launch by handle. */
#define FS_STUB_BODY(stub, ...)                                                                    \
    do {                                                                                           \
        static cudaKernel_t handle;                                                                \
        static int looked_up;                                                                      \
        void *args[] = {__VA_ARGS__};                                                              \
        dim3 grid, block;                                                                          \
        size_t smem;                                                                               \
        cudaStream_t stream;                                                                       \
        if (!looked_up) looked_up = __cudaGetKernel(&handle, (const void *)stub) == cudaSuccess;   \
        if (__cudaPopCallConfiguration(&grid, &block, &smem, &stream) != cudaSuccess) return;      \
        (void)__cudaLaunchKernel(handle, grid, block, args, smem, stream);                         \
    } while (0)

/* A fat binary header with no entries, and the wrapper nvcc points the
 * registration at (__fatDeviceText). */
static const unsigned long long fs_fake_fatbin[2] = {0x00100001BA55ED50ull, 0};
static const __fatBinC_Wrapper_t fs_fake_wrapper = {FATBINC_MAGIC, FATBINC_VERSION, fs_fake_fatbin,
                                                    NULL};

#endif /* FS_TEST_FAKE_MODULE_H */
