/* got.h - the trace-only attach through the loaded objects' GOT/PLT slots
 * (got.c), for `fsdpshim attach` where CUPTI cannot be had. */
#ifndef FS_GOT_H
#define FS_GOT_H

#include <stdbool.h>

enum fs_got_status {
    FS_GOT_TRACING,  /* the slots are redirected, the trace is open */
    FS_GOT_NO_CUDA,  /* neither the runtime nor the driver is loaded */
    FS_GOT_NO_TRACE, /* the trace could not be started (its file) */
};

/* Starts the trace (passive.h) at `level` with `frames` frames to `path`,
 * then points every loaded object's slots of the hook table's entry points
 * (hooks.h) at their trace-only functions, makes the driver's lookups hand
 * out trace-only functions too, and keeps doing so for objects loaded
 * later. When it cannot, it logs why and says which. */
enum fs_got_status fs_got_attach(int level, unsigned frames, const char *path);

/* Puts every slot back, makes lookups answer with the driver's own
 * functions again, and closes the trace; false when not attached. */
bool fs_got_detach(void);

#endif /* FS_GOT_H */
