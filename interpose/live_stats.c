/* live_stats.c - the live statistics page of this process (format/live.h),
 * which `fsdpshim top --live` reads from another process (docs/cli.md).
 *
 * A thread of the shim's own, started with the allocator, rewrites the page
 * every PERIOD_NS from what is already counted: the allocator's statistics
 * API (fs_alloc_get_stats, fs_alloc_stream_free), the rate limiter's
 * counters and, while allocating stacks are kept for the trace or for OOM
 * snapshots, the live blocks' stacks (trace/blocks.c). Allocations and
 * frees do nothing for it; the thread only takes the locks those readers
 * take, briefly, a few times a second.
 *
 * Lifetime. The page is made with O_EXCL and mode 0600 (fchmod too:
 * whatever the umask) so that only its user reads it. It is removed at
 * exit, and by a fatal signal whose action is the default (the process is
 * about to die): the handlers here are installed before the trace writer's,
 * which hand on to them. A process that dies otherwise (SIGKILL, or a
 * handler of the program's own that ends it with _exit, a fork child's
 * _exit) leaves its page behind, with a pid that no longer runs: readers
 * remove such pages, and so does every process that makes a page. A fork
 * child starts without a page and makes its own with its allocator.
 *
 * Fork. The walk over the live blocks holds, one at a time, the locks of
 * the block map and the stack table, which a child that traces needs. It
 * runs under walk_lock, which fork's prepare handler takes, so no walk is
 * under way across a fork; nothing under walk_lock waits for a lock that
 * another prepare handler holds (the trace's string table and writer), so
 * the handlers may run in any order. The sites' Python labels, whose table
 * lock is held across string interning, are read outside it. */
#include "live_stats.h"
#include "core/lifetime.h"

#include "../common/path.h"
#include "../format/live.h"
#include "../trace/python.h"
#include "../trace/snapshot.h"
#include "../trace/stack.h"
#include "nccl/rate_limiter.h"
#include "core/shim.h"
#include "core/trace_glue.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Twice as often as the 100 ms the page promises: a late wake-up still
 * keeps it. */
#define PERIOD_NS (50 * 1000000ull)
/* The sites walk every live block: with every update while that is cheap,
 * less often when it is not, so that walks take at most 1% of the time. */
#define SITES_COST_SHARE 100
/* Labels kept for sites that were among the largest once. */
#define LABELS 64

static struct {
    fs_allocator *a;
    uint32_t ndev;
    fs_live_head *page;
    size_t size;
    fs_live_device *devs;
    char name[64];
    fs_live_proc sites; /* the sites part of the last walk */
    uint64_t sites_due_ns;
    uint64_t updates;
} live;

/* What the signal handlers need: the page's path in FS_LIVE_DIR (unlink()
 * is async-signal-safe, shm_unlink is not listed) and the process it
 * belongs to, 0 while there is none (a fork child before its own). */
static char unlink_path[96];
static atomic_int owner;
static atomic_bool stopping;
static atomic_int rank = -1, world = -1;
static atomic_bool rank_from_comm;
static pthread_mutex_t walk_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* ---- devices --------------------------------------------------------------- */

/* What an allocator key names (the keys are streams.c's: 1 the legacy
 * stream, odd ones a thread's per-thread stream by serial, else the
 * program's handle). */
static fs_live_stream stream_entry(const fs_stream_free *f)
{
    fs_live_stream s = {.kind = FS_LIVE_STREAM_HANDLE, .id = f->stream, .free_bytes = f->bytes};

    if (f->retired) {
        s.kind = FS_LIVE_STREAM_RETIRED;
    } else if (f->stream == (fs_stream_t)cudaStreamLegacy) {
        s.kind = FS_LIVE_STREAM_LEGACY;
        s.id = 0;
    } else if (f->stream & 1) {
        s.kind = FS_LIVE_STREAM_PER_THREAD;
        s.id = f->stream >> 1;
    }
    return s;
}

