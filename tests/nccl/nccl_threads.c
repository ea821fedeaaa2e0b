/* nccl_threads.c - the simulated NCCL with ranks as threads of one process.
 *
 * One thread drives four communicators made by ncclCommInitAll through
 * groups (every collective, send/recv, split); then four threads each init
 * one rank with ncclCommInitRank; then the refusals: two ranks on one
 * device, and ncclGroupSimulateEnd running nothing. */
#include "coll_suite.h"
#include "nccl_check.h"

#include <pthread.h>

#define NRANKS 4

static ncclUniqueId thread_id;

/* One rank per thread: init, all-reduce its rank on the legacy default
 * stream, check, destroy. */
static void *rank_thread(void *arg)
{
    int rank = (int)(intptr_t)arg;
    ncclComm_t comm;
    cudaStream_t stream = 0;
    int32_t *buf, host = rank;
    CHECK_CUDA(cudaSetDevice(rank));
    /* The three ways in: plain, with a config (non-blocking), scalable. */
    if (rank == 0) {
        CHECK_NCCL(ncclCommInitRank(&comm, NRANKS, thread_id, rank));
    } else if (rank % 2) {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclResult_t rc = ncclCommInitRankConfig(&comm, NRANKS, thread_id, rank, &config);
        CHECK(rc == ncclSuccess || rc == ncclInProgress, "%s", ncclGetErrorString(rc));
        do
            CHECK_NCCL(ncclCommGetAsyncError(comm, &rc));
        while (rc == ncclInProgress);
        CHECK_NCCL(rc);
    } else {
        CHECK_NCCL(ncclCommInitRankScalable(&comm, NRANKS, rank, 1, &thread_id, NULL));
    }
    CHECK_CUDA(cudaMalloc((void **)&buf, sizeof(*buf)));
    CHECK_CUDA(cudaMemcpy(buf, &host, sizeof(host), cudaMemcpyHostToDevice));
    CHECK_NCCL(ncclAllReduce(buf, buf, 1, ncclInt32, ncclSum, comm, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(&host, buf, sizeof(host), cudaMemcpyDeviceToHost));
    CHECK(host == 0 + 1 + 2 + 3, "rank %d: allreduce got %d", rank, host);
    CHECK_NCCL(ncclCommDestroy(comm));
    CHECK_CUDA(cudaFree(buf));
    return NULL;
}

int main(void)
{
    int version;
    CHECK_NCCL(ncclGetVersion(&version));
    CHECK(version == NCCL_VERSION_CODE, "version %d", version);

    struct suite s = {.nranks = NRANKS, .nlocal = NRANKS};
    CHECK_NCCL(ncclCommInitAll(s.comm, NRANKS, NULL));
    for (int r = 0; r < NRANKS; r++) {
        int count, dev, rank;
        CHECK_NCCL(ncclCommCount(s.comm[r], &count));
        CHECK_NCCL(ncclCommCuDevice(s.comm[r], &dev));
        CHECK_NCCL(ncclCommUserRank(s.comm[r], &rank));
        CHECK(count == NRANKS && dev == r && rank == r, "comm %d: %d %d %d", r, count, dev, rank);
        s.rank[r] = r;
    }
    suite_streams(&s);
    suite_run(&s);

    /* Simulated groups estimate and run nothing. */
    ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
    CHECK_NCCL(ncclGroupStart());
    for (int r = 0; r < NRANKS; r++)
        CHECK_NCCL(ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, s.comm[r], s.stream[r]));
    CHECK_NCCL(ncclGroupSimulateEnd(&info));
    CHECK(info.estimatedTime >= 0, "estimated time %f", (double)info.estimatedTime);
    for (int r = 0; r < NRANKS; r++) {
        CHECK_CUDA(cudaStreamSynchronize(s.stream[r]));
        CHECK_NCCL(ncclCommFinalize(s.comm[r]));
        CHECK_NCCL(ncclCommDestroy(s.comm[r]));
    }
    CHECK(ncclGroupEnd() == ncclInvalidUsage, "unbalanced ncclGroupEnd accepted");

    /* A config not made by NCCL_CONFIG_INITIALIZER is refused. */
    ncclConfig_t raw;
    ncclComm_t none;
    memset(&raw, 0, sizeof(raw));
    CHECK_NCCL(ncclGetUniqueId(&thread_id));
    CHECK(ncclCommInitRankConfig(&none, 1, thread_id, 0, &raw) == ncclInvalidArgument,
          "uninitialised config accepted");

    /* Ranks as threads, one init call each. */
    pthread_t th[NRANKS];
    CHECK_NCCL(ncclGetUniqueId(&thread_id));
    for (int r = 0; r < NRANKS; r++)
        CHECK(pthread_create(&th[r], NULL, rank_thread, (void *)(intptr_t)r) == 0,
              "pthread_create");
    for (int r = 0; r < NRANKS; r++)
        pthread_join(th[r], NULL);

    /* Work that cannot be enqueued (a destroyed stream) is an error, and does
     * not block the communicator's later work, which waits its turn. */
    ncclComm_t solo;
    cudaStream_t gone, ok;
    float *one;
    CHECK_NCCL(ncclCommInitAll(&solo, 1, NULL));
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaMalloc((void **)&one, sizeof(float)));
    CHECK_CUDA(cudaStreamCreate(&gone));
    CHECK_CUDA(cudaStreamCreate(&ok));
    CHECK_CUDA(cudaStreamDestroy(gone));
    CHECK(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, solo, gone) == ncclUnhandledCudaError,
          "enqueue on a destroyed stream succeeded");
    CHECK_NCCL(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, solo, ok));
    CHECK_CUDA(cudaStreamSynchronize(ok));
    CHECK_NCCL(ncclCommDestroy(solo));
    CHECK_CUDA(cudaStreamDestroy(ok));
    CHECK_CUDA(cudaFree(one));

    /* Two ranks on one device are refused, as NCCL 2.28 does. */
    ncclComm_t dup[2] = {(ncclComm_t)1, (ncclComm_t)1};
    int devs[2] = {1, 1};
    ncclResult_t rc = ncclCommInitAll(dup, 2, devs);
    CHECK(rc == ncclInvalidUsage, "same device: got %s", ncclGetErrorString(rc));
    CHECK(dup[0] == NULL && dup[1] == NULL, "comms left behind");
    CHECK(strstr(ncclGetLastError(NULL), "Duplicate GPU") != NULL, "last error: %s",
          ncclGetLastError(NULL));
    printf("nccl_threads: ok\n");
    return 0;
}
