/* nccl_group_limit.c - the rate limiter inside ncclGroupStart/End: it still
 * limits, and it does not deadlock.
 *
 * One thread drives two ranks on devices 0 and 1 (ncclCommInitAll), so every
 * all-gather is issued in a group, as such programs must. Per device, a
 * consumer stream held by a host function reads each output and frees it.
 * With ag_limit (2) outputs freed and still in use, the next grouped
 * all-gather, nested one group deep, must wait for the consumers and then
 * complete, with the right data. A limiter that waited at ncclGroupEnd on
 * the group's own work, or that held a lock the consumers' frees need, would
 * hang here (the watchdog turns that into a failure).
 *
 * Also sends and receives between the ranks in a group, so that the group's
 * deferred stream notes are exercised. Run with FSDPSHIM_CONF=ag_limit:2. */
#include "coll_test.h"

#include <string.h>

#define RANKS     2
#define LIMIT     2
#define SHARD     (256u << 10)
#define PROMPT_S  2.0 /* a wait here would never end: the gates open only later */
#define RELEASE_S 0.40

static ncclComm_t comms[RANKS];
static cudaStream_t nccl_streams[RANKS], consumers[RANKS];
static void *shards[RANKS], *sinks[RANKS];

/* One all-gather per rank into outs[], nested `depth` groups deep. */
static void grouped_all_gather(void **outs, int depth)
{
    NCCL_CHECK(ncclGroupStart());
    if (depth > 1) NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclAllGather(shards[0], outs[0], SHARD, ncclUint8, comms[0], nccl_streams[0]));
    if (depth > 1) NCCL_CHECK(ncclGroupEnd());
    NCCL_CHECK(ncclAllGather(shards[1], outs[1], SHARD, ncclUint8, comms[1], nccl_streams[1]));
    NCCL_CHECK(ncclGroupEnd());
}

static bool gathered_right(void *out)
{
    unsigned char *host = malloc(RANKS * SHARD);
    CUDA_CHECK(cudaMemcpy(host, out, RANKS * SHARD, cudaMemcpyDeviceToHost));
    bool right = true;
    for (size_t i = 0; i < RANKS * SHARD && right; i++)
        right = host[i] == (unsigned char)(0x40 + i / SHARD);
    free(host);
    return right;
}

/* Rank r sends its shard to rank 1 - r, in one group. */
static void exchange(void **recv)
{
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < RANKS; r++) {
        NCCL_CHECK(ncclSend(shards[r], SHARD, ncclUint8, 1 - r, comms[r], nccl_streams[r]));
        NCCL_CHECK(ncclRecv(recv[r], SHARD, ncclUint8, 1 - r, comms[r], nccl_streams[r]));
    }
    NCCL_CHECK(ncclGroupEnd());
}

int main(void)
{
    coll_watchdog(60);
    coll_require_devices(2);
    int devs[RANKS] = {0, 1};
    NCCL_CHECK(ncclCommInitAll(comms, RANKS, devs));
    for (int r = 0; r < RANKS; r++) {
        CUDA_CHECK(cudaSetDevice(r));
        CUDA_CHECK(cudaStreamCreateWithFlags(&nccl_streams[r], cudaStreamNonBlocking));
        CUDA_CHECK(cudaStreamCreateWithFlags(&consumers[r], cudaStreamNonBlocking));
        CUDA_CHECK(cudaMalloc(&shards[r], SHARD));
        CUDA_CHECK(cudaMalloc(&sinks[r], RANKS * SHARD));
        CUDA_CHECK(cudaMemset(shards[r], 0x40 + r, SHARD));
        CUDA_CHECK(cudaDeviceSynchronize());
    }

    coll_gate gates[RANKS];
    coll_gate *gate_ptrs[RANKS];
    for (int r = 0; r < RANKS; r++) {
        CUDA_CHECK(cudaSetDevice(r));
        coll_gate_hold(&gates[r], consumers[r]);
        gate_ptrs[r] = &gates[r];
    }

    void *outs[RANKS];
    coll_releaser releaser;
    for (int i = 0; i <= LIMIT; i++) {
        for (int r = 0; r < RANKS; r++) {
            CUDA_CHECK(cudaSetDevice(r));
            CUDA_CHECK(cudaMallocAsync(&outs[r], RANKS * SHARD, nccl_streams[r]));
        }
        if (i == LIMIT) coll_releaser_start(&releaser, gate_ptrs, RANKS, RELEASE_S);
        double start = coll_now();
        grouped_all_gather(outs, i == LIMIT ? 2 : 1);
        double returned = coll_now();
        if (i < LIMIT) {
            EXPECT(returned - start < PROMPT_S,
                   "grouped all-gather %d waited %.3f s with %d freed outputs per device", i,
                   returned - start, i);
            for (int r = 0; r < RANKS; r++) {
                CUDA_CHECK(cudaSetDevice(r));
                cudaEvent_t gathered;
                CUDA_CHECK(cudaEventCreateWithFlags(&gathered, cudaEventDisableTiming));
                CUDA_CHECK(cudaEventRecord(gathered, nccl_streams[r]));
                CUDA_CHECK(cudaStreamWaitEvent(consumers[r], gathered, 0));
                CUDA_CHECK(cudaMemcpyAsync(sinks[r], outs[r], RANKS * SHARD,
                                           cudaMemcpyDeviceToDevice, consumers[r]));
                CUDA_CHECK(cudaEventDestroy(gathered));
                CUDA_CHECK(cudaFreeAsync(outs[r], consumers[r]));
            }
            continue;
        }
        coll_releaser_join(&releaser);
        for (int r = 0; r < RANKS; r++)
            EXPECT(returned >= coll_gate_opened_at(&gates[r]),
                   "the nested grouped all-gather returned before device %d's consumer, "
                   "holding %d freed outputs, was released",
                   r, LIMIT);
    }

    for (int r = 0; r < RANKS; r++) {
        CUDA_CHECK(cudaSetDevice(r));
        CUDA_CHECK(cudaDeviceSynchronize());
        EXPECT(gathered_right(outs[r]), "rank %d's last all-gather output is wrong", r);
        EXPECT(gathered_right(sinks[r]), "rank %d's consumer read a wrong output", r);
    }

    /* Point-to-point in a group: each rank receives the other's shard. */
    void *recv[RANKS];
    for (int r = 0; r < RANKS; r++) {
        CUDA_CHECK(cudaSetDevice(r));
        CUDA_CHECK(cudaMalloc(&recv[r], SHARD));
    }
    exchange(recv);
    for (int r = 0; r < RANKS; r++) {
        CUDA_CHECK(cudaSetDevice(r));
        CUDA_CHECK(cudaDeviceSynchronize());
        EXPECT(coll_all_bytes(recv[r], SHARD, (unsigned char)(0x40 + 1 - r)),
               "rank %d did not receive rank %d's shard", r, 1 - r);
        CUDA_CHECK(cudaFree(recv[r]));
        CUDA_CHECK(cudaFreeAsync(outs[r], nccl_streams[r]));
        CUDA_CHECK(cudaFree(sinks[r]));
        CUDA_CHECK(cudaFree(shards[r]));
        CUDA_CHECK(cudaDeviceSynchronize());
    }
    for (int r = 0; r < RANKS; r++)
        NCCL_CHECK(ncclCommDestroy(comms[r]));
    if (coll_failures) return 1;
    printf("nccl_group_limit: grouped all-gathers limited without deadlock\n");
    return 0;
}
