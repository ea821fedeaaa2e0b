/* nccl_internal.h - what the files of the simulated NCCL share.
 *
 * The simulated libnccl.so.2 is split by idea:
 *   clique.c    the shared-memory segment a communicator's ranks meet in, and
 *               every wait on a peer (liveness, timeout, abort)
 *   reduce.c    data types, their conversions and the reduction operators
 *   transport.c the device work: collectives and send/recv moving real data
 *               through the segment, run on the caller's stream
 *   last_error.c the thread's and a communicator's errors, error strings
 *   comm_ref.c  a communicator's references; the last frees it
 *   buffers.c   registrations, windows, ncclMemAlloc/Free
 *   comm.c      communicator life: unique ids, init, split, shrink, destroy,
 *               abort, suspend, revoke, queries, user reduction operators
 *   group.c     ncclGroupStart/End: queued operations and host tasks
 *   coll.c      the collective and point-to-point entry points
 *   onesided.c  the one-sided (window) operations
 * Calls go down this list's dependencies only: last_error.c below every
 * file, comm_ref.c below transport.c and comm.c, transport.c below group.c,
 * group.c below comm.c, comm.c below the entry points of coll.c and
 * onesided.c. Declarations below are grouped by the file that owns them. */
#ifndef SIM_NCCL_INTERNAL_H
#define SIM_NCCL_INTERNAL_H

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Every NCCL entry point is exported twice, as the real library does: a
 * strong pncclX (for profilers) and a weak ncclX alias, with no symbol
 * version, so a preloaded ncclX interposes on either. */
