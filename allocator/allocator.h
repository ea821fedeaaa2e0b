/* allocator.h - the caching allocator: PyTorch-grade policy with per-stream
 * pools and deferred, event-ordered reuse (SPEC sections 4 and 5).
 *
 * This is the whole interface the preload library, the benchmarks and the
 * replay tool use. It knows nothing of CUDA symbols or interposition: every
 * device operation goes through the fs_device_ops table (device.h), and
 * streams are opaque handles that the caller registers.
 *
 * Threads: every function is thread-safe. Blocks of distinct (device, stream)
 * pairs are served under distinct locks; statistics are atomics. */
#ifndef FS_ALLOCATOR_H
#define FS_ALLOCATOR_H

#include "device.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- configuration ---------------------------------------------------- */

typedef enum fs_free_semantics {
    FS_FREE_SEMANTICS_SYNC,   /* cudaFree synchronises the device, then caches the block */
    FS_FREE_SEMANTICS_DEVICE, /* reuse once every stream with work has passed the free (default) */
    FS_FREE_SEMANTICS_STREAM, /* reuse at once on the block's stream, as PyTorch's allocator */
} fs_free_semantics;

typedef enum fs_cross_stream_reuse {
    FS_REUSE_NONE,      /* a stream only ever takes its own free blocks (PyTorch) */
    FS_REUSE_COMPLETED, /* also another stream's block whose free has completed (default) */
    FS_REUSE_WAIT,      /* also pending ones, the taker waiting on the GPU (stream-ordered only) */
} fs_cross_stream_reuse;

/* PyTorch's roundup_power2_divisions buckets: one per power of two from
 * 1 MiB up, the last one covering everything larger. 0 = no rounding. */
#define FS_ROUNDUP_BUCKETS 16

typedef struct fs_alloc_config {
    fs_free_semantics free_semantics;
    fs_cross_stream_reuse cross_stream_reuse;
    size_t max_split_size; /* bytes; SIZE_MAX = unlimited */
    unsigned roundup_divisions[FS_ROUNDUP_BUCKETS];
    double garbage_collection_threshold; /* 0 = off, else in (0, 1) */
    bool expandable_segments;
    size_t large_segment; /* bytes: the large pool's shared segment (requests of 1 to 10 MiB) */
    /* segment_growth: false (small_first) sizes a large request's segment
     * to the request until the cache holds large_segment; true (pytorch)
     * shares large_segment segments from the first */
    bool pytorch_growth;
    /* malloc_reuse: false (wait) lets a cudaMalloc miss take a block whose
     * device-ordered free is pending, every stream waiting for the free on
     * the GPU; true (grow) grows instead, as PyTorch's allocator does */
    bool malloc_grow;
} fs_alloc_config;

/* Fills the SPEC's defaults. */
void fs_alloc_config_default(fs_alloc_config *cfg);

/* Applies one FSDPSHIM_CONF key that belongs to the allocator
 * (free_semantics, cross_stream_reuse, max_split_size_mb,
 * roundup_power2_divisions, garbage_collection_threshold,
 * expandable_segments, large_segment_mb, segment_growth, malloc_reuse). Returns 1 when applied, 0
 * when the key is not an allocator key, -1 when the value is bad: then `err` holds one line naming
 * the valid choices and `cfg` is unchanged. */
int fs_alloc_config_set(fs_alloc_config *cfg, const char *key, const char *value, char *err,
                        size_t errlen);

/* Writes the allocator's keys as key:value pairs, in FSDPSHIM_CONF syntax,
 * into buf (truncated to len). */
void fs_alloc_config_describe(const fs_alloc_config *cfg, char *buf, size_t len);

/* ---- lifetime --------------------------------------------------------- */

typedef struct fs_allocator fs_allocator;

typedef enum fs_status {
    FS_OK = 0,
    FS_ERR_OOM,       /* out of memory after release-and-retry */
    FS_ERR_INVALID,   /* inside a segment we own but not the start of a live block */
    FS_ERR_NOT_OWNED, /* outside every segment we own: the caller passes it through */
    FS_ERR_DEVICE,    /* the device failed a call */
} fs_status;

