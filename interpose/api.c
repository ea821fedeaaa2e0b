/* api.c - the public C API (include/fsdpshim/fsdpshim.h).
 *
 * Thin: each function checks that the shim is active, enters it (so that
 * runtime calls it causes are the shim's own) and asks the allocator or the
 * trace. Annotations go on the thread's stack in trace/annot.c, which NVTX
 * ranges share; while tracing is off snapshot marks and flushes have
 * nothing to do. */
#include "../include/fsdpshim/fsdpshim.h"
#include "../trace/annot.h"
#include "../trace/trace.h"
#include "core/shim.h"
#include "core/trace_glue.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define API FS_EXPORT

static bool device_ok(int device, bool any)
{
    return (any && device == -1) || (device >= 0 && device < fs_shim_device_count());
}

API int fsdpshim_active(void)
{
    if (!fs_shim_enter_active()) return FSDPSHIM_ERR_INACTIVE;
    fs_shim_leave();
    return FSDPSHIM_OK;
}

API int fsdpshim_record_stream(void *ptr, void *stream)
{
    fs_allocator *a = fs_shim_enter_active();
    fs_stream_t key;
    fs_status st;
    int dev;

    if (!a) return FSDPSHIM_ERR_INACTIVE;
    key = fs_shim_stream_key((cudaStream_t)stream, false, &dev);
    st = dev < 0 ? FS_ERR_INVALID : fs_record_stream(a, ptr, key);
    if (st == FS_OK) fs_alloc_stream_note_work(a, dev, key);
    fs_shim_leave();
    return st == FS_OK            ? FSDPSHIM_OK
           : st == FS_ERR_INVALID ? FSDPSHIM_ERR_INVALID
                                  : FSDPSHIM_ERR_NOT_OWNED;
}

/* The stream is recorded for its own device, as PyTorch's current stream
 * is per device; NULL (and the legacy and per-thread handles) name a stream
 * of the current device. */
API int fsdpshim_set_stream(void *stream)
{
    fs_allocator *a = fs_shim_enter_active();
    int dev;

    if (!a) return FSDPSHIM_ERR_INACTIVE;
    fs_shim_stream_key((cudaStream_t)stream, false, &dev);
    fs_shim_leave();
    if (dev < 0) return FSDPSHIM_ERR_INVALID;
    return fs_thread_stream_set(dev, (cudaStream_t)stream) ? FSDPSHIM_OK : FSDPSHIM_ERR_DEVICE;
}

API int fsdpshim_get_stream(void **stream)
{
    int dev;

    if (!fs_shim_enter_active()) return FSDPSHIM_ERR_INACTIVE;
    dev = fs_shim_current_device();
    fs_shim_leave();
    if (!stream) return FSDPSHIM_ERR_INVALID;
    if (dev < 0) return FSDPSHIM_ERR_DEVICE;
    *stream = (void *)fs_thread_stream(dev);
    return FSDPSHIM_OK;
}

API int fsdpshim_empty_cache(int device)
{
    fs_allocator *a = fs_shim_enter_active();
    fs_status st;

    if (!a) return FSDPSHIM_ERR_INACTIVE;
    st = device_ok(device, true) ? fs_alloc_empty_cache(a, device) : FS_ERR_INVALID;
    fs_shim_leave();
    return st == FS_OK            ? FSDPSHIM_OK
           : st == FS_ERR_INVALID ? FSDPSHIM_ERR_INVALID
                                  : FSDPSHIM_ERR_DEVICE;
}

/* "<stat>.<pool>.<field>" or a plain counter name. */
static bool stat_lookup(const fs_alloc_stats *s, const char *name, int64_t *value)
{
    static const struct {
        const char *name;
        size_t offset;
    } stats[] =
        {
#define STAT(f) {#f, offsetof(fs_alloc_stats, f)}
            STAT(allocation),      STAT(segment),
            STAT(active),          STAT(inactive_split),
            STAT(allocated_bytes), STAT(reserved_bytes),
            STAT(active_bytes),    STAT(inactive_split_bytes),
            STAT(requested_bytes),
#undef STAT
        },
      counters[] = {
#define COUNTER(f) {#f, offsetof(fs_alloc_stats, f)}
          COUNTER(num_alloc_retries),  COUNTER(num_ooms),           COUNTER(num_sync_all_streams),
          COUNTER(num_device_alloc),   COUNTER(num_device_free),    COUNTER(pending_frees),
          COUNTER(pending_free_bytes), COUNTER(largest_free_block),
#undef COUNTER
      };
    static const char *const pools[FS_SIZE_CLASSES] = {
        [FS_SIZE_ALL] = "all", [FS_SIZE_SMALL] = "small_pool", [FS_SIZE_LARGE] = "large_pool"};
    static const char *const fields[] = {"current", "peak", "allocated", "freed"};
    const char *dot1 = strchr(name, '.'), *dot2;
    size_t n;

    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        if (!strcmp(name, counters[i].name)) {
            *value = *(const int64_t *)((const char *)s + counters[i].offset);
            return true;
        }
    if (!dot1 || !(dot2 = strchr(dot1 + 1, '.'))) return false;
    n = (size_t)(dot1 - name);
    for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++) {
        if (strlen(stats[i].name) != n || strncmp(name, stats[i].name, n)) continue;
        for (int p = 0; p < FS_SIZE_CLASSES; p++) {
            if (strlen(pools[p]) != (size_t)(dot2 - dot1 - 1) ||
                strncmp(dot1 + 1, pools[p], (size_t)(dot2 - dot1 - 1)))
                continue;
            const fs_stat *st = (const fs_stat *)((const char *)s + stats[i].offset) + p;
            const int64_t vals[] = {st->current, st->peak, st->allocated, st->freed};
            for (int f = 0; f < 4; f++)
                if (!strcmp(dot2 + 1, fields[f])) {
                    *value = vals[f];
                    return true;
                }
        }
    }
    return false;
}

