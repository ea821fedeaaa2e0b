/* buffers.c - the buffers a program hands the simulated NCCL:
 * registrations and windows (bookkeeping only: the sim needs no mapping),
 * the device API's pointer queries on a window, and ncclMemAlloc/Free.
 * A communicator's registrations are released with it (comm_ref.c). */
#include "nccl_internal.h"
#include "nccl_2_30.h"

#include <stdlib.h>

struct sim_reg {
    struct sim_reg *next;
    struct sim_reg *wnext; /* sim_windows */
    struct ncclComm *comm;
    void *buff;
    size_t size;
    int window;
};

/* Every live window of the process, for the device API's pointer queries,
 * which name a window without its communicator. */
static pthread_mutex_t sim_windows_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_reg *sim_windows;

static void sim_window_unlink(struct sim_reg *r)
{
    pthread_mutex_lock(&sim_windows_lock);
    for (struct sim_reg **pp = &sim_windows; *pp; pp = &(*pp)->wnext)
        if (*pp == r) {
            *pp = r->wnext;
            break;
        }
    pthread_mutex_unlock(&sim_windows_lock);
}

void sim_buffers_release(struct ncclComm *c)
{
    while (c->regs) {
        struct sim_reg *r = c->regs;
        c->regs = r->next;
        if (r->window) sim_window_unlink(r);
        free(r);
    }
}

static ncclResult_t sim_reg_add(ncclComm_t comm, void *buff, size_t size, int window,
                                struct sim_reg **out)
{
    if (!sim_comm_valid(comm) || !buff || !size || !out) return ncclInvalidArgument;
    struct sim_reg *r = calloc(1, sizeof(*r));
    if (!r) return ncclSystemError;
    r->comm = comm;
    r->buff = buff;
    r->size = size;
    r->window = window;
    pthread_mutex_lock(&comm->lock);
    r->next = comm->regs;
    comm->regs = r;
    pthread_mutex_unlock(&comm->lock);
    if (window) {
        pthread_mutex_lock(&sim_windows_lock);
        r->wnext = sim_windows;
        sim_windows = r;
        pthread_mutex_unlock(&sim_windows_lock);
    }
    *out = r;
    return ncclSuccess;
}

static ncclResult_t sim_reg_remove(ncclComm_t comm, void *handle, int window)
{
    if (!sim_comm_valid(comm) || !handle) return ncclInvalidArgument;
    ncclResult_t rc = ncclInvalidArgument;
    pthread_mutex_lock(&comm->lock);
    for (struct sim_reg **pp = &comm->regs; *pp; pp = &(*pp)->next)
        if (*pp == handle && (*pp)->window == window) {
            struct sim_reg *r = *pp;
            *pp = r->next;
            if (r->window) sim_window_unlink(r);
            free(r);
            rc = ncclSuccess;
            break;
        }
    pthread_mutex_unlock(&comm->lock);
    return rc;
}

SIM_NCCL_EXPORT ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size,
                                               void **handle)
{
    struct sim_reg *r;
    ncclResult_t rc = sim_reg_add(comm, buff, size, 0, &r);
    if (rc == ncclSuccess) *handle = r;
    return rc;
}
SIM_NCCL_ALIAS(ncclCommRegister);

SIM_NCCL_EXPORT ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
    return sim_reg_remove(comm, handle, 0);
}
SIM_NCCL_ALIAS(ncclCommDeregister);

SIM_NCCL_EXPORT ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                                     ncclWindow_t *win, int winFlags)
{
    struct sim_reg *r;
    if (!win || (winFlags & ~(NCCL_WIN_DEFAULT | NCCL_WIN_COLL_SYMMETRIC)))
        return ncclInvalidArgument;
    ncclResult_t rc = sim_reg_add(comm, buff, size, 1, &r);
    if (rc == ncclSuccess) *win = (ncclWindow_t)(void *)r;
    return rc;
}
SIM_NCCL_ALIAS(ncclCommWindowRegister);