/* Creates an allocator for devices [0, device_count). `ops` must outlive it. */
fs_allocator *fs_allocator_create(const fs_alloc_config *cfg, const fs_device_ops *ops,
                                  int device_count);

/* Releases every cached segment through the device and frees the metadata.
 * Live blocks are forgotten, not freed. */
void fs_allocator_destroy(fs_allocator *a);

/* ---- streams ----------------------------------------------------------- */

enum fs_stream_kind {
    FS_STREAM_LEGACY,      /* the legacy default stream: its events order every blocking stream */
    FS_STREAM_BLOCKING,    /* synchronises with the legacy stream */
    FS_STREAM_NONBLOCKING, /* cudaStreamNonBlocking: needs its own fence event */
};

/* Tells the allocator a stream exists (created by the program or first seen
 * in a call). Registering twice is harmless. */
void fs_alloc_stream_register(fs_allocator *a, int device, fs_stream_t s, enum fs_stream_kind kind);

/* Notes that work was issued on `s` since the last fence (cheap: a flag). */
void fs_alloc_stream_note_work(fs_allocator *a, int device, fs_stream_t s);

/* The stream is being destroyed: cached blocks tagged with it are retagged
 * so that a new stream that reuses the handle never inherits them. Its work
 * is fenced first, so call this while the stream still exists. */
void fs_alloc_stream_retire(fs_allocator *a, int device, fs_stream_t s);

/* A thread's per-thread default stream, at the thread's exit, when the
 * stream may already be gone: retired like fs_alloc_stream_retire, but
 * nothing is recorded on it. What it may still have queued is known done
 * only after a whole-device synchronisation that began after this call
 * (fs_alloc_note_host_sync_since, or the allocator's own before it reports
 * out of memory and in empty_cache). Never waits. */
void fs_alloc_stream_exit(fs_allocator *a, int device, fs_stream_t s);

/* ---- allocation -------------------------------------------------------- */

enum fs_alloc_flags {
    FS_ALLOC_STREAM_ORDERED = 1u << 0, /* cudaMallocAsync: cross_stream_reuse:wait allowed */
    /* Never a pending block behind a GPU-side wait: a block whose free waits
     * for other streams is taken once that work has completed (PyTorch's
     * own allocator's semantics, which its adapter keeps) */
    FS_ALLOC_NO_GPU_WAIT = 1u << 1,
};

/* Allocates `size` (> 0) bytes on `device` for `stream`. On FS_ERR_OOM the
 * OOM figures are passed to the observer (if any) and *out is untouched. */
fs_status fs_malloc(fs_allocator *a, int device, fs_stream_t stream, size_t size, unsigned flags,
                    void **out);

/* ---- private pools ------------------------------------------------------ */

/* A private pool holds memory that only the allocations made into it use
 * (PyTorch's MemPool, a CUDA graph's pool): named by a number the caller
 * picks, not 0 (the shared cache), per device. Its blocks serve only its
 * own requests on the stream they were made for, and its requests only
 * ever take its own blocks or new segments; a free goes back to the pool
 * the block came from. While held, nothing of it is given back to make
 * room for others; let go, its free memory goes at the next empty_cache or
 * release-and-retry, and its blocks still live go the same way once freed
 * ("private.c"). */
typedef struct fs_private_conf {
    bool held;        /* in use: PyTorch's use count above 0 */
    bool lend_on_oom; /* a shared-cache request that found the device full may take a free
                         block of this pool on the request's stream (PyTorch's use_on_oom); it
                         stays this pool's */
    bool no_split;    /* blocks are handed out whole, never split (PyTorch's no_split) */
    /* Where its segments come from when not the device table's plain memory
     * (a MemPool's own allocator): whole plain segments, never expandable.
     * Called under the allocator's device lock: a CUDA call made from it
     * must not come back into this allocator. NULL for the device table. */
    fs_dev_status (*segment_alloc)(void *ctx, int device, size_t size, void **out);
    void (*segment_free)(void *ctx, int device, void *ptr, size_t size);
    void *segment_ctx;
} fs_private_conf;

