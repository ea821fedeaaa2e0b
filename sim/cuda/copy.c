/* copy.c - the driver's copies and sets: cuMemcpy* (linear, peer, 2-D, 3-D
 * and batched) and cuMemsetD8/D16/D32 (linear and 2-D), each synchronous
 * form with its _ptds variant and each Async form with its _ptsz variant.
 *
 * Each is one move of the runtime's model (../core/copy_engine.c, through
 * sim_drv_copy), so it is an op on its stream in order with kernels, events
 * and the runtime's copies, really moves or sets the bytes (nothing reaches
 * device memory in a dry run, FSDPSHIM_SIM_DATA=0), and blocks the caller
 * exactly when the runtime's counterpart does: a copy touching pageable
 * host memory always, a synchronous copy unless both sides are device
 * memory, a synchronous set only on pinned host memory. What the driver
 * adds is its own argument checks, in its codes: the memory types of the
 * 2-D and 3-D descriptors (a side named device memory must be memory the
 * device reaches; there are no CUDA arrays in the sim, so a CUarray operand
 * is CUDA_ERROR_INVALID_HANDLE), pitches (at least the row's extent, at
 * most CU_DEVICE_ATTRIBUTE_MAX_PITCH), the alignment cuda.h documents for
 * 16- and 32-bit sets (pointer and pitch), and the batches' attributes. */
#include <stdbool.h>
#include <stdlib.h>

#include "driver_internal.h"

#define DEVICE(p) ((void *)(uintptr_t)(p))

/* Initialised, and, for the default streams, a current context. */
static CUresult ready_on(CUstream s)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_stream_context(s);
}

static CUresult move(const struct sim_copy *c, CUstream s, int pt, int async)
{
    CUresult res = ready_on(s);
    return res ? res : sim_cu_result(sim_drv_copy(c, (cudaStream_t)s, pt, async));
}

/* A one-row copy of n bytes. */
static CUresult copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, CUstream s,
                     int pt, int async)
{
    struct sim_copy c = {dst, src, n, 1, 1, n, n, 1, 1, 0, 1, kind};
    return move(&c, s, pt, async);
}

/* ---- linear copies ---- */

#define COPY_PAIR(name, pt_name, params, dst, src, kind, stream, async)                            \
    SIM_API CUresult name params                                                                   \
    {                                                                                              \
        return copy(dst, src, n, kind, stream, 0, async);                                          \
    }                                                                                              \
    SIM_API CUresult pt_name params                                                                \
    {                                                                                              \
        return copy(dst, src, n, kind, stream, 1, async);                                          \
    }

/* Unified addressing: the pointers say what they are. */
COPY_PAIR(cuMemcpy, cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), DEVICE(dst),
          DEVICE(src), cudaMemcpyDefault, NULL, 0)
COPY_PAIR(cuMemcpyAsync, cuMemcpyAsync_ptsz,
          (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), DEVICE(dst), DEVICE(src),
          cudaMemcpyDefault, s, 1)
COPY_PAIR(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, (CUdeviceptr dst, const void *src, size_t n),
          DEVICE(dst), src, cudaMemcpyHostToDevice, NULL, 0)
COPY_PAIR(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, (void *dst, CUdeviceptr src, size_t n), dst,
          DEVICE(src), cudaMemcpyDeviceToHost, NULL, 0)
COPY_PAIR(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n),
          DEVICE(dst), DEVICE(src), cudaMemcpyDeviceToDevice, NULL, 0)
COPY_PAIR(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz,
          (CUdeviceptr dst, const void *src, size_t n, CUstream s), DEVICE(dst), src,
          cudaMemcpyHostToDevice, s, 1)
COPY_PAIR(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz,
          (void *dst, CUdeviceptr src, size_t n, CUstream s), dst, DEVICE(src),
          cudaMemcpyDeviceToHost, s, 1)
COPY_PAIR(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz,
          (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), DEVICE(dst), DEVICE(src),
          cudaMemcpyDeviceToDevice, s, 1)

/* Between devices: every device of the sim reaches every other's memory,
 * so the contexts are only checked. */
static CUresult copy_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                          size_t n, CUstream s, int pt, int async)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (sim_ctx_device(dst_ctx) < 0 || sim_ctx_device(src_ctx) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    return copy(DEVICE(dst), DEVICE(src), n, cudaMemcpyDeviceToDevice, s, pt, async);
}

