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

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define FS_COMM_DEAD    0xdeadc0117dead000ULL
#define FS_CONFIG_MAGIC 0xcafebeef

struct fs_reg {
    struct fs_reg *next;
    void *buff;
    size_t size;
    int window;
};

static _Thread_local char fs_last_error[512];

void fs_set_last_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fs_last_error, sizeof(fs_last_error), fmt, ap);
    va_end(ap);
}

int fs_comm_valid(const struct ncclComm *c)
{
    return c && c->magic == FS_COMM_MAGIC;
}

void fs_comm_ref(struct ncclComm *c)
{
    atomic_fetch_add(&c->refs, 1);
}

void fs_comm_unref(struct ncclComm *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    fs_clique_close(&c->clq);
    while (c->regs) {
        struct fs_reg *r = c->regs;
        c->regs = r->next;
        free(r);
    }
    pthread_mutex_destroy(&c->lock);
    c->magic = 0;
    free(c);
}

void fs_comm_set_error(struct ncclComm *c, ncclResult_t rc, const char *fmt, ...)
{
    char msg[sizeof(c->errmsg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fs_set_last_error("%s", msg);
    /* The first error sticks; it is also the one worth printing. Errors come
     * from stream workers too, so the message is kept on the communicator
     * for ncclGetLastError(comm) on the user's thread. has_errmsg: 0 none,
     * 2 being written, 1 written. */
    int none = 0;
    if (!atomic_compare_exchange_strong(&c->has_errmsg, &none, 2)) return;
    memcpy(c->errmsg, msg, sizeof(msg));
    atomic_store(&c->async_err, rc);
    atomic_store(&c->has_errmsg, 1);
    fprintf(stderr, "fsdpshim: %s\n", msg);
}

/* ---- ids and versions ---------------------------------------------------- */

FS_NCCL_EXPORT ncclResult_t pncclGetVersion(int *version)
{
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
FS_NCCL_ALIAS(ncclGetVersion);

FS_NCCL_EXPORT ncclResult_t pncclGetUniqueId(ncclUniqueId *id)
{
    if (!id) return ncclInvalidArgument;
    memset(id, 0, sizeof(*id));
    /* 20 random bytes name the segment; the pid only helps a human reading /dev/shm. */
    if (getrandom(id->internal, 20, 0) != 20) {
        fs_set_last_error("sim NCCL: getrandom failed");
        return ncclSystemError;
    }
    int pid = getpid();
    memcpy(id->internal + 20, &pid, sizeof(pid));
    return ncclSuccess;
}
FS_NCCL_ALIAS(ncclGetUniqueId);

/* A child communicator's id: the parent's, mixed with the split's ordinal
 * and colour, so that every rank of the parent derives the same one. */
static void fs_child_id(const ncclUniqueId *parent, uint64_t ordinal, int64_t color,
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

ncclResult_t fs_wait_result(enum fs_wait_rc rc)
{
    switch (rc) {
    case FS_WAIT_OK:
        return ncclSuccess;
    case FS_WAIT_PEER:
        return ncclRemoteError;
    case FS_WAIT_TIMEOUT:
        return ncclSystemError;
    default:
        return ncclInvalidUsage; /* aborted under the caller's feet */
    }
}

struct fs_init_task {
    struct fs_task base;
    struct ncclComm *comm;
    ncclComm_t *out;
    uint64_t started;
};

/* Every rank's device is known once all have joined. */
static ncclResult_t fs_check_devices(struct ncclComm *c)
{
    for (int a = 0; a < c->nranks; a++)
        for (int b = a + 1; b < c->nranks; b++)
            if (c->clq.slots[a].device == c->clq.slots[b].device) {
                fs_set_last_error(
                    "sim NCCL: Duplicate GPU detected : rank %d and rank %d both on CUDA "
                    "device %d",
                    a, b, c->clq.slots[a].device);
                return ncclInvalidUsage;
            }
    return ncclSuccess;
}

static void fs_init_fail(struct fs_init_task *t, ncclResult_t rc)
{
    struct ncclComm *c = t->comm;
    fs_clique_fail(&c->clq);
    fs_clique_unlink(&c->clq);
    c->magic = FS_COMM_DEAD;
    fs_comm_unref(c);
    *t->out = NULL;
    t->base.rc = rc;
}

static int fs_init_poll(struct fs_task *task)
{
    struct fs_init_task *t = (struct fs_init_task *)task;
    struct ncclComm *c = t->comm;
    char why[256];
    int rc = fs_clique_poll_joined(&c->clq, t->started, why, sizeof(why));
    if (rc == 0) return 0;
    if (rc < 0) {
        fs_set_last_error("sim NCCL rank %d/%d: init failed: %s", c->rank, c->nranks, why);
        fprintf(stderr, "fsdpshim: sim NCCL rank %d/%d: init failed: %s\n", c->rank, c->nranks,
                why);
        fs_init_fail(t, fs_wait_result(-rc));
        return -1;
    }
    fs_clique_unlink(&c->clq);
    ncclResult_t dup = fs_check_devices(c);
    if (dup != ncclSuccess) {
        fs_init_fail(t, dup);
        return -1;
    }
    atomic_store(&c->async_err, ncclSuccess);
    return 1;
}

/* A config must come from NCCL_CONFIG_INITIALIZER. Its tuning fields mean
 * nothing here, and a non-blocking communicator is simply initialised
 * before the call returns, which is a valid outcome of a non-blocking call
 * (ncclSuccess instead of ncclInProgress). */
static ncclResult_t fs_check_config(const ncclConfig_t *config)
{
    if (config && (config->magic != FS_CONFIG_MAGIC ||
                   config->size < offsetof(ncclConfig_t, cgaClusterSize))) {
        fs_set_last_error("sim NCCL: ncclConfig_t not initialised with NCCL_CONFIG_INITIALIZER");
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

/* Creates rank `rank` of the communicator `id` on `device`, joined, and
 * its init task, which finishes it and stores it in *out. */
static ncclResult_t fs_comm_new(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                                int device, struct fs_init_task **task)
{
    struct ncclComm *c = calloc(1, sizeof(*c));
    struct fs_init_task *t = calloc(1, sizeof(*t));
    *out = NULL;
    if (!c || !t) {
        free(c);
        free(t);
        return ncclSystemError;
    }
    c->magic = FS_COMM_MAGIC;
    c->id = *id;
    c->rank = rank;
    c->nranks = nranks;
    c->device = device;
    atomic_init(&c->refs, 1);
    atomic_init(&c->async_err, ncclInProgress);
    pthread_mutex_init(&c->lock, NULL);
    ncclResult_t rc = fs_clique_open(&c->clq, id, nranks, rank);
    if (rc == ncclSuccess) {
        c->clq.abort_flag = &c->aborted;
        rc = fs_clique_join(&c->clq, device);
    }
    if (rc != ncclSuccess) {
        fs_clique_close(&c->clq);
        pthread_mutex_destroy(&c->lock);
        free(c);
        free(t);
        return rc;
    }
    t->base.poll = fs_init_poll;
    t->comm = c;
    t->out = out;
    t->started = fs_now_ns();
    /* The handle exists at once, as in NCCL: calls in the same group may name it. */
    *out = c;
    *task = t;
    return ncclSuccess;
}

/* fs_comm_new, then init now or at ncclGroupEnd. */
static ncclResult_t fs_comm_create(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
                                   int device)
{
    struct fs_init_task *t;
    ncclResult_t rc = fs_comm_new(out, nranks, id, rank, device, &t);
    return rc == ncclSuccess ? fs_group_task(&t->base) : rc;
}

static ncclResult_t fs_init_args(ncclComm_t *comm, int nranks, int rank)
{
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks) {
        fs_set_last_error("sim NCCL: invalid init arguments (nranks %d, rank %d)", nranks, rank);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

static ncclResult_t fs_current_device(int *device)
{
    if (cudaGetDevice(device) != cudaSuccess) {
        fs_set_last_error("sim NCCL: cudaGetDevice failed");
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

FS_NCCL_EXPORT ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                                    ncclUniqueId commId, int rank,
                                                    ncclConfig_t *config)
{
    int device;
    ncclResult_t rc = fs_init_args(comm, nranks, rank);
    if (rc == ncclSuccess) rc = fs_check_config(config);
    if (rc == ncclSuccess) rc = fs_current_device(&device);
    if (rc != ncclSuccess) return rc;
    return fs_comm_create(comm, nranks, &commId, rank, device);
}
FS_NCCL_ALIAS(ncclCommInitRankConfig);

FS_NCCL_EXPORT ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                              int rank)
{
    return pncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}
FS_NCCL_ALIAS(ncclCommInitRank);

/* Several ids only spread the real bootstrap's load; one is enough here. */
FS_NCCL_EXPORT ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
                                                      int nId, ncclUniqueId *commIds,
                                                      ncclConfig_t *config)
{
    if (nId < 1 || !commIds) {
        fs_set_last_error("sim NCCL: ncclCommInitRankScalable needs at least one id");
        return ncclInvalidArgument;
    }
    return pncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}
FS_NCCL_ALIAS(ncclCommInitRankScalable);

FS_NCCL_EXPORT ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    int ndevices = 0;
    if (!comm || ndev < 1) {
        fs_set_last_error("sim NCCL: ncclCommInitAll: invalid arguments");
        return ncclInvalidArgument;
    }
    if (cudaGetDeviceCount(&ndevices) != cudaSuccess) return ncclUnhandledCudaError;
    for (int i = 0; i < ndev; i++) {
        int dev = devlist ? devlist[i] : i;
        if (dev < 0 || dev >= ndevices) {
            fs_set_last_error("sim NCCL: ncclCommInitAll: invalid device %d", dev);
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
        rc = fs_comm_create(&comm[i], ndev, &id, i, devlist ? devlist[i] : i);
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
FS_NCCL_ALIAS(ncclCommInitAll);

/* ---- split and shrink ------------------------------------------------------ */

/* Split: exchange (colour, key) over the parent, then init the child. */
struct fs_split_task {
    struct fs_task base;
    struct ncclComm *parent;
    ncclComm_t *out;
    int64_t color, key;
    uint64_t ticket, ordinal, started;
    struct fs_task *child; /* the child's init task, once created */
};

static int fs_split_poll(struct fs_task *task)
{
    struct fs_split_task *t = (struct fs_split_task *)task;
    struct ncclComm *p = t->parent;
    char why[256];
    if (t->child) {
        int rc = t->child->poll(t->child);
        if (rc < 0) t->base.rc = t->child->rc;
        if (rc != 0) free(t->child);
        return rc;
    }
    int64_t all[2 * p->nranks];
    int rc = fs_clique_xpoll(&p->clq, t->ticket, all, t->started, why, sizeof(why));
    if (rc == 0) return 0;
    if (rc < 0) {
        t->base.rc = fs_wait_result(-rc);
        fs_comm_set_error(p, t->base.rc, "sim NCCL rank %d/%d: split failed: %s", p->rank,
                          p->nranks, why);
        fs_comm_unref(p);
        t->parent = NULL;
        *t->out = NULL;
        return -1;
    }
    if (t->color == NCCL_SPLIT_NOCOLOR) {
        fs_comm_unref(p);
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
    fs_child_id(&p->id, t->ordinal, t->color, &id);
    /* The child's init is polled from here, not queued on its own. */
    struct fs_init_task *child;
    ncclResult_t r = fs_comm_new(t->out, n, &id, me, p->device, &child);
    fs_comm_unref(p);
    t->parent = NULL;
    if (r != ncclSuccess) {
        t->base.rc = r;
        return -1;
    }
    t->child = &child->base;
    return 0;
}

static ncclResult_t fs_derive_args(ncclComm_t comm, ncclComm_t *newcomm, ncclConfig_t *config)
{
    if (!fs_comm_valid(comm) || !newcomm) {
        fs_set_last_error("sim NCCL: invalid communicator or output pointer");
        return ncclInvalidArgument;
    }
    return fs_check_config(config);
}

FS_NCCL_EXPORT ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                           ncclConfig_t *config)
{
    ncclResult_t rc = fs_derive_args(comm, newcomm, config);
    if (rc != ncclSuccess) return rc;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
        fs_set_last_error("sim NCCL: ncclCommSplit: invalid color %d", color);
        return ncclInvalidArgument;
    }
    struct fs_split_task *t = calloc(1, sizeof(*t));
    if (!t) return ncclSystemError;
    fs_comm_ref(comm);
    t->base.poll = fs_split_poll;
    t->parent = comm;
    t->out = newcomm;
    t->color = color;
    t->key = key;
    t->ordinal = ++comm->splits;
    t->started = fs_now_ns();
    int64_t mine[2] = {color, key};
    t->ticket = fs_clique_xpost(&comm->clq, mine);
    *newcomm = NULL;
    rc = fs_group_task(&t->base);
    return rc;
}
FS_NCCL_ALIAS(ncclCommSplit);

/* Shrink needs no exchange: every surviving rank passes the same list, and
 * the excluded ranks (perhaps dead) take no part. */
FS_NCCL_EXPORT ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList,
                                            int excludeRanksCount, ncclComm_t *newcomm,
                                            ncclConfig_t *config, int shrinkFlags)
{
    ncclResult_t rc = fs_derive_args(comm, newcomm, config);
    if (rc != ncclSuccess) return rc;
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList) ||
        (shrinkFlags & ~(NCCL_SHRINK_DEFAULT | NCCL_SHRINK_ABORT))) {
        fs_set_last_error("sim NCCL: ncclCommShrink: invalid arguments");
        return ncclInvalidArgument;
    }
    int me = comm->rank, n = comm->nranks;
    for (int r = 0; r < comm->nranks; r++) {
        int excluded = 0;
        for (int i = 0; i < excludeRanksCount; i++)
            if (excludeRanksList[i] == r) excluded = 1;
        if (!excluded) continue;
        if (r == comm->rank) {
            fs_set_last_error("sim NCCL: ncclCommShrink called by excluded rank %d", r);
            return ncclInvalidArgument;
        }
        n--;
        if (r < comm->rank) me--;
    }
    if (shrinkFlags & NCCL_SHRINK_ABORT) {
        /* Stop what the parent has in flight; it can only be destroyed now. */
        atomic_store(&comm->aborted, 1);
        fs_clique_fail(&comm->clq);
    }
    ncclUniqueId id;
    fs_child_id(&comm->id, ++comm->splits, -2, &id);
    return fs_comm_create(newcomm, n, &id, me, comm->device);
}
FS_NCCL_ALIAS(ncclCommShrink);

/* ---- tear-down ------------------------------------------------------------- */

static int fs_drained(void *arg)
{
    struct ncclComm *c = arg;
    return atomic_load(&c->done) == atomic_load(&c->issued);
}

/* Waits until this rank's queued device work has run. */
static ncclResult_t fs_comm_drain(struct ncclComm *c)
{
    char why[256];
    enum fs_wait_rc rc = fs_clique_wait(&c->clq, fs_drained, c, c->rank, why, sizeof(why));
    if (rc == FS_WAIT_TIMEOUT) {
        fs_comm_set_error(c, ncclSystemError, "sim NCCL rank %d/%d: finalize: %s", c->rank,
                          c->nranks, why);
        return ncclSystemError;
    }
    return ncclSuccess;
}

FS_NCCL_EXPORT ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    if (!fs_comm_valid(comm)) return ncclInvalidArgument;
    return fs_comm_drain(comm);
}
FS_NCCL_ALIAS(ncclCommFinalize);

FS_NCCL_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    if (!fs_comm_valid(comm)) return ncclInvalidArgument;
    fs_comm_drain(comm);
    comm->magic = FS_COMM_DEAD;
    fs_comm_unref(comm);
    return ncclSuccess;
}
FS_NCCL_ALIAS(ncclCommDestroy);

FS_NCCL_EXPORT ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    if (!comm) return ncclSuccess;
    if (!fs_comm_valid(comm)) return ncclInvalidArgument;
    /* Queued work sees the flag and skips; peers see this rank failed. */
    atomic_store(&comm->aborted, 1);
    fs_clique_fail(&comm->clq);
    fs_clique_unlink(&comm->clq);
    comm->magic = FS_COMM_DEAD;
    fs_comm_unref(comm);
    return ncclSuccess;
}
FS_NCCL_ALIAS(ncclCommAbort);

/* ---- queries ---------------------------------------------------------------- */

FS_NCCL_EXPORT ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
    if (!fs_comm_valid(comm) || !count) return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}