/* fs_malloc into private pool `priv` (0: the shared cache, as fs_malloc).
 * A pool not configured yet is held, with the defaults. */
fs_status fs_malloc_private(fs_allocator *a, int device, fs_stream_t stream, uint64_t priv,
                            size_t size, unsigned flags, void **out);

/* Sets how private pool `priv` of `device` behaves, from now on; letting
 * it go (held false) forgets it once it holds no memory. Its segment
 * source must be set before its first segment and not changed after. */
void fs_alloc_private_configure(fs_allocator *a, int device, uint64_t priv,
                                const fs_private_conf *conf);

/* empty_cache for one private pool: its free memory back to the device
 * once it is let go; nothing while it is held (PyTorch's emptyCache of a
 * pool still in use). */
fs_status fs_alloc_private_empty(fs_allocator *a, int device, uint64_t priv);

/* A fence: the events that must all complete before freed memory may be
 * reused. Reference counted; used by the all-gather rate limiter. */
typedef struct fs_fence fs_fence;

/* cudaFree: applies the configured free_semantics. If `fence_out` is not
 * NULL the block's fence is recorded now and returned with a reference the
 * caller must drop with fs_fence_release(). */
fs_status fs_free(fs_allocator *a, void *ptr, fs_fence **fence_out);

/* cudaFreeAsync(ptr, stream): reusable at once by allocations on `stream`,
 * by others once the free has completed on the GPU (and recorded uses too). */
fs_status fs_free_async(fs_allocator *a, void *ptr, fs_stream_t stream, fs_fence **fence_out);

/* Records that the live block containing `ptr` (any interior address) is
 * used on `stream`: its reuse waits for that use. FS_ERR_NOT_OWNED if `ptr`
 * is in no live block. */
fs_status fs_record_stream(fs_allocator *a, void *ptr, fs_stream_t stream);
/* Forgets the streams recorded on live block ptr: the caller knows their
 * work on it is ordered before anything that follows on the block's own
 * stream (PyTorch's graph_capture_record_stream_reuse: the captured graph
 * orders them), so that its free is as if none had been recorded. */
fs_status fs_forget_uses(fs_allocator *a, void *ptr);

/* Fence queries: FS_DEV_OK when every event has completed, else NOT_READY.
 * fs_fence_wait blocks on the host until complete (events only, never a
 * device synchronisation). */
fs_dev_status fs_fence_query(fs_allocator *a, fs_fence *f);
fs_dev_status fs_fence_wait(fs_allocator *a, fs_fence *f);
void fs_fence_release(fs_allocator *a, fs_fence *f);

/* ---- maintenance ------------------------------------------------------- */

/* The host synchronised with `device` (or with every device when -1), e.g.
 * after cudaDeviceSynchronize: retire deferred frees whose events completed. */
void fs_alloc_note_host_sync(fs_allocator *a, int device);

/* A whole-device synchronisation (cudaDeviceSynchronize) waits for every
 * piece of work issued before it began, so every device-ordered free made
 * before then is reusable once it returns, fenced or not. Take the token
 * right before the synchronisation and pass it afterwards (only when it
 * succeeded); frees made meanwhile on other threads are left alone. */
uint64_t fs_alloc_sync_begin(fs_allocator *a, int device);
void fs_alloc_note_host_sync_since(fs_allocator *a, int device, uint64_t token);

/* Releases every cached, unused segment of `device` (all devices when -1),
 * waiting for pending frees' events first (torch.cuda.empty_cache). */
fs_status fs_alloc_empty_cache(fs_allocator *a, int device);

/* Releases cached memory until at most `keep_bytes` of unused reserved
 * memory stays (cudaMemPoolTrimTo). */
fs_status fs_alloc_trim(fs_allocator *a, int device, size_t keep_bytes);

