/* comm.c - communicator life in the simulated NCCL.
 *
 * Unique ids are random; the shared segment of a communicator is named from
 * its id, so every rank that is handed the id (ranks as processes) or calls
 * ncclCommInitAll (ranks as threads) meets in the same segment. Init is a
 * host task: join (publish pid and device), then poll until every rank has
 * joined, refuse two ranks on one device with ncclInvalidUsage as NCCL 2.28
 * does, and unlink the segment's name (the mapping lives on until the last
 * rank unmaps it). Inside ncclGroupStart/End the polling happens at
 * ncclGroupEnd, so one thread can initialise many ranks.
 *
 * A communicator is freed when its handle is destroyed (or aborted) and the
 * last piece of device work that uses it has run. */
#include "nccl_internal.h"
#include "nccl_2_30.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define SIM_COMM_DEAD    0xdeadc0117dead000ULL
#define SIM_CONFIG_MAGIC 0xcafebeef

/* ---- ids and versions ---------------------------------------------------- */

SIM_NCCL_EXPORT ncclResult_t pncclGetVersion(int *version)
{
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
SIM_NCCL_ALIAS(ncclGetVersion);

SIM_NCCL_EXPORT ncclResult_t pncclGetUniqueId(ncclUniqueId *id)
{
    if (!id) return ncclInvalidArgument;
    memset(id, 0, sizeof(*id));
    /* 20 random bytes name the segment; the pid only helps a human reading /dev/shm. */
    if (getrandom(id->internal, 20, 0) != 20) {
        sim_set_last_error("sim NCCL: getrandom failed");
        return ncclSystemError;
    }
    int pid = getpid();
    memcpy(id->internal + 20, &pid, sizeof(pid));
    return ncclSuccess;
}
SIM_NCCL_ALIAS(ncclGetUniqueId);

/* A child communicator's id: the parent's, mixed with the split's ordinal
 * and colour, so that every rank of the parent derives the same one. */
static void sim_child_id(const ncclUniqueId *parent, uint64_t ordinal, int64_t color,
                         ncclUniqueId *out)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    memset(out, 0, sizeof(*out));
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 20; i++)
            h = (h ^ (unsigned char)parent->internal[i]) * 1099511628211ull;
        h = (h ^ ordinal) * 1099511628211ull;
        h = (h ^ (uint64_t)color) * 1099511628211ull;
        h = (h ^ (uint64_t)round) * 1099511628211ull;
        out->internal[round] = (char)(h >> 32);
    }
}

/* ---- init ---------------------------------------------------------------- */

struct sim_init_task {
    struct sim_task base;
    struct ncclComm *comm;
    ncclComm_t *out;
    uint64_t started;
};

/* Every rank's device is known once all have joined. */
static ncclResult_t sim_check_devices(struct ncclComm *c)
{
    for (int a = 0; a < c->nranks; a++)
        for (int b = a + 1; b < c->nranks; b++)
            if (c->clq.slots[a].device == c->clq.slots[b].device) {
                sim_set_last_error(
                    "sim NCCL: Duplicate GPU detected : rank %d and rank %d both on CUDA "
                    "device %d",
                    a, b, c->clq.slots[a].device);
                return ncclInvalidUsage;
            }
    return ncclSuccess;
}

static void sim_init_fail(struct sim_init_task *t, ncclResult_t rc)
{
    struct ncclComm *c = t->comm;
    sim_clique_fail(&c->clq);
    sim_clique_unlink(&c->clq);
    c->magic = SIM_COMM_DEAD;
    sim_comm_unref(c);
    *t->out = NULL;
    t->base.rc = rc;
}

static int sim_init_poll(struct sim_task *task)
{
    struct sim_init_task *t = (struct sim_init_task *)task;
    struct ncclComm *c = t->comm;
    char why[256];
    int rc = sim_clique_poll_joined(&c->clq, t->started, why, sizeof(why));
    if (rc == 0) return 0;
    if (rc < 0) {
        sim_set_last_error("sim NCCL rank %d/%d: init failed: %s", c->rank, c->nranks, why);
        fprintf(stderr, "fsdpshim: sim NCCL rank %d/%d: init failed: %s\n", c->rank, c->nranks,
                why);
        sim_init_fail(t, sim_wait_result(-rc));
        return -1;
    }
    sim_clique_unlink(&c->clq);
    ncclResult_t dup = sim_check_devices(c);
    if (dup != ncclSuccess) {
        sim_init_fail(t, dup);
        return -1;
    }
    atomic_store(&c->async_err, ncclSuccess);
    return 1;
}

