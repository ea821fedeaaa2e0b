/* internal.h - what the files of the simulated runtime share with each other,
 * grouped by the file that owns each piece.
 *
 * The library is built with -fvisibility=hidden and only the CUDA entry
 * points listed in libcudart.map leave it, plus, under the private node
 * FSDPSHIM_SIM_PRIVATE, the part of this device model that the simulated
 * driver (sim/cuda/, libcuda.so.1) works on: the map names each one. */
#ifndef FS_SIM_INTERNAL_H
#define FS_SIM_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "sim_private.h"

/* Every CUDA entry point is defined with this so the version script can
 * export it (the default visibility is hidden). */
#define FS_API __attribute__((visibility("default")))
/* The part of the model the simulated driver (sim/cuda/) works on: visible,
 * and exported under FSDPSHIM_SIM_PRIVATE by libcudart.map. */
#define FS_SEAM __attribute__((visibility("default")))
/* Exports the runtime entry point `name` a second time, as sim_rt_<name>
 * under FSDPSHIM_SIM_PRIVATE, for the simulated driver, whose call that is
 * the runtime call's own work (cuMemPoolCreate is cudaMemPoolCreate): a
 * call by the public name from libcuda.so.1 would bind to whatever the
 * process interposes on that name (libfsdpshim.so interposes on many), and
 * the driver must reach the model itself. Written after the definition (an
 * alias needs its target in the same file); sim/cuda/driver.h declares the
 * aliases the driver uses. */
#define SIM_RT_ALIAS(name)                                                                         \
    extern __typeof__(name) sim_rt_##name __attribute__((alias(#name), visibility("default")))

/* ---- init.c: process-wide configuration, set once on first use ---- */
struct fs_config {
    int ndevices;    /* FSDPSHIM_SIM_DEVICES, default 8 */
    size_t capacity; /* FSDPSHIM_SIM_MEM bytes per device, default 16 GiB */
    int stats;       /* FSDPSHIM_SIM_STATS=1: per-device counts at exit */
    /* FSDPSHIM_SIM_DATA, default 1. With 0 nothing reads or writes device
     * memory: its mappings stay PROT_NONE and copies, sets and collectives
     * keep their ordering and checks but move no bytes (a dry run). */
    int moves_data;
};
extern FS_SEAM struct fs_config fs_cfg;
FS_SEAM void fs_init(void);
/* Whether fs_init has run: the runtime initialises the driver on its first
 * call, so driver calls need no cuInit after one (sim/cuda/). */
FS_SEAM int fs_initialized(void);
/* Loads and initialises the simulated driver, once (driver.c). */
void fs_driver_start(void);

/* ---- errors.c: the per-thread last error ---- */
/* Records err as the thread's last error (except cudaSuccess and
 * cudaErrorNotReady, which the runtime never records) and returns it. */
cudaError_t fs_ret(cudaError_t err);
/* The simulated driver's calls into the model leave the runtime's last error
 * as it was (a driver call never touches it): SIM_QUIETLY(call) makes the
 * call between a hold and a put of the thread's last error. */
FS_SEAM cudaError_t sim_err_hold(void);
FS_SEAM void sim_err_put(cudaError_t held);
#define SIM_QUIETLY(call)                                                                          \
    __extension__({                                                                                \
        cudaError_t held_ = sim_err_hold(), err_ = (call);                                         \
        sim_err_put(held_);                                                                        \
        err_;                                                                                      \
    })
FS_SEAM CUresult fs_cu_get_error_name(CUresult err, const char **str);
FS_SEAM CUresult fs_cu_get_error_string(CUresult err, const char **str);

/* ---- device.c: devices and the thread's current device ---- */
struct fs_pool;
struct fs_stream;
struct fs_device {
    int ordinal;
    pthread_mutex_t mu;        /* stream list, submission order, accounting */
    struct fs_stream *streams; /* every stream with work possibly pending */
    struct fs_stream *legacy;  /* the legacy default stream, made on first use */
    /* Held while a host function of this device runs: the GPU's documented
     * worst case is that host functions of all streams are serialised. */
    pthread_mutex_t hostfn_mu;
    size_t used, peak;      /* capacity accounting (under mu) */
    uint64_t allocs, frees; /* FSDPSHIM_SIM_STATS counts (under mu) */
    uint64_t refused;       /* allocations refused for capacity (under mu) */
    size_t largest_refused; /* the largest of them */
    int touched;            /* used at all: gets a stats line */
    unsigned flags;         /* cudaSetDeviceFlags */
    struct fs_pool *pool;   /* default memory pool */
    uint64_t reset_gen;     /* bumped by cudaDeviceReset (atomic) */
    int ctx_active;         /* primary context initialised, until a reset (atomic) */
    /* The current pool (cudaDeviceSetMemPool): what cudaMallocAsync takes
     * from; the default pool until set (atomic). */
    struct fs_pool *current_pool;
    /* Graph memory: what a stream capture's allocations take. */
    struct fs_pool *graph_pool;
};
FS_SEAM struct fs_device *fs_dev(int ordinal); /* NULL when out of range */
int fs_cur_device(void);
/* NULL only when there is no device at all (FSDPSHIM_SIM_DEVICES=0): the
 * callers then fail with cudaErrorNoDevice. */
