/* coll_test.c - helpers of the collective integration tests (coll_test.h). */
#include "coll_test.h"

#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int coll_failures;

double coll_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void coll_require_devices(int n)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < n) {
        printf("skipped: %d device(s) needed, the runtime sees %d (%s)\n", n, count,
               cudaGetErrorString(e));
        exit(77);
    }
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAILED: watchdog: the test hung (deadlock?)\n";
    ssize_t ignored = write(2, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(1);
}

void coll_watchdog(unsigned seconds)
{
    signal(SIGALRM, on_alarm);
    alarm(seconds);
}

static void CUDART_CB gate_wait(void *arg)
{
    coll_gate *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

void coll_gate_hold(coll_gate *g, cudaStream_t stream)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->open = false;
    g->opened_at = 0;
    CUDA_CHECK(cudaLaunchHostFunc(stream, gate_wait, g));
}

void coll_gate_open(coll_gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->opened_at = coll_now();
    g->open = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

double coll_gate_opened_at(coll_gate *g)
{
    pthread_mutex_lock(&g->lock);
    double t = g->opened_at;
    pthread_mutex_unlock(&g->lock);
    return t;
}

static void *releaser_main(void *arg)
{
    coll_releaser *r = arg;
    struct timespec ts = {(time_t)r->delay, (long)((r->delay - (double)(time_t)r->delay) * 1e9)};
    nanosleep(&ts, NULL);
    for (int i = 0; i < r->n; i++)
        coll_gate_open(r->gates[i]);
    return NULL;
}

void coll_releaser_start(coll_releaser *r, coll_gate **gates, int n, double delay)
{
    r->gates = gates;
    r->n = n;
    r->delay = delay;
    if (pthread_create(&r->thread, NULL, releaser_main, r) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        exit(1);
    }
}

void coll_releaser_join(coll_releaser *r)
{
    pthread_join(r->thread, NULL);
}

bool coll_all_bytes(const void *dev, size_t n, unsigned char value)
{
    unsigned char *host = malloc(n);
    if (!host) exit(1);
    CUDA_CHECK(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost));
    bool same = true;
    for (size_t i = 0; i < n && same; i++)
        same = host[i] == value;
    free(host);
    return same;
}
