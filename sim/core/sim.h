/* sim.h - the device model's one header: what the files of sim/core/ and
 * the runtime's entry points (sim/cudart/) share, grouped by the file that
 * owns each piece, and the one seam through which every other stand-in
 * library (libcuda.so.1, libnccl.so.2, libcublas, libcublasLt, libcudnn,
 * libnvidia-ml, libcupti) reaches the model.
 *
 * The model lives in libcudart.so.13 (docs/sim.md, "Layout"). It is built
 * with -fvisibility=hidden: the runtime's entry points (SIM_API) leave it
 * under the real runtime's version node, and what this header marks
 * SIM_SEAM (plus the sim_rt_* second names, SIM_RT_ALIAS) under the one
 * private node FSDPSHIM_SIM_PRIVATE (sim/cudart/libcudart.map); all else is
 * local. */
#ifndef SIM_CORE_SIM_H
#define SIM_CORE_SIM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

/* Every CUDA entry point is defined with this so the version script can
 * export it (the default visibility is hidden). */
#define SIM_API __attribute__((visibility("default")))
/* The seam: the part of the model the other stand-in libraries work on
 * (the driver, NCCL, cuBLAS, cuDNN, NVML, CUPTI): visible, and exported
 * under FSDPSHIM_SIM_PRIVATE by cudart/libcudart.map. Everything else here
 * is shared between core/ and cudart/ only. */
#define SIM_SEAM __attribute__((visibility("default")))
/* Exports the runtime entry point `name` a second time, as sim_rt_<name>
 * under FSDPSHIM_SIM_PRIVATE, for the simulated driver, whose call that is
 * the runtime call's own work (cuMemPoolCreate is cudaMemPoolCreate): a
 * call by the public name from libcuda.so.1 would bind to whatever the
 * process interposes on that name (libfsdpshim.so interposes on many), and
 * the driver must reach the model itself. Written after the definition (an
 * alias needs its target in the same file); sim/cuda/driver_internal.h declares the
 * aliases the driver uses. */
#define SIM_RT_ALIAS(name)                                                                         \
    extern __typeof__(name) sim_rt_##name __attribute__((alias(#name), visibility("default")))

/* ==== The seam: device work, for NCCL, cuBLAS, cuBLASLt and cuDNN ==== */
/* They run their calls as device work on the caller's stream, like a
 * kernel: in stream order, not serialised with host functions the way
 * cudaLaunchHostFunc work is (core/stream_ops.c, core/config.c). */
typedef void (*sim_work_fn)(void *arg);

/* Enqueues fn(arg) on `stream` as device work. Stream 0 means what it means
 * for the calling thread (legacy, or per-thread under the _ptsz variants:
 * pass per_thread accordingly). Returns cudaErrorInvalidResourceHandle for a
 * destroyed or unknown stream. */
SIM_SEAM cudaError_t sim_stream_enqueue(cudaStream_t stream, int per_thread, sim_work_fn fn,
                                        void *arg);

/* As sim_stream_enqueue, for work a CUDA graph may hold: while the stream
 * captures, the work becomes a graph node of `type` (it is then run at each
 * launch of the graph) instead of running now. run(arg) does the work and
 * leaves arg alone; drop(arg), unless NULL, frees arg once nothing will run
 * it again. sim_stream_enqueue itself is refused while the stream
 * captures (cudaErrorStreamCaptureUnsupported: its work cannot be replayed).
 * On failure arg is the caller's again. */
SIM_SEAM cudaError_t sim_stream_enqueue_work(cudaStream_t stream, int per_thread,
                                             enum cudaGraphNodeType type, sim_work_fn run,
                                             sim_work_fn drop, void *arg);

/* The device a stream belongs to, or -1 for an unknown stream. */
SIM_SEAM int sim_stream_device(cudaStream_t stream);

/* 0 under FSDPSHIM_SIM_DATA=0 (a dry run): device work then moves no bytes
 * and must not touch device memory, which stays PROT_NONE. */
SIM_SEAM int sim_moves_data(void);

/* ---- core/config.c: process-wide configuration, set once on first use ---- */
struct sim_config {
    int ndevices;    /* FSDPSHIM_SIM_DEVICES, default 8 */
    size_t capacity; /* FSDPSHIM_SIM_MEM bytes per device, default 16 GiB */
    int stats;       /* FSDPSHIM_SIM_STATS=1: per-device counts at exit */
    /* FSDPSHIM_SIM_DATA, default 1. With 0 nothing reads or writes device
     * memory: its mappings stay PROT_NONE and copies, sets and collectives
     * keep their ordering and checks but move no bytes (a dry run). */
    int moves_data;
};
extern SIM_SEAM struct sim_config sim_cfg;
SIM_SEAM void sim_init(void);
/* Whether sim_init has run: the runtime initialises the driver on its first
 * call, so driver calls need no cuInit after one (sim/cuda/). */
SIM_SEAM int sim_initialized(void);

/* ---- core/driver_load.c: the simulated driver, loaded at run time ---- */
/* Loads and initialises the simulated driver, once. */
void sim_driver_start(void);
typedef CUresult (*sim_get_proc_address_fn)(const char *, void **, int, cuuint64_t,
                                            CUdriverProcAddressQueryResult *);
/* The driver's cuGetProcAddress_v2, after sim_driver_start; NULL when no
 * driver could be loaded and initialised. */
sim_get_proc_address_fn sim_driver_proc_address(void);

/* ---- core/errors.c: the per-thread last error ---- */
/* Records err as the thread's last error (except cudaSuccess and
 * cudaErrorNotReady, which the runtime never records) and returns it. */
cudaError_t sim_record_error(cudaError_t err);
/* The simulated driver's calls into the model leave the runtime's last error
 * as it was (a driver call never touches it): SIM_QUIETLY(call) makes the
 * call between a hold and a put of the thread's last error. */
SIM_SEAM cudaError_t sim_err_hold(void);
SIM_SEAM void sim_err_put(cudaError_t held);
#define SIM_QUIETLY(call)                                                                          \
    __extension__({                                                                                \
        cudaError_t held_ = sim_err_hold(), err_ = (call);                                         \
        sim_err_put(held_);                                                                        \
        err_;                                                                                      \
    })
