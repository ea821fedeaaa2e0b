/* vmm.c - the driver's virtual memory API, reached the way PyTorch reaches
 * it (cudaGetDriverEntryPointByVersion): reserve, create, map, set access,
 * aliasing of two mappings of one allocation, copies across adjacent
 * mappings, unmap, release; also
 * cuMemGetAddressRange and the "symbol not found" answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>

#include "require_device.h"

static CUresult (*mem_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*mem_address_free)(CUdeviceptr, size_t);
static CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
static CUresult (*mem_release)(CUmemGenericAllocationHandle);
static CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
static CUresult (*mem_unmap)(CUdeviceptr, size_t);
static CUresult (*mem_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
static CUresult (*mem_granularity)(size_t *, const CUmemAllocationProp *,
                                   CUmemAllocationGranularity_flags);
static CUresult (*mem_address_range)(CUdeviceptr *, size_t *, CUdeviceptr);

static void *entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult status;
    assert_int_equal(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &status),
                     cudaSuccess);
    assert_int_equal(status, cudaDriverEntryPointSuccess);
    assert_non_null(fn);
    return fn;
}

static int setup(void **state)
{
    (void)state;
    *(void **)&mem_reserve = entry("cuMemAddressReserve");
    *(void **)&mem_address_free = entry("cuMemAddressFree");
    *(void **)&mem_create = entry("cuMemCreate");
    *(void **)&mem_release = entry("cuMemRelease");
    *(void **)&mem_map = entry("cuMemMap");
    *(void **)&mem_unmap = entry("cuMemUnmap");
    *(void **)&mem_set_access = entry("cuMemSetAccess");
    *(void **)&mem_granularity = entry("cuMemGetAllocationGranularity");
    *(void **)&mem_address_range = entry("cuMemGetAddressRange");
    return 0;
}

static CUmemAllocationProp device_prop(void)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    return prop;
}

static void test_unknown_symbol(void **state)
{
    (void)state;
    void *fn = (void *)&fn;
    enum cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSuccess;
    assert_int_equal(cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, 12000,
                                                      cudaEnableDefault, &status),
                     cudaSuccess);
    assert_null(fn);
    assert_int_equal(status, cudaDriverEntryPointSymbolNotFound);
}

static void test_reserve_create_map_access_unmap(void **state)
{
    (void)state;
    CUmemAllocationProp prop = device_prop();
    size_t gran = 0;
    assert_int_equal(mem_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    assert_true(gran > 0);

    CUdeviceptr va = 0;
    assert_int_equal(mem_reserve(&va, 4 * gran, 0, 0, 0), CUDA_SUCCESS);
    assert_true(va % gran == 0);
    CUmemGenericAllocationHandle h;
    assert_int_equal(mem_create(&h, gran, &prop, 0), CUDA_SUCCESS);
    /* Map one allocation twice: both views alias the same memory. */
    assert_int_equal(mem_map(va, gran, 0, h, 0), CUDA_SUCCESS);
    assert_int_equal(mem_map(va + 2 * gran, gran, 0, h, 0), CUDA_SUCCESS);
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    assert_int_equal(mem_set_access(va, gran, &access, 1), CUDA_SUCCESS);
    assert_int_equal(mem_set_access(va + 2 * gran, gran, &access, 1), CUDA_SUCCESS);
    /* The unmapped gap cannot be given access. */
    assert_int_not_equal(mem_set_access(va + gran, gran, &access, 1), CUDA_SUCCESS);

    unsigned char out = 0;
    assert_int_equal(cudaMemset((void *)(uintptr_t)(va + 100), 0x5a, 1), cudaSuccess);
    assert_int_equal(
        cudaMemcpy(&out, (void *)(uintptr_t)(va + 2 * gran + 100), 1, cudaMemcpyDefault),
        cudaSuccess);
    assert_int_equal(out, 0x5a);

    CUdeviceptr base;
    size_t size;
    assert_int_equal(mem_address_range(&base, &size, va + 2 * gran + 7), CUDA_SUCCESS);
    assert_int_equal(base, va + 2 * gran);
    assert_int_equal(size, gran);

    /* Releasing while mapped is allowed; memory lives until unmapped. */
    assert_int_equal(mem_release(h), CUDA_SUCCESS);
    assert_int_equal(mem_unmap(va, gran), CUDA_SUCCESS);
    assert_int_equal(mem_unmap(va + 2 * gran, gran), CUDA_SUCCESS);
    assert_int_equal(mem_address_free(va, 4 * gran), CUDA_SUCCESS);
}