SIM_API CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                              CUcontext src_ctx, size_t n)
{
    return copy_peer(dst, dst_ctx, src, src_ctx, n, NULL, 0, 0);
}

SIM_API CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                   CUcontext src_ctx, size_t n)
{
    return copy_peer(dst, dst_ctx, src, src_ctx, n, NULL, 1, 0);
}

SIM_API CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                   CUcontext src_ctx, size_t n, CUstream s)
{
    return copy_peer(dst, dst_ctx, src, src_ctx, n, s, 0, 1);
}

SIM_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                        CUcontext src_ctx, size_t n, CUstream s)
{
    return copy_peer(dst, dst_ctx, src, src_ctx, n, s, 1, 1);
}

/* ---- 2-D and 3-D copies ---- */

/* One side of a 2-D or 3-D descriptor. */
struct side {
    CUmemorytype type;
    const void *host;
    CUdeviceptr device;
    CUarray array;
    size_t x, y, z, pitch, height;
};

/* The address a side starts at, and whether it names device memory. */
static CUresult side_start(const struct side *sd, char **start, bool *device)
{
    size_t max_pitch = 0;
    int attr;
    if (sim_device_attribute(cudaDevAttrMaxPitch, 0, &attr) == 0) max_pitch = (size_t)attr;
    if (max_pitch && sd->pitch > max_pitch) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t base;
    switch (sd->type) {
    case CU_MEMORYTYPE_HOST:
        base = (uintptr_t)sd->host;
        *device = false;
        break;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED: /* a unified address: the memory says what it is */
        base = (uintptr_t)sd->device;
        *device = sd->type == CU_MEMORYTYPE_DEVICE;
        break;
    case CU_MEMORYTYPE_ARRAY:
        /* The sim has no CUDA arrays: no CUarray can be valid. */
        return sd->array ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t off, slice, rows;
    if (__builtin_mul_overflow(sd->pitch, sd->height, &slice) ||
        __builtin_mul_overflow(slice, sd->z, &off) ||
        __builtin_mul_overflow(sd->y, sd->pitch, &rows) ||
        __builtin_add_overflow(off, rows, &off) || __builtin_add_overflow(off, sd->x, &off) ||
        __builtin_add_overflow(base, off, &base))
        return CUDA_ERROR_INVALID_VALUE;
    *start = (char *)base;
    return CUDA_SUCCESS;
}

/* cuda.h's rules for the pitch and slice height of a side: when given, at
 * least the row's (slice's) extent; not given (0) only where there is a
 * single row (slice) to copy. */
static bool side_fits(const struct side *sd, size_t width, size_t height, size_t depth)
{
    if (sd->pitch ? sd->pitch < width + sd->x || width + sd->x < width : height > 1 || depth > 1)
        return false;
    if (depth > 1 && (sd->height ? sd->height < height + sd->y : true)) return false;
    return true;
}

/* The kind that makes the model check the sides named device memory. */
static enum cudaMemcpyKind kind_of(bool dst_device, bool src_device)
{
    if (dst_device && src_device) return cudaMemcpyDeviceToDevice;
    if (dst_device) return cudaMemcpyHostToDevice;
    if (src_device) return cudaMemcpyDeviceToHost;
    return cudaMemcpyDefault;
}

static CUresult copy_3d(const struct side *src, const struct side *dst, size_t width, size_t height,
                        size_t depth, CUstream s, int pt, int async)
{
    CUresult res = ready_on(s);
    if (res) return res;
    if (width == 0 || height == 0 || depth == 0) return CUDA_SUCCESS;
    if (!side_fits(src, width, height, depth) || !side_fits(dst, width, height, depth))
        return CUDA_ERROR_INVALID_VALUE;
    char *from, *to;
    bool from_device, to_device;
    if ((res = side_start(src, &from, &from_device)) || (res = side_start(dst, &to, &to_device)))
        return res;
    struct sim_copy c = {to,
                         from,
                         width,
                         height,
                         depth,
                         dst->pitch ? dst->pitch : width,
                         src->pitch ? src->pitch : width,
                         dst->height ? dst->height : height,
                         src->height ? src->height : height,
                         0,
                         1,
                         kind_of(to_device, from_device)};
    return move(&c, s, pt, async);
}

static CUresult copy_2d_desc(const CUDA_MEMCPY2D *p, CUstream s, int pt, int async)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    struct side src = {
        p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes, p->srcY, 0,
        p->srcPitch,      0};
    struct side dst = {
        p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes, p->dstY, 0,
        p->dstPitch,      0};
    return copy_3d(&src, &dst, p->WidthInBytes, p->Height, 1, s, pt, async);
}

