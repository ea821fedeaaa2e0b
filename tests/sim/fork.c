/* fork.c - sim-only: a child forked after the parent used streams gets a
 * fresh set of streams and events and keeps a copy of the memory; the
 * parent carries on unaffected. (On a GPU a CUDA context does not survive
 * fork at all.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "require_device.h"

/* Runs in the child: exit status 0 when everything holds. */
static int child_checks(void *dev, cudaStream_t parent_stream, cudaEvent_t parent_event)
{
    int v = 0;
    cudaStream_t s;
    /* Inherited memory: the parent wrote 7s before forking. */
    if (cudaMemcpy(&v, dev, sizeof v, cudaMemcpyDeviceToHost) || v != 0x07070707) return 1;
    /* The parent's stream and event do not exist here. */
    if (cudaStreamSynchronize(parent_stream) != cudaErrorInvalidResourceHandle) return 2;
    if (cudaEventQuery(parent_event) != cudaErrorInvalidResourceHandle) return 3;
    (void)cudaGetLastError();
    /* New streams work, including the per-thread one. */
    if (cudaStreamCreate(&s) || cudaMemsetAsync(dev, 9, sizeof v, s) ||
        cudaMemcpyAsync(&v, dev, sizeof v, cudaMemcpyDeviceToHost, s) || cudaStreamSynchronize(s))
        return 4;
    if (v != 0x09090909) return 5;
    if (cudaMemsetAsync(dev, 1, sizeof v, cudaStreamPerThread) ||
        cudaStreamSynchronize(cudaStreamPerThread) || cudaDeviceSynchronize())
        return 6;
    return cudaFree(dev) == cudaSuccess ? 0 : 7;
}

static void test_child_gets_fresh_streams(void **state)
{
    (void)state;
    void *dev;
    cudaStream_t s;
    cudaEvent_t ev;
    int v = 0;
    assert_int_equal(cudaMalloc(&dev, 4096), cudaSuccess);
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaEventCreate(&ev), cudaSuccess);
    assert_int_equal(cudaMemsetAsync(dev, 7, 4096, s), cudaSuccess);
    assert_int_equal(cudaEventRecord(ev, s), cudaSuccess);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_int_equal(cudaMemcpy(&v, dev, sizeof v, cudaMemcpyDefault), cudaSuccess);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(child_checks(dev, s, ev));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    /* The parent's memory was not touched by the child's writes. */
    assert_int_equal(cudaMemcpyAsync(&v, dev, sizeof v, cudaMemcpyDeviceToHost, s), cudaSuccess);
    assert_int_equal(v, 0x07070707);
    assert_int_equal(cudaEventQuery(ev), cudaSuccess);
    cudaEventDestroy(ev);
    cudaStreamDestroy(s);
    assert_int_equal(cudaFree(dev), cudaSuccess);
}

int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_child_gets_fresh_streams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