struct fs_device *fs_cur_dev(void);
/* Waits for all work submitted to the device so far, then trims its pool. */
FS_SEAM void fs_device_sync(struct fs_device *dev);
/* cudaDeviceReset of dev: its cudaMalloc memory, streams and events are
 * gone and its primary context is inactive. */
FS_SEAM void fs_device_reset(struct fs_device *dev);
/* The thread's current context, as the ordinal of the device whose primary
 * context it is, or -1 when the thread has none. */
FS_SEAM int fs_ctx_current(void);
/* Makes device's primary context current (and device the runtime's current
 * device); an invalid ordinal (-1) leaves the thread with no context. */
FS_SEAM void fs_ctx_set_current(int device);

/* ---- props.c ---- */
/* Value of a runtime (or driver: same numbering) device attribute; returns
 * -1 for an attribute the sim does not know. */
FS_SEAM int fs_device_attribute(int attr, int device, int *value);

/* ---- stream.c: stream objects, their workers and ordering ---- */
struct fs_dep {
    struct fs_stream *stream;
    uint64_t seq;
};
enum fs_stream_kind { FS_STREAM_USER, FS_STREAM_LEGACY, FS_STREAM_PER_THREAD };
struct fs_stream {
    struct fs_device *dev;
    enum fs_stream_kind kind;
    unsigned flags; /* cudaStreamNonBlocking */
    int priority;
    unsigned long long id;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    struct fs_op *head, *tail;
    uint64_t submitted, completed; /* sequence numbers of ops */
    int destroyed;                 /* under mu */
    int worker_running;            /* under mu */
    struct fs_stream *dev_next;    /* in dev->streams (under dev->mu), then retired */
    /* Non-NULL while the stream takes part in a stream capture: its work
     * then becomes graph nodes (capture.c owns it, under its lock). */
    struct fs_capture_state *_Atomic cap;
};
/* Creates a stream on dev (worker started lazily). */
struct fs_stream *fs_stream_new(struct fs_device *dev, enum fs_stream_kind kind, unsigned flags,
                                int priority);
/* Marks s destroyed: it accepts no more work, its worker drains and exits. */
void fs_stream_destroy(struct fs_stream *s);
/* Resolves a handle as the calling thread sees it; per_thread says whether
 * handle 0 means the per-thread stream (_ptsz/_ptds variants). */
cudaError_t fs_stream_resolve(cudaStream_t h, int per_thread, struct fs_stream **out);
/* Device or host work described so that a CUDA graph can replay it: run(arg)
 * does it and leaves arg alone; drop(arg), when set, frees arg once nothing
 * will run it again (after its one run, or when the graph holding it goes). */
struct fs_work {
    enum cudaGraphNodeType type; /* what it is as a graph node */
    fs_sim_work_fn run;
    fs_sim_work_fn drop;
    void *arg;
    int hostfn; /* runs under the device's host-function lock */
};
/* The enqueue path every kind of work takes: in stream order as
 * fs_stream_submit does, or, while s is capturing, as a node of the capture
 * (*seq is then 0: there is nothing to wait for). On failure nothing took
 * w->arg: cudaErrorInvalidResourceHandle for a destroyed stream, the
 * capture's error (capture.c) while capturing. */
cudaError_t fs_stream_enqueue(struct fs_stream *s, const struct fs_work *w,
                              const struct fs_dep *extra, uint64_t *seq);
/* Submits fn(arg) in stream order after the stream's implicit dependencies
 * (legacy/blocking) and `extra` (may be NULL). hostfn: run under the device's
 * host-function lock. Returns the op's sequence number, or 0 when s was
 * destroyed. fn consumes arg, so it cannot be replayed: while s is capturing
 * (or would join a capture implicitly) the call is refused with 0 and the
 * capture is invalidated; use fs_stream_enqueue for work a graph may hold. */
uint64_t fs_stream_submit(struct fs_stream *s, fs_sim_work_fn fn, void *arg, int hostfn,
                          const struct fs_dep *extra);
/* As fs_stream_submit for fn(arg) that does not consume arg, never
 * captured: how a graph launch replays its nodes. */
uint64_t fs_stream_submit_replay(struct fs_stream *s, fs_sim_work_fn fn, void *arg, int hostfn,
                                 const struct fs_dep *extra);
