/* passive.c - the trace-only event source (passive.h).
 *
 * A trace-only attach sees the program's calls, not an allocator: the
 * sizes of the live blocks and each device's total live bytes are kept
 * here, in a table sharded by address (each shard with its own lock, so
 * threads freeing different blocks rarely meet), and every event carries
 * the totals after it, as the allocator's events do. There is no cache, so
 * a device's reserved bytes are its allocated bytes.
 *
 * A freed block leaves the table when the free call begins, not when it
 * returns: once the runtime has the address back, another thread's
 * allocation can get it, and that allocation's event, written when its call
 * returns, may come first. */
#include "passive.h"

#include "../../trace/annot.h"
#include "../../trace/python.h"
#include "../../trace/stack.h"
#include "../../trace/trace.h"
#include "../python/gil.h"
#include "../core/shim.h"

#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SHARDS     64
#define MAX_RANGES 32

typedef struct live {
    uint64_t addr; /* 0: an empty slot */
    uint64_t size;
    int device;
} live;

typedef struct shard {
    pthread_mutex_t lock;
    live *slots;
    size_t cap, used;
} shard;

static shard shards[SHARDS];
static pthread_once_t shards_once = PTHREAD_ONCE_INIT;
static atomic_int_least64_t allocated[FS_FMT_MAX_DEVICES];
static unsigned frames_kept;

/* The code of the CUDA libraries (runtime, driver, CUPTI) loaded when the
 * trace started: the callbacks' stacks start inside them. */
static struct {
    uintptr_t lo, hi;
} cuda_code[MAX_RANGES];
static int cuda_ranges;

/* One more at each fs_passive_start: a free taken out of the table by an
 * earlier trace is not this one's. */
static atomic_uint traces;

/* The block fs_passive_free_enter took out of the table, for the free's
 * event (or for putting back if the call fails). */
typedef struct taken_free {
    uint64_t addr; /* 0: none */
    unsigned trace;
    bool found;
    live block;
    uint64_t time_ns, allocated;
} taken_free;

static FS_TLS struct {
    uint32_t stack, pystack;
    taken_free freed;
} pending;

static bool cuda_library(const char *path)
{
    static const char *const names[] = {"libcudart.so", "libcuda.so", "libcupti.so"};
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(base, names[i], strlen(names[i]))) return true;
    return false;
}

static int find_cuda_code(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    if (!info->dlpi_name || !cuda_library(info->dlpi_name)) return 0;
    for (int i = 0; i < info->dlpi_phnum && cuda_ranges < MAX_RANGES; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        cuda_code[cuda_ranges].lo = info->dlpi_addr + ph->p_vaddr;
        cuda_code[cuda_ranges].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        cuda_ranges++;
    }
    return 0;
}

static bool in_cuda_code(uintptr_t ip)
{
    for (int i = 0; i < cuda_ranges; i++)
        if (ip >= cuda_code[i].lo && ip < cuda_code[i].hi) return true;
    return false;
}

static void init_shards(void)
{
    for (int i = 0; i < SHARDS; i++)
        pthread_mutex_init(&shards[i].lock, NULL);
}

static void log_line(const char *line)
{
    fs_log(FS_LOG_WARN, "%s", line);
}

bool fs_passive_start(int level, unsigned frames, const char *path, const char *how)
{
    fs_trace_settings s = {
        .level = level,
        .frames = frames,
        .path = path,
        .rank = -1,
        .log = log_line,
    };

    pthread_once(&shards_once, init_shards);
    /* a new trace (a later attach) knows nothing of the blocks of the last */
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&shards[i].lock);
        free(shards[i].slots);
        shards[i].slots = NULL;
        shards[i].cap = shards[i].used = 0;
        pthread_mutex_unlock(&shards[i].lock);
    }
    for (int d = 0; d < FS_FMT_MAX_DEVICES; d++)
        atomic_store(&allocated[d], 0);
    cuda_ranges = 0;
    dl_iterate_phdr(find_cuda_code, NULL);
    frames_kept = frames;
    atomic_fetch_add(&traces, 1);
    if (!fs_trace_start(&s)) return false;
    if (level >= FS_TRACE_PYTHON) fs_python_gil_start(frames);
    fs_modules_define();
    fs_log(FS_LOG_INFO, "trace-only attach (%s): tracing the program's own allocations to %s", how,
           fs_trace_path() ? fs_trace_path() : "?");
    return true;
}

void fs_passive_stop(void)
{
    fs_trace_stop();
}

void fs_passive_enter(void)
{
    int level = fs_trace_level();
    pending.stack = pending.pystack = 0;
    pending.freed.addr = 0;
    if (level >= FS_TRACE_STACKS)
        pending.stack = fs_stack_capture_skipping(frames_kept, in_cuda_code);
    if (level >= FS_TRACE_PYTHON) pending.pystack = fs_python_stack(frames_kept);
}

/* ---- the live blocks ------------------------------------------------------- */

static uint64_t hash_addr(uint64_t addr)
{
    return (addr >> 8) * 0x9e3779b97f4a7c15ull;
}

static shard *shard_of(uint64_t addr)
{
    return &shards[(hash_addr(addr) >> 58) % SHARDS];
}

/* Under the shard's lock. */
static bool put(shard *s, live b)
{
    if ((s->used + 1) * 4 > s->cap * 3) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        live *n = calloc(cap, sizeof *n);
        if (!n) return false;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slots[i].addr) continue;
            size_t j = hash_addr(s->slots[i].addr) & (cap - 1);
            while (n[j].addr)
                j = (j + 1) & (cap - 1);
            n[j] = s->slots[i];
        }
        free(s->slots);
        s->slots = n;
        s->cap = cap;
    }
    size_t j = hash_addr(b.addr) & (s->cap - 1);
    while (s->slots[j].addr && s->slots[j].addr != b.addr)
        j = (j + 1) & (s->cap - 1);
    if (!s->slots[j].addr) s->used++;
    s->slots[j] = b;
    return true;
}