/* A config must come from NCCL_CONFIG_INITIALIZER. Its tuning fields mean
 * nothing here, and a non-blocking communicator is simply initialised
 * before the call returns, which is a valid outcome of a non-blocking call
 * (ncclSuccess instead of ncclInProgress). */
static ncclResult_t sim_check_config(const ncclConfig_t *config)
{
    if (config && (config->magic != SIM_CONFIG_MAGIC ||
                   config->size < offsetof(ncclConfig_t, cgaClusterSize))) {
        sim_set_last_error("sim NCCL: ncclConfig_t not initialised with NCCL_CONFIG_INITIALIZER");
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

/* Creates rank `rank` of the communicator `id` on `device`, joined, and
 * its init task, which finishes it and stores it in *out. */
static ncclResult_t sim_comm_new(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                                 int device, struct sim_init_task **task)
{
    struct ncclComm *c = calloc(1, sizeof(*c));
    struct sim_init_task *t = calloc(1, sizeof(*t));
    *out = NULL;
    if (!c || !t) {
        free(c);
        free(t);
        return ncclSystemError;
    }
    c->magic = SIM_COMM_MAGIC;
    c->id = *id;
    c->rank = rank;
    c->nranks = nranks;
    c->device = device;
    atomic_init(&c->refs, 1);
    atomic_init(&c->async_err, ncclInProgress);
    pthread_mutex_init(&c->lock, NULL);
    ncclResult_t rc = sim_clique_open(&c->clq, id, nranks, rank);
    if (rc == ncclSuccess) {
        c->clq.abort_flag = &c->aborted;
        rc = sim_clique_join(&c->clq, device);
    }
    if (rc != ncclSuccess) {
        sim_clique_close(&c->clq);
        pthread_mutex_destroy(&c->lock);
        free(c);
        free(t);
        return rc;
    }
    t->base.poll = sim_init_poll;
    t->comm = c;
    t->out = out;
    t->started = sim_now_ns();
    /* The handle exists at once, as in NCCL: calls in the same group may name it. */
    *out = c;
    *task = t;
    return ncclSuccess;
}

/* sim_comm_new, then init now or at ncclGroupEnd. */
static ncclResult_t sim_comm_create(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                                    int device)
{
    struct sim_init_task *t;
    ncclResult_t rc = sim_comm_new(out, nranks, id, rank, device, &t);
    return rc == ncclSuccess ? sim_group_task(&t->base) : rc;
}

static ncclResult_t sim_init_args(ncclComm_t *comm, int nranks, int rank)
{
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks) {
        sim_set_last_error("sim NCCL: invalid init arguments (nranks %d, rank %d)", nranks, rank);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

static ncclResult_t sim_current_device(int *device)
{
    if (cudaGetDevice(device) != cudaSuccess) {
        sim_set_last_error("sim NCCL: cudaGetDevice failed");
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

SIM_NCCL_EXPORT ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                                     ncclUniqueId commId, int rank,
                                                     ncclConfig_t *config)
{
    int device;
    ncclResult_t rc = sim_init_args(comm, nranks, rank);
    if (rc == ncclSuccess) rc = sim_check_config(config);
    if (rc == ncclSuccess) rc = sim_current_device(&device);
    if (rc != ncclSuccess) return rc;
    return sim_comm_create(comm, nranks, &commId, rank, device);
}
SIM_NCCL_ALIAS(ncclCommInitRankConfig);

SIM_NCCL_EXPORT ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                               int rank)
{
    return pncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}
SIM_NCCL_ALIAS(ncclCommInitRank);

/* Several ids only spread the real bootstrap's load; one is enough here. */
SIM_NCCL_EXPORT ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
                                                       int nId, ncclUniqueId *commIds,
                                                       ncclConfig_t *config)
{
    if (nId < 1 || !commIds) {
        sim_set_last_error("sim NCCL: ncclCommInitRankScalable needs at least one id");
        return ncclInvalidArgument;
    }
    return pncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}
SIM_NCCL_ALIAS(ncclCommInitRankScalable);

SIM_NCCL_EXPORT ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    int ndevices = 0;
    if (!comm || ndev < 1) {
        sim_set_last_error("sim NCCL: ncclCommInitAll: invalid arguments");
        return ncclInvalidArgument;
    }
    if (cudaGetDeviceCount(&ndevices) != cudaSuccess) return ncclUnhandledCudaError;
    for (int i = 0; i < ndev; i++) {
        int dev = devlist ? devlist[i] : i;
        if (dev < 0 || dev >= ndevices) {
            sim_set_last_error("sim NCCL: ncclCommInitAll: invalid device %d", dev);
            return ncclInvalidArgument;
        }
    }
    ncclUniqueId id;
    ncclResult_t rc = pncclGetUniqueId(&id);
    if (rc != ncclSuccess) return rc;
    for (int i = 0; i < ndev; i++)
        comm[i] = NULL;
    /* One thread initialises every rank: a group makes the joins
     * non-blocking and waits for all of them at its end. */
    pncclGroupStart();
    for (int i = 0; i < ndev && rc == ncclSuccess; i++)
        rc = sim_comm_create(&comm[i], ndev, &id, i, devlist ? devlist[i] : i);
    /* If a rank could not even be created, the others would wait for it:
     * abort them so that the group end below fails them at once. */
    for (int i = 0; rc != ncclSuccess && i < ndev; i++)
        if (comm[i]) atomic_store(&comm[i]->aborted, 1);
    ncclResult_t end = pncclGroupEnd();
    if (rc == ncclSuccess) rc = end;
    if (rc != ncclSuccess)
        for (int i = 0; i < ndev; i++)
            if (comm[i]) {
                pncclCommAbort(comm[i]);
                comm[i] = NULL;
            }
    return rc;
}
SIM_NCCL_ALIAS(ncclCommInitAll);

/* ---- split and shrink ------------------------------------------------------ */

/* Split: exchange (colour, key) over the parent, then init the child. */
struct sim_split_task {
    struct sim_task base;
    struct ncclComm *parent;
    ncclComm_t *out;
    int64_t color, key;
    uint64_t ticket, ordinal, started;
    struct sim_task *child; /* the child's init task, once created */
};

static int sim_split_poll(struct sim_task *task)
{
    struct sim_split_task *t = (struct sim_split_task *)task;
    struct ncclComm *p = t->parent;
    char why[256];
    if (t->child) {
        int rc = t->child->poll(t->child);
        if (rc < 0) t->base.rc = t->child->rc;
        if (rc != 0) free(t->child);
        return rc;
    }
    int64_t all[2 * p->nranks];
    int rc = sim_clique_xpoll(&p->clq, t->ticket, all, t->started, why, sizeof(why));
    if (rc == 0) return 0;
    if (rc < 0) {
        t->base.rc = sim_wait_result(-rc);
        sim_comm_set_error(p, t->base.rc, "sim NCCL rank %d/%d: split failed: %s", p->rank,
                           p->nranks, why);
        sim_comm_unref(p);
        t->parent = NULL;
        *t->out = NULL;
        return -1;
    }
    if (t->color == NCCL_SPLIT_NOCOLOR) {
        sim_comm_unref(p);
        t->parent = NULL;
        *t->out = NULL;
        return 1;
    }
    /* New rank: position among the same colour, ordered by (key, old rank). */
    int n = 0, me = 0;
    for (int r = 0; r < p->nranks; r++) {
        if (all[2 * r] != t->color) continue;
        if (all[2 * r + 1] < t->key || (all[2 * r + 1] == t->key && r < p->rank)) me++;
        n++;
    }
    ncclUniqueId id;
    sim_child_id(&p->id, t->ordinal, t->color, &id);
    /* The child's init is polled from here, not queued on its own. */
    struct sim_init_task *child;
    ncclResult_t r = sim_comm_new(t->out, n, &id, me, p->device, &child);
    sim_comm_unref(p);
    t->parent = NULL;
    if (r != ncclSuccess) {
        t->base.rc = r;
        return -1;
    }
    t->child = &child->base;
    return 0;
}

static ncclResult_t sim_derive_args(ncclComm_t comm, ncclComm_t *newcomm, ncclConfig_t *config)
{
    if (!sim_comm_valid(comm) || !newcomm) {
        sim_set_last_error("sim NCCL: invalid communicator or output pointer");
        return ncclInvalidArgument;
    }
    return sim_check_config(config);
}

SIM_NCCL_EXPORT ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key,
                                            ncclComm_t *newcomm, ncclConfig_t *config)
{
    ncclResult_t rc = sim_derive_args(comm, newcomm, config);
    if (rc != ncclSuccess) return rc;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
        sim_set_last_error("sim NCCL: ncclCommSplit: invalid color %d", color);
        return ncclInvalidArgument;
    }
    struct sim_split_task *t = calloc(1, sizeof(*t));
    if (!t) return ncclSystemError;
    sim_comm_ref(comm);
    t->base.poll = sim_split_poll;
    t->parent = comm;
    t->out = newcomm;
    t->color = color;
    t->key = key;
    t->ordinal = ++comm->splits;
    t->started = sim_now_ns();
    int64_t mine[2] = {color, key};
    t->ticket = sim_clique_xpost(&comm->clq, mine);
    *newcomm = NULL;
    rc = sim_group_task(&t->base);
    return rc;
}
SIM_NCCL_ALIAS(ncclCommSplit);

