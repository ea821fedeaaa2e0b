/* nccl_2_30.c - the NCCL 2.29/2.30 entry points PyTorch 2.15 imports, on the
 * simulated NCCL (docs/sim-nccl.md): communicator growth (the grown
 * communicator moves real data), suspend/resume and what a suspended
 * communicator refuses, memory statistics, revoke, window queries, and the
 * documented errors of the one-sided and device API calls the sim cannot run.
 * Ranks are communicators of one thread (ncclCommInitAll, groups). */
#include "nccl_check.h"

#include "nccl_2_30.h"

#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        CHECK(r_ == (want), "%s, not %s (%s)", ncclGetErrorString(r_), ncclGetErrorString(want),   \
              ncclGetLastError(NULL));                                                             \
    } while (0)

/* all-reduce (sum) of one float per rank, rank r contributing r + 1, on n
 * communicators of one thread, in one group, each on a stream of its own or
 * (legacy) on stream 0, which is then each communicator's device's legacy
 * stream, as in NCCL, whatever device is current at ncclGroupEnd; each
 * rank's result must be n(n+1)/2 */
static void allreduce_check(ncclComm_t *comms, int n, int legacy)
{
    float *buf[8], want = (float)(n * (n + 1) / 2);
    int dev, devs[8];
    cudaStream_t streams[8];

    CHECK_CUDA(cudaGetDevice(&dev));
    for (int r = 0; r < n; r++) {
        float v = (float)(r + 1);
        CHECK_NCCL(ncclCommCuDevice(comms[r], &devs[r]));
        CHECK_CUDA(cudaSetDevice(devs[r]));
        CHECK_CUDA(cudaStreamCreate(&streams[r]));
        CHECK_CUDA(cudaMalloc((void **)&buf[r], sizeof(float)));
        CHECK_CUDA(cudaMemcpy(buf[r], &v, sizeof v, cudaMemcpyHostToDevice));
    }
    CHECK_NCCL(ncclGroupStart());
    for (int r = 0; r < n; r++)
        CHECK_NCCL(ncclAllReduce(buf[r], buf[r], 1, ncclFloat, ncclSum, comms[r],
                                 legacy ? NULL : streams[r]));
    CHECK_NCCL(ncclGroupEnd());
    for (int r = 0; r < n; r++) {
        float got;
        CHECK_CUDA(cudaSetDevice(devs[r]));
        CHECK_CUDA(cudaStreamSynchronize(streams[r]));
        CHECK_CUDA(cudaStreamDestroy(streams[r]));
        CHECK_CUDA(cudaMemcpy(&got, buf[r], sizeof got, cudaMemcpyDeviceToHost));
        CHECK(got == want, "rank %d of %d: %g, not %g", r, n, got, want);
        CHECK_CUDA(cudaFree(buf[r]));
    }
    CHECK_CUDA(cudaSetDevice(dev));
}

static void grow(ncclComm_t *comms)
{
    ncclUniqueId id, again, other;
    ncclComm_t g[3];
    int rank, count;

    EXPECT(ncclCommGetUniqueId(comms[0], NULL), ncclInvalidArgument);
    CHECK_NCCL(ncclCommGetUniqueId(comms[0], &id));
    /* one id at a time, until a grow consumes it */
    EXPECT(ncclCommGetUniqueId(comms[0], &again), ncclInvalidUsage);
    EXPECT(ncclCommGrow(comms[1], 3, NULL, 0, &g[1], NULL), ncclInvalidArgument);
    EXPECT(ncclCommGrow(comms[1], 2, NULL, -1, &g[1], NULL), ncclInvalidArgument);
    EXPECT(ncclCommGrow(NULL, 3, NULL, 2, &g[2], NULL), ncclInvalidArgument);
    EXPECT(ncclCommGrow(NULL, 3, &id, 3, &g[2], NULL), ncclInvalidArgument);
    memset(&other, 7, sizeof other);
    EXPECT(ncclCommGrow(comms[0], 3, &other, -1, &g[0], NULL), ncclInvalidArgument);

    /* the root with the id, the other existing rank without, the new rank
     * with the id and its rank, on device 2 */
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclCommGrow(comms[0], 3, &id, -1, &g[0], NULL));
    CHECK_NCCL(ncclCommGrow(comms[1], 3, NULL, -1, &g[1], NULL));
    CHECK_CUDA(cudaSetDevice(2));
    CHECK_NCCL(ncclCommGrow(NULL, 3, &id, 2, &g[2], NULL));
    CHECK_NCCL(ncclGroupEnd());
    CHECK_CUDA(cudaSetDevice(0));
    for (int r = 0; r < 3; r++) {
        CHECK_NCCL(ncclCommUserRank(g[r], &rank));
        CHECK_NCCL(ncclCommCount(g[r], &count));
        CHECK(rank == r && count == 3, "grown rank %d: rank %d of %d", r, rank, count);
    }
    allreduce_check(g, 3, 0);
    allreduce_check(g, 3, 1);
    /* the parent still works, and a second id comes after the grow */
    allreduce_check(comms, 2, 0);
    CHECK_NCCL(ncclCommGetUniqueId(comms[0], &again));
    CHECK(memcmp(&again, &id, sizeof id), "the second grow's id is the first's");
    for (int r = 0; r < 3; r++)
        CHECK_NCCL(ncclCommDestroy(g[r]));
}

