/* device.h - the little the caching allocator needs from a GPU.
 *
 * The allocator never names a CUDA symbol: it reaches the device only
 * through this table. The preload library fills it with the program's own
 * CUDA runtime and driver (interpose/core/cuda_device.c); the unit tests fill it
 * with a scripted fake (tests/allocator/fake_device.c); the benchmarks with a
 * zero-cost device.
 *
 * Streams and events are opaque pointer-sized handles. A stream handle is
 * whatever the caller uses to tell streams apart (the interposer maps the
 * program's cudaStream_t to it); the allocator only compares them and hands
 * them back to these functions. Every function may be called from any thread
 * and must not call back into the allocator. */
#ifndef FS_DEVICE_H
#define FS_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uintptr_t fs_stream_t;
typedef uintptr_t fs_event_t;

typedef enum fs_dev_status {
    FS_DEV_OK = 0,
    FS_DEV_NOT_READY, /* event_query: the event has not completed yet */
    FS_DEV_OUT_OF_MEMORY,
    FS_DEV_ERROR, /* anything else; the caller treats it as fatal for this call */
} fs_dev_status;

/* The memory a segment is made of, after the allocations it serves. A
 * device reset (cudaDeviceReset) destroys plain memory and keeps
 * stream-ordered memory, as the runtime does with cudaMalloc and
 * cudaMallocAsync allocations; virtual-memory mappings also stay. */
typedef enum fs_seg_memory {
    FS_SEG_PLAIN,   /* cudaMalloc-style */
    FS_SEG_ORDERED, /* the stream-ordered allocator's: survives a device reset */
} fs_seg_memory;

typedef struct fs_device_ops {
    void *ctx; /* passed back as the first argument of every function */

    /* Plain segments. `mem` says which memory; an ordered segment must be
     * usable by every stream once segment_alloc returns, and segment_free
     * is called only once no stream uses it. */
    fs_dev_status (*segment_alloc)(void *ctx, int device, fs_seg_memory mem, size_t size,
                                   void **out);
    fs_dev_status (*segment_free)(void *ctx, int device, fs_seg_memory mem, void *ptr);

    /* Virtual memory, for expandable segments. vm_map creates physical memory
     * of `size` bytes, maps it at `addr` inside a reservation and makes it
     * accessible from `device`, all or nothing; vm_unmap undoes all of that
     * for exactly one such mapping (a driver unmaps only whole mappings, so
     * the allocator maps every page with a call of its own). `size` and
     * `addr` are multiples of vm_granularity(), which is 0 when there is
     * none. May be NULL: no expandable segments. */
    size_t (*vm_granularity)(void *ctx, int device);
    fs_dev_status (*vm_reserve)(void *ctx, int device, size_t size, void **out);
    fs_dev_status (*vm_release)(void *ctx, int device, void *base, size_t size);
    fs_dev_status (*vm_map)(void *ctx, int device, void *addr, size_t size);
    fs_dev_status (*vm_unmap)(void *ctx, int device, void *addr, size_t size);

    /* Events: timing-free, used only for ordering. */
    fs_dev_status (*event_create)(void *ctx, int device, fs_event_t *out);
    void (*event_destroy)(void *ctx, int device, fs_event_t event);
    fs_dev_status (*event_record)(void *ctx, int device, fs_event_t event, fs_stream_t stream);
    fs_dev_status (*event_query)(void *ctx, int device, fs_event_t event); /* OK or NOT_READY */
    fs_dev_status (*event_synchronize)(void *ctx, int device, fs_event_t event);

    /* Make `stream` wait (on the GPU, never on the host) for `event`. */
    fs_dev_status (*stream_wait_event)(void *ctx, int device, fs_stream_t stream, fs_event_t event);

    /* True while `stream` is being captured into a CUDA graph: nothing may be
     * recorded or queried on it then. */
    bool (*stream_is_capturing)(void *ctx, int device, fs_stream_t stream);

    /* True while any capture in global mode is under way in the process: then
     * even a query on another stream would invalidate it. */
    bool (*capture_underway)(void *ctx);

    /* Block the host until all work on `device` is complete. */
    fs_dev_status (*device_synchronize)(void *ctx, int device);

    /* Total memory of `device` in bytes (cudaMemGetInfo's total), asked once
     * per device, at its first miss, outside the allocator's locks. May be
     * NULL: then
     * garbage_collection_threshold has nothing to measure against and is
     * off, and expandable segments reserve a fixed 256 GiB of address space. */
    size_t (*mem_capacity)(void *ctx, int device);
} fs_device_ops;

#endif /* FS_DEVICE_H */
