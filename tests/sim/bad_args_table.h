/* bad_args_table.h - the bad-argument table: for each bad call, the code
 * the CUDA runtime returns and the last error it leaves behind.
 *
 * One table, three users: tests/sim/bad_args.c runs it on the sim, the same
 * program built against the real runtime runs it on a GPU (tests/gpu), and
 * the shim's integration tests run it under the preload library, so all
 * three must agree. docs/sim.md lists the sources for each row.
 *
 * FS_BAD_ARGS(X) expands X(name, call, expected code, expected last error)
 * per case (FS_BAD_ARGS_DESTROYED(X) likewise, for destroyed objects); `call` may use `c` (a struct
 * fs_bad_args_ctx *) and `p` (a scratch void * that starts non-NULL). fs_bad_args_setup makes the
 * context: live, freed and destroyed objects to misuse. */
#ifndef FS_BAD_ARGS_TABLE_H
#define FS_BAD_ARGS_TABLE_H

#include <cuda_runtime_api.h>
#include <stdint.h>

struct fs_bad_args_ctx {
    void *dev;         /* a live 1 MiB cudaMalloc block */
    void *dev1000;     /* a live cudaMalloc(1000) block: 1000 bytes to a copy */
    void *freed;       /* a cudaMalloc block already freed */
    void *async_freed; /* a cudaMallocAsync block already freed */
    cudaStream_t dead_stream;
    cudaEvent_t dead_event;
    cudaEvent_t live_event;
    cudaMemPool_t pool;
    char host[256]; /* pageable host memory */
};

/* Returns 0 when the context is ready. */
static inline int fs_bad_args_setup(struct fs_bad_args_ctx *c)
{
    if (cudaMalloc(&c->dev, 1 << 20) || cudaMalloc(&c->dev1000, 1000) ||
        cudaMalloc(&c->freed, 4096) || cudaFree(c->freed))
        return -1;
    if (cudaMallocAsync(&c->async_freed, 4096, 0) || cudaFreeAsync(c->async_freed, 0) ||
        cudaStreamSynchronize(0))
        return -1;
    if (cudaStreamCreate(&c->dead_stream) || cudaStreamDestroy(c->dead_stream)) return -1;
    if (cudaEventCreate(&c->dead_event) || cudaEventDestroy(c->dead_event)) return -1;
    if (cudaEventCreate(&c->live_event) || cudaDeviceGetDefaultMemPool(&c->pool, 0)) return -1;
    return 0;
}

static inline void fs_bad_args_teardown(struct fs_bad_args_ctx *c)
{
    cudaEventDestroy(c->live_event);
    cudaFree(c->dev1000);
    cudaFree(c->dev);
}

static void CUDART_CB fs_bad_args_nop(void *arg)
{
    (void)arg;
}

static void CUDART_CB fs_bad_args_nop_callback(cudaStream_t s, cudaError_t e, void *arg)
{
    (void)s, (void)e, (void)arg;
}

/* `call` for "succeeds and returns NULL": cudaErrorUnknown flags a non-NULL
 * pointer (the runtime itself never returns it for these calls). */
#define FS_NULL_OR_UNKNOWN(call)                                                                   \
    ((call) == cudaSuccess && p == NULL ? cudaSuccess : cudaErrorUnknown)

static const uint64_t fs_bad_args_one = 1;

