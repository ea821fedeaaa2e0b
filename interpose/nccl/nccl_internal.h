/* nccl_internal.h - what the NCCL glue files share.
 *
 *   nccl_real.c      the program's own NCCL entry points
 *   nccl_comm.c      communicator set-up and tear-down, the communicator table
 *   nccl.c           collectives, point-to-point, groups, record-stream
 *   nccl_register.c  buffer and window registration (segment pins)
 *   rate_limiter.c   the all-gather rate limiter (rate_limiter.h) */
#ifndef FS_NCCL_INTERNAL_H
#define FS_NCCL_INTERNAL_H

#include "../shim.h"

#include <nccl.h>
#include <stdatomic.h>
#include <stdbool.h>

/* ---- nccl_real.c -------------------------------------------------------- */

/* The program's `name` (else its pnccl alias) from the NCCL it loaded,
 * never the shim's own definition, cached in *slot once found. NULL while
 * no NCCL is loaded. */
void *fs_nccl_resolve(_Atomic(void *) *slot, const char *name);

/* The real entry point behind one of our definitions, typed as it:
 *     __typeof__(&ncclAllReduce) real = FS_NCCL_REAL(ncclAllReduce); */
#define FS_NCCL_REAL(fn)                                                                           \
    __extension__({                                                                                \
        static _Atomic(void *) fs_nccl_slot_;                                                      \
        void *fs_nccl_p_ = atomic_load_explicit(&fs_nccl_slot_, memory_order_acquire);             \
        (__typeof__(&fn))(fs_likely(fs_nccl_p_) ? fs_nccl_p_                                       \
                                                : fs_nccl_resolve(&fs_nccl_slot_, #fn));           \
    })

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