FS_NCCL_ALIAS(ncclCommCount);

FS_NCCL_EXPORT ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!fs_comm_valid(comm) || !device) return ncclInvalidArgument;
    *device = comm->device;
    return ncclSuccess;
}
FS_NCCL_ALIAS(ncclCommCuDevice);

FS_NCCL_EXPORT ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!fs_comm_valid(comm) || !rank) return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}
FS_NCCL_ALIAS(ncclCommUserRank);

FS_NCCL_EXPORT ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!fs_comm_valid(comm) || !asyncError) return ncclInvalidArgument;
    *asyncError = (ncclResult_t)atomic_load(&comm->async_err);
    return ncclSuccess;
}
FS_NCCL_ALIAS(ncclCommGetAsyncError);

FS_NCCL_EXPORT const char *pncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}
FS_NCCL_ALIAS(ncclGetErrorString);

/* The communicator's first error when it has one (it may have happened on
 * a stream worker), else the calling thread's last error. */
FS_NCCL_EXPORT const char *pncclGetLastError(ncclComm_t comm)
{
    if (fs_comm_valid(comm) && atomic_load(&comm->has_errmsg) == 1) return comm->errmsg;
    return fs_last_error;
}
FS_NCCL_ALIAS(ncclGetLastError);

/* ---- registrations: bookkeeping only, the sim needs no mapping ------------ */