#define FS_BAD_ARGS(X)                                                                             \
    /* null out-pointers */                                                                        \
    X(malloc_null_out, cudaMalloc(NULL, 16), cudaErrorInvalidValue, cudaErrorInvalidValue)         \
    X(malloc_async_null_out, cudaMallocAsync(NULL, 16, 0), cudaErrorInvalidValue,                  \
      cudaErrorInvalidValue)                                                                       \
    X(malloc_host_null_out, cudaMallocHost(NULL, 16), cudaErrorInvalidValue,                       \
      cudaErrorInvalidValue)                                                                       \
    X(stream_create_null_out, cudaStreamCreate(NULL), cudaErrorInvalidValue,                       \
      cudaErrorInvalidValue)                                                                       \
    X(event_create_null_out, cudaEventCreate(NULL), cudaErrorInvalidValue, cudaErrorInvalidValue)  \
    X(device_count_null_out, cudaGetDeviceCount(NULL), cudaErrorInvalidValue,                      \
      cudaErrorInvalidValue)                                                                       \
    /* cudaMemGetInfo fills what it is given: on a GPU a null out-pointer is no error */           \
    X(mem_get_info_null_free, cudaMemGetInfo(NULL, (size_t *)&p), cudaSuccess, cudaSuccess)        \
    X(mem_get_info_null_total, cudaMemGetInfo((size_t *)&p, NULL), cudaSuccess, cudaSuccess)       \
    X(pointer_attributes_null_out, cudaPointerGetAttributes(NULL, c->dev), cudaErrorInvalidValue,  \
      cudaErrorInvalidValue)                                                                       \
    X(elapsed_time_null_out, cudaEventElapsedTime(NULL, c->live_event, c->live_event),             \
      cudaErrorInvalidValue, cudaErrorInvalidValue)                                                \
    /* size 0 and sizes near SIZE_MAX */                                                           \
    X(malloc_zero, FS_NULL_OR_UNKNOWN(cudaMalloc(&p, 0)), cudaSuccess, cudaSuccess)                \
    X(malloc_async_zero, FS_NULL_OR_UNKNOWN(cudaMallocAsync(&p, 0, 0)), cudaSuccess, cudaSuccess)  \
    X(malloc_size_max, cudaMalloc(&p, SIZE_MAX), cudaErrorMemoryAllocation,                        \
      cudaErrorMemoryAllocation)                                                                   \
    X(malloc_size_max_minus_4k, cudaMalloc(&p, SIZE_MAX - 4095), cudaErrorMemoryAllocation,        \
      cudaErrorMemoryAllocation)                                                                   \
    X(malloc_async_size_max, cudaMallocAsync(&p, SIZE_MAX, 0), cudaErrorMemoryAllocation,          \
      cudaErrorMemoryAllocation)                                                                   \
    X(memcpy_zero_bytes, cudaMemcpy(c->dev, c->host, 0, cudaMemcpyHostToDevice), cudaSuccess,      \
      cudaSuccess)                                                                                 \
    /* frees of NULL, unknown, interior and already freed pointers */                              \
    X(free_null, cudaFree(NULL), cudaSuccess, cudaSuccess)                                         \
    X(free_async_null, cudaFreeAsync(NULL, 0), cudaSuccess, cudaSuccess)                           \
    X(free_interior, cudaFree((char *)c->dev + 256), cudaErrorInvalidValue, cudaErrorInvalidValue) \
    X(free_host_pointer, cudaFree(c->host), cudaErrorInvalidValue, cudaErrorInvalidValue)          \
    X(free_double, cudaFree(c->freed), cudaErrorInvalidValue, cudaErrorInvalidValue)               \
    X(free_async_interior, cudaFreeAsync((char *)c->dev + 256, 0), cudaErrorInvalidValue,          \
      cudaErrorInvalidValue)                                                                       \
    X(free_async_double, cudaFreeAsync(c->async_freed, 0), cudaErrorInvalidValue,                  \
      cudaErrorInvalidValue)                                                                       \
    X(free_host_unknown, cudaFreeHost(c->host), cudaErrorInvalidValue, cudaErrorInvalidValue)      \
    X(host_unregister_unknown, cudaHostUnregister(c->host), cudaErrorHostMemoryNotRegistered,      \
      cudaErrorHostMemoryNotRegistered)                                                            \
    /* devices, copies, pools */                                                                   \
    X(set_device_out_of_range, cudaSetDevice(9999), cudaErrorInvalidDevice,                        \
      cudaErrorInvalidDevice)                                                                      \
    X(set_device_negative, cudaSetDevice(-1), cudaErrorInvalidDevice, cudaErrorInvalidDevice)      \
    X(properties_bad_device, cudaGetDeviceProperties((struct cudaDeviceProp *)c->host, 9999),      \
      cudaErrorInvalidDevice, cudaErrorInvalidDevice)                                              \
    X(default_pool_bad_device, cudaDeviceGetDefaultMemPool((cudaMemPool_t *)&p, 9999),             \
      cudaErrorInvalidDevice, cudaErrorInvalidDevice)                                              \
    X(memcpy_bad_kind, cudaMemcpy(c->dev, c->host, 16, (enum cudaMemcpyKind)42),                   \
      cudaErrorInvalidMemcpyDirection, cudaErrorInvalidMemcpyDirection)                            \
    X(memcpy_null_dst, cudaMemcpy(NULL, c->host, 16, cudaMemcpyDefault), cudaErrorInvalidValue,    \
      cudaErrorInvalidValue)                                                                       \
    X(memcpy_past_allocation_end,                                                                  \
      cudaMemcpy(c->host, (char *)c->dev + (1 << 20) - 16, 64, cudaMemcpyDeviceToHost),            \
      cudaErrorInvalidValue, cudaErrorInvalidValue)                                                \
    /* copies and sets may reach the size asked for, not the 512-byte granule */                   \
    X(memcpy_to_requested_end,                                                                     \
      cudaMemcpy((char *)c->dev1000 + 744, c->host, 256, cudaMemcpyHostToDevice), cudaSuccess,     \
      cudaSuccess)                                                                                 \
    X(memcpy_to_granule_end,                                                                       \
      cudaMemcpy((char *)c->dev1000 + 768, c->host, 256, cudaMemcpyHostToDevice),                  \
      cudaErrorInvalidValue, cudaErrorInvalidValue)                                                \
    X(memset_to_requested_end, cudaMemset(c->dev1000, 0, 1000), cudaSuccess, cudaSuccess)          \
    X(memset_one_past_requested, cudaMemset(c->dev1000, 0, 1001), cudaErrorInvalidValue,           \
      cudaErrorInvalidValue)                                                                       \
    X(memcpy_one_past_requested,                                                                   \
      cudaMemcpy(c->host, (char *)c->dev1000 + 999, 2, cudaMemcpyDeviceToHost),                    \
      cudaErrorInvalidValue, cudaErrorInvalidValue)                                                \
    X(memset_null, cudaMemset(NULL, 0, 16), cudaErrorInvalidValue, cudaErrorInvalidValue)          \
    X(pool_used_high_nonzero,                                                                      \
      cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrUsedMemHigh, (void *)&fs_bad_args_one),      \
      cudaErrorInvalidValue, cudaErrorInvalidValue)