/* cudaDeviceReset: forgets every segment, stream and event of `device`
 * without calling the device (they are already gone) and starts afresh. */
void fs_alloc_device_reset(fs_allocator *a, int device);

/* Pins the segment containing `ptr` (NCCL registration): it is never
 * released while pinned. Calls nest. */
fs_status fs_alloc_segment_pin(fs_allocator *a, void *ptr, bool pin);

/* ---- introspection ----------------------------------------------------- */

typedef struct fs_block_info {
    int device;
    fs_stream_t stream;
    void *block;       /* start of the live block containing the address */
    size_t block_size; /* rounded size */
    size_t requested;  /* size the program asked for */
    void *segment;     /* enclosing segment (cuMemGetAddressRange, IPC handles) */
    size_t segment_size;
    size_t page; /* an expandable segment's mapping granule, each page one mapping; else 0 */
} fs_block_info;

/* Describes the live block containing `ptr`. FS_ERR_NOT_OWNED otherwise. */
fs_status fs_alloc_block_info(fs_allocator *a, const void *ptr, fs_block_info *out);

/* One statistic as PyTorch names it. */
typedef struct fs_stat {
    int64_t current, peak, allocated, freed;
} fs_stat;

enum { FS_SIZE_ALL, FS_SIZE_SMALL, FS_SIZE_LARGE, FS_SIZE_CLASSES };

typedef struct fs_alloc_stats {
    fs_stat allocation[FS_SIZE_CLASSES];
    fs_stat segment[FS_SIZE_CLASSES];
    fs_stat active[FS_SIZE_CLASSES];
    fs_stat inactive_split[FS_SIZE_CLASSES];
    fs_stat allocated_bytes[FS_SIZE_CLASSES];
    fs_stat reserved_bytes[FS_SIZE_CLASSES];
    fs_stat active_bytes[FS_SIZE_CLASSES];
    fs_stat inactive_split_bytes[FS_SIZE_CLASSES];
    fs_stat requested_bytes[FS_SIZE_CLASSES];
    /* PyTorch's: live blocks and whole segments of max_split_size or more */
    fs_stat oversize_allocations;
    fs_stat oversize_segments;
    int64_t num_alloc_retries;
    int64_t num_ooms;
    int64_t num_sync_all_streams;
    int64_t num_device_alloc;
    int64_t num_device_free;
    /* Beyond PyTorch: frees waiting on events and their bytes, and the largest free block. */
    int64_t pending_frees;
    int64_t pending_free_bytes;
    int64_t largest_free_block;
} fs_alloc_stats;

/* Fills `out` for `device` (sums over every device when -1). */
void fs_alloc_get_stats(fs_allocator *a, int device, fs_alloc_stats *out);

/* The free cached bytes of one stream's pools. */
typedef struct fs_stream_free {
    fs_stream_t stream;
    bool retired; /* the stream was destroyed; its blocks wait to be adopted or released */
    size_t bytes;
} fs_stream_free;

/* The streams of `device` whose pools hold the most free cached bytes,
 * largest first, up to max of them into out. Returns how many streams hold
 * any; *total receives the free cached bytes of all of them. Takes the
 * device's registry lock and each pool's lock in turn, briefly, as
 * fs_alloc_get_stats does for the largest free block: for monitors polling
 * a few times a second, not for an allocation path. */
size_t fs_alloc_stream_free(fs_allocator *a, int device, fs_stream_free *out, size_t max,
                            size_t *total);

/* Restarts PyTorch's `allocated` and `freed` figures and the event counters
 * (num_alloc_retries and the like) from 0, the current values kept
 * (torch.cuda.reset_accumulated_memory_stats). */
void fs_alloc_reset_accumulated(fs_allocator *a, int device);

/* Caps what the allocator reserves on `device` at `bytes` (0: no cap but the
 * device's own size), as PyTorch's per-process memory fraction caps its
 * cache (torch.cuda.set_per_process_memory_fraction): a miss that would
 * grow past it gives back cached segments and tries again, as when the
 * device is full, then fails as out of memory. Memory already reserved
 * stays; a lower cap only stops growth. */
