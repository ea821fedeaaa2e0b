/* stack.c - native backtraces and the stack table (stack.h).
 *
 * Frames come from libunwind's unw_backtrace, its fast path: on x86-64 it
 * caches, per return address, how to find the caller, so a repeated stack
 * unwinds without DWARF interpretation, and it needs no frame pointers
 * (libcudart, libtorch and libnccl are built without them). A stack is
 * interned by the hash of its frames into one of STRIPES tables, each with
 * its own lock, so threads allocating at different sites rarely meet; a hit
 * costs a hash and a compare, no allocation. A new stack is defined in the
 * trace (FS_REC_STACK) under its stripe's lock, before its id can be seen. */
#define UNW_LOCAL_ONLY
#include "stack.h"
#include "trace_internal.h"

#include <libunwind.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#define STRIPES 64

typedef struct entry {
    uint64_t hash;
    uint32_t id, n;
    uint64_t *frames;
} entry;

typedef struct stripe {
    pthread_mutex_t lock;
    entry *table;
    size_t cap, used;
} stripe;

static stripe stripes[STRIPES];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static atomic_uint next_id = 1;

/* id -> frames, for fs_stack_frames; grows, never shrinks. */
static pthread_mutex_t by_id_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t **by_id;
static uint32_t *by_id_n;
static size_t by_id_cap;

static int find_self(struct dl_phdr_info *info, size_t size, void *arg);

static void init(void)
{
    for (int i = 0; i < STRIPES; i++)
        pthread_mutex_init(&stripes[i].lock, NULL);
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    dl_iterate_phdr(find_self, (void *)(uintptr_t)fs_stack_capture);
}

static uint64_t hash_frames(const uint64_t *f, unsigned n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (unsigned i = 0; i < n; i++) {
        h ^= f[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h | 1; /* 0 marks an empty slot */
}

static bool grow(stripe *s)
{
    size_t ncap = s->cap ? s->cap * 2 : 256;
    entry *n = calloc(ncap, sizeof *n);
    if (!n) return false;
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->table[i].hash) continue;
        size_t j = (s->table[i].hash >> 6) & (ncap - 1);
        while (n[j].hash)
            j = (j + 1) & (ncap - 1);
        n[j] = s->table[i];
    }
    free(s->table);
    s->table = n;
    s->cap = ncap;
    return true;
}

static void remember(uint32_t id, uint64_t *frames, uint32_t n)
{
    pthread_mutex_lock(&by_id_lock);
    if (id >= by_id_cap) {
        size_t cap = by_id_cap ? by_id_cap * 2 : 1024;
        while (cap <= id)
            cap *= 2;
        uint64_t **f = realloc(by_id, cap * sizeof *f);
        uint32_t *c = f ? realloc(by_id_n, cap * sizeof *c) : NULL;
        if (f) by_id = f;
        if (c) by_id_n = c;
        if (!f || !c) {
            pthread_mutex_unlock(&by_id_lock);
            return;
        }
        memset(by_id + by_id_cap, 0, (cap - by_id_cap) * sizeof *f);
        memset(by_id_n + by_id_cap, 0, (cap - by_id_cap) * sizeof *c);
        by_id_cap = cap;
    }
    by_id[id] = frames;
    by_id_n[id] = n;
    pthread_mutex_unlock(&by_id_lock);
}

static uint32_t intern(const uint64_t *frames, unsigned n)
{
    uint8_t rec[16 + 10 * FS_FMT_MAX_FRAMES]; /* a stack record's largest encoding */
    uint64_t h = hash_frames(frames, n);
    stripe *s = &stripes[h % STRIPES];
    uint32_t id = 0;

    pthread_mutex_lock(&s->lock);
    if ((s->used + 1) * 2 > s->cap && !grow(s)) goto out;
    size_t i = (h >> 6) & (s->cap - 1);
    for (; s->table[i].hash; i = (i + 1) & (s->cap - 1)) {
        entry *e = &s->table[i];
        if (e->hash == h && e->n == n && !memcmp(e->frames, frames, n * sizeof *frames)) {
            id = e->id;
            goto out;
        }
    }
    uint64_t *copy = malloc(n * sizeof *copy + 1);
    if (!copy) goto out;
    memcpy(copy, frames, n * sizeof *copy);
    id = atomic_fetch_add(&next_id, 1);
    s->table[i] = (entry){.hash = h, .id = id, .n = n, .frames = copy};
    s->used++;
    fs_trace_define(rec, fs_fmt_put_stack(id, frames, n, rec));
    remember(id, copy, n);
out:
    pthread_mutex_unlock(&s->lock);
    return id;
}

