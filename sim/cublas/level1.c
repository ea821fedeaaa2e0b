/* level1.c - the level-1 routines PyTorch calls: vector updates (axpy, copy,
 * swap, scal, rot, rotm) and reductions (asum, nrm2, dot, amax, amin), plus
 * the scalar rotg/rotmg. Each is device work on the handle's stream that
 * computes nothing. A reduction's result lives where the pointer mode says:
 * in device mode writing it is part of the device work; in host mode cuBLAS
 * returns once the result is on the host, so the call waits for the stream
 * and then stores 0 (the sim computes no value; an empty problem's result is
 * 0 in cuBLAS too). Empty problems (n <= 0) return at once, as in cuBLAS. */
#include "blas_internal.h"

#include <string.h>

static cublasStatus_t update(cublasHandle_t h, int n)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    return sim_blas_run(h, n <= 0);
}

static cublasStatus_t reduce(cublasHandle_t h, int empty, void *result, size_t size)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!result) return CUBLAS_STATUS_INVALID_VALUE;
    if (h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE) return sim_blas_launch(h->stream);
    cublasStatus_t st = sim_blas_run(h, empty);
    if (st == CUBLAS_STATUS_SUCCESS) st = sim_blas_wait(h->stream);
    if (st == CUBLAS_STATUS_SUCCESS) memset(result, 0, size);
    return st;
}

#define SIM_AXPY(name, T)                                                                          \
    cublasStatus_t name(cublasHandle_t handle, int n, const T *alpha, const T *x, int incx, T *y,  \
                        int incy)                                                                  \
    {                                                                                              \
        (void)alpha, (void)x, (void)incx, (void)y, (void)incy;                                     \
        return update(handle, n);                                                                  \
    }
SIM_AXPY(cublasSaxpy_v2, float)
SIM_AXPY(cublasDaxpy_v2, double)
SIM_AXPY(cublasCaxpy_v2, cuComplex)
SIM_AXPY(cublasZaxpy_v2, cuDoubleComplex)

/* copy and swap: read x and write y (swap writes x too, so its x is not
 * const: X is x's element type as the entry point declares it). */
#define SIM_COPY_SWAP(name, X, T)                                                                  \
    cublasStatus_t name(cublasHandle_t handle, int n, X *x, int incx, T *y, int incy)              \
    {                                                                                              \
        (void)x, (void)incx, (void)y, (void)incy;                                                  \
        return update(handle, n);                                                                  \
    }
SIM_COPY_SWAP(cublasScopy_v2, const float, float)
SIM_COPY_SWAP(cublasDcopy_v2, const double, double)
SIM_COPY_SWAP(cublasCcopy_v2, const cuComplex, cuComplex)
SIM_COPY_SWAP(cublasZcopy_v2, const cuDoubleComplex, cuDoubleComplex)
SIM_COPY_SWAP(cublasSswap_v2, float, float)
SIM_COPY_SWAP(cublasDswap_v2, double, double)
SIM_COPY_SWAP(cublasCswap_v2, cuComplex, cuComplex)
SIM_COPY_SWAP(cublasZswap_v2, cuDoubleComplex, cuDoubleComplex)

#define SIM_SCAL(name, T, S)                                                                       \
    cublasStatus_t name(cublasHandle_t handle, int n, const S *alpha, T *x, int incx)              \
    {                                                                                              \
        (void)alpha, (void)x, (void)incx;                                                          \
        return update(handle, n);                                                                  \
    }
SIM_SCAL(cublasSscal_v2, float, float)
SIM_SCAL(cublasDscal_v2, double, double)
SIM_SCAL(cublasCscal_v2, cuComplex, cuComplex)
SIM_SCAL(cublasZscal_v2, cuDoubleComplex, cuDoubleComplex)
SIM_SCAL(cublasCsscal_v2, cuComplex, float)
SIM_SCAL(cublasZdscal_v2, cuDoubleComplex, double)

#define SIM_ROT(name, T, C, S)                                                                     \
    cublasStatus_t name(cublasHandle_t handle, int n, T *x, int incx, T *y, int incy, const C *c,  \
                        const S *s)                                                                \
    {                                                                                              \
        (void)x, (void)incx, (void)y, (void)incy, (void)c, (void)s;                                \
        return update(handle, n);                                                                  \
    }
SIM_ROT(cublasSrot_v2, float, float, float)
SIM_ROT(cublasDrot_v2, double, double, double)
SIM_ROT(cublasCrot_v2, cuComplex, float, cuComplex)
SIM_ROT(cublasCsrot_v2, cuComplex, float, float)
SIM_ROT(cublasZrot_v2, cuDoubleComplex, double, cuDoubleComplex)
SIM_ROT(cublasZdrot_v2, cuDoubleComplex, double, double)

#define SIM_ROTM(name, T)                                                                          \
    cublasStatus_t name(cublasHandle_t handle, int n, T *x, int incx, T *y, int incy,              \
                        const T *param)                                                            \
    {                                                                                              \
        (void)x, (void)incx, (void)y, (void)incy, (void)param;                                     \
        return update(handle, n);                                                                  \
    }
