/* runtime.h - what the CUDA runtime glue files share among themselves.
 *
 * shim.h is the contract with the NCCL glue; this header is the runtime
 * side's own plumbing: the stream table (streams.c), graph-capture tracking
 * (capture.c), stream pools (stream_pool.c), the device table the allocator
 * runs on (cuda_device.c). What shim.c keeps for everyone is in shim.h. */
#ifndef FS_RUNTIME_H
#define FS_RUNTIME_H

#include "../shim.h"

/* ---- streams.c ---- */
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

/* ---- cuda_streams.c: what the allocator is told of the work on streams
 * (also for the driver's work calls, driver/driver_work.c) ---- */
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

/* ---- cuda_memory.c ----
 * The allocator's side of the memory calls, shared by the runtime's entry
 * points and the driver's (cuda_driver.c). Called inside the shim;
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

/* ---- capture.c ---- */
/* Number of captures under way in the process (any mode). */
unsigned fs_capture_active(void);
bool fs_capture_global_underway(void);
bool fs_capture_key_capturing(fs_stream_t key);
void fs_capture_begin(fs_stream_t key, enum cudaStreamCaptureMode mode);
void fs_capture_end(fs_stream_t key);
void fs_capture_reset(void);

/* ---- cuda_device.c ---- */
/* The allocator's device table over the program's runtime; expandable
 * segments only if asked and the driver's VMM entry points are reachable. */
const fs_device_ops *fs_cuda_device_ops(bool want_vm);
/* The device's free and total memory as the runtime reports them (the
 * program's last error kept); false when it cannot say. */
bool fs_cuda_mem_info(int device, size_t *free, size_t *total);
/* The driver's virtual-memory API, found through the runtime once; NULL
 * when it cannot be reached. */
const struct fs_vmm *fs_cuda_vmm(void);
/* fs_vmm_export on `device`: a descriptor for the expandable segment's
 * page at `page`, for another process. */
fs_dev_status fs_cuda_vm_export(int device, void *page, int *fd);

/* ---- ordered_segments.c ---- */
/* A stream-ordered segment's memory, and giving it back (inside
 * fs_internal_begin, the device current): a mapping of its own through the
 * driver's virtual-memory API, else a block of the shim's own pool. */
fs_dev_status fs_ordered_alloc(int device, size_t size, void **out);
fs_dev_status fs_ordered_free(int device, void *ptr);
/* The runtime state behind the table that a cudaDeviceReset of `device`
 * destroyed is forgotten; with -1 (fork child) all of it. */
void fs_cuda_device_reset(int device);
/* The program granted peers access to `device`'s default pool: the shim's
 * stream-ordered segments there, which hold its cudaMallocAsync blocks,
 * grant the same. */
void fs_cuda_ordered_access(int device, const struct cudaMemAccessDesc *descs, size_t count);
/* The most device memory the shim's fallback pool (behind its
 * stream-ordered segments where mappings cannot be made) held on `device`,
 * read after each segment; 0 when it gave none. */
uint64_t fs_cuda_ordered_reserved_peak(int device);

/* Brackets a batch of internal runtime calls: the program's last error is
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

/* ---- stream_pool.c ---- */
cudaError_t fs_pool_stream_create(cudaStream_t *out, unsigned flags, int priority);
cudaError_t fs_pool_stream_destroy(cudaStream_t s);
/* Forget pooled streams of `device` (cudaDeviceReset), or all (-1, fork). */
void fs_pool_reset(int device);

#endif /* FS_RUNTIME_H */