/* One side of a 3D copy, from the fields CUDA_MEMCPY3D and
 * CUDA_MEMCPY3D_PEER name alike (x: src or dst). */
#define SIDE_3D(p, x)                                                                              \
    {                                                                                              \
        p->x##MemoryType, p->x##Host, p->x##Device, p->x##Array, p->x##XInBytes, p->x##Y, p->x##Z, \
            p->x##Pitch, p->x##Height                                                              \
    }

/* The level of detail and the reserved fields must be 0, as documented. */
static CUresult copy_3d_desc(const CUDA_MEMCPY3D *p, CUstream s, int pt, int async)
{
    if (!p || p->srcLOD || p->dstLOD || p->reserved0 || p->reserved1)
        return CUDA_ERROR_INVALID_VALUE;
    struct side src = SIDE_3D(p, src), dst = SIDE_3D(p, dst);
    return copy_3d(&src, &dst, p->WidthInBytes, p->Height, p->Depth, s, pt, async);
}

static CUresult copy_3d_peer_desc(const CUDA_MEMCPY3D_PEER *p, CUstream s, int pt, int async)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    if (sim_ctx_device(p->srcContext) < 0 || sim_ctx_device(p->dstContext) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct side src = SIDE_3D(p, src), dst = SIDE_3D(p, dst);
    return copy_3d(&src, &dst, p->WidthInBytes, p->Height, p->Depth, s, pt, async);
}

#define DESC_PAIR(name, pt_name, impl, desc_type, async)                                           \
    SIM_API CUresult name(const desc_type *p)                                                      \
    {                                                                                              \
        return impl(p, NULL, 0, async);                                                            \
    }                                                                                              \
    SIM_API CUresult pt_name(const desc_type *p)                                                   \
    {                                                                                              \
        return impl(p, NULL, 1, async);                                                            \
    }
#define DESC_ASYNC_PAIR(name, pt_name, impl, desc_type)                                            \
    SIM_API CUresult name(const desc_type *p, CUstream s)                                          \
    {                                                                                              \
        return impl(p, s, 0, 1);                                                                   \
    }                                                                                              \
    SIM_API CUresult pt_name(const desc_type *p, CUstream s)                                       \
    {                                                                                              \
        return impl(p, s, 1, 1);                                                                   \
    }

/* cuMemcpy2DUnaligned exists for pitches cuMemcpy2D may refuse on a GPU;
 * the sim refuses none that the pitch rules allow, so the two agree. */
DESC_PAIR(cuMemcpy2D_v2, cuMemcpy2D_v2_ptds, copy_2d_desc, CUDA_MEMCPY2D, 0)
DESC_PAIR(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds, copy_2d_desc, CUDA_MEMCPY2D, 0)
DESC_ASYNC_PAIR(cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz, copy_2d_desc, CUDA_MEMCPY2D)
DESC_PAIR(cuMemcpy3D_v2, cuMemcpy3D_v2_ptds, copy_3d_desc, CUDA_MEMCPY3D, 0)
DESC_ASYNC_PAIR(cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz, copy_3d_desc, CUDA_MEMCPY3D)
DESC_PAIR(cuMemcpy3DPeer, cuMemcpy3DPeer_ptds, copy_3d_peer_desc, CUDA_MEMCPY3D_PEER, 0)
DESC_ASYNC_PAIR(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz, copy_3d_peer_desc,
                CUDA_MEMCPY3D_PEER)

/* ---- batches ---- */

/* A batch may not go to the legacy stream (stream 0 is the per-thread
 * stream under the _ptsz variant), as documented. */
static bool batch_stream_ok(CUstream s, int pt)
{
    return s != CU_STREAM_LEGACY && (s || pt);
}