static ncclResult_t fs_reg_add(ncclComm_t comm, void *buff, size_t size, int window,
                               struct fs_reg **out)
{
    if (!fs_comm_valid(comm) || !buff || !size || !out) return ncclInvalidArgument;
    struct fs_reg *r = calloc(1, sizeof(*r));
    if (!r) return ncclSystemError;
    r->buff = buff;
    r->size = size;
    r->window = window;
    pthread_mutex_lock(&comm->lock);
    r->next = comm->regs;
    comm->regs = r;
    pthread_mutex_unlock(&comm->lock);
    *out = r;
    return ncclSuccess;
}

static ncclResult_t fs_reg_remove(ncclComm_t comm, void *handle, int window)
{
    if (!fs_comm_valid(comm) || !handle) return ncclInvalidArgument;
    ncclResult_t rc = ncclInvalidArgument;
    pthread_mutex_lock(&comm->lock);
    for (struct fs_reg **pp = &comm->regs; *pp; pp = &(*pp)->next)
        if (*pp == handle && (*pp)->window == window) {
            struct fs_reg *r = *pp;
            *pp = r->next;
            free(r);
            rc = ncclSuccess;
            break;
        }
    pthread_mutex_unlock(&comm->lock);
    return rc;
}

FS_NCCL_EXPORT ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size,
                                              void **handle)
{
    struct fs_reg *r;
    ncclResult_t rc = fs_reg_add(comm, buff, size, 0, &r);
    if (rc == ncclSuccess) *handle = r;
    return rc;
}
FS_NCCL_ALIAS(ncclCommRegister);

