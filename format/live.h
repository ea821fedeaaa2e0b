/* live.h - the live statistics page: what `fsdpshim top --live` shows of a
 * running process, shared by its writer in the preload library
 * (interpose/live_stats.c) and its reader in the analyzer
 * (analysis/commands/top_live.c), which never links the library. docs/cli.md
 * ("fsdpshim top --live") is the prose version.
 *
 * One POSIX shared-memory object per process, named /fsdpshim-UID-PID (UID
 * the process's effective uid), mode 0600, laid out as
 *
 *   fs_live_head    written once when the page is made, magic last;
 *                   then `seq`, the seqlock word, odd while the payload is
 *                   being rewritten
 *   payload         fs_live_proc, then ndev fs_live_device records, kept as
 *                   64-bit words that are each stored and loaded atomically
 *
 * The writer rewrites the whole payload on every update (fs_live_publish);
 * a reader copies it out between two loads of `seq` and keeps the copy when
 * both loads saw the same even value (fs_live_read). Word-by-word atomic
 * copies make the race between the two a defined one, as C11 requires.
 *
 * Versioned like the trace format: `version` changes when a field changes
 * meaning, and the sizes in the head let a newer writer append fields that
 * an older reader skips. Everything is in the host's byte order: the page
 * never leaves the machine. */
#ifndef FS_LIVE_H
#define FS_LIVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FS_LIVE_MAGIC   0x4556494c50445346ull /* "FSDPLIVE" */
#define FS_LIVE_VERSION 1
#define FS_LIVE_PREFIX  "fsdpshim-" /* object names: "/" FS_LIVE_PREFIX "UID-PID" */
#define FS_LIVE_DIR     "/dev/shm"  /* where Linux keeps POSIX shared memory objects */
#define FS_LIVE_STREAMS 6           /* streams with the most cached free bytes, per device */
#define FS_LIVE_SITES   8           /* allocation sites with the most live bytes */
#define FS_LIVE_LABEL   56          /* bytes of a site's label, NUL included */
#define FS_LIVE_DEVICES 64          /* devices a page describes, at most */

/* What a stream entry names. */
enum fs_live_stream_kind {
    FS_LIVE_STREAM_LEGACY,     /* the legacy default stream */
    FS_LIVE_STREAM_PER_THREAD, /* a thread's per-thread default stream; id: its number */
    FS_LIVE_STREAM_HANDLE,     /* a cudaStream_t; id: the handle */
    FS_LIVE_STREAM_RETIRED,    /* a destroyed stream whose blocks are still cached */
};

typedef struct fs_live_stream {
    uint64_t kind; /* enum fs_live_stream_kind */
    uint64_t id;
    uint64_t free_bytes; /* free blocks cached in the stream's pools */
} fs_live_stream;

/* One device, with the allocator's figures (PyTorch's names, docs/allocator.md). */
typedef struct fs_live_device {
    int64_t device;
    uint64_t allocated, allocated_peak;    /* bytes in live blocks (allocated_bytes) */
    uint64_t reserved, reserved_peak;      /* bytes in segments (reserved_bytes) */
    uint64_t active, active_peak;          /* live and pending blocks (active_bytes) */
    uint64_t requested;                    /* bytes the program asked for, live blocks */
    uint64_t pending_bytes, pending_frees; /* freed, waiting for their streams */
    uint64_t blocks;                       /* live blocks */
    uint64_t allocations;                  /* allocations made so far */
    uint64_t segments;
    uint64_t device_allocs, device_frees; /* segments made and released through the device */
    uint64_t ooms, retries;
    uint64_t largest_free;      /* largest free cached block */
    uint64_t cached_free;       /* free cached bytes, every stream */
    uint64_t streams_with_free; /* streams holding free cached bytes; the first ones follow */
    fs_live_stream streams[FS_LIVE_STREAMS];
    /* the all-gather rate limiter (docs/collectives.md) */
    uint64_t rl_waits, rl_wait_ns;             /* waits so far and their total time */
    uint64_t rl_in_flight, rl_in_flight_bytes; /* freed all-gather outputs still in use */
} fs_live_device;

