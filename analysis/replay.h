/* replay.h - a trace's allocations replayed through the caching allocator
 * (allocator/, linked in) under other configurations, on a modelled device:
 * the what-if behind `fsdpshim replay` (docs/cli.md), and what an
 * explanation of an OOM uses to check which setting would have avoided it.
 *
 * One call reads one trace (one rank) twice: the first pass finds which
 * frees the recording held back and until when, the second drives one
 * allocator per configuration in step, in trace time order, each over its
 * own device model (memory of a given capacity; events that complete when
 * the recording saw the free they fence complete, else at once). Nothing
 * is preloaded and no CUDA is called. */
#ifndef FS_REPLAY_H
#define FS_REPLAY_H

#include "allocator.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Configurations replayed side by side in one reading, the recorded one
 * included. */
#define FS_REPLAY_MAX_CONFIGS 8

/* The out-of-memory failures kept per configuration (all are counted). */
#define FS_REPLAY_MAX_OOMS 16

/* One device's figures, as recorded or as one replay found them. */
typedef struct fs_replay_figures {
    uint64_t peak_reserved, peak_allocated;
    /* When allocated first reached its peak (what decides whether a job
     * fits): the bytes reserved then, and (replayed only: a trace does not
     * carry it) the largest free block. */
    uint64_t reserved_at_peak, largest_free_at_peak;
    uint64_t segments; /* plain segments reserved from the device */
    uint64_t mappings; /* expandable segments grown (one or more pages each) */
    uint64_t ooms;     /* requests that failed */
} fs_replay_figures;

typedef struct fs_replay_device {
    int device;
    fs_replay_figures recorded;
    fs_replay_figures replayed[FS_REPLAY_MAX_CONFIGS]; /* by configuration */
} fs_replay_device;

/* A request a replay could not serve: the replay skips it and goes on (a
 * later free of that block is skipped too). */
typedef struct fs_replay_oom {
    int config, device;
    uint64_t time_ns;                           /* into the trace */
    uint64_t stream;                            /* the program's handle, as the trace has it */
    uint64_t requested;                         /* bytes asked for */
    uint64_t allocated, reserved, largest_free; /* the replay's figures at the failure */
    bool recorded;                              /* the recording failed this request too */
    char *site; /* its allocation site, one frame a line (NULL: no stack traced) */
} fs_replay_oom;

typedef struct fs_replay_result {
    int rank; /* -1: unknown */
    unsigned pid;
    uint64_t allocs, frees;  /* replayed */
    uint64_t deferred_frees; /* frees the recording held back until its streams passed them */
    uint64_t recorded_ooms;  /* failed requests of the recording, replayed as probes */
    fs_replay_device *dev;   /* the devices that allocated, by number */
    size_t ndev;
    fs_replay_oom *ooms; /* the first FS_REPLAY_MAX_OOMS of each configuration */
    size_t nooms;
} fs_replay_result;

typedef struct fs_replay_options {
    size_t capacity; /* bytes of each replay device; 0: unlimited */
    bool symbols;    /* symbolise OOM sites (libdw); else MODULE+0xOFFSET */
    /* Each problem reading the trace, one line naming the file (may be NULL). */
    void (*warn)(void *ctx, const char *line);
    void *warn_ctx;
} fs_replay_options;

/* Replays trace `path` once per configuration (at most
 * FS_REPLAY_MAX_CONFIGS). garbage_collection_threshold is measured against
 * opt->capacity and is off without one. Returns false, with one line naming
 * the file in err, when the trace cannot be read; *out is then empty. */
bool fs_replay_trace(const char *path, const fs_alloc_config *configs, size_t nconfigs,
                     const fs_replay_options *opt, fs_replay_result *out, char *err, size_t errlen);
void fs_replay_result_free(fs_replay_result *r);

#endif /* FS_REPLAY_H */
