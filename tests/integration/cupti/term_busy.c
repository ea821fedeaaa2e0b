/* term_busy.c - a busy multi-threaded CUDA program for the SIGTERM stress
 * test (sigterm_attach_test.sh): THREADS threads keep the CPU busy, and
 * each makes a cudaMalloc and cudaFree pair every PERIOD_MS milliseconds
 * (0: without pause), while the main thread sleeps. With a long period gdb
 * finds no CUDA call to stop at and calls into the process on a thread it
 * stopped elsewhere (cli/attach_gdb.py), the path where a SIGTERM used to
 * turn into a SIGSEGV. It installs no signal handler of its own: SIGTERM's
 * default action ends it (after the shim's flush, once attached).
 *
 *   term_busy THREADS PERIOD_MS READY
 *
 * READY is created once every thread has made its first pair. It exits 1 on
 * a CUDA error, and by itself after MAX_SECONDS so that a test that lost it
 * leaves nothing running for long. */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define MAX_SECONDS 120

static unsigned period_ms;
static atomic_int started;

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void pair(void)
{
    void *p;
    if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess) {
        fprintf(stderr, "term_busy: a CUDA call failed\n");
        exit(1);
    }
}

static void *run(void *arg)
{
    volatile unsigned long spin = 0;
    (void)arg;
    pair();
    atomic_fetch_add(&started, 1);
    for (uint64_t next = now_ms() + period_ms;;) {
        for (int i = 0; i < 100000; i++) /* busy, in the program's own code */
            spin++;
        if (now_ms() >= next) {
            pair();
            next = now_ms() + period_ms;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc == 4 ? atoi(argv[1]) : 0;
    pthread_t t;

    if (n < 1 || n > MAX_THREADS) {
        fprintf(stderr, "usage: term_busy THREADS PERIOD_MS READY\n");
        return 2;
    }
    period_ms = (unsigned)atoi(argv[2]);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t, NULL, run, NULL) != 0) {
            fprintf(stderr, "term_busy: cannot start thread %d\n", i);
            return 1;
        }
    while (atomic_load(&started) < n)
        usleep(1000);
    int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(argv[3]);
        return 1;
    }
    close(fd);
    for (uint64_t end = now_ms() + MAX_SECONDS * 1000u; now_ms() < end;)
        usleep(10000);
    fprintf(stderr, "term_busy: no SIGTERM in %d s\n", MAX_SECONDS);
    return 1;
}