void fs_stream_wait(struct fs_stream *s, uint64_t seq);
int fs_stream_done(struct fs_stream *s, uint64_t seq);
uint64_t fs_stream_last(struct fs_stream *s);
/* Marks every stream of dev destroyed (cudaDeviceReset). */
void fs_stream_forget_device(struct fs_device *dev);

/* ---- capture.c: stream capture ---- */
struct fs_capture_state;
/* Where work on capturing stream s goes: a node of type w->type after the
 * stream's capture dependencies, which it then replaces. Takes w->arg on
 * success; cudaErrorStreamCaptureInvalidated when the capture was
 * invalidated. */
cudaError_t fs_capture_add(struct fs_stream *s, const struct fs_work *w);
/* Work on the legacy stream of dev while a blocking stream of dev captures
 * would join the capture implicitly: that invalidates those captures and
 * is cudaErrorStreamCaptureImplicit. cudaSuccess when nothing captures. */
cudaError_t fs_capture_check_legacy(struct fs_device *dev);
/* A call not permitted on a capturing stream (synchronising it, work that
 * cannot be replayed): while s captures it invalidates the capture and is
 * cudaErrorStreamCaptureUnsupported; cudaSuccess otherwise. */
cudaError_t fs_capture_refuse(struct fs_stream *s);
/* A potentially unsafe call (cudaMalloc, cudaFree) is prohibited under the
 * calling thread's capture interaction mode while captures are under way:
 * cudaErrorStreamCaptureUnsupported, and the captures that prohibit it are
 * invalidated. */
cudaError_t fs_capture_check_unsafe(void);
/* An event recorded in a capture: the capture and its nodes the record
 * stood for (cudaStreamWaitEvent joins a stream to them). */
struct fs_capture_mark;
/* The mark of recording an event on capturing stream s now, or NULL (out
 * of memory: the capture is invalidated). */
struct fs_capture_mark *fs_capture_mark_new(struct fs_stream *s);
void fs_capture_mark_free(struct fs_capture_mark *m);
/* cudaStreamWaitEvent on an event whose last record is m: s joins m's
 * capture. cudaErrorCapturedEvent when that capture has ended,
 * cudaErrorStreamCaptureMerge when s is in another capture. */
cudaError_t fs_capture_join(struct fs_stream *s, const struct fs_capture_mark *m);
/* Whether s is capturing (not cudaStreamCaptureStatusNone). */
int fs_capture_active(struct fs_stream *s);

/* ---- graph.c: graphs, their nodes, executable graphs ---- */
/* Adds a node doing w (its arg then belongs to the graph) after
 * deps[0..n) to g. */
cudaError_t fs_graph_add(cudaGraph_t g, const struct fs_work *w, const cudaGraphNode_t *deps,
                         size_t n, cudaGraphNode_t *out);
/* A new empty graph on the current device; NULL when out of memory. */
cudaGraph_t fs_graph_new(void);
/* Whether g is a live graph handle. */
int fs_graph_valid(cudaGraph_t g);
/* Whether `from` is `to` or one of its dependencies, transitively. */
int fs_graph_reaches(cudaGraphNode_t from, cudaGraphNode_t to);
/* The graph a node belongs to. */
cudaGraph_t fs_graph_of(cudaGraphNode_t node);

/* ---- handles.c: handle -> object maps, so a stale handle is an error, not a crash ---- */
struct fs_handle_set;
FS_SEAM struct fs_handle_set *fs_handles_new(void);
/* A fresh handle value that is never handed out again. */
FS_SEAM void *fs_handles_new_key(void);
FS_SEAM void fs_handles_add(struct fs_handle_set *set, const void *h, void *obj);
/* Both return the object, or NULL for an unknown handle. */
FS_SEAM void *fs_handles_remove(struct fs_handle_set *set, const void *h);
FS_SEAM void *fs_handles_get(struct fs_handle_set *set, const void *h);
/* As fs_handles_get, and calls hold(obj) before a racing remove can take
 * the object away (to take a reference on objects that get freed). */
void *fs_handles_hold(struct fs_handle_set *set, const void *h, void (*hold)(void *obj));
FS_SEAM void fs_handles_lock(struct fs_handle_set *set);
/* fs_handles_get for a caller that holds the set's lock (fs_handles_lock). */
void *fs_handles_get_locked(struct fs_handle_set *set, const void *h);
FS_SEAM void fs_handles_unlock(struct fs_handle_set *set);