static void device_figures(int d, fs_live_device *out)
{
    fs_stream_free top[FS_LIVE_STREAMS];
    fs_ratelimit_live rl;
    fs_alloc_stats st;
    size_t total, n;

    fs_alloc_get_stats(live.a, d, &st);
    *out = (fs_live_device){
        .device = d,
        .allocated = (uint64_t)st.allocated_bytes[FS_SIZE_ALL].current,
        .allocated_peak = (uint64_t)st.allocated_bytes[FS_SIZE_ALL].peak,
        .reserved = (uint64_t)st.reserved_bytes[FS_SIZE_ALL].current,
        .reserved_peak = (uint64_t)st.reserved_bytes[FS_SIZE_ALL].peak,
        .active = (uint64_t)st.active_bytes[FS_SIZE_ALL].current,
        .active_peak = (uint64_t)st.active_bytes[FS_SIZE_ALL].peak,
        .requested = (uint64_t)st.requested_bytes[FS_SIZE_ALL].current,
        .pending_bytes = (uint64_t)st.pending_free_bytes,
        .pending_frees = (uint64_t)st.pending_frees,
        .blocks = (uint64_t)st.allocation[FS_SIZE_ALL].current,
        .allocations = (uint64_t)st.allocation[FS_SIZE_ALL].allocated,
        .segments = (uint64_t)st.segment[FS_SIZE_ALL].current,
        .device_allocs = (uint64_t)st.num_device_alloc,
        .device_frees = (uint64_t)st.num_device_free,
        .ooms = (uint64_t)st.num_ooms,
        .retries = (uint64_t)st.num_alloc_retries,
        .largest_free = (uint64_t)st.largest_free_block,
    };
    n = fs_alloc_stream_free(live.a, d, top, FS_LIVE_STREAMS, &total);
    out->cached_free = total;
    out->streams_with_free = n;
    for (size_t i = 0; i < n && i < FS_LIVE_STREAMS; i++)
        out->streams[i] = stream_entry(&top[i]);
    fs_ratelimit_figures(d, &rl);
    out->rl_waits = rl.waits;
    out->rl_wait_ns = rl.wait_ns;
    out->rl_in_flight = rl.in_flight;
    out->rl_in_flight_bytes = rl.in_flight_bytes;
}

/* ---- sites ------------------------------------------------------------------
 * The live blocks are summed by stack (Python stack where one was taken,
 * else native: keys 1 << 32 | pystack, and stack), then by the stack's
 * innermost frame, as `fsdpshim top --by frame` groups: the frame is what
 * the label names. Frame keys: {ip, 0} for a native frame, {file << 32 |
 * function, 1 << 63 | line} for a Python one, {id, 1 << 62} for a stack
 * whose frames are not known. Each stack's frame is looked up once in its
 * life (stacks are interned for good) and kept in `frame_of`. */

typedef struct kv {
    uint64_t key[2]; /* {0, 0}: empty */
    uint64_t val[2];
} kv;

typedef struct kv_map {
    kv *slot;
    size_t cap, used; /* cap a power of two, kept at most half full */
} kv_map;

/* The slot of key, made when `make` and there is room; NULL when it is
 * absent and not made. Never allocates: the walk calls it under a lock. */
static kv *kv_at(kv_map *m, const uint64_t key[2], bool make)
{
    if (!m->cap) return NULL;
    size_t i = ((key[0] ^ key[1] * 0xff51afd7ed558ccdull) * 0x9e3779b97f4a7c15ull) >> 32;
    for (i &= m->cap - 1; m->slot[i].key[0] || m->slot[i].key[1]; i = (i + 1) & (m->cap - 1))
        if (m->slot[i].key[0] == key[0] && m->slot[i].key[1] == key[1]) return &m->slot[i];
    if (!make || (m->used + 1) * 2 > m->cap) return NULL;
    m->used++;
    m->slot[i] = (kv){.key = {key[0], key[1]}};
    return &m->slot[i];
}

/* Doubles the map (at least 1024 slots), keeping its entries. */
static bool kv_grow(kv_map *m)
{
    kv_map n = {.cap = m->cap ? m->cap * 2 : 1024};
    if (!(n.slot = calloc(n.cap, sizeof *n.slot))) return false;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slot[i].key[0] || m->slot[i].key[1]) *kv_at(&n, m->slot[i].key, true) = m->slot[i];
    free(m->slot);
    *m = n;
    return true;
}

static void kv_clear(kv_map *m)
{
    if (m->slot) memset(m->slot, 0, m->cap * sizeof *m->slot);
    m->used = 0;
}