SIM_SEAM CUresult sim_cu_get_error_name(CUresult err, const char **str);
SIM_SEAM CUresult sim_cu_get_error_string(CUresult err, const char **str);
/* The runtime's name and message of err; NULL for an unknown code. */
const char *sim_error_name(cudaError_t err);
const char *sim_error_text(cudaError_t err);

/* ---- core/devices.c: devices and the thread's current device ---- */
struct sim_mempool;
struct sim_stream;
struct sim_device {
    int ordinal;
    pthread_mutex_t mu;         /* stream list, submission order, accounting */
    struct sim_stream *streams; /* every stream with work possibly pending */
    struct sim_stream *legacy;  /* the legacy default stream, made on first use */
    /* Held while a host function of this device runs: the GPU's documented
     * worst case is that host functions of all streams are serialised. */
    pthread_mutex_t hostfn_mu;
    size_t used, peak;           /* capacity accounting (under mu) */
    uint64_t allocs, frees;      /* FSDPSHIM_SIM_STATS counts (under mu) */
    uint64_t refused;            /* allocations refused for capacity (under mu) */
    size_t largest_refused;      /* the largest of them */
    int touched;                 /* used at all: gets a stats line */
    unsigned flags;              /* cudaSetDeviceFlags */
    struct sim_mempool *mempool; /* default memory pool */
    uint64_t reset_gen;          /* bumped by cudaDeviceReset (atomic) */
    int ctx_active;              /* primary context initialised, until a reset (atomic) */
    /* The current pool (cudaDeviceSetMemPool): what cudaMallocAsync takes
     * from; the default pool until set (atomic). */
    struct sim_mempool *current_mempool;
    /* Graph memory: what a stream capture's allocations take. */
    struct sim_mempool *graph_mempool;
};
SIM_SEAM struct sim_device *sim_dev(int ordinal); /* NULL when out of range */
int sim_cur_device(void);
/* NULL only when there is no device at all (FSDPSHIM_SIM_DEVICES=0): the
 * callers then fail with cudaErrorNoDevice. */
struct sim_device *sim_cur_dev(void);
/* Waits for all work submitted to the device so far, then trims its pool. */
SIM_SEAM void sim_device_sync(struct sim_device *dev);
/* cudaDeviceReset of dev: its cudaMalloc memory, streams and events are
 * gone and its primary context is inactive. */
SIM_SEAM void sim_device_reset(struct sim_device *dev);
/* The thread's current context, as the ordinal of the device whose primary
 * context it is, or -1 when the thread has none. */
SIM_SEAM int sim_ctx_current(void);
/* Makes device's primary context current (and device the runtime's current
 * device); an invalid ordinal (-1) leaves the thread with no context. */
SIM_SEAM void sim_ctx_set_current(int device);
/* Marks dev's primary context initialised (until a reset), as
 * cudaInitDevice and the first binding do. */
void sim_ctx_activate(struct sim_device *dev);

/* ---- core/props.c ---- */
/* Value of a runtime (or driver: same numbering) device attribute; returns
 * -1 for an attribute the sim does not know. */
SIM_SEAM int sim_device_attribute(int attr, int device, int *value);
/* The device's cudaDeviceProp. */
void sim_device_props(struct cudaDeviceProp *p, int device);

/* ---- core/stream_worker.c: stream objects, their workers and ordering ---- */
struct sim_dep {
    struct sim_stream *stream;
    uint64_t seq;
};
enum sim_stream_kind { SIM_STREAM_USER, SIM_STREAM_LEGACY, SIM_STREAM_PER_THREAD };
struct sim_stream {
    struct sim_device *dev;
    enum sim_stream_kind kind;
    unsigned flags; /* cudaStreamNonBlocking */
    int priority;
    unsigned long long id;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    struct sim_op *head, *tail;
    uint64_t submitted, completed; /* sequence numbers of ops */
    int destroyed;                 /* under mu */
    int worker_running;            /* under mu */
    struct sim_stream *dev_next;   /* in dev->streams (under dev->mu), then retired */
    /* Non-NULL while the stream takes part in a stream capture: its work
     * then becomes graph nodes (capture.c owns it, under its lock). */
    struct sim_capture_state *_Atomic cap;
};
/* Creates a stream on dev (worker started lazily). */
struct sim_stream *sim_stream_new(struct sim_device *dev, enum sim_stream_kind kind, unsigned flags,
                                  int priority);
/* Marks s destroyed: it accepts no more work, its worker drains and exits. */
void sim_stream_destroy(struct sim_stream *s);
/* Resolves a handle as the calling thread sees it; per_thread says whether
 * handle 0 means the per-thread stream (_ptsz/_ptds variants). */
cudaError_t sim_stream_resolve(cudaStream_t h, int per_thread, struct sim_stream **out);
/* Device or host work described so that a CUDA graph can replay it: run(arg)
 * does it and leaves arg alone; drop(arg), when set, frees arg once nothing
 * will run it again (after its one run, or when the graph holding it goes). */
struct sim_work {
    enum cudaGraphNodeType type; /* what it is as a graph node */
    sim_work_fn run;
    sim_work_fn drop;
    void *arg;
    int hostfn; /* runs under the device's host-function lock */
};
/* The enqueue path every kind of work takes: in stream order as
 * sim_stream_submit does, or, while s is capturing, as a node of the capture
 * (*seq is then 0: there is nothing to wait for). On failure nothing took
 * w->arg: cudaErrorInvalidResourceHandle for a destroyed stream, the
 * capture's error (capture.c) while capturing. */
cudaError_t sim_stream_add_work(struct sim_stream *s, const struct sim_work *w,
                                const struct sim_dep *extra, uint64_t *seq);
/* Submits fn(arg) in stream order after the stream's implicit dependencies
 * (legacy/blocking) and `extra` (may be NULL). hostfn: run under the device's
 * host-function lock. Returns the op's sequence number, or 0 when s was
 * destroyed. fn consumes arg, so it cannot be replayed: while s is capturing
 * (or would join a capture implicitly) the call is refused with 0 and the
 * capture is invalidated; use sim_stream_add_work for work a graph may hold. */
uint64_t sim_stream_submit(struct sim_stream *s, sim_work_fn fn, void *arg, int hostfn,
                           const struct sim_dep *extra);