/* Under the shard's lock: removes addr's block into *out (linear probing,
 * so the entries after it move back over the hole). */
static bool take(shard *s, uint64_t addr, live *out)
{
    if (!s->cap) return false;
    size_t mask = s->cap - 1, j = hash_addr(addr) & mask;
    while (s->slots[j].addr && s->slots[j].addr != addr)
        j = (j + 1) & mask;
    if (!s->slots[j].addr) return false;
    *out = s->slots[j];
    for (size_t k = (j + 1) & mask; s->slots[k].addr; k = (k + 1) & mask) {
        size_t home = hash_addr(s->slots[k].addr) & mask;
        if (((k - home) & mask) >= ((k - j) & mask)) {
            s->slots[j] = s->slots[k];
            j = k;
        }
    }
    s->slots[j].addr = 0;
    s->used--;
    return true;
}

static uint64_t total_after(int device, int64_t change)
{
    if (device < 0 || device >= FS_FMT_MAX_DEVICES) return 0;
    return (uint64_t)(atomic_fetch_add(&allocated[device], change) + change);
}

/* An event's time and the device's total after it, taken together under one
 * lock: the reader orders events by time and takes the last one's total as
 * the state at the end, so a total must never be older than a time taken
 * before it. The shard locks alone do not give that: two threads freeing
 * blocks of different shards could take their times in one order and
 * change the total in the other (seen once, under load: a trace whose
 * every block was freed ended "40.0 KiB allocated at the last event"). A
 * leaf lock, taken under a shard's. */
static pthread_mutex_t stamp_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t stamped_total(int device, int64_t change, uint64_t *time_ns)
{
    pthread_mutex_lock(&stamp_lock);
    *time_ns = fs_trace_now();
    uint64_t total = total_after(device, change);
    pthread_mutex_unlock(&stamp_lock);
    return total;
}

void fs_passive_alloc(int device, uint64_t stream, uint64_t addr, size_t size, bool stream_ordered)
{
    fs_fmt_event ev = {
        .kind = FS_REC_ALLOC,
        .device = device,
        .stream = stream,
        .addr = addr,
        .size = size,
        .requested = size,
        .aux = stream_ordered ? FS_FMT_ALLOC_STREAM_ORDERED : 0,
        .stack = pending.stack,
        .pystack = pending.pystack,
        .annot = fs_annot_current(),
    };
    shard *s = shard_of(addr);

    pending.stack = pending.pystack = 0;
    if (!fs_trace_level() || !addr) return;
    pthread_mutex_lock(&s->lock);
    bool kept = put(s, (live){addr, size, device});
    /* the total is taken under the lock, so that this block's free, which
     * needs the same lock to find it, never writes its total first */
    uint64_t total = stamped_total(device, kept ? (int64_t)size : 0, &ev.time_ns);
    ev.allocated = ev.reserved = kept ? total : 0;
    pthread_mutex_unlock(&s->lock);
    fs_trace_event(&ev);
}

/* Takes addr's block out of the table into *f, with the time and (when
 * found) its device's total after it. */
static void take_free(uint64_t addr, taken_free *f)
{
    shard *s = shard_of(addr);

    f->addr = addr;
    f->trace = atomic_load_explicit(&traces, memory_order_relaxed);
    pthread_mutex_lock(&s->lock);
    f->found = take(s, addr, &f->block);
    if (f->found)
        f->allocated = stamped_total(f->block.device, -(int64_t)f->block.size, &f->time_ns);
    else
        f->time_ns = fs_trace_now();
    pthread_mutex_unlock(&s->lock);
}

void fs_passive_free_enter(uint64_t addr)
{
    pending.freed.addr = 0;
    if (!fs_trace_level() || !addr) return;
    take_free(addr, &pending.freed);
}

void fs_passive_free_failed(void)
{
    taken_free f = pending.freed;
    pending.freed.addr = 0;
    pending.stack = pending.pystack = 0;
    if (!f.addr || !f.found || f.trace != atomic_load_explicit(&traces, memory_order_relaxed))
        return;
    shard *s = shard_of(f.addr);
    pthread_mutex_lock(&s->lock);
    if (put(s, f.block)) total_after(f.block.device, (int64_t)f.block.size);
    pthread_mutex_unlock(&s->lock);
}

void fs_passive_free(int device, uint64_t stream, uint64_t addr, bool stream_ordered)
{
    fs_fmt_event ev = {
        .kind = FS_REC_FREE_REQUESTED,
        .device = device,
        .stream = stream,
        .addr = addr,
        .aux = stream_ordered ? FS_FMT_FREE_STREAM_ORDERED : 0,
        .annot = fs_annot_current(),
    };
    taken_free f = pending.freed;

    pending.freed.addr = 0;
    pending.stack = pending.pystack = 0;
    if (!fs_trace_level() || !addr) return;
    /* taken when the call began, unless it began before the trace */
    if (f.addr != addr || f.trace != atomic_load_explicit(&traces, memory_order_relaxed))
        take_free(addr, &f);
    ev.time_ns = f.time_ns;
    if (f.found) {
        ev.device = f.block.device;
        ev.size = f.block.size;
        ev.allocated = ev.reserved = f.allocated;
    } else {
        ev.aux |= FS_FMT_FREE_BEFORE_TRACE;
        ev.allocated = ev.reserved = total_after(device, 0);
    }
    fs_trace_event(&ev);
}
