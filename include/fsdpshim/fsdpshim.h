/* fsdpshim.h - the public C API of libfsdpshim.so (SPEC section 10).
 *
 * For programs (or Python through ctypes) running under the shim that want
 * to tell it more than the CUDA API says, or read what it knows. Only plain C
 * types cross this interface: streams and pointers are void *, devices int,
 * counters int64_t, so ctypes can call every function without a header:
 *
 *     lib = ctypes.CDLL(None)  # the preloaded libfsdpshim.so is in the process
 *     v = ctypes.c_int64()
 *     lib.fsdpshim_stat(b"allocated_bytes.all.peak", 0, ctypes.byref(v))
 *
 * The shim works only when preloaded (LD_PRELOAD, or `fsdpshim run`). A C
 * program reaches these functions without linking the shim, so that it also
 * runs without it, through fsdpshim_loader.h (or dlsym); linked with
 * -lfsdpshim instead, the program's CUDA calls may bind to libcudart and
 * never reach the shim, which then stays inactive (docs/api.md).
 *
 * Every function returns an fsdpshim_status and never crashes: while the
 * shim is not active (not preloaded, no CUDA runtime loaded yet, no device)
 * each one is a no-op returning FSDPSHIM_ERR_INACTIVE, whatever its
 * arguments. */
#ifndef FSDPSHIM_H
#define FSDPSHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fsdpshim_status {
    FSDPSHIM_OK = 0,
    FSDPSHIM_ERR_INACTIVE = 1,  /* the shim is not managing memory in this process */
    FSDPSHIM_ERR_INVALID = 2,   /* a bad argument (null out-pointer, bad device, bad stream) */
    FSDPSHIM_ERR_NOT_OWNED = 3, /* the pointer is in no live block of the shim */
    FSDPSHIM_ERR_NOT_FOUND = 4, /* no statistic of that name */
    FSDPSHIM_ERR_EMPTY = 5,     /* annotation pop with none pushed */
    FSDPSHIM_ERR_DEVICE = 6,    /* the device failed a call */
} fsdpshim_status;

/* FSDPSHIM_OK when the shim manages this process's device memory: the
 * program's CUDA calls reach it (it is preloaded), the CUDA runtime is
 * loaded and a device is present. Else FSDPSHIM_ERR_INACTIVE. */
int fsdpshim_active(void);

/* Records that `stream` (a cudaStream_t) uses the block containing `ptr`:
 * the block is reused only after that use completes (torch's
 * Tensor.record_stream). FSDPSHIM_ERR_NOT_OWNED for memory the shim did not
 * allocate. */
int fsdpshim_record_stream(void *ptr, void *stream);

/* Sets / reads the calling thread's current stream, which is per device as
 * in PyTorch: fsdpshim_set_stream(s) sets it for s's own device (NULL, and
 * the legacy and per-thread handles, name a stream of the current device);
 * cudaMalloc on device d allocates on d for the stream set for d, else for
 * d's legacy default stream; fsdpshim_get_stream answers for the current
 * device (NULL: the legacy default stream). A stream of another device never
 * changes where cudaMalloc allocates. FSDPSHIM_ERR_INVALID for a bad
 * stream (or a null out-pointer); FSDPSHIM_ERR_DEVICE when the current
 * device cannot be read, or the thread's table of streams not allocated. */
int fsdpshim_set_stream(void *stream);
int fsdpshim_get_stream(void **stream);

/* Releases every cached, unused segment of `device` (-1: every device),
 * after waiting for pending frees (torch.cuda.empty_cache). */
int fsdpshim_empty_cache(int device);

/* Reads one statistic by its PyTorch name, for `device` (-1: summed over
 * devices): "<stat>.<all|small_pool|large_pool>.<current|peak|allocated|
 * freed>" for allocation, segment, active, inactive_split, allocated_bytes,
 * reserved_bytes, active_bytes, inactive_split_bytes, requested_bytes; or a
 * plain counter: num_alloc_retries, num_ooms, num_sync_all_streams,
 * num_device_alloc, num_device_free, pending_frees, pending_free_bytes,
 * largest_free_block. */
int fsdpshim_stat(const char *name, int device, int64_t *value);

/* Resets peak statistics of `device` (-1: all) to their current values. */
int fsdpshim_reset_peak_stats(int device);

/* Writes a torch.cuda.memory_summary()-shaped text for `device` (-1: all)
 * into buf (NUL terminated, truncated to len). *needed (if not NULL)
 * receives the length the whole text needs, without the NUL. */
int fsdpshim_memory_summary(int device, char *buf, size_t len, size_t *needed);

/* Pushes / pops an annotation on the calling thread's stack: events in
 * between are attributed to it in traces. Names are copied. The stack is
 * the one NVTX ranges go on (NVTX's default domain). */
int fsdpshim_annotation_push(const char *name);
int fsdpshim_annotation_pop(void);

/* fsdpshim_snapshot writes a snapshot file of every segment and block
 * (docs/tracing.md) and, while tracing, marks the trace with a `snapshot`
 * event named `label`. fsdpshim_trace_flush writes everything buffered to
 * the trace file before returning (nothing to do while tracing is off). */
int fsdpshim_snapshot(const char *label);
int fsdpshim_trace_flush(void);

/* What `fsdpshim attach` and `fsdpshim detach` call, through gdb, in a
 * process the shim was not preloaded into (docs/cli.md, "attach"):
 * fsdpshim_attach_start traces the process's own allocations through CUPTI,
 * or, where CUPTI cannot be had, through the loaded objects' GOT slots, at
 * `level` (1 events, 2 stacks, 3 python) to `trace_path` (an FSDPSHIM_TRACE
 * pattern), changing nothing else; it answers FSDPSHIM_OK,
 * FSDPSHIM_ERR_INVALID for a bad level or a trace file that cannot be
 * created (the process's stderr says why), FSDPSHIM_ERR_INACTIVE when the shim is
 * preloaded (it traces through FSDPSHIM_CONF then), or FSDPSHIM_ERR_DEVICE
 * when neither way can be had, no CUDA runtime or driver being loaded (the
 * reason is on the process's stderr).
 * fsdpshim_attach_way then names the way taken, for the command to print:
 * "CUPTI (PATH)" or "the GOT slots, without CUPTI (WHY)".
 * fsdpshim_attach_stop unsubscribes and writes out and closes the trace;
 * FSDPSHIM_ERR_INACTIVE when not attached. */
int fsdpshim_attach_start(const char *trace_path, int level);
const char *fsdpshim_attach_way(void);
int fsdpshim_attach_stop(void);

#ifdef __cplusplus
}
#endif

#endif /* FSDPSHIM_H */
