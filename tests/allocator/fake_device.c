/* fake_device.c - the scripted device behind the allocator tests: bump
 * allocated segments and reservations, events that complete on demand,
 * switchable captures, a memory limit, and a count of every call. */
#include "fake_device.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct fake_event {
    fs_stream_t stream;
    int device;
    bool recorded, complete, alive;
} fake_event;

typedef struct fake_seg {
    uintptr_t addr;
    size_t size;
    fs_seg_memory mem;
} fake_seg;

typedef struct fake_dev {
    uintptr_t seg_next, vm_next;
    size_t used;
    long live;
    fake_seg *segs; /* live segments, for their sizes at free */
    long cap;
} fake_dev;

struct fake_device {
    pthread_mutex_t mu;
    fs_device_ops ops;
    int ndev;
    size_t capacity;
    bool auto_complete;
    fake_dev *dev;
    fake_event *ev;
    size_t nev, capev;
    fs_stream_t capturing[8];
    int ncapturing;
    fake_counts c;
    fs_stream_t (*waits)[2];
    long nwaits, capwaits;
};

static fake_device *F(void *ctx)
{
    return ctx;
}

static fs_dev_status seg_alloc(void *ctx, int device, fs_seg_memory mem, size_t size, void **out)
{
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.segment_alloc++;
    if (mem == FS_SEG_ORDERED) f->c.segment_alloc_ordered++;
    fake_dev *d = &f->dev[device];
    if (size > f->capacity || d->used > f->capacity - size) {
        pthread_mutex_unlock(&f->mu);
        return FS_DEV_OUT_OF_MEMORY;
    }
    if (d->live == d->cap) {
        long cap = d->cap ? d->cap * 2 : 64;
        fake_seg *n = realloc(d->segs, (size_t)cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&f->mu);
            return FS_DEV_ERROR;
        }
        d->segs = n;
        d->cap = cap;
    }
    *out = (void *)d->seg_next;
    d->segs[d->live++] = (fake_seg){d->seg_next, size, mem};
    d->seg_next += (size + FAKE_GRANULARITY - 1) / FAKE_GRANULARITY * FAKE_GRANULARITY;
    d->used += size;
    pthread_mutex_unlock(&f->mu);
    return FS_DEV_OK;
}

