/* group.c - ncclGroupStart/End in the simulated NCCL.
 *
 * Group state is per thread, as in NCCL. Between ncclGroupStart and the
 * outermost ncclGroupEnd, operations are queued and host tasks (init,
 * split, shrink) only posted. ncclGroupEnd first polls every task to
 * completion together - one thread can so initialise or split many ranks
 * without deadlocking on itself - then turns the queued operations into one
 * piece of device work per communicator and enqueues each on its stream.
 * Since enqueueing never waits for peers, one thread driving several ranks'
 * communicators in one group cannot deadlock either. */
#include "nccl_internal.h"

#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local int group_depth;
static _Thread_local struct sim_nccl_op *group_queue;
static _Thread_local int group_queued, group_queue_cap;
static _Thread_local struct sim_task *group_tasks, **group_tasks_tail;

/* Polls every task until all have finished; returns the first failure. */
static ncclResult_t sim_run_tasks(struct sim_task *list)
{
    ncclResult_t first = ncclSuccess;
    while (list) {
        struct sim_task **pp = &list;
        while (*pp) {
            struct sim_task *t = *pp;
            int rc = t->poll(t);
            if (rc == 0) {
                pp = &t->next;
                continue;
            }
            if (rc < 0 && first == ncclSuccess) first = t->rc;
            *pp = t->next;
            free(t);
        }
    }
    return first;
}

ncclResult_t sim_group_task(struct sim_task *t)
{
    t->next = NULL;
    if (group_depth == 0) return sim_run_tasks(t);
    if (!group_tasks_tail) group_tasks_tail = &group_tasks;
    *group_tasks_tail = t;
    group_tasks_tail = &t->next;
    return ncclSuccess;
}

/* A work item that cannot be enqueued still holds its place in the
 * communicator's order: a helper thread retires it, empty. */
static void *sim_retire(void *w)
{
    sim_work_run(w);
    return NULL;
}

/* Makes `to` wait for the work queued so far on `from`. */
static void sim_stream_join(cudaStream_t to, cudaStream_t from)
{
    cudaEvent_t ev;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) return;
    cudaEventRecord(ev, from);
    cudaStreamWaitEvent(to, ev, 0);
    cudaEventDestroy(ev);
}

static ncclResult_t sim_enqueue_on_device(const struct sim_nccl_op *ops, int n,
                                          struct ncclComm *comm);

/* Enqueues the operations of `comm` among ops[0..n) as one work item on
 * the stream of the first; other streams used in the batch are joined to
 * it before and after with events, as NCCL does. Like NCCL, it enqueues with
 * the communicator's device current, so that stream 0 (the legacy stream) is
 * that device's, whatever device is current at ncclGroupEnd. */
static ncclResult_t sim_enqueue_comm(const struct sim_nccl_op *ops, int n, struct ncclComm *comm)
{
    int dev;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaSetDevice(comm->device) != cudaSuccess) {
        sim_set_last_error("sim NCCL: cannot make device %d current", comm->device);
        return ncclUnhandledCudaError;
    }
    ncclResult_t rc = sim_enqueue_on_device(ops, n, comm);
    if (cudaSetDevice(dev) != cudaSuccess && rc == ncclSuccess) rc = ncclUnhandledCudaError;
    return rc;
}

static ncclResult_t sim_enqueue_on_device(const struct sim_nccl_op *ops, int n,
                                          struct ncclComm *comm)
{
    int count = 0;
    for (int i = 0; i < n; i++)
        count += ops[i].comm == comm;
    struct sim_nccl_work *w = malloc(sizeof(*w) + (size_t)count * sizeof(struct sim_nccl_op));
    if (!w) return ncclSystemError;
    w->comm = comm;
    w->nops = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].comm == comm) w->ops[w->nops++] = ops[i];
    /* Kept aside: w belongs to the stream worker once enqueued. */
    cudaStream_t main = w->ops[0].stream, others[count];
    int nothers = 0;
    for (int i = 1; i < w->nops; i++)
        if (w->ops[i].stream != main) {
            sim_stream_join(main, w->ops[i].stream);
            others[nothers++] = w->ops[i].stream;
        }
    sim_comm_ref(comm);
    w->seq = atomic_fetch_add(&comm->issued, 1) + 1;
    cudaError_t err = sim_stream_enqueue(main, 0, sim_work_run, w);
    if (err != cudaSuccess) {
        w->nops = 0;
        pthread_t th;
        if (pthread_create(&th, NULL, sim_retire, w) == 0)
            pthread_detach(th);
        else
            sim_work_run(w); /* its turn has come unless earlier work is stuck */
        sim_set_last_error("sim NCCL: cannot enqueue on stream %p: %s", (void *)main,
                           cudaGetErrorString(err));
        return ncclUnhandledCudaError;
    }
    for (int i = 0; i < nothers; i++)
        sim_stream_join(others[i], main);
    return ncclSuccess;
}

