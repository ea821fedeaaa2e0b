/* internal.h - the allocator's own data structures and the functions its
 * files share, grouped by the file that owns them.
 *
 * Lock order (never taken the other way round):
 *   dev->lock (mutex)  ->  pool->lock  ->  dev->stats_lock | dev->ev_lock | dev->room_lock
 *   segindex (rwlock, read) -> pool->lock
 *   dev->lock  ->  dev->peak_lock  ->  dev->room_lock | dev->stats_lock
 * Nobody holds a pool lock across a device call, nor while taking the
 * segment index for writing: segments are detached from their pool first.
 * Two exceptions, both in "stats.c": a pool's lock is held while waiting
 * for peak_lock only by a pool that has parked (its critical section done),
 * and peak_lock's holder takes pool locks only by trying, treating a parked
 * pool as held. */
#ifndef FS_ALLOC_INTERNAL_H
#define FS_ALLOC_INTERNAL_H

#include "../common/compiler.h"
#include "allocator.h"
#include "lock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A cached alloc+free pair enters through fs_malloc and fs_free or
 * fs_free_async. Those three are flattened (every call on their path
 * inlined), which takes about a fifth of the instructions off the pair;
 * functions off the cached path are marked slow, so that flattening leaves
 * them out of line. */
#define FS_HOT_PATH  __attribute__((flatten))
#define FS_SLOW_PATH __attribute__((noinline, cold))

#define FS_KiB             ((size_t)1024)
#define FS_MiB             ((size_t)1024 * 1024)
#define FS_MIN_BLOCK       ((size_t)512) /* every block is a multiple of this */
#define FS_SMALL_SIZE      FS_MiB        /* largest request served from the small pool */
#define FS_SMALL_BUFFER    (2 * FS_MiB)  /* small pool segment */
#define FS_LARGE_BUFFER    (20 * FS_MiB) /* PyTorch's kLargeBuffer: large_segment_mb's default */
#define FS_MIN_LARGE_ALLOC (10 * FS_MiB) /* from here a request has a segment of its own */
#define FS_ROUND_LARGE     (2 * FS_MiB)

enum { FS_KIND_SMALL, FS_KIND_LARGE, FS_KINDS }; /* == FS_SIZE_SMALL - 1, FS_SIZE_LARGE - 1 */

/* Free blocks are kept in sets by size kind and by what memory their
 * segment is: a stream-ordered allocation (cudaMallocAsync) only ever
 * lives in ordered segments and a plain one (cudaMalloc) in plain ones, so
 * that a device reset destroys exactly the memory the runtime would. The
 * statistics know size kinds only. */
#define FS_SETS (2 * FS_KINDS)
static inline int fs_set_of(int kind, bool ordered)
{
    return kind + (ordered ? FS_KINDS : 0);
}
static inline int fs_set_kind(int set)
{
    return set % FS_KINDS;
}

typedef enum fs_block_state {
    FS_BLOCK_FREE,     /* in its pool's free bins */
    FS_BLOCK_LIVE,     /* handed out */
    FS_BLOCK_UNFENCED, /* freed with device semantics, waiting for the next batch fence */
    FS_BLOCK_PENDING,  /* freed, waiting for its fences' events */
    /* expandable segments: whole pages of the reservation with no memory
     * mapped behind them (or being unmapped). Never in a bin, never merged
     * with a free block; only the holder of dev->lock makes, splits, merges
     * or maps them, so it may use them across a device call. */
    FS_BLOCK_UNMAPPED,
} fs_block_state;

struct fs_stream_cache;
struct fs_segment;
struct fs_dev;

/* Events that must all complete. A batch fence (batch_seq != 0) is done
 * when it and every earlier batch of its device are; any other fence may
 * also wait for the batch numbered after_batch. */
struct fs_fence {
    atomic_int refs;
    atomic_bool done; /* sticky: set by the first query that saw everything complete */
    _Atomic uint64_t after_batch;
    uint64_t batch_seq;
    struct fs_fence *fifo_next; /* the device's queue of batches */
    int device;
    unsigned epoch; /* the device's reset count when the events were made */
    int n;
    fs_event_t ev[];
};

/* Laid out by use: the first cache line is all that best-fit search,
 * split and coalescing read, the second what a hand-out and a plain free
 * write, the rest serves pending frees and record-stream. */
