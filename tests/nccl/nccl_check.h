/* nccl_check.h - assertions and data helpers shared by the simulated-NCCL
 * test programs (plain C programs: a failed check prints where and exits 1). */
#ifndef FS_NCCL_CHECK_H
#define FS_NCCL_CHECK_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_CUDA(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        CHECK(e_ == cudaSuccess, "%s", cudaGetErrorString(e_));                                    \
    } while (0)

#define CHECK_NCCL(call)                                                                           \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        CHECK(r_ == ncclSuccess, "%s (%s)", ncclGetErrorString(r_), ncclGetLastError(NULL));       \
    } while (0)

/* Decodes a sign/exponent/mantissa float layout; fn: e4m3 "finite" variant. */
static inline double tn_mini_decode(uint32_t v, int ebits, int mbits, int fn)
{
    uint32_t emask = (1u << ebits) - 1, mmask = (1u << mbits) - 1;
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t e = (v >> mbits) & emask, m = v & mmask;
    double sign = (v >> (ebits + mbits)) & 1 ? -1.0 : 1.0;
    if ((fn && e == emask && m == mmask) || (!fn && e == emask)) return NAN;
    if (e == 0) return sign * ldexp((double)m, 1 - bias - mbits);
    return sign * ldexp((double)(m | (1u << mbits)), (int)e - bias - mbits);
}

/* A code of one of the 16- or 8-bit float types, as a double. */
static inline double tn_small_decode(ncclDataType_t t, uint32_t code)
{
    switch (t) {
    case ncclFloat16:
        return tn_mini_decode(code, 5, 10, 0);
    case ncclBfloat16: {
        uint32_t u = code << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case ncclFloat8e4m3:
        return tn_mini_decode(code, 4, 3, 1);
    default:
        return tn_mini_decode(code, 5, 2, 0);
    }
}

/* Element i of a buffer of NCCL type t, as a double. */
static inline double tn_get(ncclDataType_t t, const void *p, size_t i)
{
    switch (t) {
    case ncclInt8:
        return ((const int8_t *)p)[i];
    case ncclUint8:
        return ((const uint8_t *)p)[i];
    case ncclInt32:
        return ((const int32_t *)p)[i];
    case ncclUint32:
        return ((const uint32_t *)p)[i];
    case ncclInt64:
        return (double)((const int64_t *)p)[i];
    case ncclUint64:
        return (double)((const uint64_t *)p)[i];
    case ncclFloat32:
        return ((const float *)p)[i];
    case ncclFloat64:
        return ((const double *)p)[i];
    case ncclFloat16:
    case ncclBfloat16:
        return tn_small_decode(t, ((const uint16_t *)p)[i]);
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        return tn_small_decode(t, ((const uint8_t *)p)[i]);
    default:
        return NAN;
    }
}

static inline size_t tn_size(ncclDataType_t t)
{
    static const size_t sz[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return sz[t];
}

/* Stores an exactly representable value v as element i (search for the
 * code of the small float types: test values are few and small). */
static inline void tn_set(ncclDataType_t t, void *p, size_t i, double v)
{
    switch (t) {
    case ncclInt8:
        ((int8_t *)p)[i] = (int8_t)v;
        return;
    case ncclUint8:
        ((uint8_t *)p)[i] = (uint8_t)v;
        return;
    case ncclInt32:
        ((int32_t *)p)[i] = (int32_t)v;
        return;
    case ncclUint32:
        ((uint32_t *)p)[i] = (uint32_t)v;
        return;
    case ncclInt64:
        ((int64_t *)p)[i] = (int64_t)v;
        return;
    case ncclUint64:
        ((uint64_t *)p)[i] = (uint64_t)v;
        return;
    case ncclFloat32:
        ((float *)p)[i] = (float)v;
        return;
    case ncclFloat64:
        ((double *)p)[i] = v;
        return;
    default:
        break;
    }
    /* Codes of the small non-negative integers are remembered per type. */
    static int32_t cache[ncclNumTypes][64];
    int small = v >= 0 && v < 64 && v == floor(v);
    int32_t *slot = small ? &cache[t][(int)v] : NULL;
    if (slot && *slot) {
        if (tn_size(t) == 1)
            ((uint8_t *)p)[i] = (uint8_t)(*slot - 1);
        else
            ((uint16_t *)p)[i] = (uint16_t)(*slot - 1);
        return;
    }
    uint32_t codes = tn_size(t) == 1 ? 256 : 65536;
    for (uint32_t c = 0; c < codes; c++) {
        if (tn_small_decode(t, c) == v) {
            if (tn_size(t) == 1)
                ((uint8_t *)p)[i] = (uint8_t)c;
            else
                ((uint16_t *)p)[i] = (uint16_t)c;
            if (slot) *slot = (int32_t)c + 1;
            return;
        }
    }
    CHECK(0, "value %g not representable in type %d", v, (int)t);
}

#endif /* FS_NCCL_CHECK_H */
