/* nccl_real.c - what an NCCL entry point does when the program's NCCL
 * cannot be found (fs_nccl_missing). The entry points themselves are found
 * by the one resolver (real.c: never the shim's own definition, else the
 * pnccl alias) through FS_NCCL_REAL (real.h). */
#include "nccl_internal.h"

#include <stdio.h>

ncclResult_t fs_nccl_missing(const char *name)
{
    static atomic_flag logged = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&logged))
        fs_log(FS_LOG_ERROR, "%s: no NCCL is loaded in this process, nothing to pass the call to",
               name);
    return ncclInternalError;
}