/* ---- registry.c: what every known address range is ---- */
enum fs_range_kind {
    FS_RANGE_MALLOC,     /* cudaMalloc / cuMemAlloc */
    FS_RANGE_POOL,       /* a block of a device memory pool (or of graph memory) */
    FS_RANGE_HOST_POOL,  /* a block of a pinned host memory pool */
    FS_RANGE_VMM,        /* a cuMemMap mapping */
    FS_RANGE_PINNED,     /* cudaMallocHost / cudaHostAlloc */
    FS_RANGE_REGISTERED, /* cudaHostRegister */
    FS_RANGE_IPC,        /* cudaIpcOpenMemHandle: another process's cudaMalloc */
    FS_RANGE_MODULE,     /* a loaded module's __device__/__constant__ variables */
    FS_RANGE_MANAGED,    /* cudaMallocManaged */
};
struct fs_range {
    uintptr_t base;
    size_t size;
    enum fs_range_kind kind;
    int device;
    int live;             /* 0 once claimed for freeing (a block a graph still holds) */
    struct fs_pool *pool; /* FS_RANGE_POOL, _HOST_POOL: the memory pool it belongs to */
    size_t extent;        /* how far a copy or set may reach from base
                             (0: size, the whole range) */
    /* FS_RANGE_PINNED, _REGISTERED: the flags it was made with (the
     * runtime's and the driver's have the same values); and
     * FS_RANGE_SYNC_MEMOPS on any range */
    unsigned flags;
};
/* cuPointerSetAttribute(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS): every synchronous
 * copy or set that touches the range waits for its completion. */
#define FS_RANGE_SYNC_MEMOPS (1u << 31)
/* Returns 0, or -1 when [base, base+size) overlaps a known range. */
FS_SEAM int fs_registry_add(const struct fs_range *r);
FS_SEAM void fs_registry_remove(uintptr_t base);
/* Finds the range containing addr; returns 1 and fills *out, or 0. */
FS_SEAM int fs_registry_find(uintptr_t addr, struct fs_range *out);
/* Whether [addr, addr+n) is known memory with no hole: inside one range,
 * or across VMM mappings laid side by side (one reservation grown a mapping
 * at a time, as expandable segments do), which a GPU also treats as one. */
FS_SEAM int fs_registry_covers(uintptr_t addr, size_t n);
/* Sets `live` of the range starting exactly at base if it is `expect`;
 * returns 1 on success (used to claim a free atomically). */
int fs_registry_set_live(uintptr_t base, int expect, int live);
/* Sets the extent of the range starting exactly at base (a pool block
 * handed out again for another size). */
void fs_registry_set_extent(uintptr_t base, size_t extent);
/* Sets and clears bits of the flags of the range containing addr; 0 when
 * no range contains it. */
FS_SEAM int fs_registry_set_flags(uintptr_t addr, unsigned set, unsigned clear);
/* A malloc'd copy of every range of `kind` on `device`; returns the count. */
size_t fs_registry_collect(int device, enum fs_range_kind kind, struct fs_range **out);
static inline int fs_range_is_device(const struct fs_range *r)
{
    return r->kind == FS_RANGE_MALLOC || r->kind == FS_RANGE_POOL || r->kind == FS_RANGE_VMM ||
           r->kind == FS_RANGE_IPC || r->kind == FS_RANGE_MODULE || r->kind == FS_RANGE_MANAGED;
}

/* ---- devmem.c: device memory and its capacity ---- */
/* The device's layout (docs/sim.md, "Device memory"): the device is charged
 * in whole pages; cudaMalloc allocations of at most SIM_SMALL_MAX bytes are
 * placed at SIM_ALLOC_GRANULE, the textureAlignment the sim reports, in pages
 * they share (vram.c); memory pools reserve whole chunks of SIM_POOL_CHUNK
 * and place their blocks in them at the granule (chunks.c). */
#define SIM_ALLOC_GRANULE 512
#define SIM_PAGE_SIZE     ((size_t)2 << 20)
#define SIM_SMALL_MAX     ((size_t)1 << 20)
#define SIM_POOL_CHUNK    ((size_t)32 << 20)
static inline size_t sim_round_up(size_t size, size_t to)
{
    return (size + to - 1) / to * to;
}
/* Charges size bytes to dev; cudaErrorMemoryAllocation when over capacity. */
FS_SEAM cudaError_t fs_capacity_take(struct fs_device *dev, size_t size);
FS_SEAM void fs_capacity_give(struct fs_device *dev, size_t size);
/* Counts an allocation (freed 0) or a free (freed 1) that reached the device,
 * for FSDPSHIM_SIM_STATS: a cudaMalloc, cuMemAlloc, module load or managed
 * allocation, a pool's chunk, a cuMemCreate. */
FS_SEAM void sim_capacity_count(struct fs_device *dev, int freed);
/* Counts an allocation of size bytes that the program (or the shim) was
 * refused for lack of capacity: after any retry, so once per refusal the
 * caller sees. Returns err. */
