/* seam.c - sim-only: the private seam the simulated NCCL runs collectives
 * through (sim/core/sim.h). Enqueued work runs in stream order, is not
 * held by a blocked host function of the same device, understands handle 0
 * as legacy or per-thread as asked, and refuses destroyed streams. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "require_device.h"
#include "sim.h"

struct log {
    int seen[16];
    int n;
};
struct item {
    struct log *log;
    int value;
};

static void append(void *p)
{
    struct item *it = p;
    it->log->seen[it->log->n++] = it->value;
}

static void test_stream_order_with_host_functions(void **state)
{
    (void)state;
    cudaStream_t s;
    struct log log = {{0}, 0};
    struct item items[16];
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    for (int i = 0; i < 16; i++) {
        items[i] = (struct item){&log, i};
        if (i % 2)
            assert_int_equal(sim_stream_enqueue(s, 0, append, &items[i]), cudaSuccess);
        else
            assert_int_equal(cudaLaunchHostFunc(s, append, &items[i]), cudaSuccess);
    }
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(log.n, 16);
    for (int i = 0; i < 16; i++)
        assert_int_equal(log.seen[i], i);
    cudaStreamDestroy(s);
}

static void open_gate(void *gate)
{
    fs_gate_open(gate);
}

static void test_not_serialised_with_host_functions(void **state)
{
    (void)state;
    cudaStream_t held, s;
    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    /* The host function blocks until device work on another stream of the
     * same device opens the gate: that work must not wait for it. */
    assert_int_equal(cudaLaunchHostFunc(held, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(sim_stream_enqueue(s, 0, open_gate, &gate), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(held), cudaSuccess);
    assert_false(gate.timed_out);
    cudaStreamDestroy(held);
    cudaStreamDestroy(s);
}

static void test_handles_and_devices(void **state)
{
    (void)state;
    cudaStream_t s;
    struct log log = {{0}, 0};
    struct item it = {&log, 7};
    assert_int_equal(cudaSetDevice(1), cudaSuccess);
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(sim_stream_device(s), 1);
    assert_int_equal(sim_stream_device(NULL), 1);
    assert_int_equal(cudaSetDevice(0), cudaSuccess);
    assert_int_equal(sim_stream_device(s), 1);
    assert_int_equal(sim_stream_device(cudaStreamPerThread), 0);

    /* Handle 0 as the per-thread stream: ordered with cudaStreamPerThread. */
    assert_int_equal(sim_stream_enqueue(NULL, 1, append, &it), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
    assert_int_equal(log.n, 1);
    assert_int_equal(sim_stream_enqueue(NULL, 0, append, &it), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
    assert_int_equal(log.n, 2);

    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
    assert_int_equal(sim_stream_enqueue(s, 0, append, &it), cudaErrorInvalidResourceHandle);
    assert_int_equal(sim_stream_device(s), -1);
    /* The seam reports, it does not touch the program's last error. */
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_order_with_host_functions),
        cmocka_unit_test(test_not_serialised_with_host_functions),
        cmocka_unit_test(test_handles_and_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