static bool access_order_ok(CUmemcpySrcAccessOrder order)
{
    return order == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
           order == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL ||
           order == CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

/* One copy of a batch. A source to be read during the call is copied
 * before the call returns where the model would otherwise leave it for
 * later (a synchronous copy: it waits unless both sides are device
 * memory); the order of copies within a batch is theirs to choose, and
 * here it is the order given. */
static CUresult batch_copy(void *dst, const void *src, size_t n, CUmemcpySrcAccessOrder order,
                           CUstream s, int pt)
{
    return copy(dst, src, n, cudaMemcpyDefault, s, pt,
                order != CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL);
}

/* *fail (when given) names the copy that failed, SIZE_MAX for a failure of
 * no single copy: the CUDA 12.8 ABI's failIdx. */
static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                      CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, size_t *fail,
                      CUstream s, int pt)
{
    CUresult res = ready_on(s);
    if (fail) *fail = SIZE_MAX;
    if (res) return res;
    if (!dsts || !srcs || !sizes || !count || !attrs || !idxs || !nattrs || nattrs > count ||
        idxs[0] != 0 || !batch_stream_ok(s, pt))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < nattrs; k++)
        if ((k && idxs[k] <= idxs[k - 1]) || idxs[k] >= count ||
            !access_order_ok(attrs[k].srcAccessOrder) ||
            (attrs[k].flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE))
            return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0, i = 0; i < count; i++) {
        if (k + 1 < nattrs && i == idxs[k + 1]) k++;
        res =
            batch_copy(DEVICE(dsts[i]), DEVICE(srcs[i]), sizes[i], attrs[k].srcAccessOrder, s, pt);
        if (res) {
            if (fail) *fail = i;
            return res;
        }
    }
    return CUDA_SUCCESS;
}

SIM_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                       size_t count, CUmemcpyAttributes *attrs, size_t *idxs,
                                       size_t nattrs, CUstream s)
{
    return batch(dsts, srcs, sizes, count, attrs, idxs, nattrs, NULL, s, 0);
}

SIM_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                            size_t count, CUmemcpyAttributes *attrs, size_t *idxs,
                                            size_t nattrs, CUstream s)
{
    return batch(dsts, srcs, sizes, count, attrs, idxs, nattrs, NULL, s, 1);
}

/* The CUDA 12.8 ABI, with the index of a failed copy, under the name cuda.h
 * now gives the CUDA 13 one (its symbol: driver_internal.h). */
SIM_API CUresult sim_memcpy_batch_v1(SIM_BATCH_V1_PARAMS)
{
    return batch(dsts, srcs, sizes, count, attrs, idxs, nattrs, fail, s, 0);
}

SIM_API CUresult sim_memcpy_batch_v1_ptsz(SIM_BATCH_V1_PARAMS)
{
    return batch(dsts, srcs, sizes, count, attrs, idxs, nattrs, fail, s, 1);
}

/* A pointer operand of a 3-D batch: elements are bytes for pointer to
 * pointer copies, and 0 for the row length or layer height means packed. */
static CUresult operand(const CUmemcpy3DOperand *o, const CUextent3D *e, struct side *sd)
{
    if (o->type == CU_MEMCPY_OPERAND_TYPE_ARRAY)
        return o->op.array.array ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
    if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER ||
        (o->op.ptr.rowLength && o->op.ptr.rowLength < e->width) ||
        (o->op.ptr.layerHeight && o->op.ptr.layerHeight < e->height))
        return CUDA_ERROR_INVALID_VALUE;
    *sd = (struct side){CU_MEMORYTYPE_UNIFIED,
                        NULL,
                        o->op.ptr.ptr,
                        NULL,
                        0,
                        0,
                        0,
                        o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width,
                        o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height};
    return CUDA_SUCCESS;
}

static CUresult batch_3d(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                         unsigned long long flags, CUstream s, int pt)
{
    CUresult res = ready_on(s);
    if (fail) *fail = SIZE_MAX;
    if (res) return res;
    if (!n || !ops || flags || !batch_stream_ok(s, pt)) return CUDA_ERROR_INVALID_VALUE;
    struct side *sides = malloc(2 * n * sizeof *sides);
    if (!sides) return CUDA_ERROR_OUT_OF_MEMORY;
    /* Every operation is checked before any is enqueued. */
    for (size_t i = 0; !res && i < n; i++) {
        const CUextent3D *e = &ops[i].extent;
        if (!e->width || !e->height || !e->depth || !access_order_ok(ops[i].srcAccessOrder) ||
            (ops[i].flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE))
            res = CUDA_ERROR_INVALID_VALUE;
        if (!res) res = operand(&ops[i].src, e, &sides[2 * i]);
        if (!res) res = operand(&ops[i].dst, e, &sides[2 * i + 1]);
        if (res && fail) *fail = i;
    }
    for (size_t i = 0; !res && i < n; i++) {
        const CUextent3D *e = &ops[i].extent;
        res = copy_3d(&sides[2 * i], &sides[2 * i + 1], e->width, e->height, e->depth, s, pt,
                      ops[i].srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL);
        if (res && fail) *fail = i;
    }
    free(sides);
    return res;
}