static kv_map by_stack;    /* this walk: stack key -> {bytes, blocks} */
static bool by_stack_full; /* the walk met more stacks than by_stack holds */
static kv_map frame_of;    /* for good: stack key -> its frame key */
static kv_map by_frame;    /* this walk: frame key -> {bytes, blocks} */

static struct label {
    uint64_t key[2];
    uint64_t walk; /* the last walk that named it */
    char text[FS_LIVE_LABEL];
} labels[LABELS];
static uint64_t walks;

/* Called under a block-map stripe lock: nothing allocates here. */
static void count_block(void *ctx, uint32_t stack, uint32_t pystack, uint64_t size)
{
    const uint64_t key[2] = {pystack ? (1ull << 32 | pystack) : stack, 0};
    kv *e = kv_at(&by_stack, key, true);
    (void)ctx;
    if (!e) {
        by_stack_full = true;
        return;
    }
    e->val[0] += size;
    e->val[1]++;
}

/* The frame key of a stack key, looked up now: native stacks under
 * walk_lock (the stack table's lock), Python ones outside it. */
static void frame_key(uint64_t stack_key, uint64_t out[2])
{
    if (stack_key >> 32) {
        fs_fmt_pyframe f;
        if (fs_python_frames((uint32_t)stack_key, &f, 1)) {
            out[0] = (uint64_t)f.file << 32 | f.function;
            out[1] = 1ull << 63 | f.line;
            return;
        }
    } else {
        uint64_t ip;
        if (fs_stack_frames((uint32_t)stack_key, &ip, 1) && ip) {
            out[0] = ip;
            out[1] = 0;
            return;
        }
    }
    out[0] = stack_key;
    out[1] = 1ull << 62;
}

/* Notes the frames of the stacks this walk met for the first time, of one
 * kind (Python or native). False when frame_of cannot grow. */
static bool frames_learn(bool python)
{
    for (size_t i = 0; i < by_stack.cap; i++) {
        const kv *s = &by_stack.slot[i];
        if (!s->key[0] || (s->key[0] >> 32 != 0) != python) continue;
        if (kv_at(&frame_of, s->key, false)) continue;
        uint64_t fk[2];
        frame_key(s->key[0], fk);
        kv *e = kv_at(&frame_of, s->key, true);
        if (!e && (!kv_grow(&frame_of) || !(e = kv_at(&frame_of, s->key, true)))) return false;
        e->val[0] = fk[0];
        e->val[1] = fk[1];
    }
    return true;
}

/* A label, cut to its room: the head of a long name says enough. */
__attribute__((format(printf, 3, 4))) static void label_put(char *out, size_t len, const char *fmt,
                                                            ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, len, fmt, ap);
    va_end(ap);
}

/* A frame's label. Native: its dynamic symbol if it has one, else
 * MODULE+0xOFFSET (what dladdr knows without reading debug information:
 * symbolisation stays offline, with `fsdpshim top TRACE`). Python:
 * FUNCTION (FILE:LINE). */
static void frame_label(const uint64_t key[2], char *out, size_t len)
{
    char file[256] = "?", func[128] = "?";
    Dl_info info;

    if (key[1] >> 63) {
        fs_trace_string_text((uint32_t)(key[0] >> 32), file, sizeof file);
        fs_trace_string_text((uint32_t)key[0], func, sizeof func);
        label_put(out, len, "%s (%s:%u)", func, fs_base_name(file), (unsigned)key[1]);
        return;
    }
    if (key[1]) {
        label_put(out, len, "%s stack %u", key[0] >> 32 ? "Python" : "native", (uint32_t)key[0]);
        return;
    }
    /* a return address: the call is the byte before it */
    if (!dladdr((void *)(uintptr_t)(key[0] - 1), &info)) {
        label_put(out, len, "0x%llx", (unsigned long long)key[0]);
        return;
    }
    const char *module = info.dli_fname && *info.dli_fname ? fs_base_name(info.dli_fname)
                                                           : program_invocation_short_name;
    if (info.dli_sname)
        label_put(out, len, "%s (%s)", info.dli_sname, module);
    else
        label_put(out, len, "%s+0x%llx", module,
                  (unsigned long long)(key[0] - (uintptr_t)info.dli_fbase));
}

/* The label of a frame key, named now if it is new; the one named longest
 * ago gives its slot up, never one named in this walk. */
