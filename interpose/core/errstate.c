/* errstate.c - keeping the runtime's last-error state the program's own.
 *
 * PyTorch calls cudaGetLastError() before every allocation and raises if an
 * error is pending, so the shim must neither leave an error behind from its
 * own internal calls (a segment allocation that ran out of memory before the
 * cache was released and the call retried) nor clear one the program caused.
 * The runtime has no call that sets the last error, so an error is put back
 * by making the real runtime fail the same way with a harmless bad argument;
 * the codes the shim can meet are covered. */
#include "real.h"

#include <stdint.h>

/* Makes the real runtime set `err` as the calling thread's last error. */
static void provoke(cudaError_t err)
{
    void *p = NULL;
    int dev;

    switch (err) {
    case cudaErrorMemoryAllocation:
        /* no device has SIZE_MAX bytes; if one ever did, give them back */
        if (FS_REAL(cudaMalloc)(&p, SIZE_MAX) == cudaSuccess) FS_REAL(cudaFree)(p);
        break;
    case cudaErrorInvalidValue:
        FS_REAL(cudaMalloc)(NULL, 1);
        break;
    case cudaErrorInvalidResourceHandle:
        FS_REAL(cudaEventQuery)(NULL);
        break;
    case cudaErrorInvalidDevice:
        if (FS_REAL(cudaGetDeviceCount)(&dev) == cudaSuccess) FS_REAL(cudaSetDevice)(dev);
        break;
    default:
        break;
    }
    if (FS_REAL(cudaPeekAtLastError)() != err)
        fs_log(FS_LOG_DEBUG, "could not restore last error %d", (int)err);
}

/* Without a runtime (the allocator runs over the driver) there is no last
 * error to keep. */
void fs_err_save(fs_err_state *st)
{
    __typeof__(&cudaPeekAtLastError) peek = FS_REAL(cudaPeekAtLastError);

    st->pending = peek ? peek() : cudaSuccess;
}

void fs_err_restore(const fs_err_state *st)
{
    __typeof__(&cudaPeekAtLastError) peek = FS_REAL(cudaPeekAtLastError);

    if (!peek || peek() == st->pending) return;
    FS_REAL(cudaGetLastError)();
    if (st->pending != cudaSuccess) provoke(st->pending);
}

cudaError_t fs_shim_return_error(cudaError_t err)
{
    if (err != cudaSuccess && FS_REAL(cudaPeekAtLastError) && FS_REAL(cudaPeekAtLastError)() != err)
        provoke(err);
    return err;
}