SIM_API CUresult cuMemcpy3DBatchAsync_v2(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,
                                         unsigned long long flags, CUstream s)
{
    return batch_3d(n, ops, NULL, flags, s, 0);
}

SIM_API CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,
                                              unsigned long long flags, CUstream s)
{
    return batch_3d(n, ops, NULL, flags, s, 1);
}

/* The CUDA 12.8 ABI, with the index of a failed operation. */
SIM_API CUresult sim_memcpy_3d_batch_v1(SIM_BATCH_3D_V1_PARAMS)
{
    return batch_3d(n, ops, fail, flags, s, 0);
}

SIM_API CUresult sim_memcpy_3d_batch_v1_ptsz(SIM_BATCH_3D_V1_PARAMS)
{
    return batch_3d(n, ops, fail, flags, s, 1);
}

/* ---- sets ---- */

/* Sets `height` rows of `width` values of elem bytes at dst, rows `pitch`
 * bytes apart. cuda.h: the pointer (and, for the 2-D forms, the pitch) of a
 * 16-bit set must be 2-byte aligned, of a 32-bit set 4-byte aligned. */
static CUresult set(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned elem, size_t width,
                    size_t height, CUstream s, int pt, int async)
{
    CUresult res = ready_on(s);
    if (res) return res;
    size_t bytes;
    if (dst % elem || (height > 1 && pitch % elem) ||
        __builtin_mul_overflow(width, (size_t)elem, &bytes))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_copy c = {DEVICE(dst), NULL, bytes, height, 1,    height > 1 ? pitch : bytes,
                         0,           1,    1,     value,  elem, cudaMemcpyDefault};
    return sim_cu_result(sim_drv_copy(&c, (cudaStream_t)s, pt, async));
}

#define SET_FORMS(bits, type)                                                                      \
    SIM_API CUresult cuMemsetD##bits##_v2(CUdeviceptr dst, type v, size_t n)                       \
    {                                                                                              \
        return set(dst, 0, v, bits / 8, n, 1, NULL, 0, 0);                                         \
    }                                                                                              \
    SIM_API CUresult cuMemsetD##bits##_v2_ptds(CUdeviceptr dst, type v, size_t n)                  \
    {                                                                                              \
        return set(dst, 0, v, bits / 8, n, 1, NULL, 1, 0);                                         \
    }                                                                                              \
    SIM_API CUresult cuMemsetD##bits##Async(CUdeviceptr dst, type v, size_t n, CUstream s)         \
    {                                                                                              \
        return set(dst, 0, v, bits / 8, n, 1, s, 0, 1);                                            \
    }                                                                                              \
    SIM_API CUresult cuMemsetD##bits##Async_ptsz(CUdeviceptr dst, type v, size_t n, CUstream s)    \
    {                                                                                              \
        return set(dst, 0, v, bits / 8, n, 1, s, 1, 1);                                            \
    }                                                                                              \
    SIM_API CUresult cuMemsetD2D##bits##_v2(CUdeviceptr dst, size_t pitch, type v, size_t w,       \
                                            size_t h)                                              \
    {                                                                                              \
        return set(dst, pitch, v, bits / 8, w, h, NULL, 0, 0);                                     \
    }                                                                                              \
    SIM_API CUresult cuMemsetD2D##bits##_v2_ptds(CUdeviceptr dst, size_t pitch, type v, size_t w,  \
                                                 size_t h)                                         \
    {                                                                                              \
        return set(dst, pitch, v, bits / 8, w, h, NULL, 1, 0);                                     \
    }                                                                                              \
    SIM_API CUresult cuMemsetD2D##bits##Async(CUdeviceptr dst, size_t pitch, type v, size_t w,     \
                                              size_t h, CUstream s)                                \
    {                                                                                              \
        return set(dst, pitch, v, bits / 8, w, h, s, 0, 1);                                        \
    }                                                                                              \
    SIM_API CUresult cuMemsetD2D##bits##Async_ptsz(CUdeviceptr dst, size_t pitch, type v,          \
                                                   size_t w, size_t h, CUstream s)                 \
    {                                                                                              \
        return set(dst, pitch, v, bits / 8, w, h, s, 1, 1);                                        \
    }

SET_FORMS(8, unsigned char)
SET_FORMS(16, unsigned short)
SET_FORMS(32, unsigned int)
