/* onesided.c - NCCL 2.29/2.30's one-sided operations (ncclPutSignal,
 * ncclSignal, ncclWaitSignal) and the device API's communicator
 * (ncclDevCommCreate/Destroy), which PyTorch 2.15 imports.
 *
 * Their arguments are checked as NCCL checks them (ncclInvalidArgument), and
 * then each answers ncclInvalidUsage, said in ncclGetLastError: a put writes
 * into a peer's registered window without the peer taking part, and the sim's
 * ranks are processes whose device memory is their own (no peer mapping, no
 * proxy that would apply a put on the target's behalf); a device
 * communicator is for kernels, and the sim runs no device code.
 * docs/sim-nccl.md, "NCCL 2.29/2.30 entry points". */
#include "nccl_2_30.h"
#include "nccl_internal.h"

static ncclResult_t sim_onesided_comm(ncclComm_t comm, int peer, int sigIdx, int ctx,
                                      unsigned int flags, const char *who)
{
    if (!sim_comm_valid(comm)) {
        sim_set_last_error("sim NCCL: %s: invalid communicator", who);
        return ncclInvalidArgument;
    }
    if (peer < 0 || peer >= comm->nranks || sigIdx != 0 || ctx != 0 || flags != 0) {
        /* NCCL 2.30 accepts signal index 0 and context 0 only, and no flags */
        sim_set_last_error(
            "sim NCCL: %s: invalid peer %d, signal index %d, context %d or flags %#x", who, peer,
            sigIdx, ctx, flags);
        return ncclInvalidArgument;
    }
    return sim_comm_usable(comm);
}

static ncclResult_t sim_not_simulated(ncclComm_t comm, const char *who)
{
    sim_set_last_error("sim NCCL rank %d/%d: %s: one-sided operations are not simulated (a rank's "
                       "device memory is not mapped in its peers' processes)",
                       comm->rank, comm->nranks, who);
    return ncclInvalidUsage;
}

SIM_NCCL_EXPORT ncclResult_t pncclPutSignal(const void *localbuff, size_t count,
                                            ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                                            size_t peerWinOffset, int sigIdx, int ctx,
                                            unsigned int flags, ncclComm_t comm,
                                            cudaStream_t stream)
{
    size_t size, elem = sim_dtype_size(datatype);
    ncclResult_t rc = sim_onesided_comm(comm, peer, sigIdx, ctx, flags, "ncclPutSignal");
    (void)stream;
    if (rc != ncclSuccess) return rc;
    if (!elem || (count && !localbuff) ||
        sim_window_find(comm, peerWin, NULL, &size) != ncclSuccess || peerWinOffset > size ||
        count > (size - peerWinOffset) / elem) {
        sim_set_last_error("sim NCCL: ncclPutSignal: invalid data type, buffer or window range");
        return ncclInvalidArgument;
    }
    return sim_not_simulated(comm, "ncclPutSignal");
}
SIM_NCCL_ALIAS(ncclPutSignal);

SIM_NCCL_EXPORT ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags,
                                         ncclComm_t comm, cudaStream_t stream)
{
    ncclResult_t rc = sim_onesided_comm(comm, peer, sigIdx, ctx, flags, "ncclSignal");
    (void)stream;
    return rc != ncclSuccess ? rc : sim_not_simulated(comm, "ncclSignal");
}
SIM_NCCL_ALIAS(ncclSignal);

SIM_NCCL_EXPORT ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs,
                                             ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    if (!sim_comm_valid(comm) || nDesc < 0 || (nDesc && !signalDescs)) {
        sim_set_last_error("sim NCCL: ncclWaitSignal: invalid communicator or descriptors");
        return ncclInvalidArgument;
    }
    for (int i = 0; i < nDesc; i++) {
        ncclResult_t rc = sim_onesided_comm(comm, signalDescs[i].peer, signalDescs[i].sigIdx,
                                            signalDescs[i].ctx, 0, "ncclWaitSignal");
        if (rc != ncclSuccess) return rc;
        if (signalDescs[i].opCnt < 0) {
            sim_set_last_error("sim NCCL: ncclWaitSignal: negative count %d", signalDescs[i].opCnt);
            return ncclInvalidArgument;
        }
    }
    return sim_not_simulated(comm, "ncclWaitSignal");
}
SIM_NCCL_ALIAS(ncclWaitSignal);

SIM_NCCL_EXPORT ncclResult_t pncclDevCommCreate(ncclComm_t comm,
                                                const struct ncclDevCommRequirements *reqs,
                                                struct ncclDevComm *outDevComm)
{
    if (!sim_comm_valid(comm) || !reqs || !outDevComm) {
        sim_set_last_error("sim NCCL: ncclDevCommCreate: invalid communicator or pointers");
        return ncclInvalidArgument;
    }
    sim_set_last_error("sim NCCL: ncclDevCommCreate: the device API is for kernels, and the "
                       "simulated device runs no device code");
    return ncclInvalidUsage;
}
SIM_NCCL_ALIAS(ncclDevCommCreate);

/* No device communicator is ever created, so none can be destroyed. */
SIM_NCCL_EXPORT ncclResult_t pncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm *devComm)
{
    (void)devComm;
    sim_set_last_error("sim NCCL: ncclDevCommDestroy: %s",
                       sim_comm_valid(comm) ? "not a device communicator of this communicator"
                                            : "invalid communicator");
    return ncclInvalidArgument;
}
SIM_NCCL_ALIAS(ncclDevCommDestroy);