FS_SEAM cudaError_t fs_capacity_refused(struct fs_device *dev, size_t size, cudaError_t err);
/* Allocates `size` bytes of dev as the driver does for cudaMalloc (vram.c),
 * charges and counts it, and registers it as `kind` (FS_RANGE_MALLOC,
 * _MODULE, or _MANAGED, which gets pages of its own that the host may
 * touch) with the size asked for as its range. */
FS_SEAM cudaError_t fs_devmem_alloc(struct fs_device *dev, size_t size, enum fs_range_kind kind,
                                    void **out);
/* Unregisters, unmaps and uncharges a range made by fs_devmem_alloc. */
void fs_devmem_release(const struct fs_range *r);
/* As fs_devmem_release, but leaves the pages mapped (to the process's end:
 * work still queued may touch them). */
void sim_devmem_drop(const struct fs_range *r);
/* Claims the live cudaMalloc/pool block starting at ptr for freeing;
 * cudaErrorInvalidValue for an unknown or interior pointer or a double free. */
cudaError_t fs_claim_device_block(const void *ptr, struct fs_range *r);
/* cudaFree's work after the null check: cudaErrorInvalidValue for a pointer
 * that does not start a live block. */
FS_SEAM cudaError_t fs_devmem_free(void *ptr);
/* The current device's free and total bytes; cudaErrorNoDevice without one. */
FS_SEAM cudaError_t fs_devmem_info(size_t *free_bytes, size_t *total);
/* Frees every cudaMalloc range of a device (cudaDeviceReset). */
void fs_devmem_forget_device(int device);

/* ---- arena.c: the shareable backing of device memory ---- */
/* Where a device allocation's pages live: at `offset` in its device's
 * memfd `fd` (inode `ino`), or, in a dry run, nowhere (fd -1; the offset is
 * then only a number no other allocation of the process has). `owned` is 0
 * in a forked child for what it inherited: its private copy, which no other
 * process can map. */
struct sim_backing {
    int fd;
    int owned;
    uint64_t ino;
    uint64_t offset;
};
/* Maps `size` bytes (a multiple of SIM_PAGE_SIZE) of fresh device memory
 * of dev, aligned to SIM_PAGE_SIZE: read-write pages of the device's memfd,
 * or PROT_NONE anonymous pages in a dry run. NULL when the host refuses. */
void *sim_arena_map(struct fs_device *dev, size_t size);
/* Unmaps what sim_arena_map returned and gives its pages back. */
void sim_arena_unmap(void *base, size_t size);
/* The backing of the allocation that starts at base; 0 if there is none. */
int sim_arena_backing(const void *base, struct sim_backing *out);

/* ---- vram.c: where cudaMalloc memory lies in a device's pages ---- */
/* Places `size` bytes on dev and charges the pages it needs: a small size
 * in a page shared with other small allocations, a larger one (or any, when
 * `own_pages`) in pages of its own. cudaErrorMemoryAllocation over capacity. */
cudaError_t sim_vram_alloc(struct fs_device *dev, size_t size, int own_pages, void **out);
/* Frees what sim_vram_alloc placed at p; a page left empty is uncharged,
 * and unmapped if `unmap`. */
void sim_vram_free(void *p, int unmap);
/* The backing of the allocation at p (sim/arena.c), its offset p's own. */
int sim_vram_backing(const void *p, struct sim_backing *out);

/* ---- ipc.c, ipc_event.c: CUDA IPC handles ---- */
/* What a cudaIpcMemHandle_t / cudaIpcEventHandle_t holds: where the
 * exporting process keeps the pages or the event's shared state. */
struct sim_ipc_wire {
    uint32_t magic;  /* SIM_IPC_MEM_MAGIC or SIM_IPC_EVENT_MAGIC */
    int32_t pid;     /* the exporting process */
    int32_t fd;      /* its memfd (opened as /proc/<pid>/fd/<fd>); -1: none */
    int32_t device;  /* memory: the device it lives on */
    uint64_t ino;    /* the memfd's inode, so a reused pid or fd cannot pass */
    uint64_t offset; /* memory: offset in the memfd; event: slot index */
    uint64_t size;   /* memory: the allocation's extent; event: slot serial */
    char unused[CUDA_IPC_HANDLE_SIZE - 40];
};
#define SIM_IPC_MEM_MAGIC   0x4d435046u /* "FPCM" */
#define SIM_IPC_EVENT_MAGIC 0x45435046u /* "FPCE" */
/* Opens /proc/<pid>/fd/<fd> and checks it is the memfd with inode ino;
 * returns the new fd or -1. */
int sim_ipc_open_peer_fd(const struct sim_ipc_wire *w);

/* The shared state of an interprocess event (ipc_event.c). Records take a
 * generation from a counter in memory every process that has the event
 * maps; a record's op stores its generation when its stream reaches it. */