static fs_dev_status seg_free(void *ctx, int device, fs_seg_memory mem, void *ptr)
{
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.segment_free++;
    fake_dev *d = &f->dev[device];
    /* not a live segment of that memory: the allocator is wrong */
    fs_dev_status st = FS_DEV_ERROR;
    for (long i = 0; i < d->live; i++) {
        if (d->segs[i].addr == (uintptr_t)ptr && d->segs[i].mem == mem) {
            d->used -= d->segs[i].size;
            d->segs[i] = d->segs[--d->live];
            st = FS_DEV_OK;
            break;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return st;
}

void fake_reset(fake_device *f, int device)
{
    pthread_mutex_lock(&f->mu);
    fake_dev *d = &f->dev[device];
    for (long i = 0; i < d->live;) {
        if (d->segs[i].mem == FS_SEG_PLAIN) {
            d->used -= d->segs[i].size;
            d->segs[i] = d->segs[--d->live];
        } else {
            i++;
        }
    }
    for (size_t i = 0; i < f->nev; i++)
        if (f->ev[i].device == device) f->ev[i].alive = false;
    pthread_mutex_unlock(&f->mu);
}

static size_t vm_gran(void *ctx, int device)
{
    (void)ctx;
    (void)device;
    return FAKE_GRANULARITY;
}

static fs_dev_status vm_reserve(void *ctx, int device, size_t size, void **out)
{
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.vm_reserve++;
    *out = (void *)f->dev[device].vm_next;
    f->dev[device].vm_next += (size + FAKE_GRANULARITY - 1) / FAKE_GRANULARITY * FAKE_GRANULARITY;
    pthread_mutex_unlock(&f->mu);
    return FS_DEV_OK;
}

static fs_dev_status vm_release(void *ctx, int device, void *base, size_t size)
{
    (void)device;
    (void)base;
    (void)size;
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.vm_release++;
    pthread_mutex_unlock(&f->mu);
    return FS_DEV_OK;
}

static fs_dev_status vm_map(void *ctx, int device, void *addr, size_t size)
{
    (void)addr;
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.vm_map++;
    fake_dev *d = &f->dev[device];
    if (size > f->capacity || d->used > f->capacity - size) {
        pthread_mutex_unlock(&f->mu);
        return FS_DEV_OUT_OF_MEMORY;
    }
    d->used += size;
    pthread_mutex_unlock(&f->mu);
    return FS_DEV_OK;
}

static fs_dev_status vm_unmap(void *ctx, int device, void *addr, size_t size)
{
    (void)addr;
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.vm_unmap++;
    f->dev[device].used -= size;
    pthread_mutex_unlock(&f->mu);
    return FS_DEV_OK;
}

static bool is_capturing_locked(fake_device *f, fs_stream_t s)
{
    for (int i = 0; i < f->ncapturing; i++)
        if (f->capturing[i] == s) return true;
    return false;
}

static fs_dev_status ev_create(void *ctx, int device, fs_event_t *out)
{
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.event_create++;
    if (f->nev == f->capev) {
        size_t cap = f->capev ? f->capev * 2 : 256;
        fake_event *n = realloc(f->ev, cap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&f->mu);
            return FS_DEV_ERROR;
        }
        f->ev = n;
        f->capev = cap;
    }
    f->ev[f->nev] = (fake_event){.device = device, .alive = true};
    *out = (fs_event_t)++f->nev;
    pthread_mutex_unlock(&f->mu);
    return FS_DEV_OK;
}

static void ev_destroy(void *ctx, int device, fs_event_t e)
{
    (void)device;
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.event_destroy++;
    if (!f->ev[e - 1].alive) f->c.dead_event_calls++;
    f->ev[e - 1].alive = false;
    pthread_mutex_unlock(&f->mu);
}

static fs_dev_status ev_record(void *ctx, int device, fs_event_t e, fs_stream_t s)
{
    (void)device;
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.event_record++;
    if (is_capturing_locked(f, s)) f->c.records_on_capturing++;
    fake_event *ev = &f->ev[e - 1];
    if (!ev->alive) f->c.dead_event_calls++;
    ev->stream = s;
    ev->recorded = true;
    ev->complete = f->auto_complete;
    pthread_mutex_unlock(&f->mu);
    return FS_DEV_OK;
}

static fs_dev_status ev_query(void *ctx, int device, fs_event_t e)
{
    (void)device;
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.event_query++;
    if (f->ncapturing) f->c.queries_while_capturing++;
    if (!f->ev[e - 1].alive) f->c.dead_event_calls++;
    bool done = f->ev[e - 1].complete || !f->ev[e - 1].recorded;
    pthread_mutex_unlock(&f->mu);
    return done ? FS_DEV_OK : FS_DEV_NOT_READY;
}

static fs_dev_status ev_sync(void *ctx, int device, fs_event_t e)
{
    (void)device;
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.event_sync++;
    if (!f->ev[e - 1].alive) f->c.dead_event_calls++;
    f->ev[e - 1].complete = true;
    pthread_mutex_unlock(&f->mu);
    return FS_DEV_OK;
}

static fs_dev_status stream_wait(void *ctx, int device, fs_stream_t s, fs_event_t e)
{
    (void)device;
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.stream_wait++;
    if (f->nwaits == f->capwaits) {
        long cap = f->capwaits ? f->capwaits * 2 : 64;
        void *n = realloc(f->waits, (size_t)cap * sizeof *f->waits);
        if (n) {
            f->waits = n;
            f->capwaits = cap;
        }
    }
    if (f->nwaits < f->capwaits) {
        f->waits[f->nwaits][0] = s;
        f->waits[f->nwaits][1] = f->ev[e - 1].stream;
        f->nwaits++;
    }
    pthread_mutex_unlock(&f->mu);
    return FS_DEV_OK;
}

static bool stream_capturing(void *ctx, int device, fs_stream_t s)
{
    (void)device;
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    bool c = is_capturing_locked(f, s);
    pthread_mutex_unlock(&f->mu);
    return c;
}

static bool capture_underway(void *ctx)
{
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    bool c = f->ncapturing > 0;
    pthread_mutex_unlock(&f->mu);
    return c;
}

static fs_dev_status dev_sync(void *ctx, int device)
{
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.device_sync++;
    for (size_t i = 0; i < f->nev; i++)
        if (f->ev[i].device == device && f->ev[i].recorded) f->ev[i].complete = true;
    pthread_mutex_unlock(&f->mu);
    return FS_DEV_OK;
}

static size_t capacity(void *ctx, int device)
{
    (void)device;
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    size_t c = f->capacity;
    pthread_mutex_unlock(&f->mu);
    return c;
}

fake_device *fake_create(int devices, size_t cap)
{
    fake_device *f = calloc(1, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    f->ndev = devices;
    f->capacity = cap;
    f->dev = calloc((size_t)devices, sizeof *f->dev);
    for (int i = 0; i < devices; i++) {
        f->dev[i].seg_next = FAKE_SEG_BASE + (uintptr_t)i * FAKE_DEV_STRIDE;
        f->dev[i].vm_next = FAKE_VM_BASE + (uintptr_t)i * FAKE_DEV_STRIDE;
    }
    f->ops = (fs_device_ops){
        .ctx = f,
        .segment_alloc = seg_alloc,
        .segment_free = seg_free,
        .vm_granularity = vm_gran,
        .vm_reserve = vm_reserve,
        .vm_release = vm_release,
        .vm_map = vm_map,
        .vm_unmap = vm_unmap,
        .event_create = ev_create,
        .event_destroy = ev_destroy,
        .event_record = ev_record,
        .event_query = ev_query,
        .event_synchronize = ev_sync,
        .stream_wait_event = stream_wait,
        .stream_is_capturing = stream_capturing,
        .capture_underway = capture_underway,
        .device_synchronize = dev_sync,
        .mem_capacity = capacity,
    };
    return f;
}

void fake_destroy(fake_device *f)
{
    free(f->ev);
    for (int i = 0; i < f->ndev; i++)
        free(f->dev[i].segs);
    free(f->dev);
    free(f->waits);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

const fs_device_ops *fake_ops(fake_device *f)
{
    return &f->ops;
}

void fake_auto_complete(fake_device *f, bool on)
{
    pthread_mutex_lock(&f->mu);
    f->auto_complete = on;
    pthread_mutex_unlock(&f->mu);
}

void fake_complete_all(fake_device *f)
{
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->nev; i++)
        if (f->ev[i].recorded) f->ev[i].complete = true;
    pthread_mutex_unlock(&f->mu);
}

void fake_complete_stream(fake_device *f, fs_stream_t s)
{
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->nev; i++)
        if (f->ev[i].recorded && f->ev[i].stream == s) f->ev[i].complete = true;
    pthread_mutex_unlock(&f->mu);
}

void fake_set_capturing(fake_device *f, fs_stream_t s, bool on)
{
    pthread_mutex_lock(&f->mu);
    if (on && f->ncapturing < 8) {
        f->capturing[f->ncapturing++] = s;
    } else if (!on) {
        for (int i = 0; i < f->ncapturing; i++)
            if (f->capturing[i] == s) f->capturing[i--] = f->capturing[--f->ncapturing];
    }
    pthread_mutex_unlock(&f->mu);
}

void fake_set_capacity(fake_device *f, size_t cap)
{
    pthread_mutex_lock(&f->mu);
    f->capacity = cap;
    pthread_mutex_unlock(&f->mu);
}

void fake_counts_get(fake_device *f, fake_counts *out)
{
    pthread_mutex_lock(&f->mu);
    *out = f->c;
    pthread_mutex_unlock(&f->mu);
}

size_t fake_used(fake_device *f, int device)
{
    pthread_mutex_lock(&f->mu);
    size_t u = f->dev[device].used;
    pthread_mutex_unlock(&f->mu);
    return u;
}

long fake_live_segments(fake_device *f, int device)
{
    pthread_mutex_lock(&f->mu);
    long n = f->dev[device].live;
    pthread_mutex_unlock(&f->mu);
    return n;
}

bool fake_wait_log(fake_device *f, long n, fs_stream_t *waiter, fs_stream_t *on)
{
    pthread_mutex_lock(&f->mu);
    bool ok = n >= 0 && n < f->nwaits;
    if (ok) {
        *waiter = f->waits[n][0];
        *on = f->waits[n][1];
    }
    pthread_mutex_unlock(&f->mu);
    return ok;
}
