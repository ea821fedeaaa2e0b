/* reduce.c - NCCL's data types and reduction operators, on the CPU.
 *
 * Native C types reduce in place in their own type. Integer arithmetic is
 * done in the matching unsigned type so that a wrapping sum is defined
 * behaviour, as on the GPU. The 16- and 8-bit float types (half, bfloat16,
 * fp8 e4m3/e5m2) are widened to float, reduced, and rounded back to nearest
 * even: one rounding per element instead of one per reduction step, which
 * is at least as accurate as the device. fp8 results saturate to the largest
 * finite value, as CUDA's __NV_SATFINITE conversions do; half overflows to
 * infinity, as IEEE says. */
#include "nccl_internal.h"

#include <math.h>
#include <string.h>

size_t sim_dtype_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
        return 8;
    default:
        return 0;
    }
}

/* ---- small float formats -------------------------------------------------
 * One encoder/decoder for any sign/exponent/mantissa layout. `fn` marks the
 * e4m3 "finite" variant: no infinities, a single NaN mantissa pattern. */

static float sim_mini_decode(uint32_t v, int ebits, int mbits, int fn)
{
    uint32_t emask = (1u << ebits) - 1, mmask = (1u << mbits) - 1;
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t e = (v >> mbits) & emask, m = v & mmask;
    float sign = (v >> (ebits + mbits)) & 1 ? -1.0f : 1.0f;
    if (fn && e == emask && m == mmask) return NAN;
    if (!fn && e == emask) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * ldexpf((float)m, 1 - bias - mbits);
    return sign * ldexpf((float)(m | (1u << mbits)), (int)e - bias - mbits);
}

static uint32_t sim_mini_encode(float f, int ebits, int mbits, int fn, int saturate)
{
    uint32_t emask = (1u << ebits) - 1, mmask = (1u << mbits) - 1;
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t sign = signbit(f) ? 1u << (ebits + mbits) : 0;
    uint32_t maxfin = fn ? (emask << mbits) | (mmask - 1) : ((emask - 1) << mbits) | mmask;
    uint32_t inf = fn ? maxfin : emask << mbits;
    if (isnan(f))
        return fn ? sign | (emask << mbits) | mmask : sign | (emask << mbits) | (1u << (mbits - 1));
    double x = fabs((double)f);
    if (isinf(x)) return sign | (saturate ? maxfin : inf);
    if (x == 0) return sign;
    int e2;
    frexp(x, &e2);
    int exp = e2 - 1;                   /* x = 1.m * 2^exp */
    if (exp < 1 - bias) exp = 1 - bias; /* subnormal range: fixed quantum */
    int q = exp - mbits;
    double r = rint(ldexp(x, -q)); /* round to nearest even, default mode */
    if (r >= ldexp(1.0, mbits + 1)) {
        r /= 2;
        q++;
    }
    uint32_t mant = (uint32_t)r, efield = 0;
    if (mant >= (1u << mbits)) {
        efield = (uint32_t)(q + mbits + bias);
        mant -= 1u << mbits;
    }
    uint32_t bits = (efield << mbits) | mant;
    if (efield > emask || bits > maxfin) return sign | (saturate ? maxfin : inf);
    return sign | bits;
}

float sim_half_to_float(uint16_t h)
{
    return sim_mini_decode(h, 5, 10, 0);
}
uint16_t sim_float_to_half(float f)
{
    return (uint16_t)sim_mini_encode(f, 5, 10, 0, 0);
}
float sim_e4m3_to_float(uint8_t v)
{
    return sim_mini_decode(v, 4, 3, 1);
}
uint8_t sim_float_to_e4m3(float f)
{
    return (uint8_t)sim_mini_encode(f, 4, 3, 1, 1);
}
float sim_e5m2_to_float(uint8_t v)
{
    return sim_mini_decode(v, 5, 2, 0);
}
uint8_t sim_float_to_e5m2(float f)
{
    return (uint8_t)sim_mini_encode(f, 5, 2, 0, 1);
}

float sim_bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

uint16_t sim_float_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* ---- native types ---------------------------------------------------------
 * T is the element type, U the type arithmetic is done in. */
#define SIM_ADD(T, U, a, b) ((T)((U)(a) + (U)(b)))
#define SIM_MUL(T, U, a, b) ((T)((U)(a) * (U)(b)))

