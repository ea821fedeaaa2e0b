/* threads.c - many threads using streams, events and both allocators at
 * once (mostly for TSan): every result must be right and the pool's used
 * memory must come back to where it started. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "require_device.h"

enum { THREADS = 4, ROUNDS = 150, N = 4096 };

static void *worker(void *arg)
{
    intptr_t failures = 0;
    unsigned char out[N];
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        cudaStream_t s;
        cudaEvent_t ev;
        void *a, *b;
        int value = (i & 0x7f) + 1;
        failures += cudaStreamCreateWithFlags(&s, i % 2 ? cudaStreamNonBlocking : 0) != 0;
        failures += cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != 0;
        failures += cudaMallocAsync(&a, N, s) != 0;
        failures += cudaMalloc(&b, N) != 0;
        failures += cudaMemsetAsync(a, value, N, s) != 0;
        failures += cudaEventRecord(ev, s) != 0;
        (void)cudaEventQuery(ev);
        /* The per-thread stream copies after the event. */
        failures += cudaStreamWaitEvent(cudaStreamPerThread, ev, 0) != 0;
        failures += cudaMemcpyAsync(b, a, N, cudaMemcpyDeviceToDevice, cudaStreamPerThread) != 0;
        failures += cudaMemcpyAsync(out, b, N, cudaMemcpyDeviceToHost, cudaStreamPerThread) != 0;
        failures += cudaFreeAsync(a, cudaStreamPerThread) != 0;
        failures += cudaEventDestroy(ev) != 0;
        failures += cudaStreamDestroy(s) != 0;
        failures += cudaStreamSynchronize(cudaStreamPerThread) != 0;
        failures += out[0] != value || out[N - 1] != value;
        failures += cudaFree(b) != 0;
    }
    return (void *)failures;
}

static void test_concurrent_users(void **state)
{
    (void)state;
    cudaMemPool_t pool;
    uint64_t used0, used1;
    pthread_t t[THREADS];
    assert_int_equal(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
    assert_int_equal(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used0),
                     cudaSuccess);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    intptr_t failures = 0;
    for (int i = 0; i < THREADS; i++) {
        void *f;
        pthread_join(t[i], &f);
        failures += (intptr_t)f;
    }
    assert_int_equal(failures, 0);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_int_equal(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used1),
                     cudaSuccess);
    assert_int_equal(used1, used0);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_users),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