FS_NCCL_EXPORT ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
    return fs_reg_remove(comm, handle, 0);
}
FS_NCCL_ALIAS(ncclCommDeregister);

FS_NCCL_EXPORT ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                                    ncclWindow_t *win, int winFlags)
{
    struct fs_reg *r;
    if (!win || (winFlags & ~(NCCL_WIN_DEFAULT | NCCL_WIN_COLL_SYMMETRIC)))
        return ncclInvalidArgument;
    ncclResult_t rc = fs_reg_add(comm, buff, size, 1, &r);
    if (rc == ncclSuccess) *win = (ncclWindow_t)(void *)r;
    return rc;
}
FS_NCCL_ALIAS(ncclCommWindowRegister);

FS_NCCL_EXPORT ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    return fs_reg_remove(comm, (void *)win, 1);
}
FS_NCCL_ALIAS(ncclCommWindowDeregister);

FS_NCCL_EXPORT ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
    if (!ptr || !size) return ncclInvalidArgument;
    return cudaMalloc(ptr, size) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}
FS_NCCL_ALIAS(ncclMemAlloc);

FS_NCCL_EXPORT ncclResult_t pncclMemFree(void *ptr)
{
    if (!ptr) return ncclSuccess;
    return cudaFree(ptr) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}
FS_NCCL_ALIAS(ncclMemFree);

