/* coll.c - the collective and point-to-point entry points.
 *
 * Each call checks its arguments as NCCL does (ncclInvalidArgument for a
 * bad communicator, type, operator, root or missing buffer), fails at once
 * with the communicator's error once it is broken, and otherwise hands one
 * operation to group.c, which queues it or enqueues it on the stream. */
#include "nccl_internal.h"

/* Which buffers this rank's part of an operation uses. */
enum { SIM_USES_SEND = 1, SIM_USES_RECV = 2 };

static ncclResult_t sim_submit(enum sim_op_kind kind, const void *sendbuff, void *recvbuff,
                               size_t count, ncclDataType_t dtype, int redop, ncclRedOp_t op,
                               int root, ncclComm_t comm, cudaStream_t stream, int uses)
{
    if (!sim_comm_valid(comm)) {
        sim_set_last_error("sim NCCL: invalid communicator");
        return ncclInvalidArgument;
    }
    ncclResult_t usable = sim_comm_usable(comm);
    if (usable != ncclSuccess) return usable;
    int err = atomic_load(&comm->async_err);
    if (err != ncclSuccess && err != ncclInProgress) return (ncclResult_t)err;
    struct sim_nccl_op o = {.kind = kind,
                            .comm = comm,
                            .sendbuff = sendbuff,
                            .recvbuff = recvbuff,
                            .count = count,
                            .dtype = dtype,
                            .root = root,
                            .stream = stream};
    if (!sim_dtype_size(dtype)) {
        sim_set_last_error("sim NCCL: invalid data type %d", (int)dtype);
        return ncclInvalidArgument;
    }
    if (redop && sim_comm_resolve_op(comm, op, dtype, &o.redop) != ncclSuccess) {
        sim_set_last_error("sim NCCL: invalid reduction operator %d", (int)op);
        return ncclInvalidArgument;
    }
    if (root < 0 || root >= comm->nranks) {
        sim_set_last_error("sim NCCL: invalid root/peer %d (nranks %d)", root, comm->nranks);
        return ncclInvalidArgument;
    }
    if (count && (((uses & SIM_USES_SEND) && !sendbuff) || ((uses & SIM_USES_RECV) && !recvbuff))) {
        sim_set_last_error("sim NCCL: null buffer");
        return ncclInvalidArgument;
    }
    return sim_group_submit(&o);
}

static int sim_root_uses(ncclComm_t comm, int root, int at_root, int elsewhere)
{
    return sim_comm_valid(comm) && comm->rank == root ? at_root : elsewhere;
}

#define SIM_BOTH (SIM_USES_SEND | SIM_USES_RECV)

SIM_NCCL_EXPORT ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                            ncclDataType_t datatype, ncclComm_t comm,
                                            cudaStream_t stream)
{
    return sim_submit(SIM_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, 0, ncclSum, 0, comm,
                      stream, SIM_BOTH);
}
SIM_NCCL_ALIAS(ncclAllGather);

SIM_NCCL_EXPORT ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff,
                                                size_t recvcount, ncclDataType_t datatype,
                                                ncclRedOp_t op, ncclComm_t comm,
                                                cudaStream_t stream)
{
    return sim_submit(SIM_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, 1, op, 0, comm,
                      stream, SIM_BOTH);
}
SIM_NCCL_ALIAS(ncclReduceScatter);

SIM_NCCL_EXPORT ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                            ncclDataType_t datatype, ncclRedOp_t op,
                                            ncclComm_t comm, cudaStream_t stream)
{
    return sim_submit(SIM_ALLREDUCE, sendbuff, recvbuff, count, datatype, 1, op, 0, comm, stream,
                      SIM_BOTH);
}
SIM_NCCL_ALIAS(ncclAllReduce);

SIM_NCCL_EXPORT ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                            ncclDataType_t datatype, int root, ncclComm_t comm,
                                            cudaStream_t stream)
{
    return sim_submit(SIM_BROADCAST, sendbuff, recvbuff, count, datatype, 0, ncclSum, root, comm,
                      stream, sim_root_uses(comm, root, SIM_BOTH, SIM_USES_RECV));
}
SIM_NCCL_ALIAS(ncclBroadcast);

SIM_NCCL_EXPORT ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                                        ncclComm_t comm, cudaStream_t stream)
{
    return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
SIM_NCCL_ALIAS(ncclBcast);

SIM_NCCL_EXPORT ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                                         ncclDataType_t datatype, ncclRedOp_t op, int root,
                                         ncclComm_t comm, cudaStream_t stream)
{
    return sim_submit(SIM_REDUCE, sendbuff, recvbuff, count, datatype, 1, op, root, comm, stream,
                      sim_root_uses(comm, root, SIM_BOTH, SIM_USES_SEND));
}
SIM_NCCL_ALIAS(ncclReduce);

SIM_NCCL_EXPORT ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                           ncclDataType_t datatype, ncclComm_t comm,
                                           cudaStream_t stream)
{
    return sim_submit(SIM_ALLTOALL, sendbuff, recvbuff, count, datatype, 0, ncclSum, 0, comm,
                      stream, SIM_BOTH);
}
SIM_NCCL_ALIAS(ncclAlltoAll);

SIM_NCCL_EXPORT ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                                         ncclDataType_t datatype, int root, ncclComm_t comm,
                                         cudaStream_t stream)
{
    return sim_submit(SIM_GATHER, sendbuff, recvbuff, count, datatype, 0, ncclSum, root, comm,
                      stream, sim_root_uses(comm, root, SIM_BOTH, SIM_USES_SEND));
}
SIM_NCCL_ALIAS(ncclGather);

SIM_NCCL_EXPORT ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                                          ncclDataType_t datatype, int root, ncclComm_t comm,
                                          cudaStream_t stream)
{
    return sim_submit(SIM_SCATTER, sendbuff, recvbuff, count, datatype, 0, ncclSum, root, comm,
                      stream, sim_root_uses(comm, root, SIM_BOTH, SIM_USES_RECV));
}
SIM_NCCL_ALIAS(ncclScatter);

SIM_NCCL_EXPORT ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
                                       int peer, ncclComm_t comm, cudaStream_t stream)
{
    return sim_submit(SIM_SEND, sendbuff, NULL, count, datatype, 0, ncclSum, peer, comm, stream,
                      SIM_USES_SEND);
}
SIM_NCCL_ALIAS(ncclSend);

SIM_NCCL_EXPORT ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype,
                                       int peer, ncclComm_t comm, cudaStream_t stream)
{
    return sim_submit(SIM_RECV, NULL, recvbuff, count, datatype, 0, ncclSum, peer, comm, stream,
                      SIM_USES_RECV);
}
SIM_NCCL_ALIAS(ncclRecv);