#define SIM_DEFINE_REDUCE(suffix, T, U)                                                            \
    static void sim_reduce_##suffix(void *dst, const void *const *srcs, int nsrc, size_t n,        \
                                    int kind, const void *scalar)                                  \
    {                                                                                              \
        T *d = dst, scale;                                                                         \
        const T *s0 = srcs[0];                                                                     \
        memcpy(&scale, scalar, sizeof(T));                                                         \
        if (kind == SIM_PREMULSUM)                                                                 \
            for (size_t i = 0; i < n; i++)                                                         \
                d[i] = SIM_MUL(T, U, s0[i], scale);                                                \
        else                                                                                       \
            memcpy(d, s0, n * sizeof(T));                                                          \
        for (int k = 1; k < nsrc; k++) {                                                           \
            const T *s = srcs[k];                                                                  \
            switch (kind) {                                                                        \
            case ncclSum:                                                                          \
            case ncclAvg:                                                                          \
                for (size_t i = 0; i < n; i++)                                                     \
                    d[i] = SIM_ADD(T, U, d[i], s[i]);                                              \
                break;                                                                             \
            case SIM_PREMULSUM:                                                                    \
                for (size_t i = 0; i < n; i++)                                                     \
                    d[i] = SIM_ADD(T, U, d[i], SIM_MUL(T, U, s[i], scale));                        \
                break;                                                                             \
            case ncclProd:                                                                         \
                for (size_t i = 0; i < n; i++)                                                     \
                    d[i] = SIM_MUL(T, U, d[i], s[i]);                                              \
                break;                                                                             \
            case ncclMax:                                                                          \
                for (size_t i = 0; i < n; i++)                                                     \
                    d[i] = s[i] > d[i] ? s[i] : d[i];                                              \
                break;                                                                             \
            case ncclMin:                                                                          \
                for (size_t i = 0; i < n; i++)                                                     \
                    d[i] = s[i] < d[i] ? s[i] : d[i];                                              \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
        if (kind == ncclAvg)                                                                       \
            for (size_t i = 0; i < n; i++)                                                         \
                d[i] = (T)(d[i] / (T)nsrc);                                                        \
    }

SIM_DEFINE_REDUCE(i8, int8_t, uint8_t)
SIM_DEFINE_REDUCE(u8, uint8_t, uint8_t)
SIM_DEFINE_REDUCE(i32, int32_t, uint32_t)
SIM_DEFINE_REDUCE(u32, uint32_t, uint32_t)
SIM_DEFINE_REDUCE(i64, int64_t, uint64_t)
SIM_DEFINE_REDUCE(u64, uint64_t, uint64_t)
SIM_DEFINE_REDUCE(f32, float, float)
SIM_DEFINE_REDUCE(f64, double, double)

/* ---- small float types: widen a block to float, reduce, narrow back ---- */

static float sim_small_load(ncclDataType_t t, const void *p, size_t i)
{
    switch (t) {
    case ncclFloat16:
        return sim_half_to_float(((const uint16_t *)p)[i]);
    case ncclBfloat16:
        return sim_bf16_to_float(((const uint16_t *)p)[i]);
    case ncclFloat8e4m3:
        return sim_e4m3_to_float(((const uint8_t *)p)[i]);
    default:
        return sim_e5m2_to_float(((const uint8_t *)p)[i]);
    }
}

static void sim_small_store(ncclDataType_t t, void *p, size_t i, float v)
{
    switch (t) {
    case ncclFloat16:
        ((uint16_t *)p)[i] = sim_float_to_half(v);
        break;
    case ncclBfloat16:
        ((uint16_t *)p)[i] = sim_float_to_bf16(v);
        break;
    case ncclFloat8e4m3:
        ((uint8_t *)p)[i] = sim_float_to_e4m3(v);
        break;
    default:
        ((uint8_t *)p)[i] = sim_float_to_e5m2(v);
        break;
    }
}

#define SIM_BLOCK 1024

static void sim_reduce_small(void *dst, const void *const *srcs, int nsrc, size_t n,
                             ncclDataType_t t, int kind, const void *scalar)
{
    float acc[SIM_BLOCK], wide[SIM_BLOCK];
    float scale = sim_small_load(t, scalar, 0);
    for (size_t base = 0; base < n; base += SIM_BLOCK) {
        size_t m = n - base < SIM_BLOCK ? n - base : SIM_BLOCK;
        const void *widened[1] = {wide};
        for (int k = 0; k < nsrc; k++) {
            for (size_t i = 0; i < m; i++)
                wide[i] = sim_small_load(t, srcs[k], base + i);
            if (k == 0) {
                sim_reduce_f32(acc, widened, 1, m, kind, &scale);
                continue;
            }
            for (size_t i = 0; i < m; i++) {
                float a = acc[i], b = wide[i];
                switch (kind) {
                case ncclProd:
                    acc[i] = a * b;
                    break;
                case ncclMax:
                    acc[i] = b > a ? b : a;
                    break;
                case ncclMin:
                    acc[i] = b < a ? b : a;
                    break;
                case SIM_PREMULSUM:
                    acc[i] = a + b * scale;
                    break;
                default:
                    acc[i] = a + b;
                    break;
                }
            }
        }
        for (size_t i = 0; i < m; i++)
            sim_small_store(t, dst, base + i, kind == ncclAvg ? acc[i] / (float)nsrc : acc[i]);
    }
}

void sim_reduce(void *dst, const void *const *srcs, int nsrc, size_t n, ncclDataType_t t,
                const struct sim_redop *op)
{
    const void *scalar = op->scalar_on_device ? op->scalar_ptr : op->scalar;
    switch (t) {
    case ncclInt8:
        sim_reduce_i8(dst, srcs, nsrc, n, op->kind, scalar);
        break;
    case ncclUint8:
        sim_reduce_u8(dst, srcs, nsrc, n, op->kind, scalar);
        break;
    case ncclInt32:
        sim_reduce_i32(dst, srcs, nsrc, n, op->kind, scalar);
        break;
    case ncclUint32:
        sim_reduce_u32(dst, srcs, nsrc, n, op->kind, scalar);
        break;
    case ncclInt64:
        sim_reduce_i64(dst, srcs, nsrc, n, op->kind, scalar);
        break;
    case ncclUint64:
        sim_reduce_u64(dst, srcs, nsrc, n, op->kind, scalar);
        break;
    case ncclFloat32:
        sim_reduce_f32(dst, srcs, nsrc, n, op->kind, scalar);
        break;
    case ncclFloat64:
        sim_reduce_f64(dst, srcs, nsrc, n, op->kind, scalar);
        break;
    default:
        sim_reduce_small(dst, srcs, nsrc, n, t, op->kind, scalar);
        break;
    }
}
