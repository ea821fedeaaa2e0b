/* cupti.h - the trace-only attach through CUPTI (cupti.c), for programs the
 * shim is not preloaded into: CUDA_INJECTION64_PATH=libfsdpshim.so, and
 * `fsdpshim attach`. */
#ifndef FS_CUPTI_H
#define FS_CUPTI_H

#include <stdbool.h>

enum fs_cupti_status {
    FS_CUPTI_TRACING,  /* subscribed, the trace is open */
    FS_CUPTI_NO_CUPTI, /* no libcupti could be loaded */
    FS_CUPTI_TAKEN,    /* another CUPTI client holds the subscriber slot */
    FS_CUPTI_FAILED,   /* CUPTI refused otherwise */
    FS_CUPTI_NO_TRACE, /* CUPTI was had, but the trace could not be started (its file) */
    FS_CUPTI_ALREADY,  /* this process is being traced already */
};

/* Loads CUPTI (never linked: found beside the loaded CUDA runtime or
 * driver, then by the loader's search and in the toolkit), subscribes to
 * the runtime's and driver's memory, stream and VMM calls, and starts the
 * trace (passive.h) at `level` with `frames` frames to `path`. With
 * say_why, says once on stderr why when it cannot (else the caller, which
 * has another way in, does). `how` names the way in, for the log. */
enum fs_cupti_status fs_cupti_attach(int level, unsigned frames, const char *path, const char *how,
                                     bool say_why);

/* The libcupti loaded (its real path), NULL before one was; and why the
 * last fs_cupti_attach could not trace, NULL when it could. Both stay valid
 * until the next fs_cupti_attach; read them under the caller's own
 * serialisation of attaches (attach.c). */
const char *fs_cupti_library(void);
const char *fs_cupti_failure(void);

/* Unsubscribes and closes the trace; false when not attached. */
bool fs_cupti_detach(void);

#endif /* FS_CUPTI_H */
