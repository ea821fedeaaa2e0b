/* vram.c - sim-only: where cudaMalloc memory lies and what the device is
 * charged for it (docs/sim.md, "Device memory"): small allocations share
 * 2 MiB pages at 512 bytes, a page is charged once and given back with its
 * last allocation, larger allocations take whole pages of their own,
 * aligned to them; each allocation's range is the size asked for, and
 * copies stop there even where a neighbour follows in the same page. Each
 * test runs on a device of its own, so the device's free memory tells
 * exactly what the test's allocations cost. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>

#include "require_device.h"

#define MiB  ((size_t)1 << 20)
#define PAGE (2 * MiB)

/* The current device's memory in use. */
static size_t used(void)
{
    size_t free_b = 0, total = 0;
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    return total - free_b;
}

static void test_small_allocations_share_a_page(void **state)
{
    (void)state;
    assert_int_equal(cudaSetDevice(1), cudaSuccess);
    size_t base = used();
    char *p[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(cudaMalloc((void **)&p[i], 1), cudaSuccess);
    /* One page for all, 512 bytes apart, in address order. */
    assert_int_equal(used() - base, PAGE);
    for (int i = 1; i < 8; i++)
        assert_ptr_equal(p[i], p[i - 1] + 512);
    assert_int_equal((uintptr_t)p[0] % PAGE, 0);
    /* A freed slot is the lowest free address: the next one fills it. */
    assert_int_equal(cudaFree(p[3]), cudaSuccess);
    char *again;
    assert_int_equal(cudaMalloc((void **)&again, 300), cudaSuccess);
    assert_ptr_equal(again, p[3]);
    p[3] = again;
    /* 1 MiB still fits the page; the next 1 MiB does not. */
    char *half, *other;
    assert_int_equal(cudaMalloc((void **)&half, MiB), cudaSuccess);
    assert_int_equal(used() - base, PAGE);
    assert_int_equal(cudaMalloc((void **)&other, MiB), cudaSuccess);
    assert_int_equal(used() - base, 2 * PAGE);
    assert_int_equal(cudaFree(other), cudaSuccess);
    assert_int_equal(used() - base, PAGE);
    /* The page goes back with its last allocation. */
    assert_int_equal(cudaFree(half), cudaSuccess);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(used() - base, PAGE);
        assert_int_equal(cudaFree(p[i]), cudaSuccess);
    }
    assert_int_equal(used(), base);
}

static void test_large_allocations_take_whole_pages(void **state)
{
    (void)state;
    assert_int_equal(cudaSetDevice(2), cudaSuccess);
    size_t base = used();
    void *a, *b, *c;
    assert_int_equal(cudaMalloc(&a, MiB + 1), cudaSuccess);
    assert_int_equal(used() - base, PAGE);
    assert_int_equal(cudaMalloc(&b, PAGE + 1), cudaSuccess);
    assert_int_equal(used() - base, 3 * PAGE);
    assert_int_equal(cudaMalloc(&c, 3 * MiB), cudaSuccess);
    assert_int_equal(used() - base, 5 * PAGE);
    assert_int_equal((uintptr_t)a % PAGE, 0);
    assert_int_equal((uintptr_t)b % PAGE, 0);
    assert_int_equal((uintptr_t)c % PAGE, 0);
    assert_int_equal(cudaFree(b), cudaSuccess);
    assert_int_equal(used() - base, 3 * PAGE);
    assert_int_equal(cudaFree(a), cudaSuccess);
    assert_int_equal(cudaFree(c), cudaSuccess);
    assert_int_equal(used(), base);
}

/* The range is the size asked for: the driver's range queries answer it, and
 * a copy may reach no further, though the next allocation starts only 512
 * bytes on. */