/* Destroyed streams and events: what the sim and the shim answer. On a GPU
 * using a destroyed handle is undefined (the handle points at memory the
 * runtime freed): NVIDIA's runtime crashed on one of these rows (driver 580,
 * CUDA 13.0), so a program built against it runs them only one at a time, by
 * name (bad_args.c, FS_BAD_ARGS_ONLY), to see what the GPU does. */
#define FS_BAD_ARGS_DESTROYED(X)                                                                   \
    X(stream_sync_destroyed, cudaStreamSynchronize(c->dead_stream),                                \
      cudaErrorInvalidResourceHandle, cudaErrorInvalidResourceHandle)                              \
    X(stream_query_destroyed, cudaStreamQuery(c->dead_stream), cudaErrorInvalidResourceHandle,     \
      cudaErrorInvalidResourceHandle)                                                              \
    X(stream_destroy_twice, cudaStreamDestroy(c->dead_stream), cudaErrorInvalidResourceHandle,     \
      cudaErrorInvalidResourceHandle)                                                              \
    X(host_func_destroyed_stream, cudaLaunchHostFunc(c->dead_stream, fs_bad_args_nop, NULL),       \
      cudaErrorInvalidResourceHandle, cudaErrorInvalidResourceHandle)                              \
    X(malloc_async_destroyed_stream, cudaMallocAsync(&p, 16, c->dead_stream),                      \
      cudaErrorInvalidResourceHandle, cudaErrorInvalidResourceHandle)                              \
    X(callback_destroyed_stream,                                                                   \
      cudaStreamAddCallback(c->dead_stream, fs_bad_args_nop_callback, NULL, 0),                    \
      cudaErrorInvalidResourceHandle, cudaErrorInvalidResourceHandle)                              \
    /* the arguments are checked before the stream */                                              \
    X(callback_null_destroyed_stream, cudaStreamAddCallback(c->dead_stream, NULL, NULL, 0),        \
      cudaErrorInvalidValue, cudaErrorInvalidValue)                                                \
    X(host_func_null_destroyed_stream, cudaLaunchHostFunc(c->dead_stream, NULL, NULL),             \
      cudaErrorInvalidValue, cudaErrorInvalidValue)                                                \
    X(get_flags_null_destroyed_stream, cudaStreamGetFlags(c->dead_stream, NULL),                   \
      cudaErrorInvalidValue, cudaErrorInvalidValue)                                                \
    X(memcpy_async_bad_kind_destroyed_stream,                                                      \
      cudaMemcpyAsync(c->dev, c->host, 16, (enum cudaMemcpyKind)42, c->dead_stream),               \
      cudaErrorInvalidMemcpyDirection, cudaErrorInvalidMemcpyDirection)                            \
    X(free_async_null_destroyed_stream, cudaFreeAsync(NULL, c->dead_stream),                       \
      cudaErrorInvalidResourceHandle, cudaErrorInvalidResourceHandle)                              \
    X(event_record_destroyed, cudaEventRecord(c->dead_event, 0), cudaErrorInvalidResourceHandle,   \
      cudaErrorInvalidResourceHandle)                                                              \
    X(event_query_destroyed, cudaEventQuery(c->dead_event), cudaErrorInvalidResourceHandle,        \
      cudaErrorInvalidResourceHandle)                                                              \
    X(event_destroy_twice, cudaEventDestroy(c->dead_event), cudaErrorInvalidResourceHandle,        \
      cudaErrorInvalidResourceHandle)

#endif /* FS_BAD_ARGS_TABLE_H */