typedef struct fs_block {
    uintptr_t addr;
    size_t size;
    struct fs_block *prev, *next;  /* address neighbours inside the segment */
    struct fs_block *left, *right; /* neighbours in its free bin */
    struct fs_segment *seg;
    fs_block_state state;
    uint32_t bin; /* its free bin, while in one */
    size_t requested;
    fs_stream_t stream;        /* stream the live block was handed to */
    struct fs_block *map_next; /* live map chain */
    uint64_t free_seq;         /* stream-ordered free number in its pool; 0 = completed */
    uint32_t gc_age;           /* misses the block has sat free through */
    int nuses, capuses;
    fs_stream_t *uses;              /* streams recorded while live */
    struct fs_block *lnext, *lprev; /* pending / unfenced list */
    fs_fence *fence;                /* device batch fence or free_async event */
    fs_fence *uses_fence;           /* events of record_stream uses */
    fs_stream_t ready_stream;       /* pending, yet reusable at once on this stream ... */
    bool has_ready;                 /* ... when this is set */
    uint64_t dev_seq;               /* device-ordered free number on its device; 0 = none */
} fs_block;

/* An expandable segment's blocks tile its whole reservation: the pages
 * with nothing mapped are FS_BLOCK_UNMAPPED blocks, page-aligned at both
 * ends and never next to one another. Every page is mapped by a driver
 * call of its own, so any page can be unmapped alone. */
typedef struct fs_segment {
    uintptr_t base;
    size_t size;    /* bytes backed by memory (mapped pages when expandable) */
    size_t reserve; /* expandable: bytes of address space reserved; else 0 */
    size_t page;    /* expandable: the mapping granule; else 0 */
    size_t extent;  /* the range the index answers for (reserve, else size):
                     * set before the segment enters the index, never
                     * changed, so readers need the index lock alone */
    struct fs_stream_cache *pool;
    int kind;
    int pinned;
    bool ordered; /* serves stream-ordered blocks: FS_SEG_ORDERED memory or mappings */
    bool expandable;
    bool detached; /* being released: no longer in its pool */
    fs_block *head;
    struct fs_segment *next, *prev; /* the pool's segments */
} fs_segment;

/* Free blocks of one pool kind in (size, address) order ("bins.c"). */
#define FS_BIN_EXACT_LOG   15 /* below 32 KiB: a bin per size */
#define FS_BIN_EXACT_LIMIT ((size_t)1 << FS_BIN_EXACT_LOG)
#define FS_BIN_EXACT       (FS_BIN_EXACT_LIMIT / FS_MIN_BLOCK) /* 64 */
#define FS_BIN_SUB_BITS    6                                   /* then 64 bins per power of two */
#define FS_BINS            (64 * 26) /* up to 1 TiB, the rest in the last */
typedef struct fs_bins {
    struct fs_block *bin[FS_BINS];
    uint64_t map[FS_BINS / 64];
    uint32_t summary;
} fs_bins;

/* A pool's live blocks by address ("blockmap.c"). */
typedef struct fs_livemap {
    struct fs_block **tab;
    size_t mask, n;
} fs_livemap;

typedef struct fs_blist {
    fs_block *head;
    size_t n;
} fs_blist;

/* Statistics ("stats.c"). The fields blocks change are kept per pool and
 * come first; the ones segments change are kept per device. */
enum fs_stat_field {
    FS_ST_ALLOCATION,
    FS_ST_ALLOCATED_BYTES,
    FS_ST_REQUESTED_BYTES,
    FS_ST_ACTIVE,
    FS_ST_ACTIVE_BYTES,
    FS_ST_INACTIVE_SPLIT,
    FS_ST_INACTIVE_SPLIT_BYTES,
    FS_ST_POOL_FIELDS,
    FS_ST_SEGMENT = FS_ST_POOL_FIELDS,
    FS_ST_RESERVED_BYTES,
    FS_ST_FIELDS
};
#define FS_ST_DEV_FIELDS (FS_ST_FIELDS - FS_ST_POOL_FIELDS)

/* One pool kind's counters in a pool, in the order a change reaches them. */
typedef struct fs_stat_row {
    /* written only under the pool's lock; allocated bytes, which an
     * observer sums without it, with relaxed atomic accesses (the others
     * plain: atomics on all seven cost a cached pair 3-4 ns) */
    int64_t cur[FS_ST_POOL_FIELDS];
    int64_t total[FS_ST_POOL_FIELDS]; /* every rise: PyTorch's `allocated` */
    /* a rise past room is settled with the device; below low, room goes back */
    int64_t room[FS_ST_POOL_FIELDS], low[FS_ST_POOL_FIELDS];
} fs_stat_row;

/* A pool's part of its device's statistics, under the pool's lock: the
 * cached hot path writes nothing else of the statistics. Counters are kept
 * by pool kind; each of the 21 (field, small|large|all) has a room, this
 * pool's share of the device's peak (see "stats.c"). */