/* Two allocations mapped side by side in one reservation (expandable
 * segments grow this way) form one range for copies and sets; a range that
 * runs on into an unmapped part of the reservation is refused. */
static void test_copy_across_adjacent_mappings(void **state)
{
    (void)state;
    CUmemAllocationProp prop = device_prop();
    size_t gran = 0;
    assert_int_equal(mem_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h[2];
    assert_int_equal(mem_reserve(&va, 3 * gran, 0, 0, 0), CUDA_SUCCESS);
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(mem_create(&h[i], gran, &prop, 0), CUDA_SUCCESS);
        assert_int_equal(mem_map(va + i * gran, gran, 0, h[i], 0), CUDA_SUCCESS);
        assert_int_equal(mem_set_access(va + i * gran, gran, &access, 1), CUDA_SUCCESS);
    }
    char *p = (char *)(uintptr_t)va;
    size_t half = 4096, n = 2 * half; /* from just below the seam to just above it */
    char *at = p + gran - half;
    unsigned char host[2 * 4096], back[2 * 4096];

    assert_int_equal(cudaMemset(at, 0x6b, n), cudaSuccess);
    assert_int_equal(cudaMemcpy(back, at, n, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(back[i], 0x6b);
    for (size_t i = 0; i < n; i++)
        host[i] = (unsigned char)(i * 7);
    assert_int_equal(cudaMemcpy(at, host, n, cudaMemcpyHostToDevice), cudaSuccess);
    /* device to device across the seam, onto the start of the first mapping */
    assert_int_equal(cudaMemcpy(p, at, n, cudaMemcpyDeviceToDevice), cudaSuccess);
    assert_int_equal(cudaMemcpy(back, p, n, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_memory_equal(back, host, n);
    assert_int_equal(cudaMemsetAsync(at, 0, n, 0), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(0), cudaSuccess);

    /* The third granule is reserved but not mapped. Only the sim's answer is
     * checked: a GPU may instead fault later (a sticky error that would end
     * this program's other tests). */
    struct cudaDeviceProp dp;
    assert_int_equal(cudaGetDeviceProperties(&dp, 0), cudaSuccess);
    if (strcmp(dp.name, "fsdpshim simulated device") == 0) {
        char *tail = p + 2 * gran - half;
        assert_int_equal(cudaMemset(tail, 0, n), cudaErrorInvalidValue);
        assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
        assert_int_equal(cudaMemcpy(back, tail, n, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
        assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    }

    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(mem_unmap(va + i * gran, gran), CUDA_SUCCESS);
        assert_int_equal(mem_release(h[i]), CUDA_SUCCESS);
    }
    assert_int_equal(mem_address_free(va, 3 * gran), CUDA_SUCCESS);
}

static void test_bad_vmm_arguments(void **state)
{
    (void)state;
    CUmemAllocationProp prop = device_prop();
    size_t gran = 0;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    assert_int_equal(mem_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                     CUDA_SUCCESS);
    assert_int_equal(mem_create(&h, gran + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(mem_reserve(&va, gran / 2, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    prop.location.id = 9999;
    assert_int_not_equal(mem_create(&h, gran, &prop, 0), CUDA_SUCCESS);
}

static void test_address_range_of_malloc(void **state)
{
    (void)state;
    void *d;
    CUdeviceptr base;
    size_t size;
    assert_int_equal(cudaMalloc(&d, 1 << 20), cudaSuccess);
    assert_int_equal(mem_address_range(&base, &size, (CUdeviceptr)(uintptr_t)d + 1234),
                     CUDA_SUCCESS);
    assert_int_equal(base, (CUdeviceptr)(uintptr_t)d);
    assert_true(size >= (1 << 20));
    assert_int_equal(cudaFree(d), cudaSuccess);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_symbol),
        cmocka_unit_test(test_reserve_create_map_access_unmap),
        cmocka_unit_test(test_copy_across_adjacent_mappings),
        cmocka_unit_test(test_bad_vmm_arguments),
        cmocka_unit_test(test_address_range_of_malloc),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
