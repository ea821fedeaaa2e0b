/* nccl_rate_limit.c - the all-gather rate limiter, judged from the program.
 *
 * Like FSDP: each all-gather writes a fresh output on the NCCL stream, a
 * consumer stream reads it and the output is freed. The consumer is held
 * busy by a host function, so every freed output is still in use on the GPU.
 * With K such outputs freed, the next ncclAllGather must not be issued (must
 * not return) until the consumer is released; with fewer, it must return at
 * once. A releaser thread opens the consumer after a delay and the program
 * compares the times.
 *
 *   nccl_rate_limit K BYTES FREE EXPECT
 *     K       freed-but-busy outputs that must make the next all-gather wait
 *     BYTES   size of each output
 *     FREE    async: cudaFreeAsync on the consumer stream (FSDP2's order);
 *             sync: cudaFree (free_semantics:device fences the consumer)
 *     EXPECT  limited: the K+1-th all-gather waits for the release;
 *             unlimited: it does not (the limiter switched off) */
#include "coll_test.h"

#include <string.h>

#define PROMPT_S  2.0 /* a wait here would never end: the gate opens only later */
#define RELEASE_S 1.0 /* the consumer is released this long after the last call starts */

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s K BYTES async|sync limited|unlimited\n", argv[0]);
        return 2;
    }
    int k = atoi(argv[1]);
    size_t bytes = strtoull(argv[2], NULL, 0);
    bool free_async = !strcmp(argv[3], "async");
    bool expect_limited = !strcmp(argv[4], "limited");
    if (k < 1 || k > 64 || !bytes) {
        fprintf(stderr, "bad K or BYTES\n");
        return 2;
    }
    coll_watchdog(60);
    coll_require_devices(1);

    int dev = 0;
    ncclComm_t comm;
    cudaStream_t nccl_stream, consumer;
    CUDA_CHECK(cudaSetDevice(dev));
    NCCL_CHECK(ncclCommInitAll(&comm, 1, &dev));
    CUDA_CHECK(cudaStreamCreateWithFlags(&nccl_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
    void *shard, *sink;
    CUDA_CHECK(cudaMalloc(&shard, bytes));
    CUDA_CHECK(cudaMalloc(&sink, bytes));
    CUDA_CHECK(cudaMemset(shard, 0x33, bytes));
    CUDA_CHECK(cudaDeviceSynchronize());

    coll_gate gate;
    coll_gate_hold(&gate, consumer);

    void *out = NULL;
    coll_releaser releaser;
    coll_gate *gates[1] = {&gate};
    for (int i = 0; i <= k; i++) {
        if (free_async)
            CUDA_CHECK(cudaMallocAsync(&out, bytes, nccl_stream));
        else
            CUDA_CHECK(cudaMalloc(&out, bytes));

        if (i == k) coll_releaser_start(&releaser, gates, 1, RELEASE_S);
        double start = coll_now();
        NCCL_CHECK(ncclAllGather(shard, out, bytes, ncclUint8, comm, nccl_stream));
        double returned = coll_now();
        if (i < k) {
            EXPECT(returned - start < PROMPT_S,
                   "all-gather %d waited %.3f s with only %d freed outputs in flight (limit %d)", i,
                   returned - start, i, k);
            /* The consumer reads the output after the all-gather, then it is freed. */
            cudaEvent_t gathered;
            CUDA_CHECK(cudaEventCreateWithFlags(&gathered, cudaEventDisableTiming));
            CUDA_CHECK(cudaEventRecord(gathered, nccl_stream));
            CUDA_CHECK(cudaStreamWaitEvent(consumer, gathered, 0));
            CUDA_CHECK(cudaMemcpyAsync(sink, out, bytes, cudaMemcpyDeviceToDevice, consumer));
            CUDA_CHECK(cudaEventDestroy(gathered));
            if (free_async)
                CUDA_CHECK(cudaFreeAsync(out, consumer));
            else
                CUDA_CHECK(cudaFree(out));
            continue;
        }
        coll_releaser_join(&releaser);
        double released = coll_gate_opened_at(&gate);
        if (expect_limited)
            EXPECT(returned >= released,
                   "all-gather %d returned %.3f s before the consumer holding %d freed outputs "
                   "was released: it was issued while they were still in use",
                   k, released - returned, k);
        else
            EXPECT(returned < released,
                   "all-gather %d waited for the consumer although the limiter is off", k);
        printf("all-gather %d: returned %.3f s after the call, consumer released at %.3f s\n", k,
               returned - start, released - start);
    }

    CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT(coll_all_bytes(out, bytes, 0x33), "the last all-gather's output is wrong");
    EXPECT(coll_all_bytes(sink, bytes, 0x33), "the consumer read a wrong output");
    if (free_async)
        CUDA_CHECK(cudaFreeAsync(out, nccl_stream));
    else
        CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaFree(sink));
    CUDA_CHECK(cudaFree(shard));
    NCCL_CHECK(ncclCommDestroy(comm));
    return coll_failures ? 1 : 0;
}
