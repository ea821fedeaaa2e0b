/* absent.c - driver families the sim does not offer, each answering what a
 * GPU without the feature answers, so that a caller takes its fallback:
 *
 *   green contexts        CUDA_ERROR_NOT_SUPPORTED (cuDeviceGetDevResource,
 *                         cuCtxGetDevResource and the rest): the sim does
 *                         not partition SMs; PyTorch's
 *                         torch.cuda.green_contexts raises
 *   multicast objects     CUDA_ERROR_NOT_SUPPORTED, with
 *                         CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED = 0, as on
 *                         an H100 without a multicast-capable NVSwitch;
 *                         PyTorch's symmetric memory checks the attribute
 *   dma-buf export        CUDA_ERROR_NOT_SUPPORTED from
 *                         cuMemGetHandleForAddressRange, with
 *                         CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0
 *   decompression         CUDA_ERROR_NOT_SUPPORTED from
 *                         cuMemBatchDecompressAsync, with
 *                         CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK
 *                         = 0, as on an H100 (the engine is Blackwell's)
 *   the linker            CUDA_ERROR_NOT_SUPPORTED for starting a link (the
 *                         sim compiles nothing), so no CUlinkState ever
 *                         exists and every call taking one is
 *                         CUDA_ERROR_INVALID_HANDLE; the module loader,
 *                         which needs no compiler, is module.c
 *
 * and the two families the sim can honour without device code:
 *
 *   driver log callbacks  registered and unregistered for real; the sim's
 *                         driver never logs, so none is ever called
 *   tensor maps           cuTensorMapEncodeTiled checks its arguments as
 *                         documented and encodes them into the opaque map,
 *                         which only a kernel (computing nothing here) reads */
#include <stdlib.h>
#include <string.h>

#include "driver_internal.h"