#define SIM_NCCL_EXPORT __attribute__((visibility("default")))
#define SIM_NCCL_ALIAS(name)                                                                       \
    extern __typeof__(p##name) name __attribute__((weak, alias("p" #name), visibility("default")))

/* ---- clique.c ---------------------------------------------------------- */

/* One rank's slot in the segment. Written by its owner, read by peers. */
struct sim_slot {
    _Atomic int present;    /* joined the clique */
    _Atomic int failed;     /* aborted or hit an error: peers stop waiting on it */
    int pid;                /* for liveness checks across processes */
    int device;             /* to refuse two ranks on one device */
    _Atomic uint64_t tick;  /* device-side barriers passed */
    _Atomic uint64_t xtick; /* host-side exchanges posted */
    int64_t xchg[2][2];     /* host exchange payload, double-buffered by xtick parity */
    _Atomic uint64_t colls; /* collectives this rank finished */
    _Atomic int left;       /* SIM_LEFT_*: how the rank left the communicator, 0 not */
    char pad[12];
};

/* How a rank left its communicator while a peer may still wait on it: the
 * peer's error names it, so that diverging ranks are told from dead ones. */
enum { SIM_LEFT_DESTROYED = 1, SIM_LEFT_EXITED = 2 };

/* A one-message mailbox for one ordered pair of ranks (send/recv). */
struct sim_mbox {
    _Atomic uint64_t sent;  /* messages put */
    _Atomic uint64_t taken; /* messages taken */
    size_t len;
    char pad[40];
};

struct sim_clique {
    void *base; /* the mapping */
    size_t size;
    char name[64]; /* shm name, while not yet unlinked */
    int nranks, rank;
    struct sim_clique_hdr *hdr;
    struct sim_slot *slots;
    char *staging;                /* nranks * SIM_STAGE_BYTES */
    struct sim_mbox *mbox;        /* nranks * nranks, [src * nranks + dst] */
    char *mdata;                  /* SIM_MBOX_BYTES per mailbox */
    _Atomic int *abort_flag;      /* the local communicator's abort flag */
    struct sim_clique *next_open; /* this process's open cliques (clique.c) */
};

#define SIM_STAGE_BYTES ((size_t)1 << 20)
#define SIM_MBOX_BYTES  ((size_t)256 << 10)

/* A wait's outcome. */
enum sim_wait_rc { SIM_WAIT_OK = 0, SIM_WAIT_PEER, SIM_WAIT_TIMEOUT, SIM_WAIT_ABORT };

/* Opens (creating if first) the segment for `id`, sized for nranks. Returns
 * ncclInvalidArgument when an existing segment has another size. */
ncclResult_t sim_clique_open(struct sim_clique *c, const ncclUniqueId *id, int nranks, int rank);
/* Publishes this rank's pid and device; non-blocking. */
ncclResult_t sim_clique_join(struct sim_clique *c, int device);
/* Host-side polls, for ncclGroupEnd to drive many at once: 1 when
 * ready(arg), 0 if not yet (after sleeping briefly for a change), minus an
 * sim_wait_rc on failure (a peer died or failed, abort, or `started` + the
 * timeout passed; `why` says more). `started` comes from sim_now_ns(). */
int sim_clique_poll(struct sim_clique *c, int (*ready)(void *), void *arg, uint64_t started,
                    char *why, size_t whylen);
/* Polls until every rank has joined. */
int sim_clique_poll_joined(struct sim_clique *c, uint64_t started, char *why, size_t whylen);
/* Unlinks the segment's name (idempotent); the memory lives while mapped. */
void sim_clique_unlink(struct sim_clique *c);
void sim_clique_close(struct sim_clique *c);
/* Marks this rank failed so that peers waiting on it give up, and wakes them. */
void sim_clique_fail(struct sim_clique *c);
/* Wakes everyone waiting on the segment after a state change. */
void sim_clique_ring(struct sim_clique *c);
/* Waits until ready(arg) is true, failing on a dead or failed peer, on the
 * local abort flag or after the timeout. `peer` is -1 for "any rank". */
enum sim_wait_rc sim_clique_wait(struct sim_clique *c, int (*ready)(void *), void *arg, int peer,
                                 char *why, size_t whylen);
/* Device-side barrier over all ranks. */
enum sim_wait_rc sim_clique_barrier(struct sim_clique *c, char *why, size_t whylen);
/* Host-side all-gather of two int64 per rank: post this rank's pair, then
 * poll with the returned ticket until out (nranks * 2) is filled. */
uint64_t sim_clique_xpost(struct sim_clique *c, const int64_t mine[2]);
int sim_clique_xpoll(struct sim_clique *c, uint64_t k, int64_t *out, uint64_t started, char *why,
                     size_t whylen);
uint64_t sim_now_ns(void);

/* ---- reduce.c ---------------------------------------------------------- */

/* A resolved reduction: a built-in operator, or a pre-multiplied sum with
 * its scalar (in the collective's data type, raw bytes). */
struct sim_redop {
    int kind;
    ncclDataType_t dtype; /* ncclSum .. ncclAvg, or SIM_PREMULSUM */
    int scalar_on_device; /* read *scalar_ptr when the collective runs */
    const void *scalar_ptr;
    unsigned char scalar[8];
};
#define SIM_PREMULSUM 100

size_t sim_dtype_size(ncclDataType_t t); /* 0 for an unknown type */
/* dst[i] = op over srcs[0..nsrc)[i], i < n. dst does not alias srcs. */
void sim_reduce(void *dst, const void *const *srcs, int nsrc, size_t n, ncclDataType_t t,
                const struct sim_redop *op);
float sim_half_to_float(uint16_t h);
uint16_t sim_float_to_half(float f);
float sim_bf16_to_float(uint16_t h);
uint16_t sim_float_to_bf16(float f);
float sim_e4m3_to_float(uint8_t v);
uint8_t sim_float_to_e4m3(float f);
float sim_e5m2_to_float(uint8_t v);
uint8_t sim_float_to_e5m2(float f);

/* ---- last_error.c ------------------------------------------------------ */

/* The thread's last-error string (ncclGetLastError). */
void sim_set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Records an error on the communicator and in the last-error string. */
void sim_comm_set_error(struct ncclComm *c, ncclResult_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The NCCL result for a failed wait: a dead or failed peer is
 * ncclRemoteError, a timeout ncclSystemError. */
ncclResult_t sim_wait_result(enum sim_wait_rc rc);

/* ---- comm_ref.c -------------------------------------------------------- */

void sim_comm_ref(struct ncclComm *c);
/* Drops a reference; the last closes c's segment, releases its
 * registrations and frees it. */
void sim_comm_unref(struct ncclComm *c);

/* ---- buffers.c --------------------------------------------------------- */

/* Frees every registration and window of c (its last reference is gone). */
void sim_buffers_release(struct ncclComm *c);
/* The buffer and size of window `win` of comm; ncclInvalidArgument (said)
 * when win is not a window registered on comm. */
ncclResult_t sim_window_find(ncclComm_t comm, ncclWindow_t win, void **buff, size_t *size);

/* ---- comm.c ------------------------------------------------------------ */

#define SIM_COMM_MAGIC   0x5f73696d6e63636cULL /* "_simnccl" */
#define SIM_MAX_USER_OPS 64

struct ncclComm {
    uint64_t magic;
    struct sim_clique clq;
    ncclUniqueId id;
    int rank, nranks, device;
    _Atomic int refs;        /* the handle + queued device work */
    _Atomic int aborted;     /* ncclCommAbort: queued work is skipped */
    _Atomic int ready;       /* init completed */
    _Atomic int async_err;   /* ncclResult_t seen by ncclCommGetAsyncError */
    _Atomic int has_errmsg;  /* 1 once errmsg is written (first error only) */
    char errmsg[448];        /* the first error, for ncclGetLastError(comm) */
    _Atomic uint64_t issued; /* device work items enqueued (host side) */
    _Atomic uint64_t done;   /* device work items finished (stream side) */
    uint64_t splits;         /* splits/shrinks made from this comm, for child ids */
    uint64_t grows;          /* ncclCommGrow calls made from this comm, for the new ids */
    int grow_id_out;         /* ncclCommGetUniqueId gave an id no grow has consumed */
    _Atomic int suspended;   /* ncclCommSuspend: operations refused until resumed */
    _Atomic int revoked;     /* ncclCommRevoke: operations refused for good */
    pthread_mutex_t lock;    /* user ops, registrations */
    struct sim_redop user_ops[SIM_MAX_USER_OPS];
    unsigned char user_op_used[SIM_MAX_USER_OPS];
    struct sim_reg *regs;
};

/* 1 if c looks like a live communicator handle. */
static inline int sim_comm_valid(const struct ncclComm *c)
{
    return c && c->magic == SIM_COMM_MAGIC;
}
/* ncclInvalidUsage (said in the last error) when c is suspended or revoked
 * and so takes no operation, else ncclSuccess; c is valid. */
ncclResult_t sim_comm_usable(struct ncclComm *c);
/* Resolves an ncclRedOp_t for a collective on comm with data type t. */
ncclResult_t sim_comm_resolve_op(struct ncclComm *c, ncclRedOp_t op, ncclDataType_t t,
                                 struct sim_redop *out);

/* ---- group.c / transport.c ---------------------------------------------- */

enum sim_op_kind {
    SIM_ALLGATHER,
    SIM_REDUCESCATTER,
    SIM_ALLREDUCE,
    SIM_BROADCAST,
    SIM_REDUCE,
    SIM_ALLTOALL,
    SIM_GATHER,
    SIM_SCATTER,
    SIM_SEND,
    SIM_RECV
};

struct sim_nccl_op {
    enum sim_op_kind kind;
    struct ncclComm *comm;
    const void *sendbuff;
    void *recvbuff;
    size_t count; /* per-rank element count, as the API takes it */
    ncclDataType_t dtype;
    struct sim_redop redop;
    int root; /* root, or peer for send/recv */
    cudaStream_t stream;
};

/* A batch of one communicator's operations run as one piece of device work. */
struct sim_nccl_work {
    struct ncclComm *comm;
    uint64_t seq; /* 1-based position in the comm's device order */
    int nops;
    struct sim_nccl_op ops[];
};

/* Stream work function: runs w's operations, then frees w. */
void sim_work_run(void *w);

/* A host task polled to completion by ncclGroupEnd (init, split, shrink):
 * poll returns 1 when done, 0 to be called again, -1 on failure (it has then
 * recorded the error). */
struct sim_task {
    int (*poll)(struct sim_task *t);
    ncclResult_t rc; /* set by poll when it returns -1 */
    struct sim_task *next;
};

/* Queues op for ncclGroupEnd when inside a group, otherwise enqueues it. */
ncclResult_t sim_group_submit(const struct sim_nccl_op *op);
/* Runs t now (polling until done) outside a group, or queues it. */
ncclResult_t sim_group_task(struct sim_task *t);

#endif /* SIM_NCCL_INTERNAL_H */
