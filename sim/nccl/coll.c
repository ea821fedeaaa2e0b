/* coll.c - the collective and point-to-point entry points.
 *
 * Each call checks its arguments as NCCL does (ncclInvalidArgument for a
 * bad communicator, type, operator, root or missing buffer), fails at once
 * with the communicator's error once it is broken, and otherwise hands one
 * operation to group.c, which queues it or enqueues it on the stream. */
#include "nccl_internal.h"

/* Which buffers this rank's part of an operation uses. */
enum { FS_USES_SEND = 1, FS_USES_RECV = 2 };

static ncclResult_t fs_submit(enum fs_op_kind kind, const void *sendbuff, void *recvbuff,
                              size_t count, ncclDataType_t dtype, int redop, ncclRedOp_t op,
                              int root, ncclComm_t comm, cudaStream_t stream, int uses)
{
    if (!fs_comm_valid(comm)) {
        fs_set_last_error("sim NCCL: invalid communicator");
        return ncclInvalidArgument;
    }
    ncclResult_t usable = fs_comm_usable(comm);
    if (usable != ncclSuccess) return usable;
    int err = atomic_load(&comm->async_err);
    if (err != ncclSuccess && err != ncclInProgress) return (ncclResult_t)err;
    struct fs_op o = {.kind = kind,
                      .comm = comm,
                      .sendbuff = sendbuff,
                      .recvbuff = recvbuff,
                      .count = count,
                      .dtype = dtype,
                      .root = root,
                      .stream = stream};
    if (!fs_dtype_size(dtype)) {
        fs_set_last_error("sim NCCL: invalid data type %d", (int)dtype);
        return ncclInvalidArgument;
    }
    if (redop && fs_comm_resolve_op(comm, op, dtype, &o.redop) != ncclSuccess) {
        fs_set_last_error("sim NCCL: invalid reduction operator %d", (int)op);
        return ncclInvalidArgument;
    }
    if (root < 0 || root >= comm->nranks) {
        fs_set_last_error("sim NCCL: invalid root/peer %d (nranks %d)", root, comm->nranks);
        return ncclInvalidArgument;
    }
    if (count && (((uses & FS_USES_SEND) && !sendbuff) || ((uses & FS_USES_RECV) && !recvbuff))) {
        fs_set_last_error("sim NCCL: null buffer");
        return ncclInvalidArgument;
    }
    return fs_group_submit(&o);
}

static int fs_root_uses(ncclComm_t comm, int root, int at_root, int elsewhere)
{
    return fs_comm_valid(comm) && comm->rank == root ? at_root : elsewhere;
}

#define FS_BOTH (FS_USES_SEND | FS_USES_RECV)

FS_NCCL_EXPORT ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                           ncclDataType_t datatype, ncclComm_t comm,
                                           cudaStream_t stream)
{
    return fs_submit(FS_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, 0, ncclSum, 0, comm,
                     stream, FS_BOTH);
}
FS_NCCL_ALIAS(ncclAllGather);

FS_NCCL_EXPORT ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff,
                                               size_t recvcount, ncclDataType_t datatype,
                                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return fs_submit(FS_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, 1, op, 0, comm,
                     stream, FS_BOTH);
}
FS_NCCL_ALIAS(ncclReduceScatter);

FS_NCCL_EXPORT ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream)
{
    return fs_submit(FS_ALLREDUCE, sendbuff, recvbuff, count, datatype, 1, op, 0, comm, stream,
                     FS_BOTH);
}
FS_NCCL_ALIAS(ncclAllReduce);

FS_NCCL_EXPORT ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                           ncclDataType_t datatype, int root, ncclComm_t comm,
                                           cudaStream_t stream)
{
    return fs_submit(FS_BROADCAST, sendbuff, recvbuff, count, datatype, 0, ncclSum, root, comm,
                     stream, fs_root_uses(comm, root, FS_BOTH, FS_USES_RECV));
}
FS_NCCL_ALIAS(ncclBroadcast);

FS_NCCL_EXPORT ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                                       ncclComm_t comm, cudaStream_t stream)
{
    return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
FS_NCCL_ALIAS(ncclBcast);

FS_NCCL_EXPORT ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                                        ncclDataType_t datatype, ncclRedOp_t op, int root,
                                        ncclComm_t comm, cudaStream_t stream)
{
    return fs_submit(FS_REDUCE, sendbuff, recvbuff, count, datatype, 1, op, root, comm, stream,
                     fs_root_uses(comm, root, FS_BOTH, FS_USES_SEND));
}
FS_NCCL_ALIAS(ncclReduce);

FS_NCCL_EXPORT ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                          ncclDataType_t datatype, ncclComm_t comm,
                                          cudaStream_t stream)
{
    return fs_submit(FS_ALLTOALL, sendbuff, recvbuff, count, datatype, 0, ncclSum, 0, comm, stream,
                     FS_BOTH);
}
FS_NCCL_ALIAS(ncclAlltoAll);

FS_NCCL_EXPORT ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                                        ncclDataType_t datatype, int root, ncclComm_t comm,
                                        cudaStream_t stream)
{
    return fs_submit(FS_GATHER, sendbuff, recvbuff, count, datatype, 0, ncclSum, root, comm, stream,
                     fs_root_uses(comm, root, FS_BOTH, FS_USES_SEND));
}
FS_NCCL_ALIAS(ncclGather);

FS_NCCL_EXPORT ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                                         ncclDataType_t datatype, int root, ncclComm_t comm,
                                         cudaStream_t stream)
{
    return fs_submit(FS_SCATTER, sendbuff, recvbuff, count, datatype, 0, ncclSum, root, comm,
                     stream, fs_root_uses(comm, root, FS_BOTH, FS_USES_RECV));
}
FS_NCCL_ALIAS(ncclScatter);

FS_NCCL_EXPORT ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
                                      int peer, ncclComm_t comm, cudaStream_t stream)
{
    return fs_submit(FS_SEND, sendbuff, NULL, count, datatype, 0, ncclSum, peer, comm, stream,
                     FS_USES_SEND);
}
FS_NCCL_ALIAS(ncclSend);

FS_NCCL_EXPORT ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype,
                                      int peer, ncclComm_t comm, cudaStream_t stream)
{
    return fs_submit(FS_RECV, NULL, recvbuff, count, datatype, 0, ncclSum, peer, comm, stream,
                     FS_USES_RECV);
}
FS_NCCL_ALIAS(ncclRecv);
