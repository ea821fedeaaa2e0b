/* nccl_procs.c - the simulated NCCL with ranks as processes.
 *
 *   nccl_procs coll     4 processes run every collective check (coll_suite.c)
 *   nccl_procs samedev  2 processes on device 0: both refused, ncclInvalidUsage
 *   nccl_procs death    rank 3 exits after init: the others' all-reduce fails
 *                       with ncclRemoteError within seconds instead of hanging,
 *                       and they shrink it away and carry on
 *   nccl_procs stall    rank 3 lives but never calls: the others' all-reduce
 *                       fails with ncclSystemError after FSDPSHIM_SIM_NCCL_TIMEOUT
 *   nccl_procs exited   after one all-reduce rank 3 exits normally, the others
 *                       call a second: it fails at once, and their error says
 *                       the peer exited normally after 1 collective (the ranks
 *                       diverged), not that it died; a child each rank
 *                       forks and that exits first is no rank leaving
 *   nccl_procs destroyed  the same, rank 3 destroying its communicator first
 *
 * The parent forks before any CUDA call and makes none itself; rank 0 makes
 * the unique id and hands it to the others through a shared page. */
#include "coll_suite.h"
#include "nccl_check.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct shared {
    ncclUniqueId id;
    _Atomic int ready;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static ncclUniqueId get_id(struct shared *sh, int rank)
{
    if (rank == 0) {
        CHECK_NCCL(ncclGetUniqueId(&sh->id));
        atomic_store(&sh->ready, 1);
    }
    while (!atomic_load(&sh->ready))
        usleep(1000);
    return sh->id;
}

static int run_coll(struct shared *sh, int rank, int nranks)
{
    struct suite s = {.nranks = nranks, .nlocal = 1, .rank = {rank}};
    CHECK_CUDA(cudaSetDevice(rank));
    CHECK_NCCL(ncclCommInitRank(&s.comm[0], nranks, get_id(sh, rank), rank));
    suite_streams(&s);
    suite_run(&s);
    CHECK_NCCL(ncclCommDestroy(s.comm[0]));
    return 0;
}

static int run_samedev(struct shared *sh, int rank, int nranks)
{
    ncclComm_t comm;
    CHECK_CUDA(cudaSetDevice(0));
    ncclResult_t rc = ncclCommInitRank(&comm, nranks, get_id(sh, rank), rank);
    CHECK(rc == ncclInvalidUsage, "rank %d: got %s", rank, ncclGetErrorString(rc));
    CHECK(comm == NULL, "rank %d: a comm was returned", rank);
    return 0;
}

/* How rank 3 breaks off. */
enum broken { DIES, STALLS, EXITS, DESTROYS };

/* Rank 3 dies (death) or stalls (stall) after init; the others' all-reduce
 * must fail, quickly: ncclRemoteError for a dead peer; for a stalled one,
 * ncclSystemError on the rank that timed out first, and ncclRemoteError on
 * those that saw it give up before their own timeout. Or every rank makes
 * one all-reduce, then rank 3 exits normally (exited) or destroys its
 * communicator and exits (destroyed) while the others call a second: it
 * fails at once, and the error names what rank 3 did. */
