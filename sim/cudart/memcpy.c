/* memcpy.c - the runtime's cudaMemcpy*, cudaMemcpyPeer* and cudaMemset*
 * entry points, each a copy or set of sim/core/copy_engine.c. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

SIM_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    return sim_copy_2d(dst, n, src, n, n, 1, kind, NULL, 0, SIM_COPY_SYNC);
}

SIM_API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    return sim_copy_2d(dst, n, src, n, n, 1, kind, NULL, 1, SIM_COPY_SYNC);
}

SIM_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                    cudaStream_t s)
{
    return sim_copy_2d(dst, n, src, n, n, 1, kind, s, 0, SIM_COPY_ASYNC);
}

SIM_API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n,
                                         enum cudaMemcpyKind kind, cudaStream_t s)
{
    return sim_copy_2d(dst, n, src, n, n, 1, kind, s, 1, SIM_COPY_ASYNC);
}

SIM_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                 size_t width, size_t height, enum cudaMemcpyKind kind)
{
    return sim_copy_2d(dst, dpitch, src, spitch, width, height, kind, NULL, 0, SIM_COPY_SYNC);
}

SIM_API cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch,
                                      size_t width, size_t height, enum cudaMemcpyKind kind)
{
    return sim_copy_2d(dst, dpitch, src, spitch, width, height, kind, NULL, 1, SIM_COPY_SYNC);
}

SIM_API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                      size_t width, size_t height, enum cudaMemcpyKind kind,
                                      cudaStream_t s)
{
    return sim_copy_2d(dst, dpitch, src, spitch, width, height, kind, s, 0, SIM_COPY_ASYNC);
}

SIM_API cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch,
                                           size_t width, size_t height, enum cudaMemcpyKind kind,
                                           cudaStream_t s)
{
    return sim_copy_2d(dst, dpitch, src, spitch, width, height, kind, s, 1, SIM_COPY_ASYNC);
}

static cudaError_t copy_peer(void *dst, int dst_dev, const void *src, int src_dev, size_t n,
                             cudaStream_t s, enum sim_copy_mode mode)
{
    sim_init();
    /* a copy of nothing checks no device (seen on a GPU, driver 580:
     * cudaMemcpyPeer(p, 9999, q, 0, 0) is cudaSuccess) */
    if (n && (!sim_dev(dst_dev) || !sim_dev(src_dev)))
        return sim_record_error(cudaErrorInvalidDevice);
    return sim_copy_2d(dst, n, src, n, n, 1, cudaMemcpyDeviceToDevice, s, 0, mode);
}

SIM_API cudaError_t cudaMemcpyPeer(void *dst, int dst_dev, const void *src, int src_dev, size_t n)
{
    return copy_peer(dst, dst_dev, src, src_dev, n, NULL, SIM_COPY_SYNC);
}

SIM_API cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_dev, const void *src, int src_dev,
                                        size_t n, cudaStream_t s)
{
    return copy_peer(dst, dst_dev, src, src_dev, n, s, SIM_COPY_ASYNC);
}

SIM_API cudaError_t cudaMemset(void *dst, int value, size_t n)
{
    return sim_set_2d(dst, n, value, n, 1, NULL, 0, SIM_COPY_SYNC);
}

SIM_API cudaError_t cudaMemset_ptds(void *dst, int value, size_t n)
{
    return sim_set_2d(dst, n, value, n, 1, NULL, 1, SIM_COPY_SYNC);
}

SIM_API cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s)
{
    return sim_set_2d(dst, n, value, n, 1, s, 0, SIM_COPY_ASYNC);
}

SIM_API cudaError_t cudaMemsetAsync_ptsz(void *dst, int value, size_t n, cudaStream_t s)
{
    return sim_set_2d(dst, n, value, n, 1, s, 1, SIM_COPY_ASYNC);
}

SIM_API cudaError_t cudaMemset2D(void *dst, size_t pitch, int value, size_t width, size_t height)
{
    return sim_set_2d(dst, pitch, value, width, height, NULL, 0, SIM_COPY_SYNC);
}

SIM_API cudaError_t cudaMemset2D_ptds(void *dst, size_t pitch, int value, size_t width,
                                      size_t height)
{
    return sim_set_2d(dst, pitch, value, width, height, NULL, 1, SIM_COPY_SYNC);
}

SIM_API cudaError_t cudaMemset2DAsync(void *dst, size_t pitch, int value, size_t width,
                                      size_t height, cudaStream_t s)
{
    return sim_set_2d(dst, pitch, value, width, height, s, 0, SIM_COPY_ASYNC);
}

SIM_API cudaError_t cudaMemset2DAsync_ptsz(void *dst, size_t pitch, int value, size_t width,
                                           size_t height, cudaStream_t s)
{
    return sim_set_2d(dst, pitch, value, width, height, s, 1, SIM_COPY_ASYNC);
}
