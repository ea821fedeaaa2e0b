/* funcattr.c - sim-only: what a registered kernel reports
 * (cudaFuncGetAttributes), the attributes a program may set and their
 * checks, per device (cudaFuncSetAttribute on the current device,
 * cudaKernelSetAttributeForDevice), and occupancy from the sim's H100-like
 * SM: 2048 threads, 64 Ki registers (32 per thread reported), 228 KiB of
 * shared memory with 1 KiB reserved per block, 32 blocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fake_module.h"
#include "require_device.h"

static void kern(void)
{
    FS_STUB_BODY(kern, NULL);
}

static void other(void)
{
    FS_STUB_BODY(other, NULL);
}

static void unknown(void)
{
    FS_STUB_BODY(unknown, NULL);
}

static void **module;

static void test_attributes(void **state)
{
    (void)state;
    struct cudaFuncAttributes a;
    assert_int_equal(cudaFuncGetAttributes(&a, (const void *)kern), cudaSuccess);
    assert_int_equal(a.maxThreadsPerBlock, 1024);
    assert_int_equal(a.numRegs, 32);
    assert_int_equal(a.sharedSizeBytes, 0);
    assert_int_equal(a.maxDynamicSharedSizeBytes, 48 << 10);
    assert_int_equal(a.preferredShmemCarveout, -1);
    assert_int_equal(a.ptxVersion, 90);
    assert_int_equal(a.binaryVersion, 90);
    assert_int_equal(cudaFuncGetAttributes(&a, (const void *)unknown),
                     cudaErrorInvalidDeviceFunction);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
    assert_int_equal(cudaFuncGetAttributes(NULL, (const void *)kern), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
}

static void test_set_attribute_checks(void **state)
{
    (void)state;
    const void *f = (const void *)other;
    struct {
        enum cudaFuncAttribute attr;
        int value;
        cudaError_t want;
    } rows[] = {
        {cudaFuncAttributeMaxDynamicSharedMemorySize, 227 << 10, cudaSuccess},
        {cudaFuncAttributeMaxDynamicSharedMemorySize, (227 << 10) + 1, cudaErrorInvalidValue},
        {cudaFuncAttributeMaxDynamicSharedMemorySize, -1, cudaErrorInvalidValue},
        {cudaFuncAttributePreferredSharedMemoryCarveout, 100, cudaSuccess},
        {cudaFuncAttributePreferredSharedMemoryCarveout, -1, cudaSuccess},
        {cudaFuncAttributePreferredSharedMemoryCarveout, 101, cudaErrorInvalidValue},
        {cudaFuncAttributeClusterDimMustBeSet, 1, cudaErrorInvalidValue},
        {cudaFuncAttributeNonPortableClusterSizeAllowed, 2, cudaErrorInvalidValue},
        {cudaFuncAttributeClusterSchedulingPolicyPreference, cudaClusterSchedulingPolicySpread,
         cudaSuccess},
        {cudaFuncAttributeClusterSchedulingPolicyPreference, 7, cudaErrorInvalidValue},
        {cudaFuncAttributeMax, 0, cudaErrorInvalidValue},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        assert_int_equal(cudaFuncSetAttribute(f, rows[i].attr, rows[i].value), rows[i].want);
        assert_int_equal(cudaGetLastError(), rows[i].want);
    }
    assert_int_equal(
        cudaFuncSetAttribute((const void *)unknown, cudaFuncAttributeMaxDynamicSharedMemorySize, 0),
        cudaErrorInvalidDeviceFunction);
    struct cudaFuncAttributes a;
    assert_int_equal(cudaFuncGetAttributes(&a, f), cudaSuccess);
    assert_int_equal(a.maxDynamicSharedSizeBytes, 227 << 10);
    assert_int_equal(a.clusterSchedulingPolicyPreference, cudaClusterSchedulingPolicySpread);
    (void)cudaGetLastError();
}

static void test_per_device(void **state)
{
    (void)state;
    const void *f = (const void *)kern;
    cudaKernel_t k;
    void *args[] = {NULL};
    dim3 one = {1, 1, 1};
    assert_int_equal(cudaGetKernel(&k, f), cudaSuccess);
    /* Raised on device 1 only: a launch there may use 100 KiB; on device 0
     * it is still over the 48 KiB default. */
    assert_int_equal(cudaKernelSetAttributeForDevice(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     100 << 10, 1),
                     cudaSuccess);
    assert_int_equal(cudaKernelSetAttributeForDevice(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     100 << 10, 99),
                     cudaErrorInvalidDevice);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidDevice);
    struct cudaFuncAttributes a;
    assert_int_equal(cudaFuncGetAttributes(&a, f), cudaSuccess);
    assert_int_equal(a.maxDynamicSharedSizeBytes, 48 << 10);
    assert_int_equal(cudaLaunchKernel(f, one, one, args, 100 << 10, NULL), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    assert_int_equal(cudaSetDevice(1), cudaSuccess);
    assert_int_equal(cudaFuncGetAttributes(&a, f), cudaSuccess);
    assert_int_equal(a.maxDynamicSharedSizeBytes, 100 << 10);
    assert_int_equal(cudaLaunchKernel(f, one, one, args, 100 << 10, NULL), cudaSuccess);
    assert_int_equal(cudaLaunchKernel(f, one, one, args, (100 << 10) + 1, NULL),
                     cudaErrorInvalidValue);
    (void)cudaGetLastError();
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
}

static void test_occupancy(void **state)
{
    (void)state;
    const void *f = (const void *)kern;
    struct {
        int block;
        size_t smem;
        int want;
    } rows[] = {
        {1024, 0, 2},       /* threads: 2048 per SM */
        {256, 0, 8},        /* threads */
        {32, 0, 32},        /* the 32-block limit */
        {1, 0, 32},         /* a block takes a whole warp */
        {33, 0, 32},        /* 2 warps: 32 blocks by threads and by the limit */
        {64, 20 << 10, 10}, /* shared memory: 228 KiB / (20 + 1) KiB */
        {64, 48 << 10, 4},  /* 228 / 49 */
        {64, 49 << 10, 0},  /* over the kernel's limit: no block fits */
        {1025, 0, 0},       /* over the kernel's max threads */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int n = -1;
        assert_int_equal(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, rows[i].block, rows[i].smem),
            cudaSuccess);
        assert_int_equal(n, rows[i].want);
    }
    int n;
    assert_int_equal(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                         &n, f, 128, 0, cudaOccupancyDisableCachingOverride),
                     cudaSuccess);
    assert_int_equal(n, 16);
    assert_int_equal(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&n, f, 128, 0, 2),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, 0, 0),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaOccupancyMaxActiveBlocksPerMultiprocessor(NULL, f, 128, 0),
                     cudaErrorInvalidValue);
    assert_int_equal(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, (const void *)unknown, 128, 0),
        cudaErrorInvalidDeviceFunction);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidDeviceFunction);
}

int main(void)
{
    fs_test_require_device();
    module = __cudaRegisterFatBinary((void *)&fs_fake_wrapper);
    __cudaRegisterFunction(module, (const char *)kern, "kern", "kern", -1, NULL, NULL, NULL, NULL,
                           NULL);
    __cudaRegisterFunction(module, (const char *)other, "other", "other", -1, NULL, NULL, NULL,
                           NULL, NULL);
    __cudaRegisterFatBinaryEnd(module);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attributes),
        cmocka_unit_test(test_set_attribute_checks),
        cmocka_unit_test(test_per_device),
        cmocka_unit_test(test_occupancy),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    __cudaUnregisterFatBinary(module);
    return failed;
}