API int fsdpshim_stat(const char *name, int device, int64_t *value)
{
    fs_allocator *a;
    fs_alloc_stats s;
    bool found;

    if (!(a = fs_shim_enter_active())) return FSDPSHIM_ERR_INACTIVE;
    if (!name || !value || !device_ok(device, true)) {
        fs_shim_leave();
        return FSDPSHIM_ERR_INVALID;
    }
    fs_alloc_get_stats(a, device, &s);
    fs_shim_leave();
    found = stat_lookup(&s, name, value);
    return found ? FSDPSHIM_OK : FSDPSHIM_ERR_NOT_FOUND;
}

API int fsdpshim_reset_peak_stats(int device)
{
    fs_allocator *a = fs_shim_enter_active();

    if (!a) return FSDPSHIM_ERR_INACTIVE;
    if (device_ok(device, true)) fs_alloc_reset_peak(a, device);
    fs_shim_leave();
    return device_ok(device, true) ? FSDPSHIM_OK : FSDPSHIM_ERR_INVALID;
}

API int fsdpshim_memory_summary(int device, char *buf, size_t len, size_t *needed)
{
    fs_allocator *a;
    size_t n;

    if (!(a = fs_shim_enter_active())) return FSDPSHIM_ERR_INACTIVE;
    if ((!buf && len) || !device_ok(device, true)) {
        fs_shim_leave();
        return FSDPSHIM_ERR_INVALID;
    }
    n = fs_alloc_summary(a, device, buf, len);
    fs_shim_leave();
    if (needed) *needed = n;
    return FSDPSHIM_OK;
}

/* The annotation stacks are trace/annot.c's, shared with NVTX ranges: a
 * name pushed here is a range of NVTX's default domain. */
API int fsdpshim_annotation_push(const char *name)
{
    if (!fs_shim_enter_active()) return FSDPSHIM_ERR_INACTIVE;
    fs_shim_leave();
    if (!name) return FSDPSHIM_ERR_INVALID;
    /* -1 only when the name cannot be copied */
    return fs_annot_push(NULL, name, strlen(name)) < 0 ? FSDPSHIM_ERR_INVALID : FSDPSHIM_OK;
}

API int fsdpshim_annotation_pop(void)
{
    if (!fs_shim_enter_active()) return FSDPSHIM_ERR_INACTIVE;
    fs_shim_leave();
    return fs_annot_pop(NULL) < 0 ? FSDPSHIM_ERR_EMPTY : FSDPSHIM_OK;
}

API int fsdpshim_snapshot(const char *label)
{
    char path[4096];

    if (!fs_shim_enter_active()) return FSDPSHIM_ERR_INACTIVE;
    if (fs_trace_glue_snapshot("fsdpshim-snapshot", NULL, path, sizeof path))
        fs_log(FS_LOG_INFO, "snapshot%s%s: %s", label ? " " : "", label ? label : "", path);
    else
        fs_log(FS_LOG_WARN, "no snapshot%s%s: %s", label ? " " : "", label ? label : "", path);
    fs_shim_leave();
    if (fs_trace_level()) {
        fs_fmt_event ev = {.kind = FS_REC_SNAPSHOT, .device = -1, .annot = fs_annot_current()};
        if (label) ev.name = fs_trace_string(label, strlen(label));
        fs_trace_event(&ev);
    }
    return FSDPSHIM_OK;
}

API int fsdpshim_trace_flush(void)
{
    if (!fs_shim_enter_active()) return FSDPSHIM_ERR_INACTIVE;
    fs_shim_leave();
    fs_trace_flush();
    return FSDPSHIM_OK;
}
