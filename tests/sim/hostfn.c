/* hostfn.c - host functions of one device run one at a time (the GPU's
 * documented worst case, which the sim always takes), while host functions
 * of different devices and device work (copies) are not held by them.
 * Sim-only: a GPU may serialise less. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "require_device.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int running, max_running;

static void CUDART_CB busy(void *p)
{
    (void)p;
    pthread_mutex_lock(&mu);
    if (++running > max_running) max_running = running;
    pthread_mutex_unlock(&mu);
    fs_test_sleep_ms(20);
    pthread_mutex_lock(&mu);
    running--;
    pthread_mutex_unlock(&mu);
}

static void test_one_device_runs_one_host_function_at_a_time(void **state)
{
    (void)state;
    cudaStream_t s[4];
    running = max_running = 0;
    for (int i = 0; i < 4; i++)
        assert_int_equal(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking), cudaSuccess);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 4; i++)
            assert_int_equal(cudaLaunchHostFunc(s[i], busy, NULL), cudaSuccess);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_int_equal(max_running, 1);
    for (int i = 0; i < 4; i++)
        cudaStreamDestroy(s[i]);
}

static void CUDART_CB open_gate(void *gate)
{
    fs_gate_open(gate);
}

static void test_devices_do_not_serialise_each_other(void **state)
{
    (void)state;
    int n;
    assert_int_equal(cudaGetDeviceCount(&n), cudaSuccess);
    if (n < 2) skip();
    struct fs_gate gate = FS_GATE_INIT;
    cudaStream_t s1;
    /* Device 0's host function blocks until device 1's has run. */
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(cudaStreamPerThread, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaSetDevice(1), cudaSuccess);
    assert_int_equal(cudaStreamCreate(&s1), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s1, open_gate, &gate), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s1), cudaSuccess);
    cudaStreamDestroy(s1);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_false(gate.timed_out);
}

static void test_copies_overtake_a_blocked_host_function(void **state)
{
    (void)state;
    struct fs_gate gate = FS_GATE_INIT;
    cudaStream_t held, free_running;
    void *a, *b;
    cudaEvent_t ev;
    assert_int_equal(cudaMalloc(&a, 1024), cudaSuccess);
    assert_int_equal(cudaMalloc(&b, 1024), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&free_running, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaEventCreate(&ev), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(held, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(b, a, 1024, cudaMemcpyDeviceToDevice, free_running),
                     cudaSuccess);
    assert_int_equal(cudaEventRecord(ev, free_running), cudaSuccess);
    assert_int_equal(fs_event_poll(ev, 5000), cudaSuccess);
    fs_gate_open(&gate);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    cudaEventDestroy(ev);
    cudaStreamDestroy(held);
    cudaStreamDestroy(free_running);
    cudaFree(a);
    cudaFree(b);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_device_runs_one_host_function_at_a_time),
        cmocka_unit_test(test_devices_do_not_serialise_each_other),
        cmocka_unit_test(test_copies_overtake_a_blocked_host_function),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