static void suspend_and_stats(ncclComm_t c)
{
    uint64_t v = 99;
    float *buf;

    CHECK_CUDA(cudaMalloc((void **)&buf, sizeof(float)));
    for (int s = ncclStatGpuMemSuspend; s <= ncclStatGpuMemTotal; s++) {
        CHECK_NCCL(ncclCommMemStats(c, (ncclCommMemStat_t)s, &v));
        CHECK(v == 0, "statistic %d is %llu, not 0", s, (unsigned long long)v);
    }
    EXPECT(ncclCommMemStats(c, (ncclCommMemStat_t)4, &v), ncclInvalidArgument);
    EXPECT(ncclCommMemStats(c, ncclStatGpuMemTotal, NULL), ncclInvalidArgument);
    EXPECT(ncclCommMemStats(NULL, ncclStatGpuMemTotal, &v), ncclInvalidArgument);

    EXPECT(ncclCommSuspend(c, 0x4), ncclInvalidArgument);
    EXPECT(ncclCommResume(c), ncclInvalidUsage);
    CHECK_NCCL(ncclCommSuspend(c, NCCL_SUSPEND_MEM));
    CHECK_NCCL(ncclCommMemStats(c, ncclStatGpuMemSuspended, &v));
    CHECK(v == 1, "suspended reads %llu", (unsigned long long)v);
    EXPECT(ncclCommSuspend(c, NCCL_SUSPEND_MEM), ncclInvalidUsage);
    EXPECT(ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, c, NULL), ncclInvalidUsage);
    EXPECT(ncclSend(buf, 1, ncclFloat, 1, c, NULL), ncclInvalidUsage);
    CHECK_NCCL(ncclCommResume(c));
    CHECK_NCCL(ncclCommMemStats(c, ncclStatGpuMemSuspended, &v));
    CHECK(v == 0, "resumed reads %llu", (unsigned long long)v);
    EXPECT(ncclCommResume(c), ncclInvalidUsage);
    CHECK_CUDA(cudaFree(buf));
}

