/* fake_device.h - a scripted device for the allocator tests.
 *
 * Segments and reservations come from bump pointers (first at FAKE_SEG_BASE
 * and FAKE_VM_BASE, each 2 MiB aligned, never reused), so every address a
 * test expects can be written down; mappings follow the driver's rules. Events complete only when
 * the test says so (or at once in auto-complete mode); captures, failures and a memory limit are
 * switches. Every call is counted. Thread-safe. */
#ifndef FAKE_DEVICE_H
#define FAKE_DEVICE_H

#include "device.h"

#define FAKE_SEG_BASE    ((uintptr_t)0x100000000000ull)
#define FAKE_VM_BASE     ((uintptr_t)0x200000000000ull)
#define FAKE_DEV_STRIDE  ((uintptr_t)1 << 40)
#define FAKE_GRANULARITY ((size_t)2 << 20)

typedef struct fake_device fake_device;

typedef struct fake_counts {
    long segment_alloc, segment_free, vm_reserve, vm_release, vm_map, vm_unmap;
    long segment_alloc_ordered; /* of segment_alloc, FS_SEG_ORDERED ones */
    long event_create, event_destroy, event_record, event_query, event_sync;
    long stream_wait, device_sync;
    long queries_while_capturing, records_on_capturing; /* must stay 0 */
    long dead_event_calls; /* on destroyed events (or reset away): must stay 0 */
    long vm_refused;       /* virtual-memory calls the driver would refuse: must stay 0 */
} fake_counts;

fake_device *fake_create(int devices, size_t capacity);
void fake_destroy(fake_device *f);
const fs_device_ops *fake_ops(fake_device *f);

void fake_auto_complete(fake_device *f, bool on); /* events complete when recorded */
void fake_complete_all(fake_device *f);
void fake_complete_stream(fake_device *f, fs_stream_t s); /* events recorded on s so far */
/* A host wait on an incomplete event of stream s (event_synchronize) calls
 * fn, outside the device's lock, before the event counts as complete: a
 * test whose model tracks completions completes the stream there. */
void fake_on_sync(fake_device *f, void (*fn)(void *ctx, fs_stream_t s), void *ctx);
/* A query that finds an event of stream s incomplete calls fn afterwards,
 * outside the device's lock: the GPU making progress while the host polls
 * (what fn completes, the next query sees). */
void fake_on_query(fake_device *f, void (*fn)(void *ctx, fs_stream_t s), void *ctx);
void fake_set_capturing(fake_device *f, fs_stream_t s, bool on); /* global mode: underway too */
void fake_set_capacity(fake_device *f, size_t capacity);
void fake_counts_get(fake_device *f, fake_counts *out);
size_t fake_used(fake_device *f, int device); /* bytes allocated or mapped */
/* The map_in-th next vm_map call and the unmap_in-th next vm_unmap call
 * fail with FS_DEV_ERROR (0: none does). */
void fake_fail_vm(fake_device *f, long map_in, long unmap_in);
long fake_mappings(fake_device *f, int device); /* vm_map mappings in place */
long fake_live_segments(fake_device *f, int device);
/* cudaDeviceReset: plain segments and the device's events are destroyed,
 * ordered segments and mappings stay. */
void fake_reset(fake_device *f, int device);
/* The n-th stream_wait_event call: the stream that waited and the stream
 * whose event it waited for. False if there was no such call. */
bool fake_wait_log(fake_device *f, long n, fs_stream_t *waiter, fs_stream_t *on);

#endif /* FAKE_DEVICE_H */