/* The address range of the object this code is in: leading frames in it
 * are the shim's, not the program's. Beside it, the code of one more
 * object of the product's that the program calls into (the PyTorch
 * adapter: fs_stack_skip_object), whose leading frames are left out too. */
static uintptr_t self_lo, self_hi;
static _Atomic uintptr_t also_lo, also_hi;

typedef struct range {
    uintptr_t here, lo, hi;
} range;

static int find_range(struct dl_phdr_info *info, size_t size, void *arg)
{
    range *r = arg;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && r->here >= lo && r->here < lo + ph->p_memsz) {
            r->lo = lo;
            r->hi = lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

static int find_self(struct dl_phdr_info *info, size_t size, void *arg)
{
    range r = {.here = (uintptr_t)arg};
    if (!find_range(info, size, &r)) return 0;
    self_lo = r.lo;
    self_hi = r.hi;
    return 1;
}

void fs_stack_skip_object(const void *code)
{
    range r = {.here = (uintptr_t)code};
    if (!dl_iterate_phdr(find_range, &r)) return;
    atomic_store_explicit(&also_hi, 0, memory_order_relaxed); /* never a range half set */
    atomic_store_explicit(&also_lo, r.lo, memory_order_relaxed);
    atomic_store_explicit(&also_hi, r.hi, memory_order_release);
}

static bool in_product(uintptr_t ip)
{
    if (ip >= self_lo && ip < self_hi) return true;
    uintptr_t hi = atomic_load_explicit(&also_hi, memory_order_acquire);
    return ip < hi && ip >= atomic_load_explicit(&also_lo, memory_order_relaxed);
}

#if defined(__SANITIZE_THREAD__)
/* unw_backtrace's fast path keeps a per-thread cache that libunwind frees
 * from a thread-specific-data destructor taking a mutex after
 * ThreadSanitizer has torn the exiting thread down (a crash at every thread
 * exit). Under TSan the frames come from the step-by-step unwinder, which
 * keeps no such cache: the same frames, slower, and speed does not matter
 * there. */
static int backtrace_frames(void **ip, int max)
{
    unw_context_t uc;
    unw_cursor_t c;
    int n = 0;

    if (unw_getcontext(&uc) || unw_init_local(&c, &uc)) return 0;
    while (n < max && unw_step(&c) > 0) {
        unw_word_t pc;
        if (unw_get_reg(&c, UNW_REG_IP, &pc)) break;
        ip[n++] = (void *)pc;
    }
    return n;
}
#else
static int backtrace_frames(void **ip, int max)
{
    return unw_backtrace(ip, max);
}
#endif

uint32_t fs_stack_capture(unsigned max_frames)
{
    return fs_stack_capture_skipping(max_frames, NULL);
}

uint32_t fs_stack_capture_skipping(unsigned max_frames, bool (*skip)(uintptr_t ip))
{
    void *ip[FS_FMT_MAX_FRAMES + 32];
    uint64_t frames[FS_FMT_MAX_FRAMES];
    unsigned n = 0;
    int got, i = 0;

    if (fs_trace_defs_level() < FS_TRACE_STACKS || !max_frames) return 0;
    pthread_once(&init_once, init);
    fs_modules_refresh();
    if (max_frames > FS_FMT_MAX_FRAMES) max_frames = FS_FMT_MAX_FRAMES;
    /* the shim's own frames, then what is kept: a few entry and glue
     * frames are enough room, and unwinding further would cost more */
    unsigned room = max_frames + (skip ? 32 : 8);
    got = backtrace_frames(
        ip, (int)(room < sizeof ip / sizeof ip[0] ? room : sizeof ip / sizeof ip[0]));
    while (i < got && in_product((uintptr_t)ip[i]))
        i++;
    while (skip && i < got && skip((uintptr_t)ip[i]))
        i++;
    for (; i < got && n < max_frames; i++)
        frames[n++] = (uint64_t)(uintptr_t)ip[i];
    return n ? intern(frames, n) : 0;
}

uint32_t fs_stack_frames(uint32_t id, uint64_t *out, uint32_t max)
{
    uint32_t n = 0;

    pthread_mutex_lock(&by_id_lock);
    if (id && id < by_id_cap && by_id[id]) {
        n = by_id_n[id] < max ? by_id_n[id] : max;
        memcpy(out, by_id[id], n * sizeof *out);
    }
    pthread_mutex_unlock(&by_id_lock);
    return n;
}