static void test_ranges_are_the_size_asked_for(void **state)
{
    (void)state;
    assert_int_equal(cudaSetDevice(3), cudaSuccess);
    CUresult (*get_range)(CUdeviceptr *, size_t *, CUdeviceptr);
    assert_int_equal(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", (void **)&get_range,
                                                      12000, cudaEnableDefault, NULL),
                     cudaSuccess);
    char *a, *b, *big;
    static char host[2048];
    assert_int_equal(cudaMalloc((void **)&a, 1), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&b, 1000), cudaSuccess);
    assert_int_equal(cudaMalloc((void **)&big, MiB + 1), cudaSuccess);
    assert_ptr_equal(b, a + 512);
    CUdeviceptr start = 0;
    size_t size = 0;
    assert_int_equal(get_range(&start, &size, (CUdeviceptr)(uintptr_t)a), CUDA_SUCCESS);
    assert_int_equal(size, 1);
    assert_int_equal(get_range(&start, &size, (CUdeviceptr)(uintptr_t)(b + 999)), CUDA_SUCCESS);
    assert_int_equal(start, (CUdeviceptr)(uintptr_t)b);
    assert_int_equal(size, 1000);
    assert_int_equal(get_range(&start, &size, (CUdeviceptr)(uintptr_t)(a + 1)),
                     CUDA_ERROR_NOT_FOUND);
    assert_int_equal(get_range(&start, &size, (CUdeviceptr)(uintptr_t)big), CUDA_SUCCESS);
    assert_int_equal(size, MiB + 1);

    assert_int_equal(cudaMemcpy(a, host, 1, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaMemcpy(a, host, 2, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    assert_int_equal(cudaMemset(a, 0, 512), cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpy(host, b, 1000, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_int_equal(cudaMemcpy(host, b, 1001, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    assert_int_equal(cudaMemset(big, 0, MiB + 2), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    /* Data stays apart in a shared page. */
    memset(host, 0x5a, sizeof host);
    assert_int_equal(cudaMemset(b, 0x33, 1000), cudaSuccess);
    assert_int_equal(cudaMemcpy(a, host, 1, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaMemcpy(host, b, 1000, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 1000; i++)
        assert_int_equal((unsigned char)host[i], 0x33);
    assert_int_equal(cudaFree(a), cudaSuccess);
    assert_int_equal(cudaFree(b), cudaSuccess);
    assert_int_equal(cudaFree(big), cudaSuccess);
}

/* cuMemAlloc shares the pages of cudaMalloc; a device's pages are its own. */
static void test_driver_and_devices(void **state)
{
    (void)state;
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    assert_int_equal(cudaGetDriverEntryPointByVersion("cuMemAlloc", (void **)&mem_alloc, 12000,
                                                      cudaEnableDefault, NULL),
                     cudaSuccess);
    assert_int_equal(cudaGetDriverEntryPointByVersion("cuMemFree", (void **)&mem_free, 12000,
                                                      cudaEnableDefault, NULL),
                     cudaSuccess);
    assert_int_equal(cudaSetDevice(4), cudaSuccess);
    size_t base = used();
    char *a;
    CUdeviceptr d;
    assert_int_equal(cudaMalloc((void **)&a, 4096), cudaSuccess);
    assert_int_equal(mem_alloc(&d, 4096), CUDA_SUCCESS);
    assert_int_equal(d, (CUdeviceptr)(uintptr_t)(a + 4096));
    assert_int_equal(used() - base, PAGE);
    assert_int_equal(cudaSetDevice(5), cudaSuccess);
    size_t base5 = used();
    void *e;
    assert_int_equal(cudaMalloc(&e, 4096), cudaSuccess);
    assert_int_equal(used() - base5, PAGE);
    assert_int_equal(cudaFree(e), cudaSuccess);
    assert_int_equal(cudaSetDevice(4), cudaSuccess);
    assert_int_equal(mem_free(d), CUDA_SUCCESS);
    assert_int_equal(cudaFree(a), cudaSuccess);
    assert_int_equal(used(), base);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_allocations_share_a_page),
        cmocka_unit_test(test_large_allocations_take_whole_pages),
        cmocka_unit_test(test_ranges_are_the_size_asked_for),
        cmocka_unit_test(test_driver_and_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
