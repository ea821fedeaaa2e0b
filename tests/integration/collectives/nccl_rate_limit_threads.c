/* nccl_rate_limit_threads.c - the rate limiter is per device, and holds when
 * several threads issue all-gathers on that device at once.
 *
 * Two single-rank communicators on device 0 (as HSDP's shard and replicate
 * groups share a device), each all-gathering on its own stream. One output
 * of each is read by a shared consumer stream, held by a host function, and
 * freed: two freed outputs in flight on device 0, but only one per
 * communicator. With ag_limit:2, the next all-gather on either communicator
 * must wait for the consumer; two threads issue one each at the same time
 * and both must return only after the release (one of them waits on the
 * oldest fence, the other on the next, or on the first waiter). A limiter
 * counting per communicator would let both through at once.
 *
 *   nccl_rate_limit_threads LIMIT    run with FSDPSHIM_CONF=ag_limit:LIMIT
 * LIMIT 2: one freed output per communicator, each thread waits on a fence;
 * LIMIT 1: one freed output, one thread waits on it and the other on the
 * first thread (every fence in flight is already being waited on). */
#include "coll_test.h"

#include <stdint.h>

#define COMMS     2
#define BYTES     (512u << 10)
#define PROMPT_S  2.0 /* a wait here would never end: the gates open only later */
#define RELEASE_S 0.40

static ncclComm_t comms[COMMS];
static cudaStream_t streams[COMMS];
static void *shard, *outs[COMMS];
static double returned_at[COMMS];

static void *issue(void *arg)
{
    int k = (int)(intptr_t)arg;
    CUDA_CHECK(cudaSetDevice(0));
    NCCL_CHECK(ncclAllGather(shard, outs[k], BYTES, ncclUint8, comms[k], streams[k]));
    returned_at[k] = coll_now();
    return NULL;
}

int main(int argc, char **argv)
{
    int limit = argc == 2 ? atoi(argv[1]) : 0;
    if (limit < 1 || limit > COMMS) {
        fprintf(stderr, "usage: %s LIMIT (1 or 2)\n", argv[0]);
        return 2;
    }
    coll_watchdog(60);
    coll_require_devices(1);
    int dev = 0;
    cudaStream_t consumer;
    void *sink;
    CUDA_CHECK(cudaSetDevice(dev));
    for (int k = 0; k < COMMS; k++) {
        NCCL_CHECK(ncclCommInitAll(&comms[k], 1, &dev));
        CUDA_CHECK(cudaStreamCreateWithFlags(&streams[k], cudaStreamNonBlocking));
    }
    CUDA_CHECK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&shard, BYTES));
    CUDA_CHECK(cudaMalloc(&sink, BYTES));
    CUDA_CHECK(cudaMemset(shard, 0x66, BYTES));
    CUDA_CHECK(cudaDeviceSynchronize());

    coll_gate gate;
    coll_gate_hold(&gate, consumer);
    for (int k = 0; k < limit; k++) {
        CUDA_CHECK(cudaMallocAsync(&outs[k], BYTES, streams[k]));
        double start = coll_now();
        NCCL_CHECK(ncclAllGather(shard, outs[k], BYTES, ncclUint8, comms[k], streams[k]));
        EXPECT(coll_now() - start < PROMPT_S,
               "all-gather on communicator %d waited with %d "
               "freed outputs on the device",
               k, k);
        cudaEvent_t gathered;
        CUDA_CHECK(cudaEventCreateWithFlags(&gathered, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventRecord(gathered, streams[k]));
        CUDA_CHECK(cudaStreamWaitEvent(consumer, gathered, 0));
        CUDA_CHECK(cudaMemcpyAsync(sink, outs[k], BYTES, cudaMemcpyDeviceToDevice, consumer));
        CUDA_CHECK(cudaEventDestroy(gathered));
        CUDA_CHECK(cudaFreeAsync(outs[k], consumer));
    }

    /* LIMIT freed outputs in flight on device 0: both next all-gathers wait. */
    for (int k = 0; k < COMMS; k++)
        CUDA_CHECK(cudaMallocAsync(&outs[k], BYTES, streams[k]));
    coll_releaser releaser;
    coll_gate *gates[1] = {&gate};
    coll_releaser_start(&releaser, gates, 1, RELEASE_S);
    pthread_t threads[COMMS];
    for (int k = 0; k < COMMS; k++)
        if (pthread_create(&threads[k], NULL, issue, (void *)(intptr_t)k) != 0) return 1;
    for (int k = 0; k < COMMS; k++)
        pthread_join(threads[k], NULL);
    coll_releaser_join(&releaser);
    double released = coll_gate_opened_at(&gate);
    for (int k = 0; k < COMMS; k++)
        EXPECT(returned_at[k] >= released,
               "the all-gather on communicator %d returned %.3f s before the consumer holding "
               "the device's freed outputs was released",
               k, released - returned_at[k]);

    CUDA_CHECK(cudaDeviceSynchronize());
    for (int k = 0; k < COMMS; k++) {
        EXPECT(coll_all_bytes(outs[k], BYTES, 0x66), "communicator %d's output is wrong", k);
        CUDA_CHECK(cudaFreeAsync(outs[k], streams[k]));
    }
    CUDA_CHECK(cudaFree(sink));
    CUDA_CHECK(cudaFree(shard));
    CUDA_CHECK(cudaDeviceSynchronize());
    for (int k = 0; k < COMMS; k++)
        NCCL_CHECK(ncclCommDestroy(comms[k]));
    if (coll_failures) return 1;
    printf("nccl_rate_limit_threads: two threads, two communicators, one device: both waited\n");
    return 0;
}