typedef struct fs_cache_stats {
    fs_stat_row row[FS_KINDS];
    int64_t room_all[FS_ST_POOL_FIELDS], low_all[FS_ST_POOL_FIELDS]; /* both kinds together */
    int64_t pending_frees, pending_free_bytes;
    uint32_t over, give; /* counters (bit slot * FS_ST_POOL_FIELDS + field) past room, below low */
    /* settling: the pool waits for peak_lock with its section done; held
     * still by peak_lock's holder (its lock taken by trying) */
    atomic_bool parked;
    bool stopped;
    int victim;    /* the pool settling tries first to take unused room from */
    uint32_t took; /* counters whose last settling took other pools' room */
    /* for counters past room: the value before, and the most since */
    int64_t before[FS_SIZE_CLASSES][FS_ST_POOL_FIELDS];
    int64_t high[FS_SIZE_CLASSES][FS_ST_POOL_FIELDS];
} fs_cache_stats;

typedef struct fs_stream_cache {
    _Alignas(64) fs_spin lock; /* the struct starts and ends on a line of its own */
    struct fs_dev *dev;
    fs_stream_t stream;
    enum fs_stream_kind kind;
    atomic_bool retired;  /* its stream was destroyed; never matched by handle */
    atomic_bool had_work; /* work issued since the last batch fence */
    fs_bins free[FS_SETS];
    size_t free_bytes[FS_SETS];
    fs_blist pending, unfenced;
    fs_livemap live; /* live blocks of its segments */
    fs_segment *segs;
    fs_segment *expandable[FS_SETS];
    unsigned frees; /* paces pending retirement on the free path */
    /* Stream-ordered frees are reusable at once on the pool's own stream, by
     * other streams only once a mark event recorded after them completes. */
    uint64_t so_seq, so_done, mark_seq;
    fs_fence *mark;
    /* A per-thread stream's pool whose thread has exited with work perhaps
     * still queued: its stream-ordered frees serve other streams once the
     * host has synchronised with the whole device at or past this token
     * (see fs_alloc_stream_exit); 0 otherwise. */
    uint64_t exit_token;
    /* The newest batch its stream waits for on the GPU on behalf of every
     * stream (fs_fence_gpu_wait_all): later batches only need a wait of
     * their own. Under dev->lock. */
    uint64_t all_waited;
    fs_block *spare; /* recycled block metadata */
    size_t nspare;
    struct fs_stream_cache *hash_next; /* registry chain (live pools only) */
    /* A private pool's name (fs_malloc_private), 0 for the shared cache's
     * pools; a private pool is never in the registry ("private.c"). Its
     * configuration changes under dev->lock; no_split, read by splits
     * under the pool's lock alone, is its copy for them. */
    uint64_t priv;
    fs_private_conf pconf;
    atomic_bool no_split;
    fs_cache_stats st;
} fs_stream_cache;

/* A pool's lock. Every critical section on a pool goes through these two,
 * so that leaving one can finish what the section owes the device (see
 * fs_cache_unlock with the statistics). */
static inline void fs_cache_lock(fs_stream_cache *p)
{
    fs_spin_lock(&p->lock);
}

void fs_stats_settle(fs_stream_cache *p); /* "stats.c" */

static inline void fs_cache_unlock(fs_stream_cache *p)
{
    if (__builtin_expect((p->st.over | p->st.give) != 0, 0)) fs_stats_settle(p);
    fs_spin_unlock(&p->lock);
}

/* A device's own statistics, under dev->stats_lock: the fields segments
 * change, with exact peaks (the all-pools peak kept too: a sum of peaks is
 * not a peak), and the event counters. Only misses and releases write them. */
typedef struct fs_dev_stats {
    _Atomic int64_t cur[FS_KINDS][FS_ST_DEV_FIELDS]; /* relaxed: an observer reads them unlocked */
    int64_t total[FS_KINDS][FS_ST_DEV_FIELDS];
    int64_t peak[FS_SIZE_CLASSES][FS_ST_DEV_FIELDS]; /* indexed FS_SIZE_ALL, _SMALL, _LARGE */
    int64_t num_alloc_retries, num_ooms, num_sync_all_streams, num_device_alloc, num_device_free;
    /* Where PyTorch's `allocated` and `freed` count from since the last
     * reset_accumulated: the totals and current values then, by kind and
     * field (pool fields and the device's own). */
    int64_t acc_total[FS_KINDS][FS_ST_FIELDS], acc_cur[FS_KINDS][FS_ST_FIELDS];
    /* PyTorch's two figures without pool kinds, kept as it keeps them */
    fs_stat oversize_allocations, oversize_segments;
} fs_dev_stats;

/* The device's pools as a reader without a lock sees them: immutable once
 * published, replaced whole, kept until the allocator is destroyed. */
typedef struct fs_cache_view {
    int n;
    fs_stream_cache *pools[];
} fs_cache_view;