/* One allocation site: an allocating stack, labelled by its innermost
 * Python frame when Python stacks are traced, else by its innermost native
 * frame (the dynamic symbol, or MODULE+0xOFFSET). */
typedef struct fs_live_site {
    uint64_t bytes, blocks; /* live now */
    char label[FS_LIVE_LABEL];
} fs_live_site;

enum fs_live_sites_state {
    FS_LIVE_SITES_NONE = 0, /* no allocating stacks are kept: sites unknown */
    FS_LIVE_SITES_KEPT = 1, /* nsites below are the largest (maybe none yet) */
};

/* The process. */
typedef struct fs_live_proc {
    int64_t rank, world;  /* -1 while not known */
    uint64_t update_ns;   /* CLOCK_MONOTONIC (one clock for every process of the host) */
    uint64_t updates;     /* updates so far */
    uint64_t interval_ns; /* the update period */
    uint64_t trace_level; /* 0 off, 1 events, 2 stacks, 3 python */
    uint64_t sites_state; /* enum fs_live_sites_state */
    uint64_t
        sites_at_ns; /* CLOCK_MONOTONIC of the sites' last update (they are counted less often) */
    uint64_t nsites;
    fs_live_site sites[FS_LIVE_SITES];
} fs_live_proc;

typedef struct fs_live_head {
    _Atomic uint64_t magic; /* FS_LIVE_MAGIC once everything else in the head is written */
    uint32_t version;       /* FS_LIVE_VERSION */
    uint32_t head_size;     /* bytes before the payload */
    uint32_t proc_size;     /* sizeof(fs_live_proc) of the writer */
    uint32_t device_size;   /* sizeof(fs_live_device) of the writer */
    uint32_t ndev;          /* device records in the payload */
    int32_t pid;
    uint64_t start_ticks; /* the process's start time (/proc/PID/stat, field 22): a
                             reused pid has another */
    char exe[64];         /* the program's name, NUL terminated, possibly cut */
    _Atomic uint64_t seq;
    _Atomic uint64_t payload[];
} fs_live_head;

/* The page's size for ndev devices. */
size_t fs_live_page_size(uint32_t ndev);

/* The object's name, "/fsdpshim-UID-PID", into buf. */
void fs_live_name(char *buf, size_t len, unsigned uid, int pid);

/* Parses a directory entry of FS_LIVE_DIR ("fsdpshim-UID-PID", no slash):
 * false when it is not a page's name. */
bool fs_live_parse_name(const char *entry, unsigned *uid, int *pid);

/* The start time of process pid in clock ticks since boot (/proc/PID/stat,
 * field 22), 0 when it cannot be read: with the pid, it names one process
 * for good, where a pid alone is reused. */
uint64_t fs_live_start_ticks(int pid);

/* Rewrites the payload of h (the writer's only): proc, then h->ndev devices. */
void fs_live_publish(fs_live_head *h, const fs_live_proc *proc, const fs_live_device *devs);

/* Checks a mapped page of `size` bytes before it is read. NULL when it can
 * be read, else a static message: not ready yet (magic not written), not a
 * page, a newer version, or sizes that do not fit. */
const char *fs_live_check(fs_live_head *h, size_t size);

/* Copies a consistent payload of a checked page into proc and devs (room
 * for h->ndev, at most FS_LIVE_DEVICES), retrying while the writer is
 * mid-update; fields a newer writer appended are left out, fields an older
 * one lacked are zero. False when no consistent copy came in `tries`
 * attempts (a writer that died mid-update leaves `seq` odd for good). */
bool fs_live_read(fs_live_head *h, fs_live_proc *proc, fs_live_device *devs, int tries);

#endif /* FS_LIVE_H */
