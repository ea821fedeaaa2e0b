/* runtime.h - what the runtime's entry points share among themselves
 * beyond the core (core/shim.h): the stream pools (stream_pool.c). */
#ifndef FS_RUNTIME_H
#define FS_RUNTIME_H

#include "../core/shim.h"

/* ---- stream_pool.c ---- */
cudaError_t fs_stream_pool_create(cudaStream_t *out, unsigned flags, int priority);
cudaError_t fs_stream_pool_destroy(cudaStream_t s);
/* Forget pooled streams of `device` (cudaDeviceReset), or all (-1, fork). */
void fs_stream_pool_reset(int device);

#endif /* FS_RUNTIME_H */