/* Shrink needs no exchange: every surviving rank passes the same list, and
 * the excluded ranks (perhaps dead) take no part. */
SIM_NCCL_EXPORT ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList,
                                             int excludeRanksCount, ncclComm_t *newcomm,
                                             ncclConfig_t *config, int shrinkFlags)
{
    ncclResult_t rc = sim_derive_args(comm, newcomm, config);
    if (rc != ncclSuccess) return rc;
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList) ||
        (shrinkFlags & ~(NCCL_SHRINK_DEFAULT | NCCL_SHRINK_ABORT))) {
        sim_set_last_error("sim NCCL: ncclCommShrink: invalid arguments");
        return ncclInvalidArgument;
    }
    int me = comm->rank, n = comm->nranks;
    for (int r = 0; r < comm->nranks; r++) {
        int excluded = 0;
        for (int i = 0; i < excludeRanksCount; i++)
            if (excludeRanksList[i] == r) excluded = 1;
        if (!excluded) continue;
        if (r == comm->rank) {
            sim_set_last_error("sim NCCL: ncclCommShrink called by excluded rank %d", r);
            return ncclInvalidArgument;
        }
        n--;
        if (r < comm->rank) me--;
    }
    if (shrinkFlags & NCCL_SHRINK_ABORT) {
        /* Stop what the parent has in flight; it can only be destroyed now. */
        atomic_store(&comm->aborted, 1);
        sim_clique_fail(&comm->clq);
    }
    ncclUniqueId id;
    sim_child_id(&comm->id, ++comm->splits, -2, &id);
    return sim_comm_create(newcomm, n, &id, me, comm->device);
}
SIM_NCCL_ALIAS(ncclCommShrink);