SIM_ROTM(cublasSrotm_v2, float)
SIM_ROTM(cublasDrotm_v2, double)

/* rotg/rotmg work on scalars: on the device in device mode, else on the host
 * once earlier work is done; the sim leaves the scalars as they are. */
static cublasStatus_t scalar(cublasHandle_t h)
{
    if (!sim_blas_handle_ok(h)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (h->pointer_mode == CUBLAS_POINTER_MODE_DEVICE) return sim_blas_launch(h->stream);
    return sim_blas_wait(h->stream);
}

#define SIM_ROTG(name, T, C)                                                                       \
    cublasStatus_t name(cublasHandle_t handle, T *a, T *b, C *c, T *s)                             \
    {                                                                                              \
        (void)a, (void)b, (void)c, (void)s;                                                        \
        return scalar(handle);                                                                     \
    }
SIM_ROTG(cublasSrotg_v2, float, float)
SIM_ROTG(cublasDrotg_v2, double, double)
SIM_ROTG(cublasCrotg_v2, cuComplex, float)
SIM_ROTG(cublasZrotg_v2, cuDoubleComplex, double)

#define SIM_ROTMG(name, T)                                                                         \
    cublasStatus_t name(cublasHandle_t handle, T *d1, T *d2, T *x1, const T *y1, T *param)         \
    {                                                                                              \
        (void)d1, (void)d2, (void)x1, (void)y1, (void)param;                                       \
        return scalar(handle);                                                                     \
    }
SIM_ROTMG(cublasSrotmg_v2, float)
SIM_ROTMG(cublasDrotmg_v2, double)

/* asum, nrm2, amax, amin: nothing to reduce unless n > 0 and incx > 0. */
#define SIM_NORM(name, T, R)                                                                       \
    cublasStatus_t name(cublasHandle_t handle, int n, const T *x, int incx, R *result)             \
    {                                                                                              \
        (void)x;                                                                                   \
        return reduce(handle, n <= 0 || incx <= 0, result, sizeof(*result));                       \
    }
SIM_NORM(cublasSasum_v2, float, float)
SIM_NORM(cublasDasum_v2, double, double)
SIM_NORM(cublasScasum_v2, cuComplex, float)
SIM_NORM(cublasDzasum_v2, cuDoubleComplex, double)
SIM_NORM(cublasSnrm2_v2, float, float)
SIM_NORM(cublasDnrm2_v2, double, double)
SIM_NORM(cublasScnrm2_v2, cuComplex, float)
SIM_NORM(cublasDznrm2_v2, cuDoubleComplex, double)
SIM_NORM(cublasIsamax_v2, float, int)
SIM_NORM(cublasIdamax_v2, double, int)
SIM_NORM(cublasIcamax_v2, cuComplex, int)
SIM_NORM(cublasIzamax_v2, cuDoubleComplex, int)
SIM_NORM(cublasIsamin_v2, float, int)
SIM_NORM(cublasIdamin_v2, double, int)
SIM_NORM(cublasIcamin_v2, cuComplex, int)
SIM_NORM(cublasIzamin_v2, cuDoubleComplex, int)

#define SIM_DOT(name, T)                                                                           \
    cublasStatus_t name(cublasHandle_t handle, int n, const T *x, int incx, const T *y, int incy,  \
                        T *result)                                                                 \
    {                                                                                              \
        (void)x, (void)incx, (void)y, (void)incy;                                                  \
        return reduce(handle, n <= 0, result, sizeof(*result));                                    \
    }
SIM_DOT(cublasSdot_v2, float)
SIM_DOT(cublasDdot_v2, double)
SIM_DOT(cublasCdotu_v2, cuComplex)
SIM_DOT(cublasCdotc_v2, cuComplex)
SIM_DOT(cublasZdotu_v2, cuDoubleComplex)
SIM_DOT(cublasZdotc_v2, cuDoubleComplex)

/* The size of one element of a cudaDataType PyTorch can ask a dot of, or 0
 * for a type cublasDotEx does not take. */
static size_t dot_type_size(cudaDataType t)
{
    switch (t) {
    case CUDA_R_16F:
    case CUDA_R_16BF:
        return 2;
    case CUDA_R_32F:
        return 4;
    case CUDA_R_64F:
    case CUDA_C_32F:
        return 8;
    case CUDA_C_64F:
        return 16;
    default:
        return 0;
    }
}

cublasStatus_t cublasDotEx(cublasHandle_t handle, int n, const void *x, cudaDataType xType,
                           int incx, const void *y, cudaDataType yType, int incy, void *result,
                           cudaDataType resultType, cudaDataType executionType)
{
    (void)x, (void)incx, (void)y, (void)incy;
    if (!sim_blas_handle_ok(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    size_t size = dot_type_size(resultType);
    if (!dot_type_size(xType) || !dot_type_size(yType) || !size || !dot_type_size(executionType))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    return reduce(handle, n <= 0, result, size);
}
