/* rl_gap.c - how soon an all-gather held back by the rate limiter is issued
 * once the memory it waited for is free again.
 *
 * PyTorch FSDP1's limiter (an event.synchronize() in Python) leaves about
 * 235 us between the end of the wait and the next all-gather's launch; the
 * shim's target is under 20 us (SPEC section 14). Each round: a consumer
 * stream reads an all-gather output and is then held by a host function,
 * and the output is freed behind the hold; with ag_limit:1 the next
 * ncclAllGather waits for that free. A releaser thread opens the hold; the
 * program measures from that moment to the return of ncclAllGather. That
 * program-side figure includes the device noticing the free has passed
 * (here the simulated device's thread wake-ups, on a shared machine) and
 * NCCL enqueueing the call; the shim's own gap, from the end of its
 * wait to the call into NCCL, is printed by the shim at exit with
 * FSDPSHIM_LOG=info (bench/shim/shim_bench.sh shows both).
 *
 *   FSDPSHIM_CONF=ag_limit:1 LD_PRELOAD=libfsdpshim.so rl_gap [ROUNDS] */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BYTES   (1u << 20)
#define HOLD_NS 2000000 /* the consumer is released 2 ms after the wait starts */

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            fprintf(stderr, "rl_gap: %s failed\n", #call);                                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool open;
    double opened_at;
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};

static void CUDART_CB hold(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gate.lock);
    while (!gate.open)
        pthread_cond_wait(&gate.cond, &gate.lock);
    pthread_mutex_unlock(&gate.lock);
}

static void *release_later(void *arg)
{
    (void)arg;
    struct timespec ts = {0, HOLD_NS};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&gate.lock);
    gate.opened_at = now_us();
    gate.open = true;
    pthread_cond_broadcast(&gate.cond);
    pthread_mutex_unlock(&gate.lock);
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    if (rounds < 1) rounds = 1;
    int dev = 0;
    ncclComm_t comm;
    cudaStream_t nccl_stream, consumer;
    void *shard, *sink, *out;
    CHECK(cudaSetDevice(dev));
    CHECK(ncclCommInitAll(&comm, 1, &dev));
    CHECK(cudaStreamCreateWithFlags(&nccl_stream, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&shard, BYTES));
    CHECK(cudaMalloc(&sink, BYTES));
    CHECK(cudaDeviceSynchronize());

    double *gaps = calloc((size_t)rounds, sizeof(*gaps));
    int waited = 0;
    for (int i = 0; i < rounds; i++) {
        /* One output, read by the consumer, which is then held before the
         * free: after the release only the free itself is left to pass. */
        gate.open = false;
        CHECK(cudaMallocAsync(&out, BYTES, nccl_stream));
        CHECK(ncclAllGather(shard, out, BYTES, ncclUint8, comm, nccl_stream));
        cudaEvent_t gathered;
        CHECK(cudaEventCreateWithFlags(&gathered, cudaEventDisableTiming));
        CHECK(cudaEventRecord(gathered, nccl_stream));
        CHECK(cudaStreamWaitEvent(consumer, gathered, 0));
        CHECK(cudaMemcpyAsync(sink, out, BYTES, cudaMemcpyDeviceToDevice, consumer));
        CHECK(cudaLaunchHostFunc(consumer, hold, NULL));
        CHECK(cudaEventDestroy(gathered));
        CHECK(cudaFreeAsync(out, consumer));

        /* The next all-gather waits for the consumer. */
        pthread_t releaser;
        CHECK(pthread_create(&releaser, NULL, release_later, NULL));
        CHECK(cudaMallocAsync(&out, BYTES, nccl_stream));
        CHECK(ncclAllGather(shard, out, BYTES, ncclUint8, comm, nccl_stream));
        double returned = now_us();
        pthread_join(releaser, NULL);
        if (returned >= gate.opened_at) gaps[waited++] = returned - gate.opened_at;
        CHECK(cudaFreeAsync(out, nccl_stream));
        CHECK(cudaDeviceSynchronize());
    }

    if (!waited) {
        printf("rl_gap: no all-gather waited for the consumer: is the shim preloaded with "
               "ag_limit:1?\n");
        return 1;
    }
    qsort(gaps, (size_t)waited, sizeof(*gaps), by_value);
    printf("rl_gap: %d of %d all-gathers waited; consumer released -> ncclAllGather returned "
           "(program side): median %.1f us, p99 %.1f us\n",
           waited, rounds, gaps[waited / 2], gaps[(size_t)((waited - 1) * 0.99)]);
    free(gaps);
    CHECK(cudaFree(sink));
    CHECK(cudaFree(shard));
    CHECK(ncclCommDestroy(comm));
    return waited == rounds ? 0 : 1;
}
