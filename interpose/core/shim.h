/* shim.h - the internal contract of libfsdpshim.so.
 *
 * Everything the interposer files share: logging, finding the program's own
 * CUDA runtime and NCCL, the parsed FSDPSHIM_CONF, the process-wide
 * allocator, the mapping from program streams to allocator stream keys, the
 * reentrancy guard and the program's last-error state. The CUDA runtime glue
 * (runtime/) and the NCCL glue (nccl/) both code against
 * this header only; it stays stable once committed.
 *
 * Interposed entry points are defined with FS_EXPORT and no symbol version,
 * so they bind ahead of cudaMalloc@libcudart.so.13 (SPEC section 1). */
#ifndef FS_SHIM_H
#define FS_SHIM_H

#include "../../allocator/allocator.h"
#include "../../common/compiler.h"

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>

#define FS_EXPORT __attribute__((visibility("default")))

/* ---- logging (log.c) ----------------------------------------------------
 * FSDPSHIM_LOG=error|warn|info|debug [warn], on stderr, prefix "fsdpshim[PID]: " or
 * "fsdpshim[PID rank R]: " (log.c).
 * fs_log checks the level itself; wrap expensive arguments in
 * fs_log_enabled(). */
enum fs_log_level { FS_LOG_ERROR, FS_LOG_WARN, FS_LOG_INFO, FS_LOG_DEBUG };
bool fs_log_enabled(enum fs_log_level level);
void fs_log(enum fs_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- real symbols (real.c) ----------------------------------------------
 * The program's own CUDA runtime / NCCL, found among the loaded objects:
 * RTLD_NEXT first, then every loaded object (including RTLD_LOCAL dlopen'ed
 * ones) through dl_iterate_phdr and a dlopen(RTLD_NOLOAD) handle of its own.
 * Never loads a library. NULL while the library is not loaded. Callers cache
 * the pointer once non-NULL (a library, once loaded, stays). */
enum fs_lib { FS_LIB_CUDART, FS_LIB_NCCL };
void *fs_real_symbol(enum fs_lib lib, const char *name);
/* Whether a shared CUDA runtime (libcudart.so) is loaded. Where none is,
 * the program's own runtime (nvcc's static one) reaches the shim only as
 * driver calls (driver/). Asking is no error either way. */
bool fs_runtime_loaded(void);

/* ---- configuration (config.c) -------------------------------------------
 * Parsed once from FSDPSHIM_CONF; unknown keys and bad values are reported
 * once with the valid choices, and the defaults are used. */
typedef struct fs_shim_config {
    fs_alloc_config alloc;     /* allocator keys (allocator/allocator.h) */
    unsigned ag_limit;         /* all-gathers in flight, 0 = off [2] */
    size_t ag_limit_bytes;     /* ag_limit_mb in bytes, 0 = off */
    bool stream_pool;          /* [true] */
    unsigned stream_pool_size; /* idle streams kept per (device, flags, priority) [32] */
    int trace;                 /* 0 off, 1 events, 2 stacks, 3 python */
    unsigned trace_frames;     /* [64] */
    bool snapshot_signal;      /* SIGUSR2 writes a snapshot [false] */
    bool oom_snapshot_stacks;  /* oom_snapshot:stacks: snapshots name each live block's
                                  allocating stack even when tracing is off [blocks] */
    bool live;                 /* the live statistics page for `fsdpshim top --live` [true] */
} fs_shim_config;
const fs_shim_config *fs_shim_config_get(void);

/* ---- the allocator (shim.c) ---------------------------------------------
 * The process-wide allocator, created on first use over cuda_device.c (or,
 * in a process without the runtime, over core/driver_device.c). NULL
 * when the shim is inactive: the program's CUDA calls do not reach it (it is
 * linked, not preloaded), the CUDA runtime is not loaded (yet), or the
 * device count could not be read; and, for a call that gave up waiting for
 * another thread's creation of it (shim.c), until that one publishes it.
 * Before it is published no pointer is the shim's: NULL means pass through. */
fs_allocator *fs_shim_allocator(void);

/* Whether the shim is preloaded: the global scope's cudaMalloc is its own.
 * False when the driver loaded it (CUDA_INJECTION64_PATH) or `fsdpshim
 * attach` did: then it serves nothing and changes nothing in the process
 * (cupti.c, torch_route.c). Cheap enough for a constructor; logs nothing. */
bool fs_shim_preloaded(void);

/* ---- streams (streams.c) ------------------------------------------------
 * The allocator's key for a program stream. Handle 0 means the legacy
 * stream, or the calling thread's per-thread stream when per_thread is true
 * (the _ptsz/_ptds variants and CUDA_API_PER_THREAD_DEFAULT_STREAM);
 * cudaStreamPerThread is a stream of its own per thread, cudaStreamLegacy the
 * legacy stream. Registers the stream with the allocator (legacy, blocking or
 * non-blocking) on first sight. *device receives the stream's device (the
 * current device for the legacy and per-thread streams); it may be NULL.
 * Returns the key; on a bad handle returns the legacy key and *device = -1. */
fs_stream_t fs_shim_stream_key(cudaStream_t stream, bool per_thread, int *device);

/* The program's current device: cached per thread, kept right by the
 * interposed cudaSetDevice. -1 when the runtime cannot say. */
int fs_shim_current_device(void);

/* Installs the PyTorch adapter the route chose once PyTorch is loaded
 * (pytorch/install.c); cheap after its one attempt. Called from the
 * runtime calls PyTorch makes before it initialises its allocator. */
void fs_torch_adapter_check(void);

/* Enters the shim if it is active and returns its allocator; the caller
 * leaves (fs_shim_leave). NULL, not entered, otherwise. For the calls the
 * program makes to the shim itself (the public API, the PyTorch adapter). */
fs_allocator *fs_shim_enter_active(void);

/* Every segment event of the allocator (alloc, free, map, unmap) also goes
 * to `hook`, beside the trace: for the PyTorch adapter's trace trackers
 * (pytorch/torch_api.c). Called under the allocator's locks: the hook must
 * only note the event. Set once; NULL is ignored. */
void fs_shim_segment_hook(void (*hook)(const fs_alloc_event *ev));

/* True while `stream` is being captured into a CUDA graph (as far as the
 * interposed capture calls tell): nothing may be recorded on it then, and
 * allocations on it go straight to the real runtime. */
bool fs_shim_stream_capturing(cudaStream_t stream, bool per_thread);

/* ---- reentrancy (shim.c) ------------------------------------------------
 * While a thread is inside the shim, interposed entry points it reaches (the
 * shim's own calls into the runtime, or a runtime that calls itself) pass
 * straight through. fs_shim_enter() returns false if the thread is already
 * inside: then pass through and do not call fs_shim_leave(). */
bool fs_shim_enter(void);
void fs_shim_leave(void);
/* Whether the calling thread is inside the shim: a runtime lookup made
 * outside it comes from an interposed entry point the program called. */
bool fs_shim_inside(void);

/* ---- the program's last-error state (errstate.c) ------------------------
 * The shim's internal runtime calls must not leave an error behind, nor clear
 * one the program caused: bracket them with fs_err_save()/fs_err_restore().
 * When the shim itself returns an error, fs_shim_return_error() makes it the
 * last error as the real call would, and returns it. */
typedef struct fs_err_state {
    cudaError_t pending; /* the program's last error before the internal calls */
} fs_err_state;
void fs_err_save(fs_err_state *st);
void fs_err_restore(const fs_err_state *st);
cudaError_t fs_shim_return_error(cudaError_t err);

/* ---- free hook (shim.c) -------------------------------------------------
 * The all-gather rate limiter asks for the free fence of chosen blocks.
 * wants_fence(ptr) is called on every free of a shim-owned block (keep it
 * cheap); when it returns true the free is made with a fence and
 * on_fence(device, ptr, fence) receives it with one reference that the hook
 * must drop with fs_fence_release(). Both are called inside the shim
 * (fs_shim_enter held) and outside allocator locks. One hook per process. */
typedef struct fs_shim_free_hook {
    bool (*wants_fence)(void *ptr);
    void (*on_fence)(int device, void *ptr, fs_fence *fence);
} fs_shim_free_hook;
void fs_shim_set_free_hook(const fs_shim_free_hook *hook);

/* The calling thread's current stream of `device`, set by
 * fsdpshim_set_stream(); NULL (the device's legacy stream) unless set.
 * cudaMalloc on that device allocates for it. Setting fails (false) for a
 * device out of range, or when the thread's table cannot be allocated. */
cudaStream_t fs_thread_stream(int device);
bool fs_thread_stream_set(int device, cudaStream_t s);
/* The free hook, or NULL. */
const fs_shim_free_hook *fs_free_hook(void);
/* The allocator if it exists already; never creates it. */
fs_allocator *fs_shim_allocator_peek(void);
/* Device count the allocator was created for (0 before). */
int fs_shim_device_count(void);
/* A device's free and total memory, asked of the runtime or, where the
 * allocator runs over the driver (core/driver_device.c), of the driver;
 * false when it cannot say. */
bool fs_shim_mem_info(int device, size_t *free, size_t *total);
/* The allocator for a served driver call: the one over the runtime where a
 * runtime is loaded, else one over the driver, created once the program
 * has initialised it (cuInit); NULL as fs_shim_allocator. */
fs_allocator *fs_shim_driver_allocator(void);

/* ---- stream keys (streams.c) ---- */
/* The runtime handle that names `key` for the calling thread: the legacy
 * stream for its key, cudaStreamPerThread for the calling thread's own
 * per-thread stream and cudaStreamLegacy for another thread's (the legacy
 * stream orders every blocking stream, so that is the safe stand-in). */
cudaStream_t fs_stream_handle(fs_stream_t key);
/* The stream is known to the shim and was destroyed by the program (it sits
 * in a stream pool): calls on it fail as on a destroyed stream. */
bool fs_stream_is_destroyed(cudaStream_t s);
/* Records a stream the shim created (or re-issued from a pool) for the
 * program; pooled says it goes back to a pool when destroyed. */
void fs_stream_adopt(cudaStream_t s, int device, unsigned flags, int priority, bool pooled);
/* The program destroyed `s`: returns true and fills the fields if the stream
 * is pooled (then it is marked destroyed and the caller parks it); false if
 * not (the entry is dropped and the caller destroys it for real). */
bool fs_stream_release(cudaStream_t s, int *device, unsigned *flags, int *priority);
/* The pooled stream `s` is destroyed for real: forget it. */
void fs_stream_forget(cudaStream_t s);
/* Forget every stream of `device` (cudaDeviceReset), or all (fork child). */
void fs_streams_reset(int device);
/* Sets the per-thread current device cache. */
void fs_current_device_set(int device);

/* ---- graph captures (capture.c) ---- */
/* Number of captures under way in the process (any mode). */
unsigned fs_capture_active(void);
bool fs_capture_global_underway(void);
bool fs_capture_key_capturing(fs_stream_t key);
void fs_capture_begin(fs_stream_t key, enum cudaStreamCaptureMode mode);
void fs_capture_end(fs_stream_t key);
void fs_capture_reset(void);

/* ---- internal calls (cuda_device.c) ----
 * Brackets a batch of internal runtime calls: the program's last error is
 * kept, calls run in relaxed capture mode while a capture is under way, and
 * `device` (if >= 0) is made current for the duration. */
typedef struct fs_internal_call {
    fs_err_state err;
    int prev_device;
    bool relaxed;
    enum cudaStreamCaptureMode mode;
} fs_internal_call;
void fs_internal_begin(fs_internal_call *c, int device);
void fs_internal_end(fs_internal_call *c);

/* ---- serving (serve.c) ----
 * The allocator's side of the memory calls, shared by the runtime's entry
 * points, the driver's (driver/cuda_driver.c) and the PyTorch adapter's. Called inside the shim;
 * FS_ERR_NOT_OWNED (and FS_ERR_OOM for an allocation) means: make the real
 * call. */
/* A plain allocation on `dev` for the thread's stream there; not served
 * while that stream is being captured. */
fs_status fs_mem_alloc(fs_allocator *a, int dev, size_t size, void **out);
/* A stream-ordered allocation for `s` (not capturing: the caller checks);
 * *dev receives the stream's device, -1 for a bad or destroyed handle. */
fs_status fs_mem_alloc_async(fs_allocator *a, cudaStream_t s, bool pt, size_t size, void **out,
                             int *dev);
/* The same with more of fs_malloc's flags (FS_ALLOC_NO_GPU_WAIT). */
fs_status fs_mem_alloc_ordered(fs_allocator *a, cudaStream_t s, bool pt, size_t size,
                               unsigned flags, void **out, int *dev);
/* Frees a block the allocator may own: ordered on `key`'s stream, or, not
 * ordered, as cudaFree. */
fs_status fs_mem_free(fs_allocator *a, void *ptr, bool ordered, fs_stream_t key);
/* The bytes of `dev` the cache holds unused, which the memory-information
 * calls count as free. */
size_t fs_mem_cached_free(fs_allocator *a, int dev);

/* What the allocator is told of the work on streams (serve.c), by the
 * runtime's calls (runtime/cuda_streams.c) and the driver's
 * (driver/driver_work.c). */
/* Work was issued on `s` (pt: stream 0 is the per-thread stream): frees
 * must fence it. Call after the real call has put the work there. */
void fs_stream_note_work(cudaStream_t s, bool pt);
/* A stream just created: the allocator learns of it now, before any work
 * is put on it (fs_alloc_stream_register), so that the work follows what
 * every stream was made to wait for. Inside the shim (fs_shim_enter). */
void fs_stream_learn(cudaStream_t s);
/* The same, and `s` works on the memory at `p` and `q` (either may be NULL
 * or not the shim's): a use of those blocks is recorded. */
void fs_stream_record_uses(const void *p, const void *q, cudaStream_t s, bool pt);
/* The host has waited for work on `device` (-1: unknown, any). */
void fs_host_synced(int device);

#endif /* FS_SHIM_H */
