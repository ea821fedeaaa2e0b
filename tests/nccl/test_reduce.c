/* test_reduce.c - unit tests of the simulated NCCL's data types and
 * reduction operators (sim/nccl/reduce.c, compiled in). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "nccl_internal.h"

static struct sim_redop op_of(int kind, ncclDataType_t t)
{
    struct sim_redop op;
    memset(&op, 0, sizeof(op));
    op.kind = kind;
    op.dtype = t;
    return op;
}

/* Every finite half decodes and encodes back to itself. */
static void half_round_trip(void **state)
{
    (void)state;
    for (uint32_t c = 0; c < 65536; c++) {
        float f = sim_half_to_float((uint16_t)c);
        if (isnan(f)) continue;
        assert_int_equal(sim_float_to_half(f), c);
    }
}

static void half_rounding(void **state)
{
    (void)state;
    assert_int_equal(sim_float_to_half(1.0f), 0x3c00);
    assert_int_equal(sim_float_to_half(65504.0f), 0x7bff);
    assert_int_equal(sim_float_to_half(65520.0f), 0x7c00);        /* rounds to infinity */
    assert_int_equal(sim_float_to_half(1.0f + 0x1p-11f), 0x3c00); /* tie to even */
    assert_int_equal(sim_float_to_half(1.0f + 0x1p-10f + 0x1p-11f), 0x3c02);
    assert_int_equal(sim_float_to_half(0x1p-24f), 0x0001); /* smallest subnormal */
    assert_int_equal(sim_float_to_half(-2.0f), 0xc000);
    assert_true(isnan(sim_half_to_float(sim_float_to_half(NAN))));
}

static void bf16_rounding(void **state)
{
    (void)state;
    assert_int_equal(sim_float_to_bf16(1.0f), 0x3f80);
    assert_int_equal(sim_float_to_bf16(1.0f + 0x1p-8f), 0x3f80); /* tie to even */
    assert_int_equal(sim_float_to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82);
    assert_true(sim_bf16_to_float(0x4049) > 3.14f && sim_bf16_to_float(0x4049) < 3.15f);
}

static void fp8_formats(void **state)
{
    (void)state;
    assert_true(sim_e4m3_to_float(0x7e) == 448.0f);
    assert_true(isnan(sim_e4m3_to_float(0x7f)));
    assert_int_equal(sim_float_to_e4m3(1000.0f), 0x7e); /* saturates */
    assert_int_equal(sim_float_to_e4m3(-1000.0f), 0xfe);
    assert_int_equal(sim_float_to_e4m3(1.0f), 0x38);
    assert_true(sim_e5m2_to_float(0x7b) == 57344.0f);
    assert_true(isinf(sim_e5m2_to_float(0x7c)));
    assert_int_equal(sim_float_to_e5m2(1e6f), 0x7b); /* saturates */
    for (uint32_t c = 0; c < 256; c++) {
        float a = sim_e4m3_to_float((uint8_t)c), b = sim_e5m2_to_float((uint8_t)c);
        if (!isnan(a)) assert_int_equal(sim_float_to_e4m3(a), c);
        if (!isnan(b) && !isinf(b)) assert_int_equal(sim_float_to_e5m2(b), c);
    }
}

static void int_ops(void **state)
{
    (void)state;
    int8_t a[3] = {100, -128, 7}, b[3] = {100, -1, -7}, out[3];
    const void *srcs[2] = {a, b};
    struct sim_redop op = op_of(ncclSum, ncclInt8);
    sim_reduce(out, srcs, 2, 3, ncclInt8, &op);
    assert_int_equal(out[0], -56); /* wraps like the device */
    assert_int_equal(out[1], 127);
    assert_int_equal(out[2], 0);
    op.kind = ncclMax;
    sim_reduce(out, srcs, 2, 3, ncclInt8, &op);
    assert_int_equal(out[0], 100);
    assert_int_equal(out[1], -1);
    op.kind = ncclMin;
    sim_reduce(out, srcs, 2, 3, ncclInt8, &op);
    assert_int_equal(out[1], -128);

    uint64_t x[2] = {UINT64_MAX, 6}, y[2] = {2, 7}, z[2];
    const void *s64[2] = {x, y};
    op = op_of(ncclProd, ncclUint64);
    sim_reduce(z, s64, 2, 2, ncclUint64, &op);
    assert_true(z[0] == UINT64_MAX - 1 && z[1] == 42);
    op.kind = ncclAvg;
    sim_reduce(z, s64, 2, 2, ncclUint64, &op);
    assert_true(z[1] == 6); /* (6 + 7) / 2, truncated */
}

static void premulsum_and_small_types(void **state)
{
    (void)state;
    float a[2] = {1, 2}, b[2] = {3, 4}, out[2];
    const void *srcs[2] = {a, b};
    struct sim_redop op = op_of(SIM_PREMULSUM, ncclFloat32);
    float scale = 0.5f;
    memcpy(op.scalar, &scale, sizeof(scale));
    sim_reduce(out, srcs, 2, 2, ncclFloat32, &op);
    assert_true(out[0] == 2.0f && out[1] == 3.0f);
    /* A device-resident scalar is read when the reduction runs. */
    op.scalar_on_device = 1;
    op.scalar_ptr = &scale;
    scale = 2.0f;
    sim_reduce(out, srcs, 2, 2, ncclFloat32, &op);
    assert_true(out[0] == 8.0f && out[1] == 12.0f);

    uint16_t h[3][2];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 2; i++)
            h[k][i] = sim_float_to_half((float)(k + i));
    uint16_t hout[2];
    const void *hs[3] = {h[0], h[1], h[2]};
    op = op_of(ncclAvg, ncclFloat16);
    sim_reduce(hout, hs, 3, 2, ncclFloat16, &op);
    assert_true(sim_half_to_float(hout[0]) == 1.0f && sim_half_to_float(hout[1]) == 2.0f);

    uint8_t e[2] = {sim_float_to_e4m3(300.0f), sim_float_to_e4m3(300.0f)}, eout;
    const void *es[2] = {&e[0], &e[1]};
    op = op_of(ncclSum, ncclFloat8e4m3);
    sim_reduce(&eout, es, 2, 1, ncclFloat8e4m3, &op);
    assert_true(sim_e4m3_to_float(eout) == 448.0f); /* saturated sum */
    assert_int_equal(sim_dtype_size(ncclBfloat16), 2);
    assert_int_equal(sim_dtype_size((ncclDataType_t)ncclNumTypes), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(half_round_trip), cmocka_unit_test(half_rounding),
        cmocka_unit_test(bf16_rounding),   cmocka_unit_test(fp8_formats),
        cmocka_unit_test(int_ops),         cmocka_unit_test(premulsum_and_small_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
