/* driver.h - what the files of the simulated driver (libcuda.so.1) share.
 *
 * The driver works on the device model of the simulated runtime
 * (../internal.h), reached through libcudart.so.13's private node
 * FSDPSHIM_SIM_PRIVATE (sim/driver.c says why this way round). Driver calls
 * report CUresult codes and never touch the runtime's last error. */
#ifndef SIM_CUDA_DRIVER_H
#define SIM_CUDA_DRIVER_H

#include "../internal.h"

/* Exports `legacy`, an older ABI name of an entry point whose signature did
 * not change (cuCtxPushCurrent for cuCtxPushCurrent_v2), as an alias of
 * `impl`. cuda.h defines the old names as macros for the new; # and ##
 * take the argument as written, so the symbol gets the old name. */
#define SIM_CU_ALIAS(legacy, impl)                                                                 \
    extern __typeof__(impl) sim_alias_##legacy __asm__(#legacy)                                    \
        __attribute__((alias(#impl), visibility("default")))

/* ---- context.c: initialisation, devices, contexts ---- */
/* CUDA_SUCCESS once the driver is initialised: by cuInit, or by the
 * runtime's first call (the runtime initialises the driver on a GPU too);
 * else CUDA_ERROR_NOT_INITIALIZED. */
CUresult sim_cu_ready(void);
/* The device of the thread's current context; CUDA_ERROR_INVALID_CONTEXT
 * when it has none (after sim_cu_ready). */
CUresult sim_cu_current_device(struct fs_device **out);
/* The primary context of a device (NULL for an invalid ordinal), and the
 * ordinal of a context (-1 for anything that is not one). */
CUcontext sim_primary_ctx(int device);
int sim_ctx_device(CUcontext ctx);

/* ---- the per-thread default stream variants, which cuda.h declares only
 * for builds with CUDA_API_PER_THREAD_DEFAULT_STREAM ---- */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream stream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream);
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int value, size_t count, CUstream stream);
CUresult cuStreamWriteValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                      unsigned int flags);
CUresult cuLaunchKernel_ptsz(CUfunction func, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem,
                             CUstream stream, void **params, void **extra);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction func, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int smem, CUstream stream,
                                        void **params);

#endif /* SIM_CUDA_DRIVER_H */
