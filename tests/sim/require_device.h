/* require_device.h - the first thing every CUDA test program does: exit 77
 * (ctest "skipped") unless a device is there. On the sim there always is;
 * the same programs built against the real runtime (tests/gpu) skip on a
 * machine without a GPU instead of failing. Also small helpers the tests
 * share: a gate a host function can block a stream on, and a clock. */
#ifndef FS_TEST_REQUIRE_DEVICE_H
#define FS_TEST_REQUIRE_DEVICE_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline void fs_test_require_device(void)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n == 0) {
        fprintf(stderr, "skipped: no CUDA device (%s)\n", cudaGetErrorName(err));
        (void)cudaGetLastError();
        exit(77);
    }
}

static inline double fs_test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void fs_test_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A gate: fs_gate_wait (run as a host function) blocks its stream until
 * fs_gate_open is called, or 5 s pass, so a broken test fails, not hangs. */
struct fs_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
    int timed_out;
};
#define FS_GATE_INIT                                                                               \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0                                  \
    }

static inline void CUDART_CB fs_gate_wait(void *p)
{
    struct fs_gate *g = p;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        if (pthread_cond_timedwait(&g->cv, &g->mu, &deadline) != 0) {
            g->timed_out = 1;
            break;
        }
    pthread_mutex_unlock(&g->mu);
}

static inline void fs_gate_open(struct fs_gate *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Polls cudaEventQuery for up to ms milliseconds; returns the last result. */
static inline cudaError_t fs_event_poll(cudaEvent_t ev, int ms)
{
    double end = fs_test_now() + ms / 1000.0;
    cudaError_t err;
    while ((err = cudaEventQuery(ev)) == cudaErrorNotReady && fs_test_now() < end)
        fs_test_sleep_ms(1);
    return err;
}

#endif /* FS_TEST_REQUIRE_DEVICE_H */