static void windows(ncclComm_t *comms)
{
    const size_t size = 1 << 16;
    ncclWindow_t win[2];
    ncclWaitSignalDesc_t desc = {.opCnt = 1, .peer = 1, .sigIdx = 0, .ctx = 0};
    char *buf[2], reqs[64], dev[64];
    void *p;

    for (int r = 0; r < 2; r++) {
        CHECK_CUDA(cudaSetDevice(r));
        CHECK_CUDA(cudaMalloc((void **)&buf[r], size));
    }
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_NCCL(ncclGroupStart());
    for (int r = 0; r < 2; r++)
        CHECK_NCCL(ncclCommWindowRegister(comms[r], buf[r], size, &win[r], NCCL_WIN_DEFAULT));
    CHECK_NCCL(ncclGroupEnd());

    CHECK_NCCL(ncclWinGetUserPtr(comms[0], win[0], &p));
    CHECK(p == buf[0], "user pointer %p, not %p", p, (void *)buf[0]);
    EXPECT(ncclWinGetUserPtr(comms[1], win[0], &p), ncclInvalidArgument);
    EXPECT(ncclWinGetUserPtr(comms[0], win[0], NULL), ncclInvalidArgument);
    CHECK_NCCL(ncclGetPeerDevicePointer(win[1], 16, 1, &p));
    CHECK(p == buf[1] + 16, "own peer pointer %p, not %p", p, (void *)(buf[1] + 16));
    EXPECT(ncclGetPeerDevicePointer(win[1], 16, 0, &p), ncclInvalidUsage);
    EXPECT(ncclGetPeerDevicePointer(win[1], 16, 2, &p), ncclInvalidArgument);
    EXPECT(ncclGetPeerDevicePointer(win[1], size, 1, &p), ncclInvalidArgument);
    EXPECT(ncclGetLsaMultimemDevicePointer(win[0], 0, &p), ncclInvalidUsage);
    EXPECT(ncclGetLsaMultimemDevicePointer(win[0], 0, NULL), ncclInvalidArgument);

    /* one-sided operations: arguments checked, then refused */
    EXPECT(ncclPutSignal(buf[0], 16, ncclFloat, 1, win[0], 0, 0, 0, 0, comms[0], NULL),
           ncclInvalidUsage);
    EXPECT(ncclPutSignal(buf[0], 16, ncclFloat, 1, win[0], 0, 1, 0, 0, comms[0], NULL),
           ncclInvalidArgument);
    EXPECT(ncclPutSignal(buf[0], 16, ncclFloat, 2, win[0], 0, 0, 0, 0, comms[0], NULL),
           ncclInvalidArgument);
    EXPECT(ncclPutSignal(buf[0], size, ncclFloat, 1, win[0], 0, 0, 0, 0, comms[0], NULL),
           ncclInvalidArgument);
    EXPECT(ncclPutSignal(buf[0], 16, ncclFloat, 1, win[1], 0, 0, 0, 0, comms[0], NULL),
           ncclInvalidArgument);
    EXPECT(ncclSignal(1, 0, 0, 0, comms[0], NULL), ncclInvalidUsage);
    EXPECT(ncclSignal(1, 0, 3, 0, comms[0], NULL), ncclInvalidArgument);
    EXPECT(ncclWaitSignal(1, &desc, comms[0], NULL), ncclInvalidUsage);
    EXPECT(ncclWaitSignal(-1, &desc, comms[0], NULL), ncclInvalidArgument);
    EXPECT(ncclWaitSignal(1, NULL, comms[0], NULL), ncclInvalidArgument);
    /* the device API: no device code on the sim */
    EXPECT(ncclDevCommCreate(comms[0], NULL, NULL), ncclInvalidArgument);
    EXPECT(ncclDevCommCreate(comms[0], (const struct ncclDevCommRequirements *)(void *)reqs,
                             (struct ncclDevComm *)(void *)dev),
           ncclInvalidUsage);
    EXPECT(ncclDevCommDestroy(comms[0], (const struct ncclDevComm *)(void *)dev),
           ncclInvalidArgument);

    CHECK_NCCL(ncclGroupStart());
    for (int r = 0; r < 2; r++)
        CHECK_NCCL(ncclCommWindowDeregister(comms[r], win[r]));
    CHECK_NCCL(ncclGroupEnd());
    EXPECT(ncclWinGetUserPtr(comms[0], win[0], &p), ncclInvalidArgument);
    EXPECT(ncclGetPeerDevicePointer(win[1], 0, 1, &p), ncclInvalidArgument);
    for (int r = 0; r < 2; r++)
        CHECK_CUDA(cudaFree(buf[r]));
}

static void revoke(ncclComm_t c)
{
    ncclResult_t state;
    float *buf;

    CHECK_CUDA(cudaMalloc((void **)&buf, sizeof(float)));
    EXPECT(ncclCommRevoke(c, 1), ncclInvalidArgument);
    EXPECT(ncclCommRevoke(NULL, 0), ncclInvalidArgument);
    CHECK_NCCL(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT));
    CHECK_NCCL(ncclCommGetAsyncError(c, &state));
    CHECK(state == ncclSuccess, "revoked and quiescent: %s", ncclGetErrorString(state));
    EXPECT(ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, c, NULL), ncclInvalidUsage);
    EXPECT(ncclCommSuspend(c, 0), ncclInvalidUsage);
    EXPECT(ncclCommFinalize(c), ncclInvalidUsage);
    CHECK_CUDA(cudaFree(buf));
}

int main(void)
{
    ncclComm_t comms[2];
    int n = 0;

    CHECK_CUDA(cudaGetDeviceCount(&n));
    CHECK(n >= 3, "needs 3 devices, has %d", n);
    CHECK_NCCL(ncclCommInitAll(comms, 2, NULL));
    grow(comms);
    suspend_and_stats(comms[0]);
    allreduce_check(comms, 2, 0); /* resumed: collectives run again */
    windows(comms);
    revoke(comms[1]);
    for (int r = 0; r < 2; r++)
        CHECK_NCCL(ncclCommDestroy(comms[r]));
    printf("nccl_2_30: ok\n");
    return 0;
}