static const char *label_of(const uint64_t key[2])
{
    struct label *oldest = &labels[0];

    for (unsigned i = 0; i < LABELS; i++) {
        if (labels[i].key[0] == key[0] && labels[i].key[1] == key[1] && labels[i].walk) {
            labels[i].walk = walks;
            return labels[i].text;
        }
        if (labels[i].walk < oldest->walk) oldest = &labels[i];
    }
    *oldest = (struct label){.key = {key[0], key[1]}, .walk = walks};
    frame_label(key, oldest->text, sizeof oldest->text);
    return oldest->text;
}

/* Sums the live blocks by frame and keeps the largest FS_LIVE_SITES,
 * labelled, in live.sites. False when a table cannot grow. */
static bool sites_walk(void)
{
    kv top[FS_LIVE_SITES];
    size_t n = 0;
    bool ok = true;

    walks++;
    pthread_mutex_lock(&walk_lock);
    for (;;) {
        kv_clear(&by_stack);
        by_stack_full = false;
        if (by_stack.cap) fs_blocks_each(count_block, NULL);
        if (by_stack.cap && !by_stack_full) break;
        /* grown outside the stripe locks, then walked again */
        if (!(ok = kv_grow(&by_stack))) break;
    }
    if (ok) ok = frames_learn(false);
    pthread_mutex_unlock(&walk_lock);
    if (!ok || !frames_learn(true)) return false;
    kv_clear(&by_frame);
    for (size_t i = 0; i < by_stack.cap; i++) {
        const kv *s = &by_stack.slot[i];
        if (!s->key[0]) continue;
        const kv *f = kv_at(&frame_of, s->key, false);
        kv *e = kv_at(&by_frame, f->val, true);
        if (!e && (!kv_grow(&by_frame) || !(e = kv_at(&by_frame, f->val, true)))) return false;
        e->val[0] += s->val[0];
        e->val[1] += s->val[1];
    }
    for (size_t i = 0; i < by_frame.cap; i++) {
        const kv *f = &by_frame.slot[i];
        if (!f->key[0] && !f->key[1]) continue;
        /* insertion into the largest ones */
        size_t j = n < FS_LIVE_SITES ? n++ : FS_LIVE_SITES;
        while (j > 0 && top[j - 1].val[0] < f->val[0]) {
            if (j < FS_LIVE_SITES) top[j] = top[j - 1];
            j--;
        }
        if (j < FS_LIVE_SITES) top[j] = *f;
    }
    live.sites.nsites = n;
    for (size_t i = 0; i < n; i++) {
        live.sites.sites[i] = (fs_live_site){.bytes = top[i].val[0], .blocks = top[i].val[1]};
        snprintf(live.sites.sites[i].label, FS_LIVE_LABEL, "%s", label_of(top[i].key));
    }
    return true;
}

/* ---- the thread ------------------------------------------------------------- */

static void update(void)
{
    uint64_t now = now_ns();
    fs_live_proc proc;

    for (uint32_t d = 0; d < live.ndev; d++)
        device_figures((int)d, &live.devs[d]);
    if (!fs_trace_glue_stacks_taken()) {
        live.sites.sites_state = FS_LIVE_SITES_NONE;
        live.sites.nsites = 0;
    } else if (now >= live.sites_due_ns) {
        bool ok = sites_walk();
        uint64_t spent = now_ns() - now;
        live.sites.sites_state = ok ? FS_LIVE_SITES_KEPT : FS_LIVE_SITES_NONE;
        live.sites.sites_at_ns = now;
        live.sites_due_ns = now + spent * SITES_COST_SHARE;
    }
    proc = live.sites;
    proc.rank = atomic_load_explicit(&rank, memory_order_relaxed);
    proc.world = atomic_load_explicit(&world, memory_order_relaxed);
    proc.update_ns = now;
    proc.updates = ++live.updates;
    proc.interval_ns = PERIOD_NS;
    proc.trace_level = (uint64_t)fs_trace_level();
    fs_live_publish(live.page, &proc, live.devs);
}

static void *live_thread(void *arg)
{
    struct timespec next;

    (void)arg;
    pthread_setname_np(pthread_self(), "fsdpshim-live");
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (!atomic_load_explicit(&stopping, memory_order_acquire)) {
        update();
        next.tv_nsec += (long)PERIOD_NS;
        if (next.tv_nsec >= 1000000000) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000;
        }
        /* absolute deadlines: the period does not drift with the update's cost */
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
            ;
    }
    return NULL;
}

