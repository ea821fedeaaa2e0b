/* coll_test.h - what the collective integration tests share: checks that
 * say what failed, a host-function gate that holds a stream busy until the
 * test opens it, a releaser thread that opens gates after a delay, a
 * monotonic clock and a watchdog that turns a hang into a failure.
 *
 * The tests are ordinary CUDA + NCCL host programs; they know nothing of the
 * shim and judge it only by what a program can see. */
#ifndef COLL_TEST_H
#define COLL_TEST_H

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define NCCL_CHECK(call)                                                                           \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: ncclResult_t %d\n", __FILE__, __LINE__, #call, (int)r_);   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Counts a failed expectation and says why; the test exits non-zero at the end. */
extern int coll_failures;
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            coll_failures++;                                                                       \
            fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond);                     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* Exits 77 (skipped) unless the runtime sees at least `n` devices: the gpu
 * builds of these tests run on machines with fewer GPUs or none. */
void coll_require_devices(int n);

/* Seconds on the monotonic clock. */
double coll_now(void);

/* Kills the test with a message after `seconds`: a deadlock fails, it does
 * not hang until ctest's timeout. */
void coll_watchdog(unsigned seconds);

/* A host function that blocks its stream until the gate is opened. */
typedef struct coll_gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool open;
    double opened_at; /* coll_now() when opened */
} coll_gate;

/* Enqueues the gate on `stream`: work behind it waits until coll_gate_open. */
void coll_gate_hold(coll_gate *g, cudaStream_t stream);
void coll_gate_open(coll_gate *g);
double coll_gate_opened_at(coll_gate *g);

/* Opens `n` gates from another thread after `delay` seconds. */
typedef struct coll_releaser {
    pthread_t thread;
    coll_gate **gates;
    int n;
    double delay;
} coll_releaser;
void coll_releaser_start(coll_releaser *r, coll_gate **gates, int n, double delay);
void coll_releaser_join(coll_releaser *r);

/* True when every byte of the device buffer equals `value`. */
bool coll_all_bytes(const void *dev, size_t n, unsigned char value);

#endif /* COLL_TEST_H */
