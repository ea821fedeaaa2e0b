/* cublas_handle.c - the simulated cuBLAS's and cuBLASLt's handles: create
 * and destroy, what a handle holds (stream, pointer, math and atomics modes,
 * SM count target, workspace) with the values cuBLAS refuses, the version
 * queries (the wheel's cuBLAS, 13.4.1) and the status strings; a NULL handle
 * is CUBLAS_STATUS_NOT_INITIALIZED everywhere. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "require_device.h"

static void test_lifecycle(void **state)
{
    (void)state;
    cublasHandle_t h = NULL;
    assert_int_equal(cublasCreate(NULL), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    assert_non_null(h);

    /* The defaults cuBLAS documents. */
    cudaStream_t s = (cudaStream_t)1;
    cublasPointerMode_t pm;
    cublasMath_t math;
    cublasAtomicsMode_t atomics;
    int sms = -1;
    assert_int_equal(cublasGetStream(h, &s), CUBLAS_STATUS_SUCCESS);
    assert_null(s);
    assert_int_equal(cublasGetPointerMode(h, &pm), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(pm, CUBLAS_POINTER_MODE_HOST);
    assert_int_equal(cublasGetMathMode(h, &math), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(math, CUBLAS_DEFAULT_MATH);
    assert_int_equal(cublasGetAtomicsMode(h, &atomics), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(atomics, CUBLAS_ATOMICS_NOT_ALLOWED);
    assert_int_equal(cublasGetSmCountTarget(h, &sms), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(sms, 0);

    /* Each setting sticks to its handle only. */
    cublasHandle_t other;
    assert_int_equal(cublasCreate(&other), CUBLAS_STATUS_SUCCESS);
    cudaStream_t mine;
    assert_int_equal(cudaStreamCreate(&mine), cudaSuccess);
    assert_int_equal(cublasSetStream(h, mine), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH |
                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION),
                     CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_ALLOWED), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSetSmCountTarget(h, 4), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasGetStream(h, &s), CUBLAS_STATUS_SUCCESS);
    assert_ptr_equal(s, mine);
    assert_int_equal(cublasGetPointerMode(h, &pm), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(pm, CUBLAS_POINTER_MODE_DEVICE);
    assert_int_equal(cublasGetMathMode(h, &math), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(math,
                     CUBLAS_TF32_TENSOR_OP_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
    assert_int_equal(cublasGetAtomicsMode(h, &atomics), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(atomics, CUBLAS_ATOMICS_ALLOWED);
    assert_int_equal(cublasGetSmCountTarget(h, &sms), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(sms, 4);
    assert_int_equal(cublasGetStream(other, &s), CUBLAS_STATUS_SUCCESS);
    assert_null(s);
    assert_int_equal(cublasGetPointerMode(other, &pm), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(pm, CUBLAS_POINTER_MODE_HOST);

    assert_int_equal(cublasDestroy(other), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaStreamDestroy(mine), cudaSuccess);
}

static void test_bad_values(void **state)
{
    (void)state;
    cublasHandle_t h;
    assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSetPointerMode(h, (cublasPointerMode_t)2), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSetAtomicsMode(h, (cublasAtomicsMode_t)2), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSetMathMode(h, (cublasMath_t)5), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSetMathMode(h, (cublasMath_t)32), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSetSmCountTarget(h, -1), CUBLAS_STATUS_INVALID_VALUE);
    int sms;
    assert_int_equal(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    assert_int_equal(cublasSetSmCountTarget(h, sms), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSetSmCountTarget(h, sms + 1), CUBLAS_STATUS_INVALID_VALUE);
    /* A refused value leaves the old one. */
    cublasPointerMode_t pm;
    assert_int_equal(cublasGetPointerMode(h, &pm), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(pm, CUBLAS_POINTER_MODE_HOST);
    assert_int_equal(cublasGetPointerMode(h, NULL), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasGetMathMode(h, NULL), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasGetStream(h, NULL), CUBLAS_STATUS_INVALID_VALUE);

    /* Every entry point on a NULL handle. */
    cudaStream_t s;
    cublasMath_t math;
    assert_int_equal(cublasDestroy(NULL), CUBLAS_STATUS_NOT_INITIALIZED);
    assert_int_equal(cublasSetStream(NULL, 0), CUBLAS_STATUS_NOT_INITIALIZED);
    assert_int_equal(cublasGetStream(NULL, &s), CUBLAS_STATUS_NOT_INITIALIZED);
    assert_int_equal(cublasSetPointerMode(NULL, CUBLAS_POINTER_MODE_HOST),
                     CUBLAS_STATUS_NOT_INITIALIZED);
    assert_int_equal(cublasSetMathMode(NULL, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_NOT_INITIALIZED);
    assert_int_equal(cublasGetMathMode(NULL, &math), CUBLAS_STATUS_NOT_INITIALIZED);
    assert_int_equal(cublasSetWorkspace(NULL, NULL, 0), CUBLAS_STATUS_NOT_INITIALIZED);
    assert_int_equal(cublasSetSmCountTarget(NULL, 0), CUBLAS_STATUS_NOT_INITIALIZED);
    assert_int_equal(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

/* cublasSetWorkspace takes a 256-byte aligned buffer (or none); setting the
 * stream drops it again, as documented. The workspace itself is not
 * visible through the API: what is checked is that it is accepted. */
static void test_workspace(void **state)
{
    (void)state;
    cublasHandle_t h;
    void *ws;
    assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaMalloc(&ws, 1 << 20), cudaSuccess);
    assert_int_equal(cublasSetWorkspace(h, ws, 1 << 20), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSetWorkspace(h, (char *)ws + 128, 4096), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSetWorkspace(h, NULL, 0), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSetWorkspace(h, (char *)ws + 256, 4096), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasSetStream(h, 0), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cudaFree(ws), cudaSuccess);
}

static void test_versions(void **state)
{
    (void)state;
    cublasHandle_t h;
    int v = 0;
    assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasGetVersion(h, &v), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(v, 130401);
    assert_int_equal(cublasGetVersion(h, NULL), CUBLAS_STATUS_NOT_INITIALIZED);
    assert_int_equal(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtGetVersion(), 130401);

    int major, minor, patch;
    assert_int_equal(cublasGetProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasGetProperty(MINOR_VERSION, &minor), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasGetProperty(PATCH_LEVEL, &patch), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(major * 10000 + minor * 100 + patch, 130401);
    assert_int_equal(cublasLtGetProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(major, 13);
    assert_int_equal(cublasGetProperty(MAJOR_VERSION, NULL), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasGetProperty((libraryPropertyType)3, &major),
                     CUBLAS_STATUS_INVALID_VALUE);

    int rt;
    assert_int_equal(cudaRuntimeGetVersion(&rt), cudaSuccess);
    assert_int_equal(cublasGetCudartVersion(), (size_t)rt);
    assert_int_equal(cublasLtGetCudartVersion(), (size_t)rt);
}

static void test_status_strings(void **state)
{
    (void)state;
    assert_string_equal(cublasGetStatusName(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
    assert_string_equal(cublasGetStatusName(CUBLAS_STATUS_EXECUTION_FAILED),
                        "CUBLAS_STATUS_EXECUTION_FAILED");
    assert_string_equal(cublasGetStatusString(CUBLAS_STATUS_SUCCESS), "success");
    assert_string_equal(cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED),
                        "the library was not initialized");
    assert_string_equal(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE),
                        "an unsupported value or parameter was passed to the function");
    assert_string_equal(cublasGetStatusName((cublasStatus_t)2), "unrecognized status");
    assert_string_equal(cublasGetStatusString((cublasStatus_t)99), "unrecognized status");
    /* cuBLASLt answers alike. */
    for (int st = 0; st <= 17; st++) {
        assert_string_equal(cublasLtGetStatusName(st), cublasGetStatusName(st));
        assert_string_equal(cublasLtGetStatusString(st), cublasGetStatusString(st));
    }
}

/* A cuBLASLt handle's lifecycle (sim_cublas_lt uses a cuBLAS handle as one). */
static void test_lt_handle(void **state)
{
    (void)state;
    cublasLtHandle_t lt;
    assert_int_equal(cublasLtCreate(NULL), CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(cublasLtDestroy(NULL), CUBLAS_STATUS_NOT_INITIALIZED);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle),      cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_workspace),      cmocka_unit_test(test_versions),
        cmocka_unit_test(test_status_strings), cmocka_unit_test(test_lt_handle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
