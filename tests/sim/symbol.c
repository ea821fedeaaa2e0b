/* symbol.c - sim-only: __device__ and __constant__ variables registered the
 * way nvcc's generated code registers them (__cudaRegisterVar). Each device
 * gets its own copy when the module is first used there, charged to the
 * device, starting from the initialised data of an uncompressed cubin in
 * the fat binary, else zeroed; copies
 * to and from symbols move real data with offsets, and the errors are the
 * runtime's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fake_module.h"
#include "require_device.h"

/* The host shadows. Whatever they hold, the device copies start zeroed here
 * (the fake fat binary has no cubin to read initialisers from). */
static int table[64] = {1, 2, 3, 4};
static float coeffs[8];
static int unregistered;
static void **module;

static void kern(void)
{
    FS_STUB_BODY(kern, NULL);
}

static void test_address_size_and_initial_value(void **state)
{
    (void)state;
    void *p;
    size_t size;
    int got[64];
    assert_int_equal(cudaGetSymbolAddress(&p, table), cudaSuccess);
    assert_int_equal(cudaGetSymbolSize(&size, table), cudaSuccess);
    assert_int_equal(size, sizeof table);
    memset(got, 0xff, sizeof got);
    assert_int_equal(cudaMemcpy(got, p, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 64; i++)
        assert_int_equal(got[i], 0);
    /* Device memory: known to the runtime as such, but not an allocation
     * that cudaFree could free. */
    struct cudaPointerAttributes attr;
    assert_int_equal(cudaPointerGetAttributes(&attr, p), cudaSuccess);
    assert_int_equal(attr.type, cudaMemoryTypeDevice);
    assert_int_equal(attr.device, 0);
    assert_int_equal(cudaFree(p), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    /* Unknown symbols and null out-pointers. */
    assert_int_equal(cudaGetSymbolAddress(&p, &unregistered), cudaErrorInvalidSymbol);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidSymbol);
    assert_int_equal(cudaGetSymbolSize(&size, &unregistered), cudaErrorInvalidSymbol);
    assert_int_equal(cudaGetSymbolAddress(NULL, table), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
}

static void test_round_trip(void **state)
{
    (void)state;
    float in[8] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 7.5f}, out[8] = {0};
    assert_int_equal(cudaMemcpyToSymbol(coeffs, in, sizeof in, 0, cudaMemcpyHostToDevice),
                     cudaSuccess);
    assert_int_equal(cudaMemcpyFromSymbol(out, coeffs, sizeof out, 0, cudaMemcpyDeviceToHost),
                     cudaSuccess);
    assert_memory_equal(out, in, sizeof in);
    /* The host shadow is not the device copy. */
    assert_true(coeffs[0] == 0.0f);
    /* With an offset, and through a device buffer (device to device). */
    float two[2] = {-1.0f, -2.0f}, *dev;
    assert_int_equal(cudaMalloc((void **)&dev, sizeof two), cudaSuccess);
    assert_int_equal(cudaMemcpy(dev, two, sizeof two, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(
        cudaMemcpyToSymbol(coeffs, dev, sizeof two, 6 * sizeof(float), cudaMemcpyDeviceToDevice),
        cudaSuccess);
    assert_int_equal(cudaMemcpyFromSymbol(out, coeffs, sizeof out, 0, cudaMemcpyDefault),
                     cudaSuccess);
    assert_true(out[5] == 5.5f && out[6] == -1.0f && out[7] == -2.0f);
    /* Asynchronously, ordered on a stream. */
    cudaStream_t s;
    float *pinned;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaMallocHost((void **)&pinned, sizeof in), cudaSuccess);
    memset(pinned, 0, sizeof in);
    assert_int_equal(cudaMemcpyToSymbolAsync(coeffs, in, sizeof in, 0, cudaMemcpyHostToDevice, s),
                     cudaSuccess);
    assert_int_equal(
        cudaMemcpyFromSymbolAsync(pinned, coeffs, sizeof in, 0, cudaMemcpyDeviceToHost, s),
        cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_memory_equal(pinned, in, sizeof in);
    assert_int_equal(cudaFreeHost(pinned), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
    assert_int_equal(cudaFree(dev), cudaSuccess);
}

static void test_copy_errors(void **state)
{
    (void)state;
    float buf[9] = {0};
    struct {
        cudaError_t got, want;
    } rows[] = {
        /* past the end, by size or offset */
        {cudaMemcpyToSymbol(coeffs, buf, 9 * sizeof(float), 0, cudaMemcpyHostToDevice),
         cudaErrorInvalidValue},
        {cudaMemcpyToSymbol(coeffs, buf, sizeof(float), 8 * sizeof(float), cudaMemcpyHostToDevice),
         cudaErrorInvalidValue},
        {cudaMemcpyFromSymbol(buf, coeffs, 1, SIZE_MAX, cudaMemcpyDeviceToHost),
         cudaErrorInvalidValue},
        /* the symbol is the device side */
        {cudaMemcpyToSymbol(coeffs, buf, 4, 0, cudaMemcpyDeviceToHost),
         cudaErrorInvalidMemcpyDirection},
        {cudaMemcpyFromSymbol(buf, coeffs, 4, 0, cudaMemcpyHostToDevice),
         cudaErrorInvalidMemcpyDirection},
        {cudaMemcpyToSymbol(&unregistered, buf, 4, 0, cudaMemcpyHostToDevice),
         cudaErrorInvalidSymbol},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_int_equal(rows[i].got, rows[i].want);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidSymbol);
    /* Exactly to the end is fine. */
    assert_int_equal(
        cudaMemcpyToSymbol(coeffs, buf, sizeof(float), 7 * sizeof(float), cudaMemcpyHostToDevice),
        cudaSuccess);
}

static void test_per_device_copies_charged(void **state)
{
    (void)state;
    size_t free0, free1, total;
    void *p0, *p1;
    int v = 42, got = -1;
    assert_int_equal(cudaSetDevice(2), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free0, &total), cudaSuccess);
    /* The first use loads the module on device 2: its variables (256 and
     * 32 bytes) are placed like a small cudaMalloc, in the device's first
     * page, which the device is charged (docs/sim.md, "Device memory"). */
    assert_int_equal(cudaGetSymbolAddress(&p1, table), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free1, &total), cudaSuccess);
    assert_int_equal(free0 - free1, 2 << 20);
    /* A launch on device 2 does not load it again. */
    dim3 one = {1, 1, 1};
    assert_int_equal(cudaLaunchKernel((const void *)kern, one, one, NULL, 0, NULL), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free0, &total), cudaSuccess);
    assert_int_equal(free0, free1);
    assert_int_equal(cudaMemcpyToSymbol(table, &v, sizeof v, 0, cudaMemcpyHostToDevice),
                     cudaSuccess);
    /* Device 0 has its own copy. */
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaGetSymbolAddress(&p0, table), cudaSuccess);
    assert_ptr_not_equal(p0, p1);
    got = -1;
    assert_int_equal(cudaMemcpyFromSymbol(&got, table, sizeof got, 0, cudaMemcpyDeviceToHost),
                     cudaSuccess);
    assert_int_equal(got, 0);
    assert_int_equal(cudaMemcpy(&got, p1, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_int_equal(got, 42);
    /* A reset of device 2 drops its copy; the next use starts afresh. */
    assert_int_equal(cudaSetDevice(2), cudaSuccess);
    assert_int_equal(cudaDeviceReset(), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free1, &total), cudaSuccess);
    assert_int_equal(free1, total);
    got = -1;
    assert_int_equal(cudaMemcpyFromSymbol(&got, table, sizeof got, 0, cudaMemcpyDeviceToHost),
                     cudaSuccess);
    assert_int_equal(got, 0);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
}

/* A module whose fat binary holds an uncompressed cubin (as nvcc emits for
 * small modules): its "table" starts from the cubin's initialised data. A
 * registration whose size disagrees with the cubin's gets zeros. */
static int shadow_table[16], shadow_wrong[8];

static void test_initial_values_from_the_image(void **state)
{
    (void)state;
    struct fs_fake_cubin c;
    fs_fake_cubin_make(&c);
    unsigned char *fb = fs_fake_fatbin_make(2, 0x11, &c, sizeof c);
    __fatBinC_Wrapper_t wrapper = {FATBINC_MAGIC, FATBINC_VERSION, (const unsigned long long *)fb,
                                   NULL};
    int got[16];
    void **m = __cudaRegisterFatBinary(&wrapper);
    __cudaRegisterVar(m, (char *)shadow_table, "table", "table", 0, sizeof shadow_table, 0, 0);
    __cudaRegisterFatBinaryEnd(m);
    assert_int_equal(cudaMemcpyFromSymbol(got, shadow_table, sizeof got, 0, cudaMemcpyDefault),
                     cudaSuccess);
    assert_int_equal(got[0], 7);
    assert_int_equal(got[15], 22);
    __cudaUnregisterFatBinary(m);

    m = __cudaRegisterFatBinary(&wrapper);
    __cudaRegisterVar(m, (char *)shadow_wrong, "table", "table", 0, sizeof shadow_wrong, 0, 0);
    __cudaRegisterFatBinaryEnd(m);
    got[0] = -1;
    assert_int_equal(
        cudaMemcpyFromSymbol(got, shadow_wrong, sizeof shadow_wrong, 0, cudaMemcpyDefault),
        cudaSuccess);
    assert_int_equal(got[0], 0);
    __cudaUnregisterFatBinary(m);
    free(fb);
}

int main(void)
{
    fs_test_require_device();
    module = __cudaRegisterFatBinary((void *)&fs_fake_wrapper);
    __cudaRegisterFunction(module, (const char *)kern, "kern", "kern", -1, NULL, NULL, NULL, NULL,
                           NULL);
    __cudaRegisterVar(module, (char *)table, "table", "table", 0, sizeof table, 0, 0);
    __cudaRegisterVar(module, (char *)coeffs, "coeffs", "coeffs", 0, sizeof coeffs, 1, 0);
    __cudaRegisterFatBinaryEnd(module);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_address_size_and_initial_value),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_copy_errors),
        cmocka_unit_test(test_per_device_copies_charged),
        cmocka_unit_test(test_initial_values_from_the_image),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    __cudaUnregisterFatBinary(module);
    return failed;
}