/* Fields are grouped by who writes them how often, each group on cache
 * lines of its own: what misses, device-ordered frees or settling
 * statistics write must not slow down the threads that only read `gen`
 * on their hot path. */
/* A private pool's configuration, kept by its device from the first call
 * that names it until it is let go and holds no memory. */
typedef struct fs_private_entry {
    uint64_t priv;
    fs_private_conf conf;
} fs_private_entry;

typedef struct fs_dev {
    pthread_mutex_t lock; /* registry, pool list, batch fences, growth */
    fs_allocator *a;
    int id;
    fs_stream_cache **pools; /* every pool, live and retired: changed under lock and peak_lock */
    int npools, cappools;
    _Atomic(fs_cache_view *) view; /* the same, for fs_observe */
    void **dead; /* replaced views and destroyed pools, freed at teardown; under lock */
    int ndead, capdead;
    fs_stream_cache *hash[64]; /* live pools by stream handle */
    fs_private_entry *privs;   /* private pools' configurations, under lock */
    int nprivs, capprivs;
    fs_stream_t legacy;
    fs_fence *last_batch; /* the newest batch fence (a reference) */
    /* The newest batch fence every stream of the device was made to wait
     * for on the GPU, so that a cudaMalloc could take a block whose
     * device-ordered free is still pending (a reference; see
     * fs_fence_gpu_wait_all): a stream the device learns of later waits
     * for it as well. Beside it, the recorded-use fences of such blocks
     * not known complete (references; streams waited for each). */
    fs_fence *all_wait;
    fs_fence **all_uses;
    int nall_uses, capall_uses;
    fs_spin batch_lock; /* the queue of batches not known complete */
    fs_fence *fifo_head, *fifo_tail;
    uint64_t batch_seq;
    size_t reserved_high; /* the most ever reserved; under `lock`, see keep_peak */
    _Atomic size_t limit; /* the most it may reserve, 0 for the device's size */
    /* ops->mem_capacity, asked at the device's first miss before its lock
     * is taken (fs_dev_learn_capacity); SIZE_MAX until then, 0 unknown */
    _Atomic size_t capacity;
    _Atomic uint64_t batch_done; /* every batch up to this one has completed */
    /* Host-sync tokens (numbers from dev_frees), written under `lock`: the
     * latest a thread's exit took while its per-thread stream may still have
     * had work, and the latest a whole-device synchronisation covered. While
     * the first is ahead, no device-ordered free is reusable on the strength
     * of its events alone (see fs_alloc_stream_exit). */
    _Atomic uint64_t exit_token, synced_token;
    fs_spin ev_lock;
    fs_event_t *evcache;
    int nev, capev;
    /* read on the hot path, written rarely */
    _Alignas(64) atomic_uint gen; /* bumped when the handle -> pool mapping changes */
    atomic_uint epoch;            /* bumped by cudaDeviceReset: older events are dead */
    /* written by every miss, read by frees */
    _Alignas(64) atomic_uint gc_clock; /* misses so far: the age unit of garbage collection */
    /* written by every device-ordered free */
    _Alignas(64) atomic_long unfenced; /* blocks waiting for a batch fence, all pools */
    _Atomic uint64_t dev_frees;        /* device-ordered frees so far: host-sync tokens */
    /* statistics ("stats.c"): the device's own, then the peaks of the
     * pools' counters (written by settling), then the room no pool holds
     * (written by a rise or fall beyond what a pool keeps) */
    _Alignas(64) fs_spin stats_lock;
    fs_dev_stats st;
    _Alignas(64) fs_spin peak_lock;
    int64_t peak[FS_SIZE_CLASSES][FS_ST_POOL_FIELDS];
    atomic_int pools_at_work; /* when room was last dealt: how many pools share it */
    int64_t gone_total[FS_KINDS][FS_ST_POOL_FIELDS]; /* `total` of pools destroyed by a reset */
    _Alignas(64) fs_spin room_lock;
    int64_t free_room[FS_SIZE_CLASSES][FS_ST_POOL_FIELDS];
} fs_dev;

/* The observer in force; replaced ones are kept (a caller may still be
 * inside one) until the allocator is destroyed. */
typedef struct fs_observer_node {
    fs_alloc_observer obs;
    struct fs_observer_node *next;
} fs_observer_node;

/* The configuration in force. fs_alloc_tune replaces it whole (readers
 * take no lock: each loads the pointer and reads one consistent copy); the
 * replaced ones stay, chained, until the allocator is destroyed, since a
 * reader may still hold one. A program changes its settings a handful of
 * times at most. */
typedef struct fs_settings {
    fs_alloc_config cfg;
    bool plain_rounding; /* no roundup_power2_divisions: every size rounds to 512 bytes */
    struct fs_settings *older;
} fs_settings;