/* As sim_stream_submit for fn(arg) that does not consume arg, never
 * captured: how a graph launch replays its nodes. */
uint64_t sim_stream_submit_replay(struct sim_stream *s, sim_work_fn fn, void *arg, int hostfn,
                                  const struct sim_dep *extra);
void sim_stream_wait(struct sim_stream *s, uint64_t seq);
int sim_stream_done(struct sim_stream *s, uint64_t seq);
uint64_t sim_stream_last(struct sim_stream *s);
/* Marks every stream of dev destroyed (cudaDeviceReset). */
void sim_stream_forget_device(struct sim_device *dev);

/* ---- core/stream_ops.c: the runtime's stream calls, each with its checks
 * and last-error rules (pt: stream 0 is the per-thread stream), shared by the
 * runtime's entry points (cudart/stream_management.c) and the driver's
 * (sim_drv_stream_*, declared below); and the device-work seam above ---- */
/* cudaStreamCreateWithPriority's work: priorities are clamped to [-5, 0]. */
cudaError_t sim_stream_create(cudaStream_t *out, unsigned flags, int priority);
/* cudaStreamDestroy's work: the default streams cannot be destroyed. */
cudaError_t sim_stream_destroy_checked(cudaStream_t h);
cudaError_t sim_stream_synchronize(cudaStream_t h, int pt);
cudaError_t sim_stream_get_flags(cudaStream_t h, unsigned int *flags, int pt);
cudaError_t sim_stream_get_device(cudaStream_t h, int *device, int pt);
/* cudaLaunchHostFunc's work: fn(user) on the stream's worker under the
 * device's host-function lock. */
cudaError_t sim_launch_host_func(cudaStream_t h, cudaHostFn_t fn, void *user, int pt);

/* ---- core/capture.c: stream capture, for the runtime's capture entry
 * points (cudart/stream_capture.c) and the graph's ---- */
cudaError_t sim_capture_begin(cudaStream_t h, int pt, cudaGraph_t graph,
                              const cudaGraphNode_t *deps, const cudaGraphEdgeData *edges,
                              size_t ndeps, enum cudaStreamCaptureMode mode);
cudaError_t sim_capture_end(cudaStream_t h, int pt, cudaGraph_t *graph_out);
cudaError_t sim_capture_info(cudaStream_t h, int pt, enum cudaStreamCaptureStatus *status,
                             unsigned long long *id, cudaGraph_t *graph,
                             const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                             size_t *ndeps);
cudaError_t sim_capture_update_deps(cudaStream_t h, int pt, cudaGraphNode_t *deps,
                                    const cudaGraphEdgeData *edges, size_t n, unsigned flags);
/* Sets the calling thread's capture interaction mode, returning the old
 * one (cudaThreadExchangeStreamCaptureMode). */
enum cudaStreamCaptureMode sim_capture_exchange_mode(enum cudaStreamCaptureMode mode);
struct sim_capture_state;
/* Where work on capturing stream s goes: a node of type w->type after the
 * stream's capture dependencies, which it then replaces. Takes w->arg on
 * success; cudaErrorStreamCaptureInvalidated when the capture was
 * invalidated. */
cudaError_t sim_capture_add(struct sim_stream *s, const struct sim_work *w);
/* Work on the legacy stream of dev while a blocking stream of dev captures
 * would join the capture implicitly: that invalidates those captures and
 * is cudaErrorStreamCaptureImplicit. cudaSuccess when nothing captures. */
cudaError_t sim_capture_check_legacy(struct sim_device *dev);
/* A call not permitted on a capturing stream (synchronising it, work that
 * cannot be replayed): while s captures it invalidates the capture and is
 * cudaErrorStreamCaptureUnsupported; cudaSuccess otherwise. */
cudaError_t sim_capture_refuse(struct sim_stream *s);
/* A potentially unsafe call (cudaMalloc, cudaFree) is prohibited under the
 * calling thread's capture interaction mode while captures are under way:
 * cudaErrorStreamCaptureUnsupported, and the captures that prohibit it are
 * invalidated. */
cudaError_t sim_capture_check_unsafe(void);
/* An event recorded in a capture: the capture and its nodes the record
 * stood for (cudaStreamWaitEvent joins a stream to them). */
struct sim_capture_mark;
/* The mark of recording an event on capturing stream s now, or NULL (out
 * of memory: the capture is invalidated). */
struct sim_capture_mark *sim_capture_mark_new(struct sim_stream *s);
void sim_capture_mark_free(struct sim_capture_mark *m);
/* cudaStreamWaitEvent on an event whose last record is m: s joins m's
 * capture. cudaErrorCapturedEvent when that capture has ended,
 * cudaErrorStreamCaptureMerge when s is in another capture. */
cudaError_t sim_capture_join(struct sim_stream *s, const struct sim_capture_mark *m);
/* Whether s is capturing (not cudaStreamCaptureStatusNone). */
int sim_capture_active(struct sim_stream *s);

/* ---- core/graph.c: graphs, their nodes, executable graphs, for the
 * runtime's graph entry points (cudart/graph_management.c) and capture ---- */
/* cudaGraphInstantiate's work: an executable graph of g's nodes as they
 * stand. */
cudaError_t sim_graph_instantiate(cudaGraphExec_t *out, cudaGraph_t g, unsigned long long flags);
/* cudaGraphLaunch's work: the nodes in order on stream sh (pt: 0 is the
 * per-thread stream), after the graph's previous launch. */
cudaError_t sim_graph_launch(cudaGraphExec_t h, cudaStream_t sh, int pt);
struct CUgraphNode_st {
    struct CUgraph_st *graph;
    size_t index;
    struct sim_work w;
    cudaGraphNode_t *deps;
    size_t ndeps;
};

struct sim_graph_held_object {
    cudaUserObject_t obj;
    unsigned count;
};

struct CUgraph_st {
    pthread_mutex_t mu;
    int refs; /* the handle's, one per executable graph (under mu) */
    unsigned long long id;
    cudaGraphNode_t *nodes;
    size_t n, cap;
    struct sim_graph_held_object *objects;
    size_t nobjects;
    unsigned nconditionals;
};

