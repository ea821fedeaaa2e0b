/* torch_api.h - what libfsdpshim.so hands the PyTorch adapter: a table of
 * plain C functions over the shim's allocator, passed to the adapter's
 * fsdpshim_torch_install() when the shim loads it (pytorch/install.c).
 *
 * The adapter (pytorch/adapter/, the product's one C++ part) implements
 * PyTorch's c10::cuda::CUDACachingAllocator::CUDAAllocator by calling these
 * and nothing else of the shim's; this header is C, included from C++ as
 * well, so it uses no C11-only types. The table is versioned: an adapter
 * built for another version of it refuses to install (a different layout
 * would call the wrong function), and so does the shim's side for an
 * adapter built from another tree (FS_TORCH_API_VERSION below). */
#ifndef FS_TORCH_API_H
#define FS_TORCH_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever the table or a struct below changes. */
#define FS_TORCH_API_VERSION 10

/* Results of the table's calls. */
enum fs_torch_status {
    FS_TORCH_OK = 0,
    FS_TORCH_OOM,       /* out of memory after the allocator's release-and-retry */
    FS_TORCH_NOT_OWNED, /* not a block of the shim's */
    FS_TORCH_ERROR,     /* the device failed a call, or the shim is not active */
};

/* One statistic as PyTorch counts it. */
typedef struct fs_torch_stat {
    int64_t current, peak, allocated, freed;
} fs_torch_stat;

/* PyTorch's DeviceStats, from the allocator's own figures; arrays are
 * indexed all, small pool, large pool, as PyTorch's StatType. */
typedef struct fs_torch_stats {
    fs_torch_stat allocation[3], segment[3], active[3], inactive_split[3];
    fs_torch_stat allocated_bytes[3], reserved_bytes[3], active_bytes[3];
    fs_torch_stat inactive_split_bytes[3], requested_bytes[3];
    fs_torch_stat oversize_allocations, oversize_segments; /* of max_split_size or more */
    int64_t num_alloc_retries, num_ooms, num_sync_all_streams;
    int64_t num_device_alloc, num_device_free;
    int64_t largest_free_block;
    int64_t max_split_size; /* bytes; 0 when unlimited, as PyTorch reports it */
} fs_torch_stats;

/* What an out-of-memory left behind, for PyTorch's message and observers. */
typedef struct fs_torch_oom {
    size_t requested, allocated, reserved, device_free, device_total;
    char why[512]; /* the shim's explanation, one line */
} fs_torch_oom;

/* One segment, or one of its blocks, for snapshot(): each segment is
 * followed by its blocks in address order. */
enum fs_torch_walk_state {
    FS_TORCH_SEGMENT,
    FS_TORCH_LIVE,    /* handed out */
    FS_TORCH_CACHED,  /* free in the cache */
    FS_TORCH_PENDING, /* freed, waiting for its streams' work */
};

typedef struct fs_torch_walk_entry {
    int state;    /* enum fs_torch_walk_state */
    void *stream; /* the cudaStream_t the segment's pool serves (NULL: the default stream) */
    uintptr_t addr;
    size_t size, requested; /* requested: a cached block's last request */
    int large, expandable;
    uint64_t pool; /* the private pool it belongs to, 0 for the shared cache */
} fs_torch_walk_entry;

/* An allocator event for PyTorch's allocator trace trackers and memory
 * history: a segment's, or a block's deferred free completing (its
 * recorded streams' work done). */
enum fs_torch_segment_action {
    FS_TORCH_SEGMENT_ALLOC,
    FS_TORCH_SEGMENT_FREE,
    FS_TORCH_SEGMENT_MAP,
    FS_TORCH_SEGMENT_UNMAP,
    FS_TORCH_FREE_COMPLETED,
};
typedef void (*fs_torch_segment_fn)(void *ctx, int action, int device, uintptr_t addr, size_t size,
                                    void *stream);

/* A live block, as PyTorch's trace entries name it. */
typedef struct fs_torch_block {
    int device;
    void *stream; /* the cudaStream_t it was allocated for */
    uintptr_t addr;
    size_t size;      /* rounded */
    size_t requested; /* the bytes asked for */
} fs_torch_block;

/* The allocator settings PyTorch lets a program change while it runs
 * (torch.cuda.memory._set_allocator_settings), as PyTorch has parsed them:
 * max_split_size (SIZE_MAX: none), roundup_power2_divisions per interval
 * from 1 MiB (PyTorch's 16), garbage_collection_threshold (0: off),
 * expandable_segments; with the keys the settings string named. */
enum fs_torch_setting {
    FS_TORCH_SET_MAX_SPLIT = 1,
    FS_TORCH_SET_ROUNDUP = 2,
    FS_TORCH_SET_GC = 4,
    FS_TORCH_SET_EXPANDABLE = 8,
};
typedef struct fs_torch_settings {
    int named; /* the fs_torch_setting bits of the keys the string named */
    size_t max_split_size;
    unsigned roundup_divisions[16];
    double garbage_collection_threshold;
    int expandable_segments;
} fs_torch_settings;

/* How a private pool behaves (PyTorch's MemPool and CUDA graph pools;
 * fs_alloc_private_configure): held while PyTorch's use count is above 0,
 * lending on out of memory (use_on_oom), no splitting (no_split), and its
 * segments from a source of its own (a MemPool's allocator: whole
 * segments, returned by the source's free; 0 from segment_alloc is
 * success). The source is called inside a table call, on its thread: a
 * CUDA call it makes goes to the runtime, not the shim. */
