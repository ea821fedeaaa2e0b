/* nccl.c - NCCL's data-moving calls: automatic record-stream and
 * the all-gather rate limiter (SPEC section 7).
 *
 * Every collective and point-to-point call passes through to the program's
 * NCCL. Once NCCL has taken it, each buffer the call touches is recorded as
 * used on the call's stream (fs_record_stream): a block freed while NCCL
 * still reads or writes it on another stream is reused only after that
 * stream has passed the use, exactly what PyTorch's record_stream does when
 * the framework remembers to call it. The stream is also noted as having
 * work, so that a later cudaFree (free_semantics:device) fences it.
 * ncclAllGather additionally waits in the rate limiter before it is issued
 * and marks its output so that the output's free feeds the limiter.
 *
 * Groups (nccl_group.c): inside one, a stream's work is noted at the
 * outermost ncclGroupEnd, when the work is on the stream. The rate limiter's
 * wait happens at the all-gather's own call, inside the group or not:
 * nothing of the group is on a stream yet, so the fences it waits on cannot
 * be behind the group's work (rate_limiter.c says more).
 *
 * Buffers are recorded only when the call moves data (count > 0) and with
 * the pointers the call was given: any address inside a shim block names
 * that block; pointers outside every shim block are not ours to track. */
#include "nccl_internal.h"
#include "../core/trace_glue.h"
#include "rate_limiter.h"

#include <stdlib.h>

/* ---- bookkeeping around one call ------------------------------------------ */

/* The device a call on `comm` runs on: the communicator's; failing that
 * (a communicator NCCL cannot describe yet), the current device. */
static int call_device(ncclComm_t comm)
{
    fs_nccl_comm_info info;
    return fs_nccl_comm_info_get(comm, &info) ? info.device : fs_shim_current_device();
}

/* NCCL took the call: its work is on `stream` now or at the group's end. */
static bool issued(ncclResult_t r)
{
    return r == ncclSuccess || r == ncclInProgress;
}

static void record_use(fs_allocator *a, const void *buf, fs_stream_t stream)
{
    /* FS_ERR_NOT_OWNED: not a shim block (NCCL's own memory, say). */
    if (buf) fs_record_stream(a, (void *)buf, stream);
}

static size_t type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
        return 8;
    default:
        return 4;
    }
}

/* Traces the call: its larger buffer's bytes (an all-gather's output, a
 * reduce-scatter's input). */
static void trace_call(ncclComm_t comm, cudaStream_t stream, int coll, const void *buf,
                       size_t count, ncclDataType_t type)
{
    fs_nccl_comm_info info;
    size_t bytes = count * type_size(type);
    int device = call_device(comm);

    if (fs_nccl_comm_info_get(comm, &info) &&
        (coll == FS_COLL_ALL_GATHER || coll == FS_COLL_REDUCE_SCATTER))
        bytes *= (size_t)info.nranks;
    fs_trace_collective(coll, device, stream, buf, bytes, comm);
}

/* After an issued call: records its buffers as used on `stream` and notes
 * the stream's work (at the group's end inside a group). */
static void after_call(ncclComm_t comm, cudaStream_t stream, const void *buf0, const void *buf1)
{
    fs_allocator *a = fs_shim_allocator();
    if (!a) return;
    fs_err_state err;
    fs_err_save(&err);
    int stream_device;
    fs_stream_t key = fs_shim_stream_key(stream, false, &stream_device);
    record_use(a, buf0, key);
    if (buf1 != buf0) record_use(a, buf1, key);
    /* The legacy stream's key does not say which device's legacy stream
     * NCCL used; the communicator does. */
    int device = call_device(comm);
    if (device < 0) device = stream_device;
    if (device >= 0) fs_nccl_group_note_work(a, device, key);
    fs_err_restore(&err);
}

/* The end of a data-moving entry point, which entered the shim before its
 * call r: the buffers' use on `stream` and the call's trace, when NCCL took
 * the call and it moves anything; then it leaves the shim and returns r.
 * NCCL is compiled without per-thread default streams, so its stream 0 is
 * the legacy stream whatever the program uses. */
static ncclResult_t data_moved(ncclResult_t r, ncclComm_t comm, cudaStream_t stream, int coll,
                               const void *buf0, const void *buf1, size_t count,
                               ncclDataType_t datatype)
{
    if (issued(r) && count > 0) {
        after_call(comm, stream, buf0, buf1);
        trace_call(comm, stream, coll, buf1, count, datatype);
    }
    fs_shim_leave();
    return r;
}

/* ---- the calls ------------------------------------------------------------ */