struct sim_ipc_event;
/* A new slot for an event made with cudaEventInterprocess; NULL when none
 * is left or the host refuses. */
struct sim_ipc_event *sim_ipc_event_new(void);
void sim_ipc_event_free(struct sim_ipc_event *e);
void sim_ipc_event_wire(const struct sim_ipc_event *e, struct sim_ipc_wire *w);
/* A record: its generation (never 0). */
uint64_t sim_ipc_event_issue(struct sim_ipc_event *e);
/* Called when the stream reaches the record of generation gen. */
void sim_ipc_event_complete(struct sim_ipc_event *e, uint64_t gen);
/* The generation of the latest record, 0 if never recorded. */
uint64_t sim_ipc_event_latest(struct sim_ipc_event *e);
int sim_ipc_event_done(struct sim_ipc_event *e, uint64_t gen);
void sim_ipc_event_wait(struct sim_ipc_event *e, uint64_t gen);

/* ---- event.c: what the IPC entry points need of events ---- */
/* The wire form of an interprocess event; cudaErrorInvalidResourceHandle
 * for an unknown event or one made without cudaEventInterprocess. */
cudaError_t sim_event_ipc_wire(cudaEvent_t h, struct sim_ipc_wire *w);
/* A new event of the current device around opened shared state, with the
 * flags of an opened event (cudaEventDisableTiming | cudaEventInterprocess). */
cudaError_t sim_event_from_ipc(struct sim_ipc_event *e, cudaEvent_t *out);

/* ---- chunks.c: the memory behind a memory pool ---- */
/* A pool's chunks and the blocks placed in them (each chunk one mapping,
 * a run of extents: blocks and free space). The owner (mempool.c) holds
 * its pool's lock across every call but sim_chunks_unmap. */
enum sim_chunk_memory {
    SIM_CHUNK_DEVICE, /* device memory, charged when the chunk is made */
    SIM_CHUNK_GRAPH,  /* device memory, charged by sim_chunks_charge (a graph's launch) */
    SIM_CHUNK_HOST,   /* pinned host memory: real, host-accessible, charged to no device */
};
struct sim_chunk;
struct sim_chunks {
    struct fs_device *dev; /* NULL for host memory */
    enum sim_chunk_memory memory;
    struct sim_chunk *list;
    uint64_t reserved;   /* bytes of the chunks charged (host: of all chunks) */
    uint64_t used;       /* bytes of the blocks placed, each as asked (not rounded) */
    uint64_t next_token; /* numbers the frees not yet reached */
};
/* Places a block asked for `size` bytes (taking them rounded up to
 * SIM_ALLOC_GRANULE) for stream s: in the smallest run of free space s may
 * take (space s freed itself, or, if `opportunistic`, space whose free
 * every stream has reached), at the run's lowest address. 0 when no run is
 * large enough. */
uintptr_t sim_chunks_place(struct sim_chunks *c, size_t size, struct fs_stream *s,
                           int opportunistic);
/* Adds a chunk able to hold `need` bytes: `need` rounded up to whole
 * chunks of SIM_POOL_CHUNK, or, with `fallback` (where those no longer
 * fit), to whole pages only. cudaErrorMemoryAllocation when the device or
 * the host refuses. */
cudaError_t sim_chunks_grow(struct sim_chunks *c, size_t need, int fallback);
/* Frees the block at base (returning the size it was asked for, 0 for no
 * such block): its space is free for stream s at once, and for every
 * stream once reached; when `reached` is 0, *token names the free for
 * sim_chunks_reach. */
size_t sim_chunks_free(struct sim_chunks *c, uintptr_t base, struct fs_stream *s, int reached,
                       uint64_t *token);
/* The stream has reached the free `token`. */
void sim_chunks_reach(struct sim_chunks *c, uint64_t token);
/* Every free on a stream of dev (of any device, when NULL) is reached and
 * belongs to no stream: those streams are gone. */
void sim_chunks_forget_streams(struct sim_chunks *c, const struct fs_device *dev);
/* Unlinks chunks that hold no block and no unreached free, newest first,
 * while more than `keep` bytes are reserved (graph memory: every such
 * chunk); returns them for sim_chunks_unmap. */
struct sim_chunk *sim_chunks_trim(struct sim_chunks *c, uint64_t keep);
/* Unmaps and uncharges chunks sim_chunks_trim unlinked (without the lock). */
void sim_chunks_unmap(struct sim_chunks *c, struct sim_chunk *list);
/* Graph memory: charges the chunk holding base if it is not yet;
 * cudaErrorMemoryAllocation over capacity. */
cudaError_t sim_chunks_charge(struct sim_chunks *c, uintptr_t base);

/* ---- mempool.c: the memory pools of each device, and pinned host pools ---- */
/* The device's default pool (the pools cudaMemPoolCreate makes hang off
 * it), and its graph memory. */