/* ---- the page's lifetime ---------------------------------------------------- */

static void at_exit(void)
{
    atomic_store_explicit(&stopping, true, memory_order_release);
    if (atomic_load(&owner) == getpid()) shm_unlink(live.name);
}

static const int fatal[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT,
                            SIGSEGV, SIGBUS, SIGFPE, SIGILL};
static struct sigaction previous[NSIG];

/* Hands the signal on; when its action is the default, the process is
 * about to die, so the page goes first. */
static void on_fatal(int sig, siginfo_t *info, void *uc)
{
    struct sigaction *old = &previous[sig];

    if (old->sa_flags & SA_SIGINFO) {
        old->sa_sigaction(sig, info, uc);
        return;
    }
    if (old->sa_handler == SIG_IGN) return;
    if (old->sa_handler != SIG_DFL) {
        old->sa_handler(sig);
        return;
    }
    if (atomic_load(&owner) == getpid()) unlink(unlink_path);
    /* The default action: restored, then raised again. The signal is
     * blocked in its handler, so it lands as the handler returns (a fault
     * sent by kill() would not come back by re-executing). */
    sigaction(sig, old, NULL);
    raise(sig);
}

static void signals_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) {
        struct sigaction old;
        /* an ignored signal stays ignored (nohup) */
        if (sigaction(fatal[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN) continue;
        previous[fatal[i]] = old;
        sigaction(fatal[i], &sa, NULL);
    }
}

static void env_rank(void)
{
    const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE");

    if (!r || !*r) r = getenv("LOCAL_RANK");
    if (r && *r && !atomic_load(&rank_from_comm)) {
        atomic_store(&rank, atoi(r));
        atomic_store(&world, w && *w ? atoi(w) : -1);
    }
}

void fs_live_set_rank(int r, int w)
{
    if (r < 0 || atomic_exchange(&rank_from_comm, true)) return; /* the first one names it */
    atomic_store(&world, w);
    atomic_store(&rank, r);
}

/* Removes this user's pages whose process no longer runs: left by
 * processes that ended without exit handlers (SIGKILL, a fork child's
 * _exit), which no reader has looked at since. Once per process start, so
 * that they never pile up in /dev/shm; a page of a running process, even
 * one whose pid was reused, is left to readers, which can tell. */
static void sweep_stale(void)
{
    DIR *dir = opendir(FS_LIVE_DIR);
    struct dirent *e;
    char name[300];
    unsigned uid;
    int pid;

    while (dir && (e = readdir(dir))) {
        if (!fs_live_parse_name(e->d_name, &uid, &pid) || uid != geteuid() || pid == getpid())
            continue;
        if (kill(pid, 0) == 0 || errno != ESRCH) continue;
        snprintf(name, sizeof name, "/%s", e->d_name);
        shm_unlink(name);
    }
    if (dir) closedir(dir);
}

/* Makes the page, its head filled in; false (logged) when it cannot. */
static bool page_make(uint32_t ndev)
{
    int pid = getpid(), fd;
    size_t size = fs_live_page_size(ndev);

    fs_live_name(live.name, sizeof live.name, (unsigned)geteuid(), pid);
    fd = shm_open(live.name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST) {
        /* The name holds this pid: a page this process made before an exec,
         * or one a dead process with the same pid left. Either is stale. */
        shm_unlink(live.name);
        fd = shm_open(live.name, O_CREAT | O_EXCL | O_RDWR, 0600);
    }
    if (fd < 0) {
        fs_log(FS_LOG_INFO,
               "live statistics: cannot make %s: %s; `fsdpshim top --live` will "
               "not see this process",
               live.name, strerror(errno));
        return false;
    }
    void *map = MAP_FAILED;
    if (fchmod(fd, 0600) == 0 && ftruncate(fd, (off_t)size) == 0)
        map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED) {
        shm_unlink(live.name);
        fs_log(FS_LOG_INFO, "live statistics: cannot size or map %s: %s", live.name, strerror(err));
        return false;
    }
    fs_live_head *h = map;
    h->version = FS_LIVE_VERSION;
    h->head_size = sizeof *h;
    h->proc_size = sizeof(fs_live_proc);
    h->device_size = sizeof(fs_live_device);
    h->ndev = ndev;
    h->pid = pid;
    h->start_ticks = fs_live_start_ticks(pid);
    snprintf(h->exe, sizeof h->exe, "%s", program_invocation_short_name);
    atomic_store_explicit(&h->seq, 0, memory_order_relaxed);
    atomic_store_explicit(&h->magic, FS_LIVE_MAGIC, memory_order_release);
    live.page = h;
    live.size = size;
    snprintf(unlink_path, sizeof unlink_path, FS_LIVE_DIR "%s", live.name);
    atomic_store(&owner, pid);
    return true;
}