struct fs_allocator {
    fs_settings *settings; /* __atomic: see fs_settings */
    const fs_device_ops *ops;
    int ndev;
    unsigned serial;
    fs_dev *devs;
    /* Above: read by every allocation. Below: written by readers of the
     * index too (a read lock is a write to the lock word), on other lines. */
    _Alignas(64) pthread_rwlock_t segidx_lock;
    fs_segment **segidx; /* every segment, sorted by base */
    size_t nseg, capseg;
    _Atomic(struct fs_observer_node *) obs;
    struct fs_observer_node *obs_old;      /* replaced observers, freed at destroy */
    _Alignas(64) pthread_mutex_t obs_lock; /* also serialises fs_alloc_tune */
};

/* ---- "stats.c" --------------------------------------------------------- */
/* One change to a block's accounting: counts and bytes for one pool kind.
 * Counts are 32-bit so that the whole delta stays within 80 bytes, which
 * compilers zero with a few stores instead of a string instruction (string
 * zeroing of deltas and block metadata cost the cached pair about a tenth
 * of its time). */
typedef struct fs_delta {
    int32_t kind;
    int32_t allocation, active, inactive_split, segment, pending;
    int32_t oversize, oversize_segments; /* fs_oversize's blocks and whole segments */
    int64_t allocated_bytes, requested_bytes, active_bytes, inactive_split_bytes, reserved_bytes;
    int64_t pending_bytes;
} fs_delta;
/* Applies dl to pool p's counters (segment and reserved to its device's);
 * the caller holds p's lock. */
void fs_stats_apply(fs_stream_cache *p, const fs_delta *dl);
/* The same for the cached hot path's two deltas, faster: a block handed
 * out of the free bins (allocation and active up, inactive splits either
 * way), and a block put straight back (the reverse). Nothing else may change. */
void fs_stats_handout(fs_stream_cache *p, const fs_delta *dl);
void fs_stats_putback(fs_stream_cache *p, const fs_delta *dl);
void fs_stats_count(fs_dev *d, int64_t *field, int64_t by); /* a counter of d->st */
/* A consistent snapshot. The caller holds no pool lock (it holds every
 * pool still for a moment). */
void fs_stats_read(fs_dev *d, fs_alloc_stats *out);
/* Every pool of d held still (locked, or parked with its critical section
 * done) until fs_stats_resume, for a walker that must see blocks and
 * statistics agree; fs_stats_read_stopped reads them meanwhile. The
 * caller holds no pool lock. */
void fs_stats_stop(fs_dev *d);
void fs_stats_read_stopped(fs_dev *d, fs_alloc_stats *out);
void fs_stats_resume(fs_dev *d);
/* Device and allocated bytes as an observer reports them after an event:
 * each pool's figure as it stands, without a lock. */
void fs_stats_totals(fs_dev *d, size_t *allocated, size_t *reserved);
/* The device's reserved bytes now (the miss path's growth policy). */
size_t fs_stats_reserved(fs_dev *d);
/* the device's total memory (0 unknown), and asking for it (allocator.c) */
void fs_dev_learn_capacity(fs_allocator *a, fs_dev *d);
size_t fs_dev_capacity(fs_dev *d);
/* Pool lifetime, under d->lock: p joins the device's pools (false: out of
 * memory, nothing changed); the pools for which keep() says false leave
 * them (their counters must be at zero; their totals stay the device's),
 * drop() frees what they own, and the pools themselves are freed with the
 * device (fs_observe may still be reading their counters). */
bool fs_stats_pool_add(fs_dev *d, fs_stream_cache *p);
void fs_stats_pools_keep(fs_dev *d, bool (*keep)(fs_stream_cache *p),
                         void (*drop)(fs_stream_cache *p));
/* Keeps memory that a reader without a lock may still hold until the
 * allocator is destroyed (d->lock held); false when out of memory. */
bool fs_dev_keep_dead(fs_dev *d, void *mem);
/* Free cached bytes in the pools of streams other than `stream` (an OOM's
 * "soft" part: memory the request's stream may not take). Takes d->lock. */
size_t fs_stats_free_elsewhere(fs_dev *d, fs_stream_t stream);

/* ---- "size.c" ---------------------------------------------------------- */
size_t fs_round_size(const fs_alloc_config *cfg, size_t size); /* 0 when it would wrap */
bool fs_rounding_is_plain(const fs_alloc_config *cfg);
/* The segment that a miss grows for a block of `rounded` bytes on a device
 * whose cache reserves `reserved` bytes (docs/allocator.md, "Pools and
 * segments"), and the least segment that holds it, all a hot-path check
 * needs; both 0 when the size would wrap. */
