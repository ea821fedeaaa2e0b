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
    uint64_t capacity; /* the replay device's bytes; 0: unlimited */
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
    /* The configuration of the "as recorded" replay, as
     * fs_alloc_config_describe writes it, and whether it is the one the
     * trace records (not the caller's, nor the defaults). */
    char recorded_config[512];
    bool config_in_trace;
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
    /* Bytes of each replay device; 0: each device's as the trace records it
     * (unlimited for a trace that does not). */
    size_t capacity;
    bool symbols; /* symbolise OOM sites (libdw); else MODULE+0xOFFSET */
    /* Each problem reading the trace, one line naming the file (may be NULL). */
    void (*warn)(void *ctx, const char *line);
    void *warn_ctx;
} fs_replay_options;

/* Replays trace `path` once per configuration (at most
 * FS_REPLAY_MAX_CONFIGS), each given as allocator keys (fs_alloc_config_set's,
 * PYTORCH_CUDA_ALLOC_CONF's syntax) that the caller has checked with
 * fs_replay_conf_apply: confs[0] is the configuration the trace was recorded
 * with (NULL: the one the trace records, else the defaults), every other
 * one keys applied over it. garbage_collection_threshold is measured
 * against the device's capacity and is off without one. Returns false,
 * with one line naming the file in err, when the trace cannot be read;
 * *out is then empty. */
bool fs_replay_trace(const char *path, const char *const *confs, size_t nconfs,
                     const fs_replay_options *opt, fs_replay_result *out, char *err, size_t errlen);

/* Applies the allocator keys of `text` over *cfg; false, with why in err,
 * at the first key that is not the allocator's or does not parse. */
bool fs_replay_conf_apply(fs_alloc_config *cfg, const char *text, char *err, size_t errlen);
void fs_replay_result_free(fs_replay_result *r);

#endif /* FS_REPLAY_H */