struct CUgraphExec_st {
    pthread_mutex_t mu;
    int refs; /* the handle's, one per launch not yet complete (under mu) */
    struct CUgraph_st *graph;
    cudaGraphNode_t *order; /* the nodes at instantiation, in order */
    size_t n;
    struct sim_dep last; /* the end of the latest launch (under mu) */
};
/* cudaGraphDestroy's and cudaGraphExecDestroy's work, leaving the last
 * error alone: cudaErrorInvalidValue for an unknown handle. An executable
 * graph's launches still running keep it (and its graph) until they end. */
cudaError_t sim_graph_destroy(cudaGraph_t g);
cudaError_t sim_graph_exec_destroy(cudaGraphExec_t e);
/* User objects (user_objects.c): made with `refcount` references; a retain
 * or release of an object that is gone, or of more references than it
 * holds, is cudaErrorInvalidValue; the last release starts the destructor
 * on a thread of its own. The last error is left alone. */
cudaError_t sim_user_object_create(cudaUserObject_t *out, void *ptr, cudaHostFn_t destroy,
                                   unsigned refcount);
cudaError_t sim_user_object_retain(cudaUserObject_t object, unsigned count);
cudaError_t sim_user_object_release(cudaUserObject_t object, unsigned count);
/* Adds a node doing w (its arg then belongs to the graph) after
 * deps[0..n) to g. */
cudaError_t sim_graph_add(cudaGraph_t g, const struct sim_work *w, const cudaGraphNode_t *deps,
                          size_t n, cudaGraphNode_t *out);
/* A new empty graph on the current device; NULL when out of memory. */
cudaGraph_t sim_graph_new(void);
/* Whether g is a live graph handle. */
int sim_graph_valid(cudaGraph_t g);
/* Whether `from` is `to` or one of its dependencies, transitively. */
int sim_graph_reaches(cudaGraphNode_t from, cudaGraphNode_t to);
/* The graph a node belongs to. */
cudaGraph_t sim_graph_of(cudaGraphNode_t node);

/* ---- core/handles.c: handle -> object maps, so a stale handle is an error, not a crash ---- */
struct sim_handle_set;
SIM_SEAM struct sim_handle_set *sim_handles_new(void);
/* A fresh handle value that is never handed out again. */
SIM_SEAM void *sim_handles_new_key(void);
SIM_SEAM void sim_handles_add(struct sim_handle_set *set, const void *h, void *obj);
/* Both return the object, or NULL for an unknown handle. */
SIM_SEAM void *sim_handles_remove(struct sim_handle_set *set, const void *h);
SIM_SEAM void *sim_handles_get(struct sim_handle_set *set, const void *h);
/* As sim_handles_get, and calls hold(obj) before a racing remove can take
 * the object away (to take a reference on objects that get freed). */
void *sim_handles_hold(struct sim_handle_set *set, const void *h, void (*hold)(void *obj));
SIM_SEAM void sim_handles_lock(struct sim_handle_set *set);
/* sim_handles_get for a caller that holds the set's lock (sim_handles_lock). */
void *sim_handles_get_locked(struct sim_handle_set *set, const void *h);
SIM_SEAM void sim_handles_unlock(struct sim_handle_set *set);

/* ---- core/hostmem.c: page-locked ("pinned") host memory, for the
 * runtime's entry points (cudart/pinned_memory.c) and the driver's ---- */
/* cudaHostAlloc's work (cudaMallocHost's with flags 0): a registered
 * mapping of size bytes; the last error as the runtime leaves it. */
cudaError_t sim_host_alloc(void **out, size_t size, unsigned flags);
/* cudaFreeHost's work: cudaErrorInvalidValue for a pointer that does not
 * start pinned memory made here. */
cudaError_t sim_host_free(void *ptr);

/* ---- core/registry.c: what every known address range is ---- */
enum sim_range_kind {
    SIM_RANGE_MALLOC,       /* cudaMalloc / cuMemAlloc */
    SIM_RANGE_MEMPOOL,      /* a block of a device memory pool (or of graph memory) */
    SIM_RANGE_HOST_MEMPOOL, /* a block of a pinned host memory pool */
    SIM_RANGE_VMM,          /* a cuMemMap mapping */
    SIM_RANGE_PINNED,       /* cudaMallocHost / cudaHostAlloc */
    SIM_RANGE_REGISTERED,   /* cudaHostRegister */
    SIM_RANGE_IPC,          /* cudaIpcOpenMemHandle: another process's cudaMalloc */
    SIM_RANGE_MODULE,       /* a loaded module's __device__/__constant__ variables */
    SIM_RANGE_MANAGED,      /* cudaMallocManaged */
};
struct sim_range {
    uintptr_t base;
    size_t size;
    enum sim_range_kind kind;
    int device;
    int live; /* 0 once claimed for freeing (a block a graph still holds) */
    struct sim_mempool
        *mempool;  /* SIM_RANGE_MEMPOOL, _HOST_MEMPOOL: the memory pool it belongs to */
    size_t extent; /* how far a copy or set may reach from base
                      (0: size, the whole range) */
    /* SIM_RANGE_PINNED, _REGISTERED: the flags it was made with (the
     * runtime's and the driver's have the same values); and
     * SIM_RANGE_SYNC_MEMOPS on any range */
    unsigned flags;
};
/* cuPointerSetAttribute(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS): every synchronous
 * copy or set that touches the range waits for its completion. */
#define SIM_RANGE_SYNC_MEMOPS (1u << 31)
/* Returns 0, or -1 when [base, base+size) overlaps a known range. */
SIM_SEAM int sim_registry_add(const struct sim_range *r);
SIM_SEAM void sim_registry_remove(uintptr_t base);
/* Finds the range containing addr; returns 1 and fills *out, or 0. */
SIM_SEAM int sim_registry_find(uintptr_t addr, struct sim_range *out);
/* Whether [addr, addr+n) is known memory with no hole: inside one range,
 * or across VMM mappings laid side by side (one reservation grown a mapping
 * at a time, as expandable segments do), which a GPU also treats as one. */
SIM_SEAM int sim_registry_covers(uintptr_t addr, size_t n);
/* Sets `live` of the range starting exactly at base if it is `expect`;
 * returns 1 on success (used to claim a free atomically). */
