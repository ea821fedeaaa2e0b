/* fake_device.c - the scripted device behind the allocator tests: bump
 * allocated segments and reservations, events that complete on demand,
 * switchable captures, a memory limit, and a count of every call. Virtual
 * memory follows the driver's rules: mappings are whole granules inside a
 * reservation and never overlap, an unmap must cover whole mappings and a
 * reservation is freed only with nothing mapped in it; a call that breaks
 * a rule is refused (FS_DEV_ERROR) and counted. */
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
    fs_seg_memory mem; /* segments only */
} fake_seg;

/* A list of address ranges: live segments, reservations or mappings. */
typedef struct fake_ranges {
    fake_seg *v;
    long n, cap;
} fake_ranges;

typedef struct fake_dev {
    uintptr_t seg_next, vm_next;
    size_t used;
    fake_ranges segs; /* live segments, for their sizes at free */
    fake_ranges reserved, mapped;
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
    long fail_map, fail_unmap; /* the n-th next call fails; 0: none does */
    fs_stream_t (*waits)[2];
    long nwaits, capwaits;
    void (*on_sync)(void *ctx, fs_stream_t s);
    void *on_sync_ctx;
    void (*on_query)(void *ctx, fs_stream_t s);
    void *on_query_ctx;
};

static fake_device *F(void *ctx)
{
    return ctx;
}