/* The thread runs on a stack of its own mapping, of the size a thread
 * gets by default (committed only as it is used, as the C library's are).
 * A stack from the C library's cache would, in a fork child, be the
 * parent's live thread's, and so would its thread id, which
 * ThreadSanitizer still counts as running there (it stops the child: "dup
 * thread"); a fresh mapping never repeats a running thread's id. A fork
 * child leaves its parent's in place: unmapped, its addresses could come
 * back as other memory that AddressSanitizer still takes for that thread's
 * stack. The lowest page is a guard. */

static int thread_start(void)
{
    pthread_attr_t attr;
    sigset_t all, old;
    pthread_t t;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), size;
    int rc;

    pthread_attr_init(&attr);
    pthread_attr_getstacksize(&attr, &size);
    void *stack = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED) {
        pthread_attr_destroy(&attr);
        return errno;
    }
    mprotect(stack, page, PROT_NONE);
    pthread_attr_setstack(&attr, (char *)stack + page, size - page);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the thread takes none of the program's signals */
    rc = pthread_create(&t, &attr, live_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) munmap(stack, size);
    return rc;
}

/* Makes the page and starts the thread that keeps it up to date, unless
 * FSDPSHIM_CONF says live:false. Started once the allocator exists, before
 * the trace writer starts (its fatal-signal handlers hand on to the ones
 * installed here: core/lifetime.h's order); again in a fork child, with its
 * own allocator. Failing to make the page is logged (info) and changes
 * nothing else. */
static void live_start(fs_allocator *a, int ndev)
{
    static bool hooks; /* once per process image: a fork child keeps them */

    if (!fs_shim_config_get()->live || ndev <= 0) return;
    if (ndev > FS_LIVE_DEVICES) ndev = FS_LIVE_DEVICES;
    live.a = a;
    live.ndev = (uint32_t)ndev;
    live.sites_due_ns = 0;
    live.updates = 0;
    memset(&live.sites, 0, sizeof live.sites);
    if (!(live.devs = calloc((size_t)ndev, sizeof *live.devs))) return;
    sweep_stale();
    if (!page_make(live.ndev)) {
        free(live.devs);
        live.devs = NULL;
        return;
    }
    if (!hooks) {
        hooks = true;
        atexit(at_exit);
        signals_install();
    }
    int rc = thread_start();
    if (rc != 0) {
        fs_log(FS_LOG_INFO, "live statistics: cannot start the thread; no page");
        atomic_store(&owner, 0);
        shm_unlink(live.name);
        munmap(live.page, live.size);
        live.page = NULL;
    }
}

/* ---- fork ---------------------------------------------------------------------- */

static void before_fork(void)
{
    pthread_mutex_lock(&walk_lock);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&walk_lock);
}

/* The child has no live thread and must not write the parent's page (the
 * mapping is shared); it makes its own with its allocator (shim.c). */
static void after_fork_child(void)
{
    pthread_mutex_unlock(&walk_lock); /* taken by this thread in before_fork */
    atomic_store(&owner, 0);
    if (live.page) munmap(live.page, live.size);
    live.page = NULL;
    free(live.devs);
    live.devs = NULL;
    /* a child is a process of its own: its communicator, or the launcher's
     * variables, say its rank */
    atomic_store(&rank_from_comm, false);
    atomic_store(&rank, -1);
    atomic_store(&world, -1);
    env_rank();
}

FS_LIFETIME(live) = {.order = FS_ORDER_LIVE,
                     .started = live_start,
                     .init = env_rank,
                     .fork_prepare = before_fork,
                     .fork_parent = after_fork_parent,
                     .fork_child = after_fork_child};