struct fs_pool *fs_pool_new(struct fs_device *dev);
struct fs_pool *sim_pool_new_graph(struct fs_device *dev);
/* Trims every pool of the device whose default pool this is, and every
 * pinned host pool, to its release threshold (after host synchronisation). */
void fs_pool_trim_threshold(struct fs_pool *pool);
/* A cudaFree of a block of `pool` (after the device was synchronised). */
void sim_pool_cuda_free(struct fs_pool *pool, uintptr_t base);
/* cudaDeviceReset: the device is idle and its streams are gone, so every
 * cached block of its pools is free for any stream. The pools and their
 * allocations stay. */
void fs_pool_forget_streams(struct fs_pool *pool);
/* cudaMallocAsync and cudaFreeAsync on the current pool (pt: the _ptsz
 * variant), leaving the last error alone: the driver's cuMemAllocAsync and
 * cuMemFreeAsync, which return their own codes. */
FS_SEAM cudaError_t fs_pool_malloc_async(void **ptr, size_t size, cudaStream_t s, int pt);
FS_SEAM cudaError_t fs_pool_free_async(void *ptr, cudaStream_t s, int pt);
/* cudaMallocFromPoolAsync, leaving the last error alone: the driver's
 * cuMemAllocFromPoolAsync. */
FS_SEAM cudaError_t fs_pool_malloc_from_pool_async(void **ptr, size_t size, cudaMemPool_t pool,
                                                   cudaStream_t s, int pt);
/* Graph memory (graphmem.c): what a launch of a graph holding the
 * allocation node `arg` must have charged first; cudaErrorMemoryAllocation
 * over capacity. */
cudaError_t sim_graph_alloc_map(void *arg);
/* The device's graph memory amounts and high-water marks; a reset of the
 * marks; cudaDeviceGraphMemTrim's release of chunks no graph uses. */
void sim_graph_pool_amounts(struct fs_pool *gp, uint64_t *reserved, uint64_t *used,
                            uint64_t *reserved_high, uint64_t *used_high);
void sim_graph_pool_reset_high(struct fs_pool *gp, int reserved);
void sim_graph_pool_trim(struct fs_pool *gp);

/* ---- fork.c: a forked child starts with no streams or events ---- */
enum fs_fork_phase { FS_FORK_PREPARE, FS_FORK_PARENT, FS_FORK_CHILD };
/* A rwlock's fork handler: write-locked by the prepare, unlocked in the
 * parent, made afresh in the child (glibc tells a writer's unlock by the
 * owner's thread id, which the child's thread no longer has). */
void fs_fork_rwlock(pthread_rwlock_t *lock, enum fs_fork_phase phase);
void fs_fork_install(void);
/* Each file's part: take its locks before fork, release them after it
 * and, in the child, forget what belonged to the parent's threads. */
void fs_devices_fork(enum fs_fork_phase phase);
void sim_pools_fork(enum fs_fork_phase phase);
void sim_vram_fork(enum fs_fork_phase phase);
void fs_registry_fork(enum fs_fork_phase phase);
void fs_streams_fork(enum fs_fork_phase phase);
void fs_events_fork(enum fs_fork_phase phase);
void sim_arena_fork(enum fs_fork_phase phase);
void sim_ipc_fork(enum fs_fork_phase phase);
void sim_ipc_event_fork(enum fs_fork_phase phase);

/* ---- stats.c ---- */
void fs_stats_install(void);

/* ---- copy.c ---- */
/* cudaMemcpy (async 0) or cudaMemcpyAsync (async 1) of n bytes on stream s
 * (0: legacy, or per-thread when per_thread), with their checks, waits and
 * last-error rules. */
cudaError_t fs_memcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                      cudaStream_t s, int per_thread, int async);
/* A copy (src set) or set (src NULL) of `depth` slices of `height` rows of
 * `width` bytes, as the driver describes its copies and sets: rows `dpitch`
 * (`spitch`) bytes apart, slices `dheight` (`sheight`) rows apart. A set
 * writes `value`, `elem` bytes (1, 2 or 4) at a time; width is a multiple
 * of elem. `kind` names the sides of a copy that must be device memory, as
 * cudaMemcpy's kind does. */
struct sim_copy {
    void *dst;
    const void *src;
    size_t width, height, depth;
    size_t dpitch, spitch, dheight, sheight;
    uint32_t value;
    unsigned elem;
    enum cudaMemcpyKind kind;
};
/* The copy or set on stream s (0: legacy, or per-thread when per_thread),
 * asynchronous or not, with cudaMemcpy*'s and cudaMemset*'s checks and
 * waits, leaving the runtime's last error as it was (the driver's cuMemcpy*
 * and cuMemset*). */