size_t fs_segment_size(const fs_alloc_config *cfg, size_t rounded, size_t reserved);
size_t fs_segment_least(size_t rounded);
int fs_size_kind(size_t rounded);
bool fs_should_split(const fs_alloc_config *cfg, const fs_block *b, size_t size);

/* ---- "bins.c" ---------------------------------------------------------- */
void fs_bins_insert(fs_bins *s, fs_block *b);
void fs_bins_remove(fs_bins *s, fs_block *b);
fs_block *fs_bins_lower_bound(const fs_bins *s, size_t size); /* first (size, addr) >= size */
fs_block *fs_bins_next(const fs_bins *s, const fs_block *b);  /* the next in that order */
fs_block *fs_bins_first(const fs_bins *s);
fs_block *fs_bins_max(const fs_bins *s);

/* ---- "blockmap.c" ------------------------------------------------------ */
/* Callers hold the pool's lock. */
int fs_live_init(fs_livemap *m);
void fs_live_fini(fs_livemap *m);
void fs_live_insert(fs_livemap *m, fs_block *b);
fs_block *fs_live_remove(fs_livemap *m, uintptr_t addr);

/* ---- "segment.c" ------------------------------------------------------- */
typedef enum fs_release_mode {
    FS_RELEASE_LARGEST,    /* largest first, until `goal` bytes are released */
    FS_RELEASE_OLDEST,     /* garbage collection: oldest first, at least average age */
    FS_RELEASE_FITTING,    /* whole plain segments only, as few bytes beyond `goal` as can be */
    FS_RELEASE_EVERYTHING, /* as LARGEST, held private pools too: teardown, device reset */
} fs_release_mode;
void fs_block_free(fs_stream_cache *p, fs_block *b); /* caller holds p->lock; p may be NULL */
fs_block *fs_block_split(fs_stream_cache *p, fs_block *b, size_t size); /* the remainder, or NULL */
void fs_free_insert(fs_stream_cache *p, fs_block *b, fs_delta *dl); /* coalesce, then into a bin */
/* The same for the remainder of a split free block, fresh from
 * fs_block_split: its neighbours cannot be free (the block before is the
 * part just cut off, the one after did not border a free block). */
void fs_free_insert_rest(fs_stream_cache *p, fs_block *r, fs_delta *dl);
void fs_free_take(fs_stream_cache *p, fs_block *b, fs_delta *dl); /* out of its bin */
/* Caller holds dev->lock, no pool lock. */
fs_status fs_segment_grow(fs_allocator *a, fs_stream_cache *p, int set, size_t rounded, bool *oom);
size_t fs_segments_release(fs_allocator *a, fs_dev *d, fs_release_mode mode, size_t goal);
/* Every free segment (and free page) of private pool priv, held or not. */
size_t fs_segments_release_private(fs_allocator *a, fs_dev *d, uint64_t priv);
fs_segment *fs_segidx_find(fs_allocator *a, uintptr_t addr); /* caller holds segidx_lock */
/* Moves s, wholly free and completed, from one pool to another; false if it
 * no longer qualifies. Caller holds dev->lock, no pool lock. */
bool fs_segment_adopt(fs_allocator *a, fs_stream_cache *from, fs_stream_cache *to, fs_segment *s);
void fs_segidx_remove(fs_allocator *a, fs_segment *s);
/* Takes plain segment s, wholly free, out of its pool p for good without
 * giving its memory back (a device reset destroyed it), its accounting
 * into dl; p->lock held. The caller then takes it out of the index (no
 * pool lock held) and frees it. */
void fs_segment_unlink(fs_stream_cache *p, fs_segment *s, fs_delta *dl);

/* ---- "fence.c" --------------------------------------------------------- */
fs_fence *fs_fence_make(fs_dev *d, const fs_stream_t *streams, int n); /* NULL: deferred */
void fs_fence_get(fs_fence *f);
void fs_fence_put(fs_dev *d, fs_fence *f); /* f may be NULL */
/* Makes stream s wait on the GPU for f and every batch before it. */
fs_status fs_fence_gpu_wait(fs_allocator *a, fs_fence *f, fs_stream_t s);
/* Makes every stream of d wait on the GPU for batch fence f and for uses
 * (a block's recorded-use fence, or NULL), and the streams d learns of
 * later too. Caller holds dev->lock. */
fs_status fs_fence_gpu_wait_all(fs_allocator *a, fs_dev *d, fs_fence *f, fs_fence *uses);
/* A stream d has just learnt of (pool p) waits for what every stream was
 * made to wait for. Caller holds dev->lock. */
