/* nccl_internal.h - what the NCCL glue files share.
 *
 *   nccl_real.c      the program's own NCCL entry points
 *   nccl_comm.c      communicator set-up and tear-down, the communicator table
 *   nccl.c           collectives, point-to-point, groups, record-stream
 *   nccl_register.c  buffer and window registration (segment pins)
 *   rate_limiter.c   the all-gather rate limiter (rate_limiter.h) */
#ifndef FS_NCCL_INTERNAL_H
#define FS_NCCL_INTERNAL_H

#include "../core/real.h"
#include "../core/shim.h"

#include <nccl.h>
#include <stdatomic.h>
#include <stdbool.h>

/* ---- nccl_real.c -------------------------------------------------------- */

/* What an interposed entry point returns when the program's NCCL cannot be
 * found (it called us, so this should not happen): logged once. */
ncclResult_t fs_nccl_missing(const char *name);

/* ---- nccl_comm.c -------------------------------------------------------- */

typedef struct fs_nccl_comm_info {
    int rank;   /* ncclCommUserRank */
    int nranks; /* ncclCommCount */
    int device; /* ncclCommCuDevice */
} fs_nccl_comm_info;

/* What we know of `comm`, asked of the real NCCL once and kept until the
 * communicator is destroyed. False while NCCL cannot say (a non-blocking
 * communicator still initialising, a bad handle). */
bool fs_nccl_comm_info_get(ncclComm_t comm, fs_nccl_comm_info *out);

/* ---- nccl_register.c ---------------------------------------------------- */

/* `comm` is being destroyed or aborted: NCCL drops its registrations with
 * it, so the segments they pinned are unpinned. */
void fs_nccl_registrations_drop(ncclComm_t comm);

/* ---- nccl_group.c ------------------------------------------------------- */

/* ncclGroupStart nesting depth of the calling thread. */
int fs_nccl_group_depth(void);
/* `stream` of `device` has work from a call NCCL took: noted to the
 * allocator now outside a group, else at the outermost ncclGroupEnd. */
void fs_nccl_group_note_work(fs_allocator *a, int device, fs_stream_t stream);

#endif /* FS_NCCL_INTERNAL_H */