/* Growth (NCCL 2.29): the grown communicator is a new one of nRanks, in which
 * the existing ranks keep their numbers and the new ranks take theirs. Its id
 * is derived from the parent's and the grow's ordinal, as a split's is, so
 * that every existing rank knows it without the root sending it; the root
 * hands it to the new ranks out of band (ncclCommGetUniqueId), and passes it
 * back to ncclCommGrow, where it must match. */
#define SIM_GROW_COLOR (-0x67726f77) /* "grow": apart from every split colour */

static void sim_grow_id(const struct ncclComm *c, ncclUniqueId *out)
{
    sim_child_id(&c->id, c->grows + 1, SIM_GROW_COLOR, out);
}

SIM_NCCL_EXPORT ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId)
{
    if (!sim_comm_valid(comm) || !uniqueId) {
        sim_set_last_error("sim NCCL: ncclCommGetUniqueId: invalid communicator or output pointer");
        return ncclInvalidArgument;
    }
    ncclResult_t rc = sim_comm_usable(comm);
    if (rc != ncclSuccess) return rc;
    pthread_mutex_lock(&comm->lock);
    if (comm->grow_id_out) {
        rc = ncclInvalidUsage;
        sim_set_last_error("sim NCCL: ncclCommGetUniqueId: the previous id was not consumed by "
                           "ncclCommGrow yet");
    } else {
        sim_grow_id(comm, uniqueId);
        comm->grow_id_out = 1;
    }
    pthread_mutex_unlock(&comm->lock);
    return rc;
}
SIM_NCCL_ALIAS(ncclCommGetUniqueId);

