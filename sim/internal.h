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

/* ---- errors.c: the per-thread last error ---- */
/* Records err as the thread's last error (except cudaSuccess and
 * cudaErrorNotReady, which the runtime never records) and returns it. */
cudaError_t fs_ret(cudaError_t err);
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
    int touched;            /* used at all: gets a stats line */
    unsigned flags;         /* cudaSetDeviceFlags */
    struct fs_pool *pool;   /* default memory pool */
    uint64_t reset_gen;     /* bumped by cudaDeviceReset (atomic) */
    int ctx_active;         /* primary context initialised, until a reset (atomic) */
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
};
/* Creates a stream on dev (worker started lazily). */
struct fs_stream *fs_stream_new(struct fs_device *dev, enum fs_stream_kind kind, unsigned flags,
                                int priority);
/* Marks s destroyed: it accepts no more work, its worker drains and exits. */
void fs_stream_destroy(struct fs_stream *s);
/* Resolves a handle as the calling thread sees it; per_thread says whether
 * handle 0 means the per-thread stream (_ptsz/_ptds variants). */
cudaError_t fs_stream_resolve(cudaStream_t h, int per_thread, struct fs_stream **out);
/* Submits fn(arg) in stream order after the stream's implicit dependencies
 * (legacy/blocking) and `extra` (may be NULL). hostfn: run under the device's
 * host-function lock. Returns the op's sequence number, or 0 when s was
 * destroyed. */
uint64_t fs_stream_submit(struct fs_stream *s, fs_sim_work_fn fn, void *arg, int hostfn,
                          const struct fs_dep *extra);
void fs_stream_wait(struct fs_stream *s, uint64_t seq);
int fs_stream_done(struct fs_stream *s, uint64_t seq);
uint64_t fs_stream_last(struct fs_stream *s);
/* Marks every stream of dev destroyed (cudaDeviceReset). */
void fs_stream_forget_device(struct fs_device *dev);

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
FS_SEAM void fs_handles_unlock(struct fs_handle_set *set);

/* ---- registry.c: what every known address range is ---- */
enum fs_range_kind {
    FS_RANGE_MALLOC,     /* cudaMalloc / cuMemAlloc */
    FS_RANGE_POOL,       /* cudaMallocAsync block (live or cached in the pool) */
    FS_RANGE_VMM,        /* a cuMemMap mapping */
    FS_RANGE_PINNED,     /* cudaMallocHost / cudaHostAlloc */
    FS_RANGE_REGISTERED, /* cudaHostRegister */
};
struct fs_range {
    uintptr_t base;
    size_t size;
    enum fs_range_kind kind;
    int device;
    int live;             /* 0 once freed (a pool block waiting in the pool) */
    struct fs_pool *pool; /* FS_RANGE_POOL: the memory pool it belongs to */
};
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
/* A malloc'd copy of every range of `kind` on `device`; returns the count. */
size_t fs_registry_collect(int device, enum fs_range_kind kind, struct fs_range **out);
static inline int fs_range_is_device(const struct fs_range *r)
{
    return r->kind == FS_RANGE_MALLOC || r->kind == FS_RANGE_POOL || r->kind == FS_RANGE_VMM;
}

/* ---- devmem.c: device memory and its capacity ---- */
/* Every device allocation (cudaMalloc, cuMemAlloc, a pool block) is rounded
 * up to this granule, the textureAlignment the sim reports: it is charged
 * so, and copies and sets may run to the rounded end, as on a GPU
 * (docs/sim.md, "Allocation granule"). */
#define SIM_ALLOC_GRANULE 512
/* Charges size bytes to dev; cudaErrorMemoryAllocation when over capacity. */
FS_SEAM cudaError_t fs_capacity_take(struct fs_device *dev, size_t size);
FS_SEAM void fs_capacity_give(struct fs_device *dev, size_t size);
/* Maps fresh device memory of `size` bytes (rounded to SIM_ALLOC_GRANULE), charges it and
 * registers it as `kind` (of memory pool `pool` for FS_RANGE_POOL, else NULL). */
FS_SEAM cudaError_t fs_devmem_alloc(struct fs_device *dev, size_t size, enum fs_range_kind kind,
                                    struct fs_pool *pool, void **out);
/* Unmaps and uncharges a range made by fs_devmem_alloc. */
void fs_devmem_release(const struct fs_range *r);
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

/* ---- mempool.c: the memory pools of each device ---- */
/* The device's default pool; pools made by cudaMemPoolCreate hang off it. */
struct fs_pool *fs_pool_new(struct fs_device *dev);
/* Trims every pool of the device whose default pool this is to its release
 * threshold (called after host synchronisation). */
void fs_pool_trim_threshold(struct fs_pool *pool);
/* A cudaFree of a pool block (after the device was synchronised). */
void fs_pool_free_now(struct fs_pool *pool, uintptr_t base);
/* cudaDeviceReset: the device is idle and its streams are gone, so every
 * cached block of its pools is free for any stream. The pools and their
 * allocations stay. */
void fs_pool_forget_streams(struct fs_pool *pool);

/* ---- fork.c: a forked child starts with no streams or events ---- */
enum fs_fork_phase { FS_FORK_PREPARE, FS_FORK_PARENT, FS_FORK_CHILD };
void fs_fork_install(void);
/* Each file's part: take its locks before fork, release them after it
 * and, in the child, forget what belonged to the parent's threads. */
void fs_devices_fork(enum fs_fork_phase phase);
void fs_pool_fork(struct fs_pool *pool, enum fs_fork_phase phase);
void fs_registry_fork(enum fs_fork_phase phase);
void fs_streams_fork(enum fs_fork_phase phase);
void fs_events_fork(enum fs_fork_phase phase);

/* ---- stats.c ---- */
void fs_stats_install(void);

#endif /* FS_SIM_INTERNAL_H */