int sim_registry_set_live(uintptr_t base, int expect, int live);
/* Sets the extent of the range starting exactly at base (a pool block
 * handed out again for another size). */
void sim_registry_set_extent(uintptr_t base, size_t extent);
/* Sets and clears bits of the flags of the range containing addr; 0 when
 * no range contains it. */
SIM_SEAM int sim_registry_set_flags(uintptr_t addr, unsigned set, unsigned clear);
/* A malloc'd copy of every range of `kind` on `device`; returns the count. */
size_t sim_registry_collect(int device, enum sim_range_kind kind, struct sim_range **out);
static inline int sim_range_is_device(const struct sim_range *r)
{
    return r->kind == SIM_RANGE_MALLOC || r->kind == SIM_RANGE_MEMPOOL ||
           r->kind == SIM_RANGE_VMM || r->kind == SIM_RANGE_IPC || r->kind == SIM_RANGE_MODULE ||
           r->kind == SIM_RANGE_MANAGED;
}

/* ---- core/devmem.c: device memory and its capacity ---- */
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
SIM_SEAM cudaError_t sim_capacity_take(struct sim_device *dev, size_t size);
SIM_SEAM void sim_capacity_give(struct sim_device *dev, size_t size);
/* Counts an allocation (freed 0) or a free (freed 1) that reached the device,
 * for FSDPSHIM_SIM_STATS: a cudaMalloc, cuMemAlloc, module load or managed
 * allocation, a pool's chunk, a cuMemCreate. */
SIM_SEAM void sim_capacity_count(struct sim_device *dev, int freed);
/* Counts an allocation of size bytes that the program (or the shim) was
 * refused for lack of capacity: after any retry, so once per refusal the
 * caller sees. Returns err. */
SIM_SEAM cudaError_t sim_capacity_refused(struct sim_device *dev, size_t size, cudaError_t err);
/* Allocates `size` bytes of dev as the driver does for cudaMalloc (vram.c),
 * charges and counts it, and registers it as `kind` (SIM_RANGE_MALLOC,
 * _MODULE, or _MANAGED, which gets pages of its own that the host may
 * touch) with the size asked for as its range. */
SIM_SEAM cudaError_t sim_devmem_alloc(struct sim_device *dev, size_t size, enum sim_range_kind kind,
                                      void **out);
/* Unregisters, unmaps and uncharges a range made by sim_devmem_alloc. */
void sim_devmem_release(const struct sim_range *r);
/* As sim_devmem_release, but leaves the pages mapped (to the process's end:
 * work still queued may touch them). */
void sim_devmem_drop(const struct sim_range *r);
/* Claims the live cudaMalloc/pool block starting at ptr for freeing;
 * cudaErrorInvalidValue for an unknown or interior pointer or a double free. */
cudaError_t sim_claim_device_block(const void *ptr, struct sim_range *r);
/* cudaFree's work after the null check: cudaErrorInvalidValue for a pointer
 * that does not start a live block. */
SIM_SEAM cudaError_t sim_devmem_free(void *ptr);
/* The current device's free and total bytes; cudaErrorNoDevice without one. */
SIM_SEAM cudaError_t sim_devmem_info(size_t *free_bytes, size_t *total);
/* Frees every cudaMalloc range of a device (cudaDeviceReset). */
void sim_devmem_forget_device(int device);

/* ---- core/arena.c: the shareable backing of device memory ---- */
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
void *sim_arena_map(struct sim_device *dev, size_t size);
/* Unmaps what sim_arena_map returned and gives its pages back. */
void sim_arena_unmap(void *base, size_t size);
/* The backing of the allocation that starts at base; 0 if there is none. */
int sim_arena_backing(const void *base, struct sim_backing *out);

/* ---- core/vram.c: where cudaMalloc memory lies in a device's pages ---- */
/* Places `size` bytes on dev and charges the pages it needs: a small size
 * in a page shared with other small allocations, a larger one (or any, when
 * `own_pages`) in pages of its own. cudaErrorMemoryAllocation over capacity. */
cudaError_t sim_vram_alloc(struct sim_device *dev, size_t size, int own_pages, void **out);
/* Frees what sim_vram_alloc placed at p; a page left empty is uncharged,
 * and unmapped if `unmap`. */
void sim_vram_free(void *p, int unmap);
/* The backing of the allocation at p (sim/core/arena.c), its offset p's own. */
int sim_vram_backing(const void *p, struct sim_backing *out);

/* ---- core/ipc.c, core/ipc_event.c: CUDA IPC handles (the runtime's entry
 * points are in cudart/ipc_handles.c) ---- */
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
/* Maps the allocation another process's handle w names (once per process:
 * a second open takes a reference) and registers it on its device, or on
 * `device` when this process does not see that one; *out is its base. */
cudaError_t sim_ipc_mem_open(const struct sim_ipc_wire *w, int device, void **out);
/* Drops a reference to what sim_ipc_mem_open mapped at base, unmapping it
 * after the device's pending work on the last; cudaErrorInvalidValue when
 * nothing was opened there. */
cudaError_t sim_ipc_mem_close(void *base);

/* The shared state of an interprocess event (ipc_event.c). Records take a
 * generation from a counter in memory every process that has the event
 * maps; a record's op stores its generation when its stream reaches it. */
struct sim_ipc_event;
/* A new slot for an event made with cudaEventInterprocess; NULL when none
 * is left or the host refuses. */
struct sim_ipc_event *sim_ipc_event_new(void);
/* Opens another process's interprocess event: maps the slot its handle w
 * names (cudaErrorDeviceUninitialized for one of this process's own). */
cudaError_t sim_ipc_event_open(const struct sim_ipc_wire *w, struct sim_ipc_event **out);
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

/* ---- core/event.c: events, for the runtime's event entry points
 * (cudart/event_management.c), the driver's (sim_drv_event_*) and IPC ---- */
