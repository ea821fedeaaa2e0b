/* transport.c - the device work of the simulated NCCL.
 *
 * A batch of one communicator's operations runs as one piece of device work
 * on the caller's stream (sim_stream_enqueue), so it starts when the
 * stream reaches it and the stream goes on when it returns, like a kernel.
 *
 * Collectives move data through each rank's staging area in the shared
 * segment, chunk by chunk: every rank copies its part of the input into its
 * own staging area, all ranks meet at a barrier, each computes its own
 * output from the staging areas it needs, and all meet again before the
 * areas are reused. Because the input is staged before any output is
 * written and a chunk's output only overlaps that chunk's input, in-place
 * calls work.
 *
 * Send/recv use one mailbox per ordered pair of ranks. The sends and
 * receives of a batch progress together, whichever can move, so a ring of
 * sends and receives in one group completes in any order.
 *
 * In a dry run (FSDPSHIM_SIM_DATA=0) no byte is read or written: a
 * collective is one chunk whose two barriers still make every rank meet,
 * and a send is one message of no data that its receive still has to take,
 * so ordering, hangs and a dead peer's errors stay as they are with data. */
#include "nccl_internal.h"
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *sim_op_name(enum sim_op_kind k)
{
    static const char *const names[] = {"AllGather", "ReduceScatter", "AllReduce", "Broadcast",
                                        "Reduce",    "AlltoAll",      "Gather",    "Scatter",
                                        "Send",      "Recv"};
    return names[k];
}

static char *sim_stage(struct sim_clique *c, int r)
{
    return c->staging + (size_t)r * SIM_STAGE_BYTES;
}

/* Runs one collective; returns the wait outcome. */
static enum sim_wait_rc sim_run_collective(struct ncclComm *comm, const struct sim_nccl_op *op,
                                           char *why, size_t whylen)
{
    struct sim_clique *c = &comm->clq;
    int n = comm->nranks, me = comm->rank;
    size_t es = sim_dtype_size(op->dtype), count = op->count;
    const char *in = op->sendbuff;
    char *out = op->recvbuff;
    /* Segments: how many pieces of its input a rank stages per chunk. */
    int segs =
        (op->kind == SIM_REDUCESCATTER || op->kind == SIM_ALLTOALL || op->kind == SIM_SCATTER) ? n
                                                                                               : 1;
    int rooted_src = op->kind == SIM_BROADCAST || op->kind == SIM_SCATTER;
    int moves = sim_moves_data();
    size_t per_seg = moves ? SIM_STAGE_BYTES / ((size_t)segs * es) : count;
    const void *srcs[n];
    /* A pre-multiplied sum scales each rank's own input by its own scalar as
     * it is staged; what is staged is then summed. */
    int premul = op->redop.kind == SIM_PREMULSUM;
    struct sim_redop combine = op->redop;
    if (premul) combine.kind = ncclSum;

    for (size_t i0 = 0; i0 < count; i0 += per_seg) {
        size_t m = count - i0 < per_seg ? count - i0 : per_seg, mb = m * es;
        if (moves && (!rooted_src || me == op->root))
            for (int k = 0; k < segs; k++) {
                char *dst = sim_stage(c, me) + (size_t)k * per_seg * es;
                const void *src[1] = {in + ((size_t)k * count + i0) * es};
                if (premul)
                    sim_reduce(dst, src, 1, m, op->dtype, &op->redop);
                else
                    memcpy(dst, src[0], mb);
            }
        enum sim_wait_rc rc = sim_clique_barrier(c, why, whylen);
        if (rc != SIM_WAIT_OK) return rc;

        if (moves) {
            switch (op->kind) {
            case SIM_ALLGATHER:
            case SIM_GATHER:
                if (op->kind == SIM_GATHER && me != op->root) break;
                for (int r = 0; r < n; r++)
                    memcpy(out + ((size_t)r * count + i0) * es, sim_stage(c, r), mb);
                break;
            case SIM_ALLREDUCE:
            case SIM_REDUCE:
                if (op->kind == SIM_REDUCE && me != op->root) break;
                for (int r = 0; r < n; r++)
                    srcs[r] = sim_stage(c, r);
                sim_reduce(out + i0 * es, srcs, n, m, op->dtype, &combine);
                break;
            case SIM_REDUCESCATTER:
                for (int r = 0; r < n; r++)
                    srcs[r] = sim_stage(c, r) + (size_t)me * per_seg * es;
                sim_reduce(out + i0 * es, srcs, n, m, op->dtype, &combine);
                break;
            case SIM_BROADCAST:
                memcpy(out + i0 * es, sim_stage(c, op->root), mb);
                break;
            case SIM_ALLTOALL:
                for (int r = 0; r < n; r++)
                    memcpy(out + ((size_t)r * count + i0) * es,
                           sim_stage(c, r) + (size_t)me * per_seg * es, mb);
                break;
            case SIM_SCATTER:
                memcpy(out + i0 * es, sim_stage(c, op->root) + (size_t)me * per_seg * es, mb);
                break;
            default:
                break;
            }
        }
        rc = sim_clique_barrier(c, why, whylen);
        if (rc != SIM_WAIT_OK) return rc;
    }
    atomic_fetch_add(&c->slots[me].colls, 1);
    return SIM_WAIT_OK;
}