static int run_broken_peer(struct shared *sh, int rank, int nranks, enum broken how)
{
    ncclComm_t comm;
    cudaStream_t stream;
    float *buf;
    int stall = how == STALLS, diverge = how == EXITS || how == DESTROYS;
    CHECK_CUDA(cudaSetDevice(rank));
    CHECK_NCCL(ncclCommInitRank(&comm, nranks, get_id(sh, rank), rank));
    CHECK_CUDA(cudaStreamCreate(&stream));
    CHECK_CUDA(cudaMalloc((void **)&buf, 1 << 20));
    if (how == EXITS) {
        /* a forked child (a data loader's worker) that exits normally is no
         * rank leaving: the collective below must still succeed */
        pid_t child = fork();
        CHECK(child >= 0, "fork");
        if (child == 0) exit(0);
        CHECK(waitpid(child, NULL, 0) == child, "waitpid");
    }
    if (diverge) {
        CHECK_NCCL(
            ncclAllReduce(buf, buf, (1 << 20) / sizeof(float), ncclFloat, ncclSum, comm, stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));
    }
    if (rank == nranks - 1) {
        if (stall)
            for (;;)
                pause(); /* alive, silent: the parent kills it at the end */
        if (how == DESTROYS) CHECK_NCCL(ncclCommDestroy(comm));
        if (diverge) exit(0); /* normally, at a point its peers do not expect */
        _exit(42);            /* dies without a word */
    }
    double t0 = now_s();
    CHECK_NCCL(
        ncclAllReduce(buf, buf, (1 << 20) / sizeof(float), ncclFloat, ncclSum, comm, stream));
    /* The stream work completes (with the error) so the program can go on. */
    CHECK_CUDA(cudaStreamSynchronize(stream));
    double waited = now_s() - t0;
    ncclResult_t async;
    CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
    CHECK(async == ncclRemoteError || (stall && async == ncclSystemError),
          "rank %d: async error %s", rank, ncclGetErrorString(async));
    CHECK(waited < 10.0, "rank %d: took %.1f s to notice", rank, waited);
    const char *err = ncclGetLastError(comm);
    const char *want = how == DIES       ? "died (killed or crashed) after 0 collectives"
                       : how == EXITS    ? "exited normally after 1 collective while this rank, "
                                           "after 1, still waits on it: the ranks diverged"
                       : how == DESTROYS ? "destroyed its communicator after 1 collective"
                                         : "";
    CHECK(strstr(err, want) != NULL, "rank %d: the error does not say '%s': %s", rank, want, err);
    ncclResult_t rc = ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, comm, stream);
    CHECK(rc == async, "rank %d: next call got %s", rank, ncclGetErrorString(rc));
    CHECK(strlen(ncclGetLastError(comm)) > 0, "no last error");
    if (how == DIES) {
        /* Recovery: the survivors shrink the dead rank away and go on. */
        ncclComm_t alive;
        int gone[1] = {nranks - 1};
        int32_t sum = rank;
        CHECK_NCCL(ncclCommShrink(comm, gone, 1, &alive, NULL, NCCL_SHRINK_ABORT));
        CHECK_CUDA(cudaMemcpy(buf, &sum, sizeof(sum), cudaMemcpyHostToDevice));
        CHECK_NCCL(ncclAllReduce(buf, buf, 1, ncclInt32, ncclSum, alive, stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));
        CHECK_CUDA(cudaMemcpy(&sum, buf, sizeof(sum), cudaMemcpyDeviceToHost));
        CHECK(sum == (nranks - 1) * (nranks - 2) / 2, "rank %d: after shrink got %d", rank, sum);
        CHECK_NCCL(ncclCommDestroy(alive));
    }
    /* err points into the communicator: print it before the abort frees it */
    printf("rank %d: %s noticed after %.3f s: %s\n", rank, stall ? "stalled peer" : "broken peer",
           waited, err);
    CHECK_NCCL(ncclCommAbort(comm));
    return 0;
}

static int run_death(struct shared *sh, int rank, int nranks)
{
    return run_broken_peer(sh, rank, nranks, DIES);
}

static int run_stall(struct shared *sh, int rank, int nranks)
{
    return run_broken_peer(sh, rank, nranks, STALLS);
}

static int run_exited(struct shared *sh, int rank, int nranks)
{
    return run_broken_peer(sh, rank, nranks, EXITS);
}

static int run_destroyed(struct shared *sh, int rank, int nranks)
{
    return run_broken_peer(sh, rank, nranks, DESTROYS);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "coll";
    int (*run)(struct shared *, int, int) = run_coll;
    int nranks = 4;
    if (!strcmp(mode, "samedev")) {
        run = run_samedev;
        nranks = 2;
    } else if (!strcmp(mode, "death")) {
        run = run_death;
    } else if (!strcmp(mode, "stall")) {
        run = run_stall;
    } else if (!strcmp(mode, "exited")) {
        run = run_exited;
    } else if (!strcmp(mode, "destroyed")) {
        run = run_destroyed;
    } else if (strcmp(mode, "coll")) {
        fprintf(stderr, "usage: %s [coll|samedev|death|stall|exited|destroyed]\n", argv[0]);
        return 2;
    }
    struct shared *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED, "mmap");
    pid_t pids[8];
    for (int r = 0; r < nranks; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0, "fork");
        if (pids[r] == 0) {
            /* exit, not _exit: the sanitizers' exit checks run in each rank. */
            exit(run(sh, r, nranks));
        }
    }
    int failed = 0;
    int stall = !strcmp(mode, "stall");
    for (int r = 0; r < nranks; r++) {
        int st;
        if (stall && r == nranks - 1) kill(pids[r], SIGKILL); /* the others are done with it */
        CHECK(waitpid(pids[r], &st, 0) == pids[r], "waitpid");
        if (stall && r == nranks - 1) {
            if (!WIFSIGNALED(st)) {
                fprintf(stderr, "rank %d: should have stalled until killed\n", r);
                failed = 1;
            }
            continue;
        }
        int want = !strcmp(mode, "death") && r == nranks - 1 ? 42 : 0;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != want) {
            fprintf(stderr, "rank %d: exit status %d (want %d)\n", r,
                    WIFEXITED(st) ? WEXITSTATUS(st) : -1, want);
            failed = 1;
        }
    }
    printf("nccl_procs %s: %s\n", mode, failed ? "FAILED" : "ok");
    return failed;
}