cudaError_t sim_event_create(cudaEvent_t *out, unsigned flags);
cudaError_t sim_event_destroy(cudaEvent_t h);
cudaError_t sim_event_record(cudaEvent_t h, cudaStream_t sh, unsigned flags, int pt);
cudaError_t sim_event_query(cudaEvent_t h);
cudaError_t sim_event_synchronize(cudaEvent_t h);
cudaError_t sim_stream_wait_event(cudaStream_t sh, cudaEvent_t h, unsigned flags, int pt);
/* The time between the completions of two recorded events
 * (cudaEventElapsedTime's work, leaving the last error alone):
 * cudaErrorInvalidResourceHandle for an unknown or never recorded event or
 * one made with cudaEventDisableTiming, cudaErrorCapturedEvent for a record
 * in a capture, cudaErrorNotReady while one is pending. */
cudaError_t sim_event_elapsed_ns(cudaEvent_t start, cudaEvent_t end, int64_t *ns);
/* The wire form of an interprocess event; cudaErrorInvalidResourceHandle
 * for an unknown event or one made without cudaEventInterprocess. */
cudaError_t sim_event_ipc_wire(cudaEvent_t h, struct sim_ipc_wire *w);
/* A new event of the current device around opened shared state, with the
 * flags of an opened event (cudaEventDisableTiming | cudaEventInterprocess). */
cudaError_t sim_event_from_ipc(struct sim_ipc_event *e, cudaEvent_t *out);

/* ---- core/chunks.c: the memory behind a memory pool ---- */
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
    struct sim_device *dev; /* NULL for host memory */
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
uintptr_t sim_chunks_place(struct sim_chunks *c, size_t size, struct sim_stream *s,
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
size_t sim_chunks_free(struct sim_chunks *c, uintptr_t base, struct sim_stream *s, int reached,
                       uint64_t *token);
/* The stream has reached the free `token`. */
void sim_chunks_reach(struct sim_chunks *c, uint64_t token);
/* Every free on a stream of dev (of any device, when NULL) is reached and
 * belongs to no stream: those streams are gone. */
void sim_chunks_forget_streams(struct sim_chunks *c, const struct sim_device *dev);
/* Unlinks chunks that hold no block and no unreached free, newest first,
 * while more than `keep` bytes are reserved (graph memory: every such
 * chunk); returns them for sim_chunks_unmap. */
struct sim_chunk *sim_chunks_trim(struct sim_chunks *c, uint64_t keep);
/* Unmaps and uncharges chunks sim_chunks_trim unlinked (without the lock). */
void sim_chunks_unmap(struct sim_chunks *c, struct sim_chunk *list);
/* Graph memory: charges the chunk holding base if it is not yet;
 * cudaErrorMemoryAllocation over capacity. */
cudaError_t sim_chunks_charge(struct sim_chunks *c, uintptr_t base);

/* ---- core/mempool.c: the memory pools of each device, and pinned host
 * pools, for the runtime's stream-ordered allocator (cudart/stream_ordered_allocator.c)
 * and the driver's ---- */
/* The pool a handle names; NULL for an unknown or destroyed one. */
struct sim_mempool *sim_mempool_check(cudaMemPool_t h);
/* What UsedMemCurrent answers, under pool->mu: the bytes of the blocks as
 * asked, with those cudaFree left counted. Graph memory's
 * (cudaGraphMemAttrUsedMemCurrent) is "the physical memory currently
 * mapped by at least one graph" (CUDA Programming Guide, Graph Memory
 * Nodes, "Physical Memory Footprint"): a launch maps the chunks its blocks
 * are in when it charges them, and only a trim unmaps them, not the
 * graph's destruction, so it is every charged chunk. An H200 (driver 580,
 * run 7) answered used 32 MiB after the graph of a 1 MiB block was
 * destroyed, and 0 after cudaDeviceGraphMemTrim. */
uint64_t sim_mempool_used_now(const struct sim_mempool *pool);
/* Gives back chunks that hold nothing until the pool holds at most `keep`
 * bytes (graph memory: every such chunk). */
void sim_mempool_trim(struct sim_mempool *pool, uint64_t keep);
/* The current pool of dev (cudaDeviceSetMemPool). */
struct sim_mempool *sim_mempool_current(struct sim_device *dev);
/* The work of cudaMallocAsync without the last error, which the runtime's
 * entry points record and the driver's (cuMemAllocAsync) leave alone. */
cudaError_t sim_mempool_alloc(void **ptr, size_t size, struct sim_mempool *pool, cudaStream_t sh,
                              int pt);
/* cudaMallocFromPoolAsync's work, recording the last error:
 * cudaErrorInvalidValue for an unknown pool. */
cudaError_t sim_mempool_alloc_from(void **ptr, size_t size, cudaMemPool_t h, cudaStream_t s,
                                   int pt);
/* The work of cudaFreeAsync without the last error, as sim_mempool_alloc. */
cudaError_t sim_mempool_free(void *ptr, cudaStream_t sh, int pt);
#define SIM_MEMPOOL_PEERS 64 /* devices whose access a pool records */

struct sim_mempool {
    struct sim_device *dev; /* its device; NULL for pinned host memory */
    pthread_mutex_t mu;
    int graph; /* the device's graph memory: no handle, no threshold */
    uint64_t threshold;
    int reuse_follow, reuse_opportunistic, reuse_internal;
    struct sim_chunks mem;
    uint64_t reserved_high, used_high;
    /* Blocks cudaFree gave back that UsedMemCurrent still counts: an H100
     * (driver 580) answered a cudaFree of a 1 MiB pool block with reserved
     * 0, used 1 MiB, and still so after synchronising. */
    uint64_t used_stale;
    /* On a default pool: the device's created pools; on a host pool: the
     * next host pool; linked through `created` (under created_mu). */
    struct sim_mempool *created;
    int destroyed; /* by cudaMemPoolDestroy with blocks still out: no handle */
    enum cudaMemAccessFlags access[SIM_MEMPOOL_PEERS]; /* recorded, not enforced */
};
/* cudaMemPoolCreate's pool: of dev's memory, or of pinned host memory
 * (dev NULL), on its device's (or the host's) list. */
struct sim_mempool *sim_mempool_create(struct sim_device *dev);
/* cudaMemPoolDestroy's work, leaving the last error alone:
 * cudaErrorInvalidValue for an unknown handle or a device's default pool.
 * The cached memory goes back at once; a pool with blocks still out stays,
 * without a handle, until they are freed. */
cudaError_t sim_mempool_destroy(cudaMemPool_t h);
/* The device's default pool (the pools cudaMemPoolCreate makes hang off
 * it), and its graph memory. */
struct sim_mempool *sim_mempool_new(struct sim_device *dev);
struct sim_mempool *sim_mempool_new_graph(struct sim_device *dev);
/* Trims every pool of the device whose default pool this is, and every
 * pinned host pool, to its release threshold (after host synchronisation). */
void sim_mempool_trim_threshold(struct sim_mempool *pool);
/* A cudaFree of a block of `pool` (after the device was synchronised). */
void sim_mempool_cuda_free(struct sim_mempool *pool, uintptr_t base);
/* cudaDeviceReset: the device is idle and its streams are gone, so every
 * cached block of its pools is free for any stream. The pools and their
 * allocations stay. */
void sim_mempool_forget_streams(struct sim_mempool *pool);
/* cudaMallocAsync and cudaFreeAsync on the current pool (pt: the _ptsz
 * variant), leaving the last error alone: the driver's cuMemAllocAsync and
 * cuMemFreeAsync, which return their own codes. */
SIM_SEAM cudaError_t sim_mempool_malloc_async(void **ptr, size_t size, cudaStream_t s, int pt);
SIM_SEAM cudaError_t sim_mempool_free_async(void *ptr, cudaStream_t s, int pt);
/* cudaMallocFromPoolAsync, leaving the last error alone: the driver's
 * cuMemAllocFromPoolAsync. */
SIM_SEAM cudaError_t sim_mempool_malloc_from_pool_async(void **ptr, size_t size, cudaMemPool_t pool,
                                                        cudaStream_t s, int pt);
/* Graph memory (entry points in cudart/graphmem.c): what a launch of a graph holding the
 * allocation node `arg` must have charged first; cudaErrorMemoryAllocation
 * over capacity. */
cudaError_t sim_graph_alloc_map(void *arg);
/* The device's graph memory amounts and high-water marks; a reset of the
 * marks; cudaDeviceGraphMemTrim's release of chunks no graph uses. */
void sim_graph_mempool_amounts(struct sim_mempool *gp, uint64_t *reserved, uint64_t *used,
                               uint64_t *reserved_high, uint64_t *used_high);
void sim_graph_mempool_reset_high(struct sim_mempool *gp, int reserved);
void sim_graph_mempool_trim(struct sim_mempool *gp);

/* ---- core/fork.c: a forked child starts with no streams or events ---- */
enum sim_fork_phase { SIM_FORK_PREPARE, SIM_FORK_PARENT, SIM_FORK_CHILD };
/* A rwlock's fork handler: write-locked by the prepare, unlocked in the
 * parent, made afresh in the child (glibc tells a writer's unlock by the
 * owner's thread id, which the child's thread no longer has). */
void sim_fork_rwlock(pthread_rwlock_t *lock, enum sim_fork_phase phase);
void sim_fork_install(void);
/* Each file's part: take its locks before fork, release them after it
 * and, in the child, forget what belonged to the parent's threads. */
void sim_devices_fork(enum sim_fork_phase phase);
void sim_mempools_fork(enum sim_fork_phase phase);
void sim_vram_fork(enum sim_fork_phase phase);
void sim_registry_fork(enum sim_fork_phase phase);
void sim_streams_fork(enum sim_fork_phase phase);
void sim_events_fork(enum sim_fork_phase phase);
void sim_arena_fork(enum sim_fork_phase phase);
void sim_ipc_fork(enum sim_fork_phase phase);
void sim_ipc_event_fork(enum sim_fork_phase phase);

/* ---- core/stats.c ---- */
void sim_stats_install(void);

/* ---- core/copy_engine.c: stream-ordered byte moves, for the runtime's
 * cudaMemcpy* and cudaMemset* (cudart/memcpy.c) and the driver's ---- */
/* Whether a copy or set returns as its synchronous or its asynchronous
 * form does (docs/sim.md, "When a call blocks the host"). */
enum sim_copy_mode { SIM_COPY_SYNC, SIM_COPY_ASYNC };
/* A copy of height rows of width bytes, dpitch and spitch bytes apart, on
 * stream sh (pt: 0 is the per-thread stream), with cudaMemcpy2D's checks,
 * waits and last-error rules. */
cudaError_t sim_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                        size_t height, enum cudaMemcpyKind kind, cudaStream_t sh, int pt,
                        enum sim_copy_mode mode);