SIM_NCCL_EXPORT ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks,
                                           const ncclUniqueId *uniqueId, int rank,
                                           ncclComm_t *newcomm, ncclConfig_t *config)
{
    ncclUniqueId id;
    int device;
    ncclResult_t rc = newcomm ? sim_check_config(config) : ncclInvalidArgument;

    if (rc != ncclSuccess) return rc;
    *newcomm = NULL;
    if (!comm) { /* a new rank: the root's id, its assigned rank */
        if (!uniqueId || nRanks < 1 || rank < 0 || rank >= nRanks) {
            sim_set_last_error("sim NCCL: ncclCommGrow: a new rank needs the id and a rank in "
                               "[0, %d), not %d",
                               nRanks, rank);
            return ncclInvalidArgument;
        }
        rc = sim_current_device(&device);
        return rc == ncclSuccess ? sim_comm_create(newcomm, nRanks, uniqueId, rank, device) : rc;
    }
    if (!sim_comm_valid(comm) || rank != -1 || nRanks <= comm->nranks) {
        sim_set_last_error("sim NCCL: ncclCommGrow: an existing rank passes its communicator, rank "
                           "-1 and more than its %d ranks (got rank %d, nRanks %d)",
                           sim_comm_valid(comm) ? comm->nranks : 0, rank, nRanks);
        return ncclInvalidArgument;
    }
    if ((rc = sim_comm_usable(comm)) != ncclSuccess) return rc;
    pthread_mutex_lock(&comm->lock);
    sim_grow_id(comm, &id);
    if (uniqueId && memcmp(uniqueId, &id, sizeof id)) {
        rc = ncclInvalidArgument;
        sim_set_last_error("sim NCCL: ncclCommGrow: the id is not this communicator's "
                           "ncclCommGetUniqueId");
    } else {
        comm->grows++;
        comm->grow_id_out = 0;
    }
    pthread_mutex_unlock(&comm->lock);
    return rc == ncclSuccess ? sim_comm_create(newcomm, nRanks, &id, comm->rank, comm->device) : rc;
}
SIM_NCCL_ALIAS(ncclCommGrow);

/* ---- tear-down ------------------------------------------------------------- */

static int sim_drained(void *arg)
{
    struct ncclComm *c = arg;
    return atomic_load(&c->done) == atomic_load(&c->issued);
}

/* Waits until this rank's queued device work has run. */
static ncclResult_t sim_comm_drain(struct ncclComm *c)
{
    char why[256];
    enum sim_wait_rc rc = sim_clique_wait(&c->clq, sim_drained, c, c->rank, why, sizeof(why));
    if (rc == SIM_WAIT_TIMEOUT) {
        sim_comm_set_error(c, ncclSystemError, "sim NCCL rank %d/%d: finalize: %s", c->rank,
                           c->nranks, why);
        return ncclSystemError;
    }
    return ncclSuccess;
}

SIM_NCCL_EXPORT ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    if (!sim_comm_valid(comm)) return ncclInvalidArgument;
    if (atomic_load(&comm->revoked)) {
        sim_set_last_error("sim NCCL: ncclCommFinalize after ncclCommRevoke");
        return ncclInvalidUsage;
    }
    return sim_comm_drain(comm);
}
SIM_NCCL_ALIAS(ncclCommFinalize);

SIM_NCCL_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    if (!sim_comm_valid(comm)) return ncclInvalidArgument;
    sim_comm_drain(comm);
    comm->magic = SIM_COMM_DEAD;
    sim_comm_unref(comm);
    return ncclSuccess;
}
SIM_NCCL_ALIAS(ncclCommDestroy);

