/* nccl_2_30.h - the NCCL 2.29/2.30 host API that PyTorch 2.15's
 * libtorch_cuda imports and the toolkit's NCCL 2.28 headers lack.
 *
 * The declarations are NCCL 2.30's, copied from the nccl.h and
 * nccl_device/core.h of the nvidia-nccl-cu13 wheel PyTorch 2.15 installs
 * (NCCL_VERSION_CODE 23007) and NVIDIA's NCCL documentation; ncclCommRevoke,
 * ncclDevCommCreate and ncclDevCommDestroy are already in the 2.28 headers.
 * The device API's types stay opaque: the sim has no device code to give them
 * to (docs/sim-nccl.md). */
#ifndef SIM_NCCL_2_30_H
#define SIM_NCCL_2_30_H
#include <nccl.h>
#include <stdint.h>

/* ncclCommSuspend flags */
#define NCCL_SUSPEND_MEM 0x01 /* release dynamic GPU memory allocations */

/* ncclCommMemStats statistics */
typedef enum {
    ncclStatGpuMemSuspend = 0,   /* allocated GPU memory that can be suspended (bytes) */
    ncclStatGpuMemSuspended = 1, /* 0 active, 1 suspended */
    ncclStatGpuMemPersist = 2,   /* allocated GPU memory that cannot be suspended (bytes) */
    ncclStatGpuMemTotal = 3      /* total allocated GPU memory tracked by NCCL (bytes) */
} ncclCommMemStat_t;

/* ncclWaitSignal: wait for opCnt signals from peer on (sigIdx, ctx) */
typedef struct {
    int opCnt;
    int peer;
    int sigIdx;
    int ctx;
} ncclWaitSignalDesc_t;

struct ncclDevComm;
struct ncclDevCommRequirements;

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                          ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                           ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value);
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr);
ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                            unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                         cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                             cudaStream_t stream);
/* device API (nccl_device/core.h), host side */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements *reqs,
                               struct ncclDevComm *outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements *reqs,
                                struct ncclDevComm *outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm *devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm *devComm);
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void **outPtr);
ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void **outPtr);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void **outPtr);
ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void **outPtr);
#endif /* SIM_NCCL_2_30_H */