/* The new range, or NULL when there is no memory for it. */
static fake_seg *ranges_add(fake_ranges *r, uintptr_t addr, size_t size)
{
    if (r->n == r->cap) {
        long cap = r->cap ? r->cap * 2 : 64;
        fake_seg *n = realloc(r->v, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        r->v = n;
        r->cap = cap;
    }
    r->v[r->n] = (fake_seg){addr, size, FS_SEG_PLAIN};
    return &r->v[r->n++];
}

static void ranges_del(fake_ranges *r, long i)
{
    r->v[i] = r->v[--r->n];
}

/* The range starting at addr, or -1. */
static long ranges_find(const fake_ranges *r, uintptr_t addr)
{
    for (long i = 0; i < r->n; i++)
        if (r->v[i].addr == addr) return i;
    return -1;
}

/* Bytes of the list's ranges that lie inside [addr, addr + size), and
 * whether any range straddles its ends. */
static size_t ranges_inside(const fake_ranges *r, uintptr_t addr, size_t size, bool *straddles)
{
    size_t in = 0;
    *straddles = false;
    for (long i = 0; i < r->n; i++) {
        uintptr_t lo = r->v[i].addr, hi = lo + r->v[i].size;
        if (hi <= addr || lo >= addr + size) continue;
        if (lo < addr || hi > addr + size)
            *straddles = true;
        else
            in += r->v[i].size;
    }
    return in;
}

static bool fits_capacity(fake_device *f, fake_dev *d, size_t size)
{
    return size <= f->capacity && d->used <= f->capacity - size;
}

static fs_dev_status seg_alloc(void *ctx, int device, fs_seg_memory mem, size_t size, void **out)
{
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.segment_alloc++;
    if (mem == FS_SEG_ORDERED) f->c.segment_alloc_ordered++;
    fake_dev *d = &f->dev[device];
    fs_dev_status st = FS_DEV_OK;
    fake_seg *seg = NULL;
    if (!fits_capacity(f, d, size))
        st = FS_DEV_OUT_OF_MEMORY;
    else if (!(seg = ranges_add(&d->segs, d->seg_next, size)))
        st = FS_DEV_ERROR;
    if (st == FS_DEV_OK) {
        seg->mem = mem;
        *out = (void *)d->seg_next;
        d->seg_next += (size + FAKE_GRANULARITY - 1) / FAKE_GRANULARITY * FAKE_GRANULARITY;
        d->used += size;
    }
    pthread_mutex_unlock(&f->mu);
    return st;
}

static fs_dev_status seg_free(void *ctx, int device, fs_seg_memory mem, void *ptr)
{
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.segment_free++;
    fake_dev *d = &f->dev[device];
    /* not a live segment of that memory: the allocator is wrong */
    fs_dev_status st = FS_DEV_ERROR;
    long i = ranges_find(&d->segs, (uintptr_t)ptr);
    if (i >= 0 && d->segs.v[i].mem == mem) {
        d->used -= d->segs.v[i].size;
        ranges_del(&d->segs, i);
        st = FS_DEV_OK;
    }
    pthread_mutex_unlock(&f->mu);
    return st;
}

void fake_reset(fake_device *f, int device)
{
    pthread_mutex_lock(&f->mu);
    fake_dev *d = &f->dev[device];
    for (long i = 0; i < d->segs.n;) {
        if (d->segs.v[i].mem == FS_SEG_PLAIN) {
            d->used -= d->segs.v[i].size;
            ranges_del(&d->segs, i);
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
    fake_dev *d = &f->dev[device];
    fs_dev_status st = FS_DEV_OK;
    if (size == 0 || size % FAKE_GRANULARITY) {
        f->c.vm_refused++;
        st = FS_DEV_ERROR;
    } else if (!ranges_add(&d->reserved, d->vm_next, size)) {
        st = FS_DEV_ERROR;
    } else {
        *out = (void *)d->vm_next;
        d->vm_next += size;
    }
    pthread_mutex_unlock(&f->mu);
    return st;
}

static fs_dev_status vm_release(void *ctx, int device, void *base, size_t size)
{
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.vm_release++;
    fake_dev *d = &f->dev[device];
    long i = ranges_find(&d->reserved, (uintptr_t)base);
    bool straddles;
    fs_dev_status st = FS_DEV_OK;
    if (i < 0 || d->reserved.v[i].size != size ||
        ranges_inside(&d->mapped, (uintptr_t)base, size, &straddles)) {
        f->c.vm_refused++;
        st = FS_DEV_ERROR;
    } else {
        ranges_del(&d->reserved, i);
    }
    pthread_mutex_unlock(&f->mu);
    return st;
}

/* One new mapping of `size` bytes at addr, as cuMemCreate + cuMemMap. */
static fs_dev_status vm_map(void *ctx, int device, void *addr, size_t size)
{
    fake_device *f = F(ctx);
    uintptr_t at = (uintptr_t)addr;
    pthread_mutex_lock(&f->mu);
    f->c.vm_map++;
    fake_dev *d = &f->dev[device];
    bool in_reservation = false, straddles;
    for (long i = 0; i < d->reserved.n; i++)
        in_reservation |= at >= d->reserved.v[i].addr &&
                          at + size <= d->reserved.v[i].addr + d->reserved.v[i].size;
    fs_dev_status st = FS_DEV_OK;
    if (size == 0 || size % FAKE_GRANULARITY || at % FAKE_GRANULARITY || !in_reservation ||
        ranges_inside(&d->mapped, at, size, &straddles) || straddles) {
        f->c.vm_refused++;
        st = FS_DEV_ERROR;
    } else if (f->fail_map && --f->fail_map == 0) {
        st = FS_DEV_ERROR;
    } else if (!fits_capacity(f, d, size)) {
        st = FS_DEV_OUT_OF_MEMORY;
    } else if (!ranges_add(&d->mapped, at, size)) {
        st = FS_DEV_ERROR;
    } else {
        d->used += size;
    }
    pthread_mutex_unlock(&f->mu);
    return st;
}

/* Unmaps whole mappings only, as cuMemUnmap. */
static fs_dev_status vm_unmap(void *ctx, int device, void *addr, size_t size)
{
    fake_device *f = F(ctx);
    uintptr_t at = (uintptr_t)addr;
    pthread_mutex_lock(&f->mu);
    f->c.vm_unmap++;
    fake_dev *d = &f->dev[device];
    bool straddles;
    fs_dev_status st = FS_DEV_OK;
    if (size == 0 || ranges_inside(&d->mapped, at, size, &straddles) != size || straddles) {
        f->c.vm_refused++;
        st = FS_DEV_ERROR;
    } else if (f->fail_unmap && --f->fail_unmap == 0) {
        st = FS_DEV_ERROR;
    } else {
        for (long i = d->mapped.n - 1; i >= 0; i--)
            if (d->mapped.v[i].addr >= at && d->mapped.v[i].addr < at + size)
                ranges_del(&d->mapped, i);
        d->used -= size;
    }
    pthread_mutex_unlock(&f->mu);
    return st;
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
    void (*hook)(void *, fs_stream_t) = done ? NULL : f->on_query;
    void *hook_ctx = f->on_query_ctx;
    fs_stream_t s = f->ev[e - 1].stream;
    pthread_mutex_unlock(&f->mu);
    if (hook) hook(hook_ctx, s); /* the device makes progress: seen by the next query */
    return done ? FS_DEV_OK : FS_DEV_NOT_READY;
}

static fs_dev_status ev_sync(void *ctx, int device, fs_event_t e)
{
    (void)device;
    fake_device *f = F(ctx);
    pthread_mutex_lock(&f->mu);
    f->c.event_sync++;
    if (!f->ev[e - 1].alive) f->c.dead_event_calls++;
    void (*hook)(void *, fs_stream_t) = f->ev[e - 1].complete ? NULL : f->on_sync;
    void *hook_ctx = f->on_sync_ctx;
    fs_stream_t s = f->ev[e - 1].stream;
    f->ev[e - 1].complete = !hook;
    pthread_mutex_unlock(&f->mu);
    if (hook) {
        hook(hook_ctx, s);
        pthread_mutex_lock(&f->mu);
        f->ev[e - 1].complete = true;
        pthread_mutex_unlock(&f->mu);
    }
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
    for (int i = 0; i < f->ndev; i++) {
        free(f->dev[i].segs.v);
        free(f->dev[i].reserved.v);
        free(f->dev[i].mapped.v);
    }
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

void fake_on_sync(fake_device *f, void (*fn)(void *ctx, fs_stream_t s), void *ctx)
{
    pthread_mutex_lock(&f->mu);
    f->on_sync = fn;
    f->on_sync_ctx = ctx;
    pthread_mutex_unlock(&f->mu);
}

void fake_on_query(fake_device *f, void (*fn)(void *ctx, fs_stream_t s), void *ctx)
{
    pthread_mutex_lock(&f->mu);
    f->on_query = fn;
    f->on_query_ctx = ctx;
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

void fake_fail_vm(fake_device *f, long map_in, long unmap_in)
{
    pthread_mutex_lock(&f->mu);
    f->fail_map = map_in;
    f->fail_unmap = unmap_in;
    pthread_mutex_unlock(&f->mu);
}

long fake_mappings(fake_device *f, int device)
{
    pthread_mutex_lock(&f->mu);
    long n = f->dev[device].mapped.n;
    pthread_mutex_unlock(&f->mu);
    return n;
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
    long n = f->dev[device].segs.n;
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