/* cudaMemset2D's work: value's low byte in height rows of width bytes. */
cudaError_t sim_set_2d(void *dst, size_t pitch, int value, size_t width, size_t height,
                       cudaStream_t sh, int pt, enum sim_copy_mode mode);
/* cudaMemcpy (async 0) or cudaMemcpyAsync (async 1) of n bytes on stream s
 * (0: legacy, or per-thread when per_thread), with their checks, waits and
 * last-error rules. */
cudaError_t sim_memcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
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
SIM_SEAM cudaError_t sim_drv_copy(const struct sim_copy *c, cudaStream_t s, int per_thread,
                                  int async);

/* ---- core/modules.c: modules (fat binaries, libraries), their kernels and variables ---- */
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
/* A module for a library loaded at run time (cudart/library_management.c), filled with
 * sim_module_add_* and then published. */
struct sim_module *sim_module_new(void);
/* Both return NULL / -1 when out of memory. */
struct sim_kernel *sim_module_add_kernel(struct sim_module *m, const void *stub, const char *name);
/* init: the variable's initial bytes (size of them, copied), or NULL for zeros. */
int sim_module_add_var(struct sim_module *m, const void *host, const char *name, size_t size,
                       int managed, const void *init);
/* Makes the module's kernels known (by handle and by stub). */
void sim_module_publish(struct sim_module *m);
/* What nvcc's registration calls do (cudart/registration.c): a new module,
 * known at once (its kernels and variables become known one by one), and
 * a kernel or variable added to it and made known; a variable registered
 * after the module was loaded somewhere is ignored (its layout is fixed). */
struct sim_module *sim_module_register(void);
void sim_module_register_kernel(struct sim_module *m, const void *stub, const char *name);
void sim_module_register_var(struct sim_module *m, const void *host, const char *name, size_t size,
                             const void *init);
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
void sim_modules_fork(enum sim_fork_phase phase);