void fs_alloc_set_limit(fs_allocator *a, int device, size_t bytes);

/* ---- checkpoints of private pools (checkpoint.c) ----------------------- */

/* A private pool's layout: its segments, each with its blocks in address
 * order (PyTorch's checkpoint state, for CUDA graph trees). */
typedef struct fs_checkpoint fs_checkpoint;
typedef struct fs_checkpoint_segment {
    uintptr_t base;
    size_t size;
    fs_stream_t stream;    /* the stream its pool serves */
    size_t first, nblocks; /* its blocks in the checkpoint's block list */
} fs_checkpoint_segment;
typedef struct fs_checkpoint_block {
    uintptr_t addr;
    size_t size;
    bool live;
} fs_checkpoint_block;

/* Takes the layout of private pool `priv` of `device`, after retiring the
 * frees whose streams have passed them. FS_ERR_INVALID, with `why`, when
 * a free still waits for its streams or a segment is expandable. */
fs_status fs_alloc_checkpoint(fs_allocator *a, int device, uint64_t priv, fs_checkpoint **out,
                              char *why, size_t len);
void fs_checkpoint_free(fs_checkpoint *c);
/* The checkpoint's segments (returned: how many) and blocks. */
size_t fs_checkpoint_segments(const fs_checkpoint *c, const fs_checkpoint_segment **segs,
                              const fs_checkpoint_block **blocks);
/* Puts the layout back: every live block of the pool is freed (its
 * address into *freed), each segment of the checkpoint is cut into its
 * blocks and those live in it are live again (into *made), each with its
 * size as its request, on the stream of its pool; segments made since stay
 * free in the pool. The arrays are the caller's to free(). Nothing changes
 * when FS_ERR_INVALID (with `why`) says the layout cannot be put back: a
 * segment given back since, a free still waiting for its streams. */
fs_status fs_alloc_restore(fs_allocator *a, const fs_checkpoint *c, uintptr_t **freed,
                           size_t *nfreed, uintptr_t **made, size_t *nmade, char *why, size_t len);

/* The configuration in force. */
void fs_alloc_config_get(const fs_allocator *a, fs_alloc_config *out);

/* What a program may change while it runs (PyTorch's
 * _set_allocator_settings): max_split_size, roundup_divisions,
 * garbage_collection_threshold and expandable_segments take cfg's values
 * for the requests from now on (segments and blocks already made stay as
 * they are); every other key keeps the value the allocator was created
 * with. */
void fs_alloc_tune(fs_allocator *a, const fs_alloc_config *cfg);

/* The cap fs_alloc_set_limit set on `device`, 0 when none. */
size_t fs_alloc_limit(fs_allocator *a, int device);

/* Resets peaks to current values (torch.cuda.reset_peak_memory_stats). */
void fs_alloc_reset_peak(fs_allocator *a, int device);

/* Writes a torch.cuda.memory_summary()-shaped text into buf (NUL
 * terminated, truncated to len). Returns the length it needed. */
size_t fs_alloc_summary(fs_allocator *a, int device, char *buf, size_t len);

/* What a walk over every segment of a device found, block by block. */
typedef struct fs_alloc_census {
    size_t segments;
    size_t live_blocks, live_bytes, requested_bytes;
    size_t free_blocks, free_bytes, split_free_blocks; /* split: shares its segment */
    size_t pending_blocks, pending_bytes;              /* unfenced or waiting on events */
    size_t mapped_bytes;                               /* every segment's backed bytes */
} fs_alloc_census;

/* Walks every segment and block of `device` under the allocator's locks and
 * checks its invariants: blocks tile each segment exactly, no two free
 * neighbours are left uncoalesced, free bins hold exactly the free blocks,
 * and the walk agrees with the statistics. Returns NULL when all hold,
 * else a static description of the first broken one. For tests and
 * debugging: it stops every stream of the device while it runs. */