void fs_fence_wait_all_new(fs_allocator *a, fs_dev *d, fs_stream_cache *p);
void fs_blist_push(fs_blist *l, fs_block *b);
void fs_blist_del(fs_blist *l, fs_block *b);
/* Caller holds dev->lock and no pool lock. */
bool fs_batch_fence(fs_dev *d); /* false: a capture deferred it, blocks stay unfenced */
void fs_marks_record(fs_dev *d);
/* Waits on the host, polling until `deadline` (CLOCK_MONOTONIC ns), for
 * fence f, and for every batch before it; true when all completed. False
 * at the deadline, or at once while a capture is under way. */
bool fs_fence_wait_until(fs_allocator *a, fs_fence *f, uint64_t deadline);
uint64_t fs_now_ns(void);
/* Drops the queue of batch fences and the newest batch, without waiting:
 * the device is being torn down or was reset. */
void fs_batches_drop(fs_dev *d);
/* Retires what completed; with sync, waits for every outstanding event first
 * (and for the whole device while a thread's exit asks for it). */
void fs_dev_retire_all(fs_dev *d, bool sync);
size_t fs_cache_retire(fs_allocator *a, fs_stream_cache *p); /* caller holds p->lock */
/* A freed block (off its list) whose fences no longer matter goes back
 * into the free bins; its accounting into dl[kind]. Caller holds p->lock. */
void fs_block_retire(fs_allocator *a, fs_stream_cache *p, fs_block *b, fs_delta *dl);
/* Caller holds dev->lock and p->lock: the host synchronised with the whole
 * device after device-ordered free number `token` was made, so those frees
 * are reusable whatever their fences say (or before they have any), and so
 * is whatever threads that exited before the token left queued. */
size_t fs_cache_retire_synced(fs_allocator *a, fs_stream_cache *p, uint64_t token);
/* A thread exited with work perhaps queued on its per-thread stream, and no
 * whole-device synchronisation has covered that exit yet. */
bool fs_dev_exit_pending(fs_dev *d);
void fs_dev_events_fini(fs_dev *d, bool destroy);

/* ---- "private.c" ------------------------------------------------------- */
/* Whether q's blocks and segments may serve a request of pool p: pools of
 * the shared cache serve one another (cross_stream_reuse permitting), a
 * private pool only itself. */
static inline bool fs_cache_may_serve(const fs_stream_cache *q, const fs_stream_cache *p)
{
    return q->priv == p->priv && (!p->priv || q == p);
}
/* Whether a release of this mode may give back p's free memory: the shared
 * cache's always; a private pool's only once let go, and then only by a
 * release of everything free (empty_cache, the release-and-retry), as
 * PyTorch frees a released private pool; at teardown and device reset,
 * all (but segments of a pool's own source, which are left to it).
 * Caller holds dev->lock. */
bool fs_cache_releasable(const fs_stream_cache *p, fs_release_mode mode);
/* The private pool priv's pool for stream s, made on first use. */
fs_stream_cache *fs_private_get(fs_allocator *a, int device, fs_stream_t s, uint64_t priv);
/* For a shared-cache request on a full device: a free block of a private
 * pool that lends on out of memory, on the request's stream. Caller holds
 * dev->lock. */
fs_block *fs_private_lend(fs_allocator *a, fs_dev *d, int set, size_t rounded, size_t req,
                          fs_stream_t stream);
/* Forgets the private pools let go that hold no memory. Caller holds dev->lock. */
void fs_private_forget_spent(fs_dev *d);
void fs_private_fini(fs_dev *d); /* teardown */

/* ---- "stream.c" -------------------------------------------------------- */
/* The pool the calling thread last allocated from. Initial-exec TLS (as
 * mimalloc does): in the preloaded library the default model would call
 * __tls_get_addr on every allocation. */
typedef struct fs_tls_pool {
    unsigned serial; /* of the allocator */
    int device;
    unsigned gen; /* the device's gen when looked up */
    fs_stream_t s;
    fs_stream_cache *p;
} fs_tls_pool;
extern FS_TLS fs_tls_pool fs_tls_last_pool;

fs_stream_cache *fs_cache_lookup(fs_allocator *a, int device, fs_stream_t s); /* and remember it */
/* A new pool of d for stream s; in the registry unless private (priv != 0).
 * Caller holds dev->lock. */
fs_stream_cache *fs_cache_new(fs_dev *d, fs_stream_t s, enum fs_stream_kind kind, uint64_t priv);
/* What d knows stream s to be. Caller holds dev->lock. */
enum fs_stream_kind fs_stream_kind_locked(fs_dev *d, fs_stream_t s);
/* Frees what a pool without segments owns (not the pool itself, which a
 * reader of an old view may still look at). */
void fs_cache_drop(fs_stream_cache *p);