typedef struct fs_torch_pool_conf {
    int held, lend_on_oom, no_split;
    int (*segment_alloc)(void *ctx, int device, size_t size, void **out);
    void (*segment_free)(void *ctx, int device, void *ptr, size_t size);
    void *segment_ctx;
} fs_torch_pool_conf;

typedef struct fs_torch_api {
    int version; /* FS_TORCH_API_VERSION */
    /* size > 0 bytes on device for stream (a cudaStream_t), in private
     * pool `pool` (0: the shared cache), stream-ordered as PyTorch's
     * allocator hands memory out: reusable on that stream at once after the
     * free. From cudaMalloc'd segments, as PyTorch's (IPC handles and NCCL
     * registration need them); during a graph capture too. On
     * FS_TORCH_OOM, *oom (if given) is filled. */
    int (*malloc)(int device, void *stream, uint64_t pool, size_t size, void **out,
                  fs_torch_oom *oom);
    /* PyTorch's free: stream-ordered on the stream the block was allocated
     * for, after the work of the streams recorded on it. */
    int (*free)(void *ptr);
    int (*record_stream)(void *ptr, void *stream);
    /* Every completed free block of the device back to the driver. */
    int (*empty_cache)(int device);
    void (*stats)(int device, fs_torch_stats *out);
    void (*reset_peak)(int device);
    void (*reset_accumulated)(int device);
    /* The segment around a live block: its base and size. */
    int (*base_allocation)(const void *ptr, void **base, size_t *size);
    /* The device a live block belongs to, or -1. */
    int (*device_of)(const void *ptr);
    /* Every segment of the device with its blocks, one consistent picture,
     * into out (at most max); returns how many there are (more than max:
     * call again with room for them). */
    size_t (*walk)(int device, fs_torch_walk_entry *out, size_t max);
    /* From now on, fn hears of every segment the table's own calls (malloc,
     * free, empty_cache) allocate, free, map or unmap, and every deferred
     * free they complete, on the calling thread, after the call has left
     * the allocator (no lock of the shim's held), in the order they
     * happened. Set once. */
    void (*segment_hook)(fs_torch_segment_fn fn, void *ctx);
    /* Caps what the shim reserves on the device at `bytes`, 0 for none
     * (PyTorch's per-process memory fraction; fs_alloc_set_limit). */
    void (*set_limit)(int device, size_t bytes);
    /* The live block containing ptr; FS_TORCH_NOT_OWNED otherwise. */
    int (*block_of)(const void *ptr, fs_torch_block *out);
    /* Private pool `pool` (not 0) of the device behaves as conf says from
     * now on; let go (held 0), it is forgotten once it holds no memory. */
    void (*pool_configure)(int device, uint64_t pool, const fs_torch_pool_conf *conf);
    /* empty_cache for one private pool: nothing while it is held. */
    int (*pool_empty)(int device, uint64_t pool);
    /* PyTorch's uncached path (its caching switched off): the device's own
     * cudaMalloc and cudaFree, outside the shim's cache and statistics. */
    int (*device_malloc)(int device, size_t size, void **out);
    int (*device_free)(void *ptr);
    /* A private pool's layout (PyTorch's checkpoint state, for CUDA graph
     * trees): taken by checkpoint (NULL, with why, when it cannot be: a
     * free still waiting for its streams, an expandable segment), freed by
     * checkpoint_free. restore puts it back: every live block of the pool
     * freed, the checkpoint's live blocks live again at their addresses;
     * then, outside the shim, freed() hears of each address freed and
     * made() of each block made live. FS_TORCH_ERROR, with why, when it
     * cannot be put back; nothing has changed then. */
    void *(*checkpoint)(int device, uint64_t pool, char *why, size_t len);
    int (*restore)(void *checkpoint, void (*freed)(void *ctx, uintptr_t addr),
                   void (*made)(void *ctx, uintptr_t addr), void *ctx, char *why, size_t len);
    void (*checkpoint_free)(void *checkpoint);
    /* Forgets the streams recorded on a live block, whose work the caller
     * knows to be ordered before its stream's next (a capture's graph
     * orders it): its free is then reusable at once on its stream. */
    int (*forget_uses)(void *ptr);
    /* New settings, for the requests from now on: the keys named take
     * their values, max_split_size, roundup and gc not named go back to the
     * shim's configuration at start, expandable_segments not named stays. */
    void (*tune)(const fs_torch_settings *s);
    /* The pages of an expandable segment under the live block at ptr, for
     * PyTorch's expandable-segment IPC: *n pages of *page bytes from
     * *first, each page's memory a file descriptor of this process's (into
     * fds, at most max), open until the page is unmapped.
     * FS_TORCH_NOT_OWNED: no live block there; FS_TORCH_ERROR: its segment
     * is not expandable (*page 0), or a page could not be exported. */
    int (*share_pages)(const void *ptr, size_t *page, uintptr_t *first, int *fds, int max, int *n);
} fs_torch_api;

/* The adapter's one entry point (looked up by name in the adapter's
 * library). `torch_key` names the PyTorch the process has loaded
 * ("2.15.0+cu132@<git hash>", from its torch/version.py): an adapter
 * compiled against another one refuses, since a different class layout
 * would corrupt memory. Installs the adapter as PyTorch's allocator unless
 * PyTorch's allocator is already in use or is not PyTorch's own (a
 * program's change_current_allocator). Returns 1 when installed, 0 when it
 * stepped aside, -1 on a mismatch; `why` says which, in one line. */
typedef int (*fs_torch_install_fn)(const fs_torch_api *api, const char *torch_key, char *why,
                                   size_t len);
#define FS_TORCH_INSTALL_SYMBOL "fsdpshim_torch_install"

#ifdef __cplusplus
}
#endif

#endif /* FS_TORCH_API_H */