SIM_NCCL_EXPORT ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    if (!sim_comm_valid(comm)) return ncclInvalidArgument;
    /* Queued work sees the flag and skips; peers see this rank failed. */
    atomic_store(&comm->aborted, 1);
    sim_clique_fail(&comm->clq);
    sim_clique_unlink(&comm->clq);
    comm->magic = SIM_COMM_DEAD;
    sim_comm_unref(comm);
    return ncclSuccess;
}
SIM_NCCL_ALIAS(ncclCommAbort);

ncclResult_t sim_comm_usable(struct ncclComm *c)
{
    if (atomic_load(&c->revoked)) {
        sim_set_last_error("sim NCCL rank %d/%d: the communicator is revoked", c->rank, c->nranks);
        return ncclInvalidUsage;
    }
    if (atomic_load(&c->suspended)) {
        sim_set_last_error("sim NCCL rank %d/%d: the communicator is suspended", c->rank,
                           c->nranks);
        return ncclInvalidUsage;
    }
    return ncclSuccess;
}

/* Revoke (NCCL 2.28): new operations are refused for good; the work already
 * queued runs to its end as the sim's always does (a collective is never cut
 * short), and ncclCommGetAsyncError says ncclInProgress until it has, then
 * ncclSuccess. Destroy, split and shrink stay allowed, finalize does not. */
SIM_NCCL_EXPORT ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    if (!sim_comm_valid(comm) || revokeFlags != NCCL_REVOKE_DEFAULT) {
        sim_set_last_error("sim NCCL: ncclCommRevoke: invalid communicator or flags %d",
                           revokeFlags);
        return ncclInvalidArgument;
    }
    atomic_store(&comm->revoked, 1);
    return ncclSuccess;
}
SIM_NCCL_ALIAS(ncclCommRevoke);

/* Suspend (NCCL 2.29): after the work queued so far, the communicator takes
 * no operation until resumed. NCCL_SUSPEND_MEM releases its dynamic device
 * memory, which the sim's NCCL has none of (it stages through host shared
 * memory), so nothing is released and ncclCommMemStats says 0 bytes. */
SIM_NCCL_EXPORT ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags)
{
    if (!sim_comm_valid(comm) || (flags & ~NCCL_SUSPEND_MEM)) {
        sim_set_last_error("sim NCCL: ncclCommSuspend: invalid communicator or flags %#x", flags);
        return ncclInvalidArgument;
    }
    ncclResult_t rc = sim_comm_usable(comm);
    if (rc != ncclSuccess) return rc;
    if ((rc = sim_comm_drain(comm)) != ncclSuccess) return rc;
    atomic_store(&comm->suspended, 1);
    return ncclSuccess;
}
SIM_NCCL_ALIAS(ncclCommSuspend);

SIM_NCCL_EXPORT ncclResult_t pncclCommResume(ncclComm_t comm)
{
    int was = 1;
    if (!sim_comm_valid(comm)) return ncclInvalidArgument;
    if (!atomic_compare_exchange_strong(&comm->suspended, &was, 0)) {
        sim_set_last_error("sim NCCL: ncclCommResume: the communicator is not suspended");
        return ncclInvalidUsage;
    }
    return ncclSuccess;
}
SIM_NCCL_ALIAS(ncclCommResume);

SIM_NCCL_EXPORT ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat,
                                               uint64_t *value)
{
    if (!sim_comm_valid(comm) || !value || stat < ncclStatGpuMemSuspend ||
        stat > ncclStatGpuMemTotal) {
        sim_set_last_error("sim NCCL: ncclCommMemStats: invalid communicator, statistic %d or "
                           "output pointer",
                           (int)stat);
        return ncclInvalidArgument;
    }
    /* no device memory of its own: every byte count is 0 */
    *value = stat == ncclStatGpuMemSuspended ? (uint64_t)atomic_load(&comm->suspended) : 0;
    return ncclSuccess;
}
SIM_NCCL_ALIAS(ncclCommMemStats);

/* ---- queries ---------------------------------------------------------------- */