/* The pool of stream s: the thread's last one when it still is, without a lock. */
static inline fs_stream_cache *fs_cache_get(fs_allocator *a, int device, fs_stream_t s)
{
    const fs_tls_pool *t = &fs_tls_last_pool;
    if (t->serial == a->serial && t->device == device && t->s == s &&
        t->gen == atomic_load_explicit(&a->devs[device].gen, memory_order_acquire))
        return t->p;
    return fs_cache_lookup(a, device, s);
}

/* The pool this thread last allocated from, if it is still current and
 * (s != FS_ANY_STREAM) is the pool of stream s; else NULL. No lock taken. */
#define FS_ANY_STREAM ((fs_stream_t)-1)
static inline fs_stream_cache *fs_cache_guess(fs_allocator *a, fs_stream_t s)
{
    const fs_tls_pool *t = &fs_tls_last_pool;
    if (t->serial != a->serial || (s != FS_ANY_STREAM && t->s != s)) return NULL;
    if (t->gen != atomic_load_explicit(&a->devs[t->device].gen, memory_order_acquire)) return NULL;
    return t->p;
}

/* ---- "maint.c" ----------------------------------------------------------- */
/* Live block b of p (p->lock held) freed by the allocator itself, at once,
 * with its free events (a device reset destroyed it, a checkpoint put back
 * frees it): absorbs its free neighbours and stays, so b->next holds. Its
 * accounting into dl[kind]. */
void fs_live_drop(fs_allocator *a, fs_stream_cache *p, fs_block *b, fs_delta dl[FS_KINDS]);

/* ---- "free.c" ------------------------------------------------------------ */
/* Runs fn on the live block containing ptr (any interior address) under its
 * pool's lock; FS_ERR_NOT_OWNED when there is none. */
fs_status fs_with_live_block(fs_allocator *a, const void *ptr,
                             fs_status (*fn)(fs_block *b, void *arg), void *arg);

/* ---- "allocator.c" ----------------------------------------------------- */
/* The best fit among p's free blocks after retiring its completed frees,
 * handed out for stream; NULL when none fits. No pool lock held. */
fs_block *fs_cache_take_free(fs_allocator *a, fs_stream_cache *p, int set, size_t rounded,
                             size_t req, fs_stream_t stream);
/* stream_ordered: an alloc or free_requested through the stream-ordered API. */
void fs_observe(fs_allocator *a, fs_alloc_event_kind kind, int device, fs_stream_t s,
                uintptr_t addr, size_t size, size_t requested, bool stream_ordered);

static inline int fs_seg_set(const fs_segment *s)
{
    return fs_set_of(s->kind, s->ordered);
}

static inline bool fs_block_is_split(const fs_block *b)
{
    return b->prev || b->next;
}

static inline const fs_settings *fs_settings_now(const fs_allocator *a)
{
    return __atomic_load_n(&a->settings, __ATOMIC_ACQUIRE);
}

/* The configuration in force (fs_settings). */
static inline const fs_alloc_config *fs_cfg(const fs_allocator *a)
{
    return &fs_settings_now(a)->cfg;
}

/* PyTorch's oversize figures count live blocks and whole segments of
 * max_split_size or more, the setting in force when each is counted (as
 * PyTorch's): 1 if `size` is such. */
static inline int32_t fs_oversize(const fs_stream_cache *p, size_t size)
{
    return size >= fs_cfg(p->dev->a)->max_split_size;
}

/* fs_round_size without its general case when no divisions are configured. */
static inline size_t fs_round_request(const fs_allocator *a, size_t size)
{
    const fs_settings *s = fs_settings_now(a);
    if (s->plain_rounding && size <= SIZE_MAX - FS_MIN_BLOCK)
        return size < FS_MIN_BLOCK ? FS_MIN_BLOCK : (size + FS_MIN_BLOCK - 1) & ~(FS_MIN_BLOCK - 1);
    return fs_round_size(&s->cfg, size);
}

/* Zeroed memory on cache lines of its own (size rounded up to whole lines):
 * for what one thread writes on its hot path (a pool, its live map, a
 * segment), so that no other thread's data shares a line with it. A pool
 * and the next one malloc returned used to touch: one thread's split
 * bookkeeping at the end of its pool sat on the line of the next pool's
 * lock. NULL when out of memory. */
static inline void *fs_zalloc_lines(size_t size)
{
    size_t bytes = (size + 63) / 64 * 64;
    void *p = bytes >= size ? aligned_alloc(64, bytes) : NULL;
    if (p) memset(p, 0, bytes);
    return p;
}

static inline fs_dev *fs_dev_of(fs_allocator *a, int device)
{
    return (device >= 0 && device < a->ndev) ? &a->devs[device] : NULL;
}

#endif /* FS_ALLOC_INTERNAL_H */