FS_EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                     ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclAllGather) real = FS_NCCL_REAL(ncclAllGather);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclAllGather");
    if (!fs_shim_enter()) return real(sendbuff, recvbuff, sendcount, datatype, comm, stream);
    uint64_t wait_end = 0;
    bool limited = sendcount > 0 && fs_ratelimit_enabled();
    /* A capture records the call for later replays: a host wait now would
     * order nothing that the replays do. */
    if (limited && !fs_shim_stream_capturing(stream, false))
        wait_end = fs_ratelimit_wait(call_device(comm));
    fs_ratelimit_launched(wait_end);
    ncclResult_t r = real(sendbuff, recvbuff, sendcount, datatype, comm, stream);
    if (issued(r) && sendcount > 0) {
        after_call(comm, stream, sendbuff, recvbuff);
        trace_call(comm, stream, FS_COLL_ALL_GATHER, recvbuff, sendcount, datatype);
        if (limited) fs_ratelimit_mark_output(recvbuff);
    }
    fs_shim_leave();
    return r;
}

FS_EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                         cudaStream_t stream)
{
    __typeof__(&ncclReduceScatter) real = FS_NCCL_REAL(ncclReduceScatter);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclReduceScatter");
    if (!fs_shim_enter()) return real(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
    return data_moved(real(sendbuff, recvbuff, recvcount, datatype, op, comm, stream), comm, stream,
                      FS_COLL_REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype);
}

FS_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream)
{
    __typeof__(&ncclAllReduce) real = FS_NCCL_REAL(ncclAllReduce);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclAllReduce");
    if (!fs_shim_enter()) return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
    return data_moved(real(sendbuff, recvbuff, count, datatype, op, comm, stream), comm, stream,
                      FS_COLL_ALL_REDUCE, sendbuff, recvbuff, count, datatype);
}

FS_EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                     ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t stream)
{
    __typeof__(&ncclBroadcast) real = FS_NCCL_REAL(ncclBroadcast);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclBroadcast");
    if (!fs_shim_enter()) return real(sendbuff, recvbuff, count, datatype, root, comm, stream);
    return data_moved(real(sendbuff, recvbuff, count, datatype, root, comm, stream), comm, stream,
                      FS_COLL_BROADCAST, sendbuff, recvbuff, count, datatype);
}

FS_EXPORT ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclBcast) real = FS_NCCL_REAL(ncclBcast);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclBcast");
    if (!fs_shim_enter()) return real(buff, count, datatype, root, comm, stream);
    return data_moved(real(buff, count, datatype, root, comm, stream), comm, stream,
                      FS_COLL_BROADCAST, buff, buff, count, datatype);
}

FS_EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, int root,
                                  ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclReduce) real = FS_NCCL_REAL(ncclReduce);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclReduce");
    if (!fs_shim_enter()) return real(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
    return data_moved(real(sendbuff, recvbuff, count, datatype, op, root, comm, stream), comm,
                      stream, FS_COLL_REDUCE, sendbuff, recvbuff, count, datatype);
}

FS_EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
                                int peer, ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclSend) real = FS_NCCL_REAL(ncclSend);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclSend");
    if (!fs_shim_enter()) return real(sendbuff, count, datatype, peer, comm, stream);
    return data_moved(real(sendbuff, count, datatype, peer, comm, stream), comm, stream,
                      FS_COLL_SEND, sendbuff, sendbuff, count, datatype);
}

FS_EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclRecv) real = FS_NCCL_REAL(ncclRecv);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclRecv");
    if (!fs_shim_enter()) return real(recvbuff, count, datatype, peer, comm, stream);
    return data_moved(real(recvbuff, count, datatype, peer, comm, stream), comm, stream,
                      FS_COLL_RECV, recvbuff, recvbuff, count, datatype);
}

FS_EXPORT ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    __typeof__(&ncclAlltoAll) real = FS_NCCL_REAL(ncclAlltoAll);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclAlltoAll");
    if (!fs_shim_enter()) return real(sendbuff, recvbuff, count, datatype, comm, stream);
    return data_moved(real(sendbuff, recvbuff, count, datatype, comm, stream), comm, stream,
                      FS_COLL_ALL_TO_ALL, sendbuff, recvbuff, count, datatype);
}

FS_EXPORT ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream)
{
    __typeof__(&ncclGather) real = FS_NCCL_REAL(ncclGather);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclGather");
    if (!fs_shim_enter()) return real(sendbuff, recvbuff, count, datatype, root, comm, stream);
    return data_moved(real(sendbuff, recvbuff, count, datatype, root, comm, stream), comm, stream,
                      FS_COLL_GATHER, sendbuff, recvbuff, count, datatype);
}

FS_EXPORT ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                                   ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream)
{
    __typeof__(&ncclScatter) real = FS_NCCL_REAL(ncclScatter);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclScatter");
    if (!fs_shim_enter()) return real(sendbuff, recvbuff, count, datatype, root, comm, stream);
    return data_moved(real(sendbuff, recvbuff, count, datatype, root, comm, stream), comm, stream,
                      FS_COLL_SCATTER, sendbuff, recvbuff, count, datatype);
}