/* ---- core/image.c: reading device code images (cubins, PTX, fat
 * binaries), for modules and the runtime's libraries (cudart/library_management.c) ---- */
/* Adds the kernels and variables the image at code declares to m: a
 * __fatBinC_Wrapper_t, a fat binary (its first uncompressed cubin, else
 * PTX), a cubin or PTX text (size bytes, SIZE_MAX when unknown).
 * cudaErrorNotSupported for a fat binary whose entries are all compressed,
 * cudaErrorInvalidKernelImage for anything else unreadable. */
cudaError_t sim_image_read(struct sim_module *m, const void *code, size_t size);
/* The initial bytes of variable `name` (and their count) in the fat binary
 * a registration names (the __fatBinC_Wrapper_t nvcc passes), read from its
 * first uncompressed cubin; NULL when the sim cannot find them. */
const void *sim_image_var_init(const void *fat_cubin, const char *name, size_t *size);

/* ---- core/funcattr.c: function attributes and occupancy, for the runtime's
 * entry points (cudart/function_attributes.c) and the driver's ---- */
/* Validates and stores one attribute of k on `device`. */
cudaError_t sim_kernel_set_attribute(struct sim_kernel *k, int device, enum cudaFuncAttribute attr,
                                     int value);
/* A kernel's attributes as a launch on `device` sees them. */
cudaError_t sim_func_get_attributes(struct cudaFuncAttributes *attr, const void *func, int device);
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
SIM_SEAM cudaError_t sim_drv_func_attributes(struct cudaFuncAttributes *attr, const void *func,
                                             int device);

/* ==== The seam: the driver's streams, events, captures and pinned host
 * memory (sim/cuda/stream.c, memory.c), each the runtime call's own
 * implementation, leaving the runtime's last error as it was (pt: the
 * per-thread default stream variant) ==== */
/* core/stream_ops.c */
SIM_SEAM cudaError_t sim_drv_stream_create(cudaStream_t *out, unsigned flags, int priority);
SIM_SEAM cudaError_t sim_drv_stream_destroy(cudaStream_t h);
SIM_SEAM cudaError_t sim_drv_stream_synchronize(cudaStream_t h, int pt);
SIM_SEAM cudaError_t sim_drv_stream_get_flags(cudaStream_t h, unsigned *flags, int pt);
SIM_SEAM cudaError_t sim_drv_stream_get_device(cudaStream_t h, int *device, int pt);
SIM_SEAM cudaError_t sim_drv_launch_host_func(cudaStream_t h, cudaHostFn_t fn, void *user, int pt);
/* core/event.c */
SIM_SEAM cudaError_t sim_drv_event_create(cudaEvent_t *out, unsigned flags);
SIM_SEAM cudaError_t sim_drv_event_record(cudaEvent_t h, cudaStream_t s, unsigned flags, int pt);
SIM_SEAM cudaError_t sim_drv_event_query(cudaEvent_t h);
SIM_SEAM cudaError_t sim_drv_event_synchronize(cudaEvent_t h);
SIM_SEAM cudaError_t sim_drv_event_destroy(cudaEvent_t h);
SIM_SEAM cudaError_t sim_drv_stream_wait_event(cudaStream_t s, cudaEvent_t h, unsigned flags,
                                               int pt);
/* core/capture.c */
SIM_SEAM cudaError_t sim_drv_stream_is_capturing(cudaStream_t h, int pt,
                                                 enum cudaStreamCaptureStatus *status);
/* core/hostmem.c */
SIM_SEAM cudaError_t sim_drv_host_alloc(void **ptr, size_t size, unsigned flags);
SIM_SEAM cudaError_t sim_drv_host_free(void *ptr);

/* ---- core/api_callback.c: the hook through which the simulated CUPTI
 * (sim/cupti/) sees API calls of the simulated runtime and driver ----
 * On a GPU the driver calls CUPTI's callbacks on API enter and exit; here the
 * entry points that CUPTI's subscriber may care about (sim/cupti/cupti.c
 * lists them) bracket their work with sim_api_enter / sim_api_exit, naming
 * the toolkit's callback id (cupti_runtime_cbid.h, cupti_driver_cbid.h) and
 * passing the toolkit's params struct (generated_cuda_runtime_api_meta.h,
 * generated_cuda_meta.h). While no CUPTI is loaded that costs one relaxed
 * load per call. */
/* One call of an entry point, from enter to exit. */
struct sim_api_call {
    int domain;              /* CUpti_CallbackDomain: 1 driver, 2 runtime */
    unsigned cbid;           /* the toolkit's callback id */
    const char *name;        /* the entry point's name */
    const void *params;      /* the toolkit's <name>_params struct */
    void *ret;               /* cudaError_t * or CUresult *, read at exit */
    uint64_t correlation;    /* the subscriber's, kept from enter to exit */
    uint32_t correlation_id; /* one per call, process-wide */
    int hooked;              /* enter reached the hook: exit must too */
};

/* Called on enter (exit 0) and exit (exit 1) of every bracketed call while
 * set. */
typedef void (*sim_api_hook_fn)(struct sim_api_call *call, int exit);

/* Sets the hook (NULL: none). Only the simulated CUPTI calls it. */
SIM_SEAM void sim_api_hook_set(sim_api_hook_fn hook);

SIM_SEAM void sim_api_enter(struct sim_api_call *call);
SIM_SEAM void sim_api_exit(struct sim_api_call *call);

/* An entry point's work, bracketed: ret = (work) between enter and exit,
 * for the call named by domain (1 driver, 2 runtime), cbid and name, whose
 * arguments are in *params. */
#define SIM_API_CALL(dom, id, fname, params_ptr, ret, work)                                        \
    do {                                                                                           \
        struct sim_api_call call_ = {.domain = (dom),                                              \
                                     .cbid = (id),                                                 \
                                     .name = (fname),                                              \
                                     .params = (params_ptr),                                       \
                                     .ret = &(ret)};                                               \
        sim_api_enter(&call_);                                                                     \
        (ret) = (work);                                                                            \
        sim_api_exit(&call_);                                                                      \
    } while (0)

#endif /* SIM_CORE_SIM_H */
