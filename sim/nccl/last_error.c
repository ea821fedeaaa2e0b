/* last_error.c - the errors of the simulated NCCL as the program reads
 * them: the thread's last error, a communicator's first error (which may
 * happen on a stream worker), the result a failed wait on peers becomes, and
 * ncclGetErrorString/ncclGetLastError. Every other file reports through
 * here, so it depends on none of them. */
#include "nccl_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char sim_last_error[512];

void sim_set_last_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sim_last_error, sizeof(sim_last_error), fmt, ap);
    va_end(ap);
}

void sim_comm_set_error(struct ncclComm *c, ncclResult_t rc, const char *fmt, ...)
{
    char msg[sizeof(c->errmsg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sim_set_last_error("%s", msg);
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

ncclResult_t sim_wait_result(enum sim_wait_rc rc)
{
    switch (rc) {
    case SIM_WAIT_OK:
        return ncclSuccess;
    case SIM_WAIT_PEER:
        return ncclRemoteError;
    case SIM_WAIT_TIMEOUT:
        return ncclSystemError;
    default:
        return ncclInvalidUsage; /* aborted under the caller's feet */
    }
}

SIM_NCCL_EXPORT const char *pncclGetErrorString(ncclResult_t result)
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
SIM_NCCL_ALIAS(ncclGetErrorString);

/* The communicator's first error when it has one (it may have happened on
 * a stream worker), else the calling thread's last error. */
SIM_NCCL_EXPORT const char *pncclGetLastError(ncclComm_t comm)
{
    if (sim_comm_valid(comm) && atomic_load(&comm->has_errmsg) == 1) return comm->errmsg;
    return sim_last_error;
}
SIM_NCCL_ALIAS(ncclGetLastError);
