/* nccl_internal.h - what the files of the simulated NCCL share.
 *
 * The simulated libnccl.so.2 is split by idea:
 *   clique.c    the shared-memory segment a communicator's ranks meet in, and
 *               every wait on a peer (liveness, timeout, abort)
 *   reduce.c    data types, their conversions and the reduction operators
 *   transport.c the device work: collectives and send/recv moving real data
 *               through the segment, run on the caller's stream
 *   comm.c      communicator life: unique ids, init, split, shrink, destroy,
 *               abort, queries, registrations, error strings
 *   group.c     ncclGroupStart/End: queued operations and host tasks
 *   coll.c      the collective and point-to-point entry points
 * Declarations below are grouped by the file that owns them. */
#ifndef FS_NCCL_INTERNAL_H
#define FS_NCCL_INTERNAL_H

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Every NCCL entry point is exported twice, as the real library does: a
 * strong pncclX (for profilers) and a weak ncclX alias, with no symbol
 * version, so a preloaded ncclX interposes on either. */
#define FS_NCCL_EXPORT __attribute__((visibility("default")))
#define FS_NCCL_ALIAS(name)                                                                        \
    extern __typeof__(p##name) name __attribute__((weak, alias("p" #name), visibility("default")))

/* ---- clique.c ---------------------------------------------------------- */

/* One rank's slot in the segment. Written by its owner, read by peers. */
struct fs_slot {
    _Atomic int present;    /* joined the clique */
    _Atomic int failed;     /* aborted or hit an error: peers stop waiting on it */
    int pid;                /* for liveness checks across processes */
    int device;             /* to refuse two ranks on one device */
    _Atomic uint64_t tick;  /* device-side barriers passed */
    _Atomic uint64_t xtick; /* host-side exchanges posted */
    int64_t xchg[2][2];     /* host exchange payload, double-buffered by xtick parity */
    _Atomic uint64_t colls; /* collectives this rank finished */
    _Atomic int left;       /* FS_LEFT_*: how the rank left the communicator, 0 not */
    char pad[12];
};

/* How a rank left its communicator while a peer may still wait on it: the
 * peer's error names it, so that diverging ranks are told from dead ones. */
enum { FS_LEFT_DESTROYED = 1, FS_LEFT_EXITED = 2 };

/* A one-message mailbox for one ordered pair of ranks (send/recv). */
struct fs_mbox {
    _Atomic uint64_t sent;  /* messages put */
    _Atomic uint64_t taken; /* messages taken */
    size_t len;
    char pad[40];
};

struct fs_clique {
    void *base; /* the mapping */
    size_t size;
    char name[64]; /* shm name, while not yet unlinked */
    int nranks, rank;
    struct fs_clique_hdr *hdr;
    struct fs_slot *slots;
    char *staging;               /* nranks * FS_STAGE_BYTES */
    struct fs_mbox *mbox;        /* nranks * nranks, [src * nranks + dst] */
    char *mdata;                 /* FS_MBOX_BYTES per mailbox */
    _Atomic int *abort_flag;     /* the local communicator's abort flag */
    struct fs_clique *next_open; /* this process's open cliques (clique.c) */
};

#define FS_STAGE_BYTES ((size_t)1 << 20)
#define FS_MBOX_BYTES  ((size_t)256 << 10)

/* A wait's outcome. */
enum fs_wait_rc { FS_WAIT_OK = 0, FS_WAIT_PEER, FS_WAIT_TIMEOUT, FS_WAIT_ABORT };

/* Opens (creating if first) the segment for `id`, sized for nranks. Returns
 * ncclInvalidArgument when an existing segment has another size. */
ncclResult_t fs_clique_open(struct fs_clique *c, const ncclUniqueId *id, int nranks, int rank);
/* Publishes this rank's pid and device; non-blocking. */
ncclResult_t fs_clique_join(struct fs_clique *c, int device);
/* Host-side polls, for ncclGroupEnd to drive many at once: 1 when
 * ready(arg), 0 if not yet (after sleeping briefly for a change), minus an
 * fs_wait_rc on failure (a peer died or failed, abort, or `started` + the
 * timeout passed; `why` says more). `started` comes from fs_now_ns(). */
int fs_clique_poll(struct fs_clique *c, int (*ready)(void *), void *arg, uint64_t started,
                   char *why, size_t whylen);
/* Polls until every rank has joined. */
int fs_clique_poll_joined(struct fs_clique *c, uint64_t started, char *why, size_t whylen);
/* Unlinks the segment's name (idempotent); the memory lives while mapped. */
void fs_clique_unlink(struct fs_clique *c);
void fs_clique_close(struct fs_clique *c);
/* Marks this rank failed so that peers waiting on it give up, and wakes them. */
void fs_clique_fail(struct fs_clique *c);
/* Wakes everyone waiting on the segment after a state change. */
void fs_clique_ring(struct fs_clique *c);
/* Waits until ready(arg) is true, failing on a dead or failed peer, on the
 * local abort flag or after the timeout. `peer` is -1 for "any rank". */
enum fs_wait_rc fs_clique_wait(struct fs_clique *c, int (*ready)(void *), void *arg, int peer,
                               char *why, size_t whylen);
/* Device-side barrier over all ranks. */
enum fs_wait_rc fs_clique_barrier(struct fs_clique *c, char *why, size_t whylen);
/* Host-side all-gather of two int64 per rank: post this rank's pair, then
 * poll with the returned ticket until out (nranks * 2) is filled. */
uint64_t fs_clique_xpost(struct fs_clique *c, const int64_t mine[2]);
int fs_clique_xpoll(struct fs_clique *c, uint64_t k, int64_t *out, uint64_t started, char *why,
                    size_t whylen);
uint64_t fs_now_ns(void);

/* ---- reduce.c ---------------------------------------------------------- */

/* A resolved reduction: a built-in operator, or a pre-multiplied sum with
 * its scalar (in the collective's data type, raw bytes). */
struct fs_redop {
    int kind;
    ncclDataType_t dtype; /* ncclSum .. ncclAvg, or FS_PREMULSUM */
    int scalar_on_device; /* read *scalar_ptr when the collective runs */
    const void *scalar_ptr;
    unsigned char scalar[8];
};
#define FS_PREMULSUM 100

size_t fs_dtype_size(ncclDataType_t t); /* 0 for an unknown type */
/* dst[i] = op over srcs[0..nsrc)[i], i < n. dst does not alias srcs. */
void fs_reduce(void *dst, const void *const *srcs, int nsrc, size_t n, ncclDataType_t t,
               const struct fs_redop *op);
float fs_half_to_float(uint16_t h);
uint16_t fs_float_to_half(float f);
float fs_bf16_to_float(uint16_t h);
uint16_t fs_float_to_bf16(float f);
float fs_e4m3_to_float(uint8_t v);
uint8_t fs_float_to_e4m3(float f);
float fs_e5m2_to_float(uint8_t v);
uint8_t fs_float_to_e5m2(float f);

/* ---- comm.c ------------------------------------------------------------ */

#define FS_COMM_MAGIC   0x5f73696d6e63636cULL /* "_simnccl" */
#define FS_MAX_USER_OPS 64

struct ncclComm {
    uint64_t magic;
    struct fs_clique clq;
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
    struct fs_redop user_ops[FS_MAX_USER_OPS];
    unsigned char user_op_used[FS_MAX_USER_OPS];
    struct fs_reg *regs;
};

/* The NCCL result for a failed wait: a dead or failed peer is
 * ncclRemoteError, a timeout ncclSystemError. */
ncclResult_t fs_wait_result(enum fs_wait_rc rc);
/* 1 if c looks like a live communicator handle. */
int fs_comm_valid(const struct ncclComm *c);
/* ncclInvalidUsage (said in the last error) when c is suspended or revoked
 * and so takes no operation, else ncclSuccess; c is valid. */
ncclResult_t fs_comm_usable(struct ncclComm *c);
void fs_comm_ref(struct ncclComm *c);
void fs_comm_unref(struct ncclComm *c);
/* Records an error on the communicator and in the last-error string. */
void fs_comm_set_error(struct ncclComm *c, ncclResult_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The thread's last-error string (ncclGetLastError). */
void fs_set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The buffer and size of window `win` of comm; ncclInvalidArgument (said)
 * when win is not a window registered on comm. */
ncclResult_t fs_window_find(ncclComm_t comm, ncclWindow_t win, void **buff, size_t *size);
/* Resolves an ncclRedOp_t for a collective on comm with data type t. */
ncclResult_t fs_comm_resolve_op(struct ncclComm *c, ncclRedOp_t op, ncclDataType_t t,
                                struct fs_redop *out);

/* ---- group.c / transport.c ---------------------------------------------- */

enum fs_op_kind {
    FS_ALLGATHER,
    FS_REDUCESCATTER,
    FS_ALLREDUCE,
    FS_BROADCAST,
    FS_REDUCE,
    FS_ALLTOALL,
    FS_GATHER,
    FS_SCATTER,
    FS_SEND,
    FS_RECV
};

struct fs_op {
    enum fs_op_kind kind;
    struct ncclComm *comm;
    const void *sendbuff;
    void *recvbuff;
    size_t count; /* per-rank element count, as the API takes it */
    ncclDataType_t dtype;
    struct fs_redop redop;
    int root; /* root, or peer for send/recv */
    cudaStream_t stream;
};

/* A batch of one communicator's operations run as one piece of device work. */
struct fs_work {
    struct ncclComm *comm;
    uint64_t seq; /* 1-based position in the comm's device order */
    int nops;
    struct fs_op ops[];
};

/* Stream work function: runs w's operations, then frees w. */
void fs_work_run(void *w);

/* A host task polled to completion by ncclGroupEnd (init, split, shrink):
 * poll returns 1 when done, 0 to be called again, -1 on failure (it has then
 * recorded the error). */
struct fs_task {
    int (*poll)(struct fs_task *t);
    ncclResult_t rc; /* set by poll when it returns -1 */
    struct fs_task *next;
};

/* Queues op for ncclGroupEnd when inside a group, otherwise enqueues it. */
ncclResult_t fs_group_submit(const struct fs_op *op);
/* Runs t now (polling until done) outside a group, or queues it. */
ncclResult_t fs_group_task(struct fs_task *t);

#endif /* FS_NCCL_INTERNAL_H */
