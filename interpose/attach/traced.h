/* traced.h - the trace-only functions of the hook table (traced.c): what
 * the loaded objects' slots hold, and what driver lookups hand out, while
 * `fsdpshim attach` traces through the slots (got.c). */
#ifndef FS_TRACED_H
#define FS_TRACED_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

/* Trace-only: call the real function, write what succeeded (passive.h). */
cudaError_t fs_traced_cuda_malloc(void **p, size_t size);
cudaError_t fs_traced_cuda_free(void *p);
cudaError_t fs_traced_cuda_malloc_async(void **p, size_t size, cudaStream_t s);
cudaError_t fs_traced_cuda_malloc_async_ptsz(void **p, size_t size, cudaStream_t s);
cudaError_t fs_traced_cuda_free_async(void *p, cudaStream_t s);
cudaError_t fs_traced_cuda_free_async_ptsz(void *p, cudaStream_t s);
cudaError_t fs_traced_cuda_malloc_from_pool(void **p, size_t size, cudaMemPool_t pool,
                                            cudaStream_t s);
cudaError_t fs_traced_cuda_stream_create(cudaStream_t *s);
cudaError_t fs_traced_cuda_stream_create_with_flags(cudaStream_t *s, unsigned flags);
cudaError_t fs_traced_cuda_stream_create_with_priority(cudaStream_t *s, unsigned flags,
                                                       int priority);
cudaError_t fs_traced_cuda_stream_destroy(cudaStream_t s);
CUresult fs_traced_cu_mem_alloc(CUdeviceptr *dptr, size_t size);
CUresult fs_traced_cu_mem_free(CUdeviceptr dptr);
CUresult fs_traced_cu_mem_alloc_async(CUdeviceptr *dptr, size_t size, CUstream s);
CUresult fs_traced_cu_mem_alloc_async_ptsz(CUdeviceptr *dptr, size_t size, CUstream s);
CUresult fs_traced_cu_mem_free_async(CUdeviceptr dptr, CUstream s);
CUresult fs_traced_cu_mem_free_async_ptsz(CUdeviceptr dptr, CUstream s);
ncclResult_t fs_traced_nccl_mem_alloc(void **p, size_t size);
ncclResult_t fs_traced_nccl_mem_free(void *p);

#endif /* FS_TRACED_H */