SIM_API CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource *resource,
                                        CUdevResourceType type)
{
    (void)device, (void)resource, (void)type;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *groups,
                                             const CUdevResource *input, CUdevResource *remaining,
                                             unsigned int flags, unsigned int min_count)
{
    (void)result, (void)groups, (void)input, (void)remaining, (void)flags, (void)min_count;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *desc, CUdevResource *resources,
                                           unsigned int count)
{
    (void)desc, (void)resources, (void)count;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuGreenCtxCreate(CUgreenCtx *ctx, CUdevResourceDesc desc, CUdevice dev,
                                  unsigned int flags)
{
    (void)ctx, (void)desc, (void)dev, (void)flags;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuGreenCtxDestroy(CUgreenCtx ctx)
{
    (void)ctx;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuCtxFromGreenCtx(CUcontext *ctx, CUgreenCtx green)
{
    (void)ctx, (void)green;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuGreenCtxStreamCreate(CUstream *stream, CUgreenCtx green, unsigned int flags,
                                        int priority)
{
    (void)stream, (void)green, (void)flags, (void)priority;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuMulticastCreate(CUmemGenericAllocationHandle *handle,
                                   const CUmulticastObjectProp *prop)
{
    (void)handle, (void)prop;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuMulticastAddDevice(CUmemGenericAllocationHandle handle, CUdevice dev)
{
    (void)handle, (void)dev;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuMulticastBindMem(CUmemGenericAllocationHandle handle, size_t offset,
                                    CUmemGenericAllocationHandle mem, size_t mem_offset,
                                    size_t size, unsigned long long flags)
{
    (void)handle, (void)offset, (void)mem, (void)mem_offset, (void)size, (void)flags;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuMulticastUnbind(CUmemGenericAllocationHandle handle, CUdevice dev, size_t offset,
                                   size_t size)
{
    (void)handle, (void)dev, (void)offset, (void)size;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuCtxGetDevResource(CUcontext ctx, CUdevResource *resource, CUdevResourceType type)
{
    (void)ctx, (void)resource, (void)type;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr ptr, size_t size,
                                               CUmemRangeHandleType type, unsigned long long flags)
{
    (void)handle, (void)ptr, (void)size, (void)type, (void)flags;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuMemBatchDecompressAsync(CUmemDecompressParams *params, size_t count,
                                           unsigned int flags, size_t *error_index, CUstream stream)
{
    (void)params, (void)count, (void)flags, (void)stream;
    if (error_index) *error_index = SIZE_MAX; /* no single operation failed */
    return CUDA_ERROR_NOT_SUPPORTED;
}
SIM_CU_ALIAS(cuMemBatchDecompressAsync_ptsz, cuMemBatchDecompressAsync);

SIM_API CUresult cuLinkCreate_v2(unsigned int count, CUjit_option *options, void **values,
                                 CUlinkState *state)
{
    (void)count, (void)options, (void)values, (void)state;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_API CUresult cuLinkComplete(CUlinkState state, void **cubin, size_t *size)
{
    (void)state, (void)cubin, (void)size;
    return CUDA_ERROR_INVALID_HANDLE;
}

SIM_API CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                  const char *name, unsigned int count, CUjit_option *options,
                                  void **values)
{
    (void)state, (void)type, (void)data, (void)size, (void)name, (void)count, (void)options;
    (void)values;
    return CUDA_ERROR_INVALID_HANDLE;
}

/* A registered log callback: the handle is the entry itself, found in the
 * list before it is trusted. */
struct CUlogsCallbackEntry_st {
    struct CUlogsCallbackEntry_st *next;
    CUlogsCallback fn;
    void *user;
};

static pthread_mutex_t logs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUlogsCallbackEntry_st *callbacks;

SIM_API CUresult cuLogsRegisterCallback(CUlogsCallback fn, void *user, CUlogsCallbackHandle *out)
{
    if (!fn || !out) return CUDA_ERROR_INVALID_VALUE;
    struct CUlogsCallbackEntry_st *e = malloc(sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&logs_mu);
    *e = (struct CUlogsCallbackEntry_st){callbacks, fn, user};
    callbacks = e;
    pthread_mutex_unlock(&logs_mu);
    *out = e;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuLogsUnregisterCallback(CUlogsCallbackHandle handle)
{
    pthread_mutex_lock(&logs_mu);
    struct CUlogsCallbackEntry_st **pp = &callbacks;
    while (*pp && *pp != handle)
        pp = &(*pp)->next;
    struct CUlogsCallbackEntry_st *e = *pp;
    if (e) *pp = e->next;
    pthread_mutex_unlock(&logs_mu);
    free(e);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The limits cuda.h documents for cuTensorMapEncodeTiled. */
SIM_API CUresult cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank,
                                        void *address, const cuuint64_t *dims,
                                        const cuuint64_t *strides, const cuuint32_t *box,
                                        const cuuint32_t *element_strides,
                                        CUtensorMapInterleave interleave,
                                        CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                        CUtensorMapFloatOOBfill fill)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    unsigned min_rank = interleave == CU_TENSOR_MAP_INTERLEAVE_NONE ? 1 : 3;
    if (!map || !address || !dims || !box || !element_strides || (rank > 1 && !strides) ||
        rank < min_rank || rank > 5 || (unsigned)type > CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B ||
        (uintptr_t)address % (interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16))
        return CUDA_ERROR_INVALID_VALUE;
    for (cuuint32_t i = 0; i < rank; i++) {
        if (dims[i] == 0 || dims[i] > ((cuuint64_t)1 << 32) || box[i] == 0 || box[i] > 256 ||
            element_strides[i] == 0 || element_strides[i] > 8)
            return CUDA_ERROR_INVALID_VALUE;
        if (i + 1 < rank && (strides[i] % 16 || strides[i] >= ((cuuint64_t)1 << 40)))
            return CUDA_ERROR_INVALID_VALUE;
    }
    /* The encoding is opaque: the arguments in order, which is all a
     * kernel that computes nothing could ever read. */
    memset(map, 0, sizeof *map);
    cuuint64_t *w = map->opaque;
    w[0] = (uintptr_t)address;
    w[1] = (cuuint64_t)type | (cuuint64_t)rank << 8 | (cuuint64_t)interleave << 16 |
           (cuuint64_t)swizzle << 24 | (cuuint64_t)l2 << 32 | (cuuint64_t)fill << 40;
    for (cuuint32_t i = 0; i < rank; i++) {
        w[2 + i] = dims[i];
        w[7 + i] = i + 1 < rank ? strides[i] : 0;
    }
    return CUDA_SUCCESS;
}