FS_SEAM cudaError_t sim_drv_copy(const struct sim_copy *c, cudaStream_t s, int per_thread,
                                 int async);

/* ---- module.c: modules (fat binaries, libraries), their kernels and variables ---- */
struct sim_module;
struct sim_kernel_attrs;
/* A kernel: what a cudaKernel_t names, and what a registered host stub names. */
struct sim_kernel {
    struct sim_module *mod;
    void *handle;     /* its cudaKernel_t: a key never handed out again */
    const void *stub; /* host stub of a registered kernel, NULL for a library's */
    char *name;       /* device (mangled) name */
    /* Set by cudaFuncSetAttribute, per device; NULL until one is set
     * (funcattr.c, under its lock). */
    struct sim_kernel_attrs *attrs;
};
struct sim_var {
    struct sim_module *mod;
    const void *host; /* the host shadow (the symbol), NULL for a library's */
    char *name;
    size_t size;
    size_t offset; /* in the module's storage on each device */
    int managed;   /* a library's __managed__ variable */
    void *init;    /* its initial bytes (size of them), NULL for zeros */
};
/* A module for a library loaded at run time (library.c), filled with
 * sim_module_add_* and then published. */
struct sim_module *sim_module_new(void);
/* Both return NULL / -1 when out of memory. */
struct sim_kernel *sim_module_add_kernel(struct sim_module *m, const void *stub, const char *name);
/* init: the variable's initial bytes (size of them, copied), or NULL for zeros. */
int sim_module_add_var(struct sim_module *m, const void *host, const char *name, size_t size,
                       int managed, const void *init);
/* Makes the module's kernels known (by handle and by stub). */
void sim_module_publish(struct sim_module *m);
/* Forgets the module's kernels and variables, gives its storage on every
 * device back to the device's capacity and frees it. wait: first wait for
 * each such device, as cudaFree does, and unmap the storage; otherwise the
 * mapping is left to the process's end (unregistering at exit). */
void sim_module_destroy(struct sim_module *m, int wait);
/* The lookups and loads below are made under the read lock. */
void sim_modules_rdlock(void);
void sim_modules_unlock(void);
/* A kernel by host stub or by cudaKernel_t (the runtime accepts either as
 * `const void *func`); NULL when unknown. */
struct sim_kernel *sim_kernel_find(const void *func);
struct sim_var *sim_var_find(const void *host);
/* Loads m on `device` if it is not yet, as lazy module loading does on
 * first use: its variables get device memory, charged to the device. */
cudaError_t sim_module_load(struct sim_module *m, int device);
/* The variable's address on `device` (loading its module there). */
cudaError_t sim_var_address(struct sim_var *v, int device, char **out);
size_t sim_module_kernel_count(const struct sim_module *m);
struct sim_kernel *sim_module_kernel_at(const struct sim_module *m, size_t i);
struct sim_kernel *sim_module_kernel_named(const struct sim_module *m, const char *name);
struct sim_var *sim_module_var_named(const struct sim_module *m, const char *name);
/* cudaDeviceReset: the device's copies of every module are gone (a later use
 * loads the module again). */
void sim_modules_forget_device(int device);
void sim_modules_fork(enum fs_fork_phase phase);

/* ---- library.c: reading device code images ---- */
/* The initial bytes of variable `name` (and their count) in the fat binary
 * a registration names (the __fatBinC_Wrapper_t nvcc passes), read from its
 * first uncompressed cubin; NULL when the sim cannot find them. */
const void *sim_image_var_init(const void *fat_cubin, const char *name, size_t *size);

/* ---- funcattr.c: function attributes and occupancy ---- */
/* What every kernel reports: the sim has no compiled code to measure. */
#define SIM_KERNEL_REGS        32
#define SIM_SMEM_DEFAULT_LIMIT (48 << 10) /* dynamic shared memory without opt-in */
/* The dynamic shared memory a launch of k on `device` may use. */
size_t sim_kernel_max_dynamic_smem(struct sim_kernel *k, int device);
int sim_kernel_nonportable_cluster(struct sim_kernel *k, int device);
/* The cluster dimensions set with cudaFuncAttributeRequiredCluster*
 * (all 0 when none). */
dim3 sim_kernel_required_cluster(struct sim_kernel *k, int device);
/* How many blocks of k fit on one SM (0 when none does). */
int sim_occupancy(struct sim_kernel *k, int device, int block, size_t dyn_smem);
void sim_kernel_attrs_free(struct sim_kernel *k);
/* cudaFuncGetAttributes of a kernel (by stub or handle) on `device`,
 * leaving the last error alone: the driver's cuFuncGetAttribute. */
FS_SEAM cudaError_t sim_drv_func_attributes(struct cudaFuncAttributes *attr, const void *func,
                                            int device);

#endif /* FS_SIM_INTERNAL_H */