/* One work item per communicator, in the order each first appears. */
static ncclResult_t sim_enqueue(const struct sim_nccl_op *ops, int n)
{
    ncclResult_t first = ncclSuccess;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = ops[j].comm == ops[i].comm;
        if (seen) continue;
        ncclResult_t rc = sim_enqueue_comm(ops + i, n - i, ops[i].comm);
        if (rc != ncclSuccess && first == ncclSuccess) first = rc;
    }
    return first;
}

ncclResult_t sim_group_submit(const struct sim_nccl_op *op)
{
    if (group_depth == 0) return sim_enqueue(op, 1);
    if (group_queued == group_queue_cap) {
        int cap = group_queue_cap ? 2 * group_queue_cap : 16;
        struct sim_nccl_op *q = realloc(group_queue, (size_t)cap * sizeof(*q));
        if (!q) return ncclSystemError;
        group_queue = q;
        group_queue_cap = cap;
    }
    group_queue[group_queued++] = *op;
    return ncclSuccess;
}

SIM_NCCL_EXPORT ncclResult_t pncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}
SIM_NCCL_ALIAS(ncclGroupStart);

/* Leaves the outermost group: takes the queued tasks and operations. */
static void sim_group_take(struct sim_task **tasks, struct sim_nccl_op **ops, int *n)
{
    *tasks = group_tasks;
    *ops = group_queue;
    *n = group_queued;
    group_tasks = NULL;
    group_tasks_tail = NULL;
    group_queue = NULL;
    group_queued = group_queue_cap = 0;
}

SIM_NCCL_EXPORT ncclResult_t pncclGroupEnd(void)
{
    if (group_depth == 0) {
        sim_set_last_error("sim NCCL: ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--group_depth > 0) return ncclSuccess;
    struct sim_task *tasks;
    struct sim_nccl_op *ops;
    int n;
    sim_group_take(&tasks, &ops, &n);
    ncclResult_t rc = sim_run_tasks(tasks);
    ncclResult_t rc2 = sim_enqueue(ops, n);
    free(ops);
    return rc != ncclSuccess ? rc : rc2;
}
SIM_NCCL_ALIAS(ncclGroupEnd);

#define SIM_INFO_MAGIC 0x74685283u

/* Ends the group without running its operations and estimates their time
 * from their size at a nominal 100 GB/s (the sim has no topology to model).
 * Tasks (inits) are still completed: they are not operations. */
SIM_NCCL_EXPORT ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    if (!simInfo || simInfo->magic != SIM_INFO_MAGIC) {
        sim_set_last_error(
            "sim NCCL: ncclSimInfo_t not initialised with NCCL_SIM_INFO_INITIALIZER");
        return ncclInvalidArgument;
    }
    if (group_depth == 0) return ncclInvalidUsage;
    if (--group_depth > 0) return ncclSuccess;
    struct sim_task *tasks;
    struct sim_nccl_op *ops;
    int n;
    sim_group_take(&tasks, &ops, &n);
    double bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += (double)ops[i].count * (double)sim_dtype_size(ops[i].dtype) *
                 (ops[i].kind == SIM_SEND || ops[i].kind == SIM_RECV ? 1 : ops[i].comm->nranks);
    free(ops);
    simInfo->estimatedTime = (float)(bytes / 100e9 * 1e6); /* microseconds */
    return sim_run_tasks(tasks);
}
SIM_NCCL_ALIAS(ncclGroupSimulateEnd);