/* The integer queries: *out is the int at `field` (offsetof) of a valid
 * communicator. */
static ncclResult_t query_int(const ncclComm_t comm, int *out, size_t field)
{
    if (!sim_comm_valid(comm) || !out) return ncclInvalidArgument;
    memcpy(out, (const char *)comm + field, sizeof *out);
    return ncclSuccess;
}

SIM_NCCL_EXPORT ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
    return query_int(comm, count, offsetof(struct ncclComm, nranks));
}
SIM_NCCL_ALIAS(ncclCommCount);

SIM_NCCL_EXPORT ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
    return query_int(comm, device, offsetof(struct ncclComm, device));
}
SIM_NCCL_ALIAS(ncclCommCuDevice);

SIM_NCCL_EXPORT ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    return query_int(comm, rank, offsetof(struct ncclComm, rank));
}
SIM_NCCL_ALIAS(ncclCommUserRank);

SIM_NCCL_EXPORT ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!sim_comm_valid(comm) || !asyncError) return ncclInvalidArgument;
    /* revoked: in progress until the work queued before the revoke has run */
    if (atomic_load(&comm->revoked))
        *asyncError = sim_drained(comm) ? ncclSuccess : ncclInProgress;
    else
        *asyncError = (ncclResult_t)atomic_load(&comm->async_err);
    return ncclSuccess;
}
SIM_NCCL_ALIAS(ncclCommGetAsyncError);

/* ---- user reduction operators ---------------------------------------------- */

SIM_NCCL_EXPORT ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                                       ncclDataType_t datatype,
                                                       ncclScalarResidence_t residence,
                                                       ncclComm_t comm)
{
    size_t es = sim_dtype_size(datatype);
    if (!op || !scalar || !sim_comm_valid(comm) || !es ||
        (residence != ncclScalarDevice && residence != ncclScalarHostImmediate))
        return ncclInvalidArgument;
    ncclResult_t rc = ncclInvalidUsage;
    pthread_mutex_lock(&comm->lock);
    for (int i = 0; i < SIM_MAX_USER_OPS; i++) {
        if (comm->user_op_used[i]) continue;
        struct sim_redop *r = &comm->user_ops[i];
        memset(r, 0, sizeof(*r));
        r->kind = SIM_PREMULSUM;
        r->dtype = datatype;
        r->scalar_on_device = residence == ncclScalarDevice;
        r->scalar_ptr = scalar;
        if (!r->scalar_on_device) memcpy(r->scalar, scalar, es);
        comm->user_op_used[i] = 1;
        *op = (ncclRedOp_t)(ncclNumOps + i);
        rc = ncclSuccess;
        break;
    }
    pthread_mutex_unlock(&comm->lock);
    return rc;
}
SIM_NCCL_ALIAS(ncclRedOpCreatePreMulSum);

SIM_NCCL_EXPORT ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    int i = (int)op - ncclNumOps;
    if (!sim_comm_valid(comm) || i < 0 || i >= SIM_MAX_USER_OPS) return ncclInvalidArgument;
    pthread_mutex_lock(&comm->lock);
    ncclResult_t rc = comm->user_op_used[i] ? ncclSuccess : ncclInvalidArgument;
    comm->user_op_used[i] = 0;
    pthread_mutex_unlock(&comm->lock);
    return rc;
}
SIM_NCCL_ALIAS(ncclRedOpDestroy);

ncclResult_t sim_comm_resolve_op(struct ncclComm *c, ncclRedOp_t op, ncclDataType_t t,
                                 struct sim_redop *out)
{
    memset(out, 0, sizeof(*out));
    out->dtype = t;
    if ((int)op >= 0 && op < ncclNumOps) {
        out->kind = (int)op;
        return ncclSuccess;
    }
    int i = (int)op - ncclNumOps;
    if (i < 0 || i >= SIM_MAX_USER_OPS) return ncclInvalidArgument;
    pthread_mutex_lock(&c->lock);
    ncclResult_t rc = ncclInvalidArgument;
    if (c->user_op_used[i] && c->user_ops[i].dtype == t) {
        *out = c->user_ops[i]; /* copied: the op may be destroyed once the call returns */
        rc = ncclSuccess;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}