/* ---- send/recv ---------------------------------------------------------- */

struct sim_p2p {
    struct ncclComm *comm;
    const struct sim_nccl_op **ops; /* the batch's sends and receives, in call order */
    size_t *done;                   /* bytes moved per op */
    int nops;
    int moves; /* 0 under FSDPSHIM_SIM_DATA=0: messages carry no data */
};

static struct sim_mbox *sim_mbox_of(struct sim_clique *c, int src, int dst)
{
    return &c->mbox[(size_t)src * (size_t)c->nranks + (size_t)dst];
}

static char *sim_mdata_of(struct sim_clique *c, int src, int dst)
{
    return c->mdata + ((size_t)src * (size_t)c->nranks + (size_t)dst) * SIM_MBOX_BYTES;
}

/* 1 if op i is the first unfinished op of its direction with its peer:
 * messages between two ranks match in call order. */
static int sim_p2p_active(const struct sim_p2p *p, int i)
{
    const struct sim_nccl_op *op = p->ops[i];
    size_t total = op->count * sim_dtype_size(op->dtype);
    if (p->done[i] >= total) return 0;
    for (int j = 0; j < i; j++) {
        const struct sim_nccl_op *o = p->ops[j];
        if (o->kind == op->kind && o->root == op->root &&
            p->done[j] < o->count * sim_dtype_size(o->dtype))
            return 0;
    }
    return 1;
}

/* Moves what can move now; returns how many ops made progress. With
 * dry_run, only counts. */
static int sim_p2p_step(struct sim_p2p *p, int dry_run)
{
    struct sim_clique *c = &p->comm->clq;
    int me = p->comm->rank, moved = 0;
    for (int i = 0; i < p->nops; i++) {
        if (!sim_p2p_active(p, i)) continue;
        const struct sim_nccl_op *op = p->ops[i];
        size_t total = op->count * sim_dtype_size(op->dtype), left = total - p->done[i];
        if (op->kind == SIM_SEND) {
            struct sim_mbox *mb = sim_mbox_of(c, me, op->root);
            if (atomic_load_explicit(&mb->sent, memory_order_relaxed) !=
                atomic_load_explicit(&mb->taken, memory_order_acquire))
                continue;
            moved++;
            if (dry_run) continue;
            size_t len = left < SIM_MBOX_BYTES || !p->moves ? left : SIM_MBOX_BYTES;
            if (p->moves)
                memcpy(sim_mdata_of(c, me, op->root), (const char *)op->sendbuff + p->done[i], len);
            mb->len = len;
            atomic_fetch_add_explicit(&mb->sent, 1, memory_order_release);
            p->done[i] += len;
        } else {
            struct sim_mbox *mb = sim_mbox_of(c, op->root, me);
            if (atomic_load_explicit(&mb->sent, memory_order_acquire) ==
                atomic_load_explicit(&mb->taken, memory_order_relaxed))
                continue;
            moved++;
            if (dry_run) continue;
            size_t len = mb->len < left ? mb->len : left;
            if (p->moves)
                memcpy((char *)op->recvbuff + p->done[i], sim_mdata_of(c, op->root, me), len);
            atomic_fetch_add_explicit(&mb->taken, 1, memory_order_release);
            p->done[i] += len;
        }
    }
    return moved;
}