SIM_NCCL_EXPORT ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    return sim_reg_remove(comm, (void *)win, 1);
}
SIM_NCCL_ALIAS(ncclCommWindowDeregister);

ncclResult_t sim_window_find(ncclComm_t comm, ncclWindow_t win, void **buff, size_t *size)
{
    ncclResult_t rc = ncclInvalidArgument;
    if (!sim_comm_valid(comm) || !win) return rc;
    pthread_mutex_lock(&comm->lock);
    for (struct sim_reg *r = comm->regs; r; r = r->next)
        if ((void *)r == (void *)win && r->window) {
            if (buff) *buff = r->buff;
            if (size) *size = r->size;
            rc = ncclSuccess;
            break;
        }
    pthread_mutex_unlock(&comm->lock);
    if (rc != ncclSuccess)
        sim_set_last_error("sim NCCL: not a window registered on this communicator");
    return rc;
}

SIM_NCCL_EXPORT ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win,
                                                void **outUserPtr)
{
    if (!outUserPtr) return ncclInvalidArgument;
    return sim_window_find(comm, win, outUserPtr, NULL);
}
SIM_NCCL_ALIAS(ncclWinGetUserPtr);

/* The device API's pointer queries take the window alone (a live one, found
 * among the process's windows); its communicator is the one it was registered
 * on. A
 * rank reaches its own window; the sim maps no peer's memory into a process
 * (each rank's device memory is its own process's), so another peer is
 * ncclInvalidUsage, and so is multimem (no NVLink SHARP). */
static ncclResult_t sim_window_comm(ncclWindow_t window, size_t offset, void **outPtr, int *rank,
                                    int *nranks, void **buff)
{
    ncclResult_t rc = ncclInvalidArgument;
    pthread_mutex_lock(&sim_windows_lock);
    for (struct sim_reg *r = sim_windows; r && outPtr; r = r->wnext)
        if ((void *)r == (void *)window && offset < r->size) {
            *rank = r->comm->rank;
            *nranks = r->comm->nranks;
            *buff = r->buff;
            rc = ncclSuccess;
            break;
        }
    pthread_mutex_unlock(&sim_windows_lock);
    if (rc != ncclSuccess) sim_set_last_error("sim NCCL: invalid window, offset or output pointer");
    return rc;
}

SIM_NCCL_EXPORT ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                                       void **outPtr)
{
    int rank, nranks;
    void *buff;
    ncclResult_t rc = sim_window_comm(window, offset, outPtr, &rank, &nranks, &buff);
    if (rc != ncclSuccess) return rc;
    if (peer < 0 || peer >= nranks) {
        sim_set_last_error("sim NCCL: peer %d out of [0, %d)", peer, nranks);
        return ncclInvalidArgument;
    }
    if (peer != rank) {
        sim_set_last_error("sim NCCL: rank %d's window memory is not mapped in rank %d's process",
                           peer, rank);
        return ncclInvalidUsage;
    }
    *outPtr = (char *)buff + offset;
    return ncclSuccess;
}
SIM_NCCL_ALIAS(ncclGetPeerDevicePointer);

SIM_NCCL_EXPORT ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                              void **outPtr)
{
    int rank, nranks;
    void *buff;
    ncclResult_t rc = sim_window_comm(window, offset, outPtr, &rank, &nranks, &buff);
    if (rc != ncclSuccess) return rc;
    sim_set_last_error("sim NCCL: no multimem (NVLink SHARP) on the simulated device");
    return ncclInvalidUsage;
}
SIM_NCCL_ALIAS(ncclGetLsaMultimemDevicePointer);

SIM_NCCL_EXPORT ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
    if (!ptr || !size) return ncclInvalidArgument;
    return cudaMalloc(ptr, size) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}
SIM_NCCL_ALIAS(ncclMemAlloc);

SIM_NCCL_EXPORT ncclResult_t pncclMemFree(void *ptr)
{
    if (!ptr) return ncclSuccess;
    return cudaFree(ptr) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}
SIM_NCCL_ALIAS(ncclMemFree);