const char *fs_alloc_check(fs_allocator *a, int device, fs_alloc_census *out);

/* One segment, or one block of a segment, as fs_alloc_walk finds it. */
typedef enum fs_walk_state {
    FS_WALK_SEGMENT, /* a segment: addr, size = its mapped bytes, expandable */
    FS_WALK_LIVE,    /* a block handed out */
    FS_WALK_CACHED,  /* a free block in the cache */
    FS_WALK_PENDING, /* freed by the program, waiting for its streams */
} fs_walk_state;

typedef struct fs_walk_entry {
    fs_walk_state state;
    fs_stream_t stream; /* the owning pool's stream */
    uintptr_t addr;
    /* requested: what a live or pending block was asked for; a cached
     * one's last request (0 if never handed out), as PyTorch's snapshot
     * shows an inactive block */
    size_t size, requested;
    bool expandable;
    bool large;    /* of the large pool (blocks over 1 MiB), not the small one */
    uint64_t priv; /* the private pool it belongs to, 0 for the shared cache */
} fs_walk_entry;

/* Copies every segment of `device`, each followed by its mapped blocks in
 * address order, into out (at most max entries), under the allocator's locks
 * as fs_alloc_check takes them (every stream of the device waits meanwhile,
 * so the copy is one consistent picture; nothing else runs under them).
 * Returns how many entries the device has: more than max means the copy was
 * cut, and the caller may call again with room for them. */
size_t fs_alloc_walk(fs_allocator *a, int device, fs_walk_entry *out, size_t max);

/* ---- observation (traces) --------------------------------------------- */

typedef struct fs_oom_info {
    int device;
    fs_stream_t stream;
    size_t requested;     /* bytes asked for */
    size_t allocated;     /* bytes in live blocks */
    size_t reserved_free; /* reserved but not allocated */
    size_t largest_free;  /* largest free block */
    size_t reserved;      /* all reserved bytes */
    size_t other_free;    /* free cached bytes in the pools of other streams */
    size_t pending;       /* bytes of freed blocks still waiting for their streams */
} fs_oom_info;

typedef enum fs_alloc_event_kind {
    FS_EV_ALLOC,
    FS_EV_FREE_REQUESTED,
    FS_EV_FREE_COMPLETED,
    FS_EV_SEGMENT_ALLOC,
    FS_EV_SEGMENT_FREE,
    FS_EV_SEGMENT_MAP,
    FS_EV_SEGMENT_UNMAP,
} fs_alloc_event_kind;

/* One event, as an observer sees it. */
typedef struct fs_alloc_event {
    fs_alloc_event_kind kind;
    int device;
    fs_stream_t stream;  /* the block's (or the growing pool's) stream; 0 none */
    uintptr_t addr;      /* the block, or the segment's range */
    size_t size;         /* the block's rounded size, or the segment's bytes */
    size_t requested;    /* allocation and free events: the bytes asked for */
    int pool;            /* FS_SIZE_SMALL or FS_SIZE_LARGE; FS_SIZE_ALL for segment events */
    size_t allocated;    /* the device's bytes in live blocks, after the event */
    size_t reserved;     /* the device's reserved bytes, after the event */
    size_t capacity;     /* the device's total memory; 0 unknown */
    bool stream_ordered; /* alloc, free_requested: through the stream-ordered API
                            (fs_malloc's FS_ALLOC_STREAM_ORDERED, fs_free_async) */
} fs_alloc_event;

/* Optional callbacks; they must not call back into the allocator. The two
 * free events come with the block's pool locked, so that they precede any
 * reuse of the block; the others outside the allocator's locks. Nothing is
 * read for an event (totals included) while no observer is set. */
typedef struct fs_alloc_observer {
    void *ctx;
    void (*on_event)(void *ctx, const fs_alloc_event *ev);
    void (*on_oom)(void *ctx, const fs_oom_info *info);
} fs_alloc_observer;

void fs_alloc_set_observer(fs_allocator *a, const fs_alloc_observer *obs);

#endif /* FS_ALLOCATOR_H */