static int sim_p2p_can_move(void *arg)
{
    return sim_p2p_step(arg, 1) > 0;
}

static int sim_p2p_finished(const struct sim_p2p *p)
{
    for (int i = 0; i < p->nops; i++)
        if (p->done[i] < p->ops[i]->count * sim_dtype_size(p->ops[i]->dtype)) return 0;
    return 1;
}

static enum sim_wait_rc sim_run_p2p(struct sim_p2p *p, char *why, size_t whylen)
{
    while (!sim_p2p_finished(p)) {
        if (sim_p2p_step(p, 0) > 0) {
            sim_clique_ring(&p->comm->clq);
            continue;
        }
        enum sim_wait_rc rc = sim_clique_wait(&p->comm->clq, sim_p2p_can_move, p, -1, why, whylen);
        if (rc != SIM_WAIT_OK) return rc;
    }
    return SIM_WAIT_OK;
}

/* ---- the work item ------------------------------------------------------ */

struct sim_turn {
    struct ncclComm *comm;
    uint64_t seq;
};

static int sim_my_turn(void *arg)
{
    struct sim_turn *t = arg;
    return atomic_load_explicit(&t->comm->done, memory_order_acquire) + 1 == t->seq;
}

/* Records a failed wait: the communicator is broken from now on, and its
 * peers are told so they stop waiting for it. An abort is not an error. */
static void sim_work_failed(struct ncclComm *comm, enum sim_wait_rc rc, const char *what,
                            const char *why)
{
    if (rc != SIM_WAIT_ABORT)
        sim_comm_set_error(comm, sim_wait_result(rc), "sim NCCL rank %d/%d: %s failed: %s",
                           comm->rank, comm->nranks, what, why);
    sim_clique_fail(&comm->clq);
}

void sim_work_run(void *arg)
{
    struct sim_nccl_work *w = arg;
    struct ncclComm *comm = w->comm;
    char why[256] = "";
    /* Work items of one communicator run in the order they were issued, even
     * when they are on different streams: ranks must agree on the order. */
    struct sim_turn turn = {comm, w->seq};
    enum sim_wait_rc rc =
        sim_clique_wait(&comm->clq, sim_my_turn, &turn, comm->rank, why, sizeof(why));
    int broken = rc != SIM_WAIT_OK || atomic_load(&comm->aborted) ||
                 (atomic_load(&comm->async_err) != ncclSuccess &&
                  atomic_load(&comm->async_err) != ncclInProgress);
    if (rc != SIM_WAIT_OK) sim_work_failed(comm, rc, "ordering", why);

    int np2p = 0;
    for (int i = 0; i < w->nops && !broken; i++) {
        if (w->ops[i].kind == SIM_SEND || w->ops[i].kind == SIM_RECV) {
            np2p++;
            continue;
        }
        rc = sim_run_collective(comm, &w->ops[i], why, sizeof(why));
        if (rc != SIM_WAIT_OK) {
            sim_work_failed(comm, rc, sim_op_name(w->ops[i].kind), why);
            broken = 1;
        }
    }
    if (np2p && !broken) {
        const struct sim_nccl_op *ops[np2p];
        size_t done[np2p];
        struct sim_p2p p = {comm, ops, done, 0, sim_moves_data()};
        for (int i = 0; i < w->nops; i++)
            if (w->ops[i].kind == SIM_SEND || w->ops[i].kind == SIM_RECV) {
                done[p.nops] = 0;
                ops[p.nops++] = &w->ops[i];
            }
        rc = sim_run_p2p(&p, why, sizeof(why));
        if (rc != SIM_WAIT_OK) sim_work_failed(comm, rc, "Send/Recv", why);
    }
    atomic_fetch_add_explicit(&comm->done, 1, memory_order_release);
    sim_clique_ring(&comm->clq);
    free(w);
    sim_comm_unref(comm);
}