/* ---- user reduction operators ---------------------------------------------- */

FS_NCCL_EXPORT ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                                      ncclDataType_t datatype,
                                                      ncclScalarResidence_t residence,
                                                      ncclComm_t comm)
{
    size_t es = fs_dtype_size(datatype);
    if (!op || !scalar || !fs_comm_valid(comm) || !es ||
        (residence != ncclScalarDevice && residence != ncclScalarHostImmediate))
        return ncclInvalidArgument;
    ncclResult_t rc = ncclInvalidUsage;
    pthread_mutex_lock(&comm->lock);
    for (int i = 0; i < FS_MAX_USER_OPS; i++) {
        if (comm->user_op_used[i]) continue;
        struct fs_redop *r = &comm->user_ops[i];
        memset(r, 0, sizeof(*r));
        r->kind = FS_PREMULSUM;
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
FS_NCCL_ALIAS(ncclRedOpCreatePreMulSum);

FS_NCCL_EXPORT ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    int i = (int)op - ncclNumOps;
    if (!fs_comm_valid(comm) || i < 0 || i >= FS_MAX_USER_OPS) return ncclInvalidArgument;
    pthread_mutex_lock(&comm->lock);
    ncclResult_t rc = comm->user_op_used[i] ? ncclSuccess : ncclInvalidArgument;
    comm->user_op_used[i] = 0;
    pthread_mutex_unlock(&comm->lock);
    return rc;
}
FS_NCCL_ALIAS(ncclRedOpDestroy);

ncclResult_t fs_comm_resolve_op(struct ncclComm *c, ncclRedOp_t op, ncclDataType_t t,
                                struct fs_redop *out)
{
    memset(out, 0, sizeof(*out));
    out->dtype = t;
    if ((int)op >= 0 && op < ncclNumOps) {
        out->kind = (int)op;
        return ncclSuccess;
    }
    int i = (int)op - ncclNumOps;
    if (i < 0 || i >= FS_MAX_USER_OPS) return ncclInvalidArgument;
    pthread_mutex_lock(&c->lock);
    ncclResult_t rc = ncclInvalidArgument;
    if (c->user_op_used[i] && c->user_ops[i].dtype == t) {
        *out = c->user_ops[i]; /* copied: the op may be destroyed once the call returns */
        rc = ncclSuccess;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}
