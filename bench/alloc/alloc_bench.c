/* alloc_bench.c - the caching allocator against host allocators.
 *
 * Part 1, cost per alloc+free pair: every allocator replays the same
 * precomputed size sequence over a working set of live blocks drawn from
 * the same mix, a pass to warm up and then timed (the best of five
 * repetitions, interleaved across allocators), at 1 and 8 threads (or
 * --threads N), in two
 * patterns: "pair" allocates each size and frees it at once (the cached
 * pair: the block comes from the cache and goes straight back), "churn"
 * frees a random live block and allocates the next size in its place (so
 * blocks split and coalesce all the time). fsdpshim runs over a zero-cost
 * device with one stream per thread, through the
 * cudaMallocAsync/cudaFreeAsync route (stream-ordered frees); its cudaFree
 * route (device-ordered, batched fences) is shown as well. glibc is called
 * as __libc_malloc/__libc_free, jemalloc through its mallocx/dallocx, and
 * mimalloc is loaded with RTLD_LOCAL so that it does not replace the
 * others' malloc.
 *
 * Part 2, fragmentation: a multi-layer FSDP training step (all-gathered
 * parameters, activations kept for backward, gradients reduced to shards,
 * sequence lengths that change between steps) is replayed through the
 * allocator, without and with expandable segments; the figure is peak
 * reserved / peak allocated.
 *
 * The last line is: summary: fsdpshim=<ns> glibc=<ns> jemalloc=<ns> mimalloc=<ns>
 * for the FSDP mix at one thread. --quick runs a short smoke version;
 * --only NAME runs one allocator, --threads N sets the many-thread count
 * (default 8; at most 64) and --one-thread skips those runs (for
 * profiling). */
#include "allocator.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KiB         ((size_t)1024)
#define MiB         ((size_t)1024 * 1024)
#define SEQ_LEN     65536
#define SLOTS       192
#define MAX_THREADS 64
#define REPS        5

/* ---- a device that costs nothing ---------------------------------------- */

static _Atomic uintptr_t next_addr = (uintptr_t)1 << 44;
static atomic_ulong next_event = 1;

static fs_dev_status z_alloc(void *c, int d, fs_seg_memory m, size_t size, void **out)
{
    (void)c;
    (void)d;
    (void)m;
    size = (size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
    *out = (void *)atomic_fetch_add(&next_addr, size);
    return FS_DEV_OK;
}
static fs_dev_status z_free(void *c, int d, fs_seg_memory m, void *p)
{
    (void)c;
    (void)d;
    (void)m;
    (void)p;
    return FS_DEV_OK;
}
static size_t z_gran(void *c, int d)
{
    (void)c;
    (void)d;
    return 2 * MiB;
}
static fs_dev_status z_reserve(void *c, int d, size_t size, void **out)
{
    return z_alloc(c, d, FS_SEG_PLAIN, size, out);
}
static fs_dev_status z_vm(void *c, int d, void *p, size_t s)
{
    (void)c;
    (void)d;
    (void)p;
    (void)s;
    return FS_DEV_OK;
}
static fs_dev_status z_ev_create(void *c, int d, fs_event_t *out)
{
    (void)c;
    (void)d;
    *out = atomic_fetch_add(&next_event, 1);
    return FS_DEV_OK;
}
static void z_ev_destroy(void *c, int d, fs_event_t e)
{
    (void)c;
    (void)d;
    (void)e;
}
static fs_dev_status z_ev_record(void *c, int d, fs_event_t e, fs_stream_t s)
{
    (void)c;
    (void)d;
    (void)e;
    (void)s;
    return FS_DEV_OK;
}
static fs_dev_status z_ev(void *c, int d, fs_event_t e)
{
    (void)c;
    (void)d;
    (void)e;
    return FS_DEV_OK;
}
static fs_dev_status z_wait(void *c, int d, fs_stream_t s, fs_event_t e)
{
    (void)c;
    (void)d;
    (void)s;
    (void)e;
    return FS_DEV_OK;
}
static bool z_capturing(void *c, int d, fs_stream_t s)
{
    (void)c;
    (void)d;
    (void)s;
    return false;
}
static bool z_underway(void *c)
{
    (void)c;
    return false;
}
static fs_dev_status z_sync(void *c, int d)
{
    (void)c;
    (void)d;
    return FS_DEV_OK;
}
static size_t z_capacity(void *c, int d)
{
    (void)c;
    (void)d;
    return (size_t)80 << 30;
}

static const fs_device_ops zero_ops = {
    .segment_alloc = z_alloc,
    .segment_free = z_free,
    .vm_granularity = z_gran,
    .vm_reserve = z_reserve,
    .vm_release = z_vm,
    .vm_map = z_vm,
    .vm_unmap = z_vm,
    .event_create = z_ev_create,
    .event_destroy = z_ev_destroy,
    .event_record = z_ev_record,
    .event_query = z_ev,
    .event_synchronize = z_ev,
    .stream_wait_event = z_wait,
    .stream_is_capturing = z_capturing,
    .capture_underway = z_underway,
    .device_synchronize = z_sync,
    .mem_capacity = z_capacity,
};

/* ---- the contenders ---------------------------------------------------------- */

extern void *__libc_malloc(size_t);
#ifdef FSDPSHIM_HAVE_JEMALLOC
extern void *mallocx(size_t, int);
extern void dallocx(void *, int);
#endif
extern void __libc_free(void *);

typedef struct contender {
    const char *name;
    void *(*alloc)(size_t size, int thread);
    void (*release)(void *p, int thread);
    bool present;
} contender;

static void *(*je_mallocx)(size_t, int);
static void (*je_dallocx)(void *, int);
static void *(*mi_malloc_fn)(size_t);
static void (*mi_free_fn)(void *);
static fs_allocator *shim;

static fs_stream_t stream_of(int thread)
{
    return (fs_stream_t)(0x5000 + thread);
}

static void *a_glibc(size_t s, int t)
{
    (void)t;
    return __libc_malloc(s);
}
static void f_glibc(void *p, int t)
{
    (void)t;
    __libc_free(p);
}
static void *a_je(size_t s, int t)
{
    (void)t;
    return je_mallocx(s, 0);
}
static void f_je(void *p, int t)
{
    (void)t;
    je_dallocx(p, 0);
}
static void *a_mi(size_t s, int t)
{
    (void)t;
    return mi_malloc_fn(s);
}
static void f_mi(void *p, int t)
{
    (void)t;
    mi_free_fn(p);
}
static void *a_fs(size_t s, int t)
{
    void *p = NULL;
    if (fs_malloc(shim, 0, stream_of(t), s, FS_ALLOC_STREAM_ORDERED, &p) != FS_OK) return NULL;
    return p;
}
static void f_fs(void *p, int t)
{
    fs_free_async(shim, p, stream_of(t), NULL);
}
static void f_fs_device(void *p, int t)
{
    (void)t;
    fs_free(shim, p, NULL);
}
static void *a_fs_plain(size_t s, int t)
{
    void *p = NULL;
    if (fs_malloc(shim, 0, stream_of(t), s, 0, &p) != FS_OK) return NULL;
    return p;
}

enum { C_FS, C_GLIBC, C_JE, C_MI, C_FS_DEVICE, NCONT };
static contender cont[NCONT] = {
    {"fsdpshim", a_fs, f_fs, true},
    {"glibc", a_glibc, f_glibc, true},
    {"jemalloc", a_je, f_je, false},
    {"mimalloc", a_mi, f_mi, false},
    {"fsdpshim(cudaFree)", a_fs_plain, f_fs_device, true},
};

static void load_host_allocators(void)
{
    /* jemalloc's initial-exec TLS does not fit a dlopen: it is linked, and
     * its own mallocx/dallocx are called (it also serves this program's
     * malloc, which only the allocators' metadata uses). */
#ifdef FSDPSHIM_HAVE_JEMALLOC
    je_mallocx = mallocx;
    je_dallocx = dallocx;
    cont[C_JE].present = true;
#endif
    void *h = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        mi_malloc_fn = (void *(*)(size_t))dlsym(h, "mi_malloc");
        mi_free_fn = (void (*)(void *))dlsym(h, "mi_free");
        cont[C_MI].present = mi_malloc_fn && mi_free_fn;
    }
}

/* ---- size sequences ------------------------------------------------------------ */

static unsigned rnd(unsigned *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Activations of odd shapes (most), parameter shards of a few fixed
 * sizes, and now and then an unsharded layer buffer. */
static size_t fsdp_size(unsigned *s)
{
    unsigned r = rnd(s) % 1000;
    if (r < 700) return 4 * KiB + rnd(s) % (2 * MiB); /* activations, attention scores */
    if (r < 960) {
        static const size_t shards[] = {256 * KiB, 1 * MiB, 3 * MiB, 4 * MiB + 512 * KiB};
        return shards[rnd(s) % 4];
    }
    if (r < 995) return 8 * MiB + rnd(s) % (8 * MiB); /* gathered small layers, grads */
    return 32 * MiB + (rnd(s) % 4) * 16 * MiB;        /* an unsharded transformer layer */
}

static size_t uniform_size(unsigned *s)
{
    return 512 + rnd(s) % (MiB - 512);
}

typedef struct sequence {
    size_t size[SEQ_LEN];
    unsigned short slot[SEQ_LEN];
} sequence;

static void make_sequence(sequence *q, size_t (*pick)(unsigned *), unsigned seed)
{
    unsigned s = seed;
    for (int i = 0; i < SEQ_LEN; i++) {
        q->size[i] = pick(&s);
        q->slot[i] = (unsigned short)(rnd(&s) % SLOTS);
    }
}

/* ---- timing ----------------------------------------------------------------------- */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

enum pattern { PAIR, CHURN };

typedef struct job {
    contender *c;
    const sequence *q;
    enum pattern pattern;
    int thread;
    long pairs;
    pthread_barrier_t *start;
    double ns;
    bool failed;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    void *slot[SLOTS];
    for (int i = 0; i < SLOTS; i++)
        slot[i] = j->c->alloc(j->q->size[i], j->thread);
    /* warm up: a pass over the sequence fills the caches */
    for (long i = 0; i < SEQ_LEN && i < j->pairs; i++) {
        int k = j->q->slot[i];
        j->c->release(slot[k], j->thread);
        slot[k] = j->c->alloc(j->q->size[i], j->thread);
    }
    pthread_barrier_wait(j->start);
    double t0 = now_ns();
    if (j->pattern == PAIR) {
        for (long n = 0; n < j->pairs; n++) {
            void *p = j->c->alloc(j->q->size[n & (SEQ_LEN - 1)], j->thread);
            if (!p) j->failed = true;
            j->c->release(p, j->thread);
        }
    } else {
        for (long n = 0; n < j->pairs; n++) {
            int i = (int)(n & (SEQ_LEN - 1));
            int k = j->q->slot[i];
            j->c->release(slot[k], j->thread);
            slot[k] = j->c->alloc(j->q->size[i], j->thread);
            if (!slot[k]) j->failed = true;
        }
    }
    j->ns = now_ns() - t0;
    for (int i = 0; i < SLOTS; i++)
        j->c->release(slot[i], j->thread);
    return NULL;
}

/* One timed repetition: wall-clock ns of the slowest thread. */
static double run_once(contender *c, const sequence *q, enum pattern pat, int threads, long pairs,
                       bool *ok)
{
    pthread_t t[MAX_THREADS];
    job j[MAX_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        j[i] = (job){c, &q[i], pat, i, pairs, &start, 0, false};
        pthread_create(&t[i], NULL, worker, &j[i]);
    }
    double worst = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        if (j[i].ns > worst) worst = j[i].ns;
        *ok &= !j[i].failed;
    }
    pthread_barrier_destroy(&start);
    return worst;
}

/* ns per pair per thread and pairs per second over all threads, for every
 * present contender on one mix and pattern: each is timed REPS times on
 * pairs / REPS pairs and its fastest repetition counts. The repetitions are
 * interleaved across contenders, so that a busy spell of a shared machine
 * falls on all of them alike, and the minimum is the figure that
 * reproduces there: noise only ever adds time. */
static bool measure(const sequence *q, enum pattern pat, int threads, long pairs, double ns[NCONT],
                    double mpairs[NCONT])
{
    bool ok = true;
    long per = pairs / REPS;
    double best[NCONT] = {0};
    for (int r = 0; r < REPS; r++) {
        for (int c = 0; c < NCONT; c++) {
            if (!cont[c].present) continue;
            double t = run_once(&cont[c], q, pat, threads, per, &ok);
            if (r == 0 || t < best[c]) best[c] = t;
        }
    }
    for (int c = 0; c < NCONT; c++) {
        ns[c] = best[c] > 0 ? best[c] / (double)per : 0;
        mpairs[c] = best[c] > 0 ? (double)per * threads / best[c] * 1e3 : 0;
    }
    return ok;
}

/* ---- fragmentation replay ------------------------------------------------------------ */

/* One FSDP step over `layers` layers at sequence length `seq`: gather a
 * layer's parameters, keep its activations for backward, free the gathered
 * copy; backward in reverse gathers again, makes full gradients, keeps the
 * gradient shard and frees the rest. */
static void fsdp_step(fs_allocator *a, int layers, size_t seq, void **shard_grads, unsigned *s)
{
    void *acts[64][3];
    const fs_stream_t st = 0x7000;
    for (int l = 0; l < layers; l++) {
        size_t params = (size_t)(24 + (l % 3) * 8) * MiB; /* unsharded layer */
        void *full;
        fs_malloc(a, 0, st, params, FS_ALLOC_STREAM_ORDERED, &full);
        for (int k = 0; k < 3; k++)
            fs_malloc(a, 0, st, seq * (k == 1 ? 4096 : 1024) + rnd(s) % 4096,
                      FS_ALLOC_STREAM_ORDERED, &acts[l][k]);
        void *tmp;
        fs_malloc(a, 0, st, seq * 3072, FS_ALLOC_STREAM_ORDERED, &tmp); /* attention scratch */
        fs_free_async(a, tmp, st, NULL);
        fs_free_async(a, full, st, NULL);
    }
    for (int l = layers - 1; l >= 0; l--) {
        size_t params = (size_t)(24 + (l % 3) * 8) * MiB;
        void *full, *grad;
        fs_malloc(a, 0, st, params, FS_ALLOC_STREAM_ORDERED, &full);
        fs_malloc(a, 0, st, params, FS_ALLOC_STREAM_ORDERED, &grad);
        for (int k = 2; k >= 0; k--)
            fs_free_async(a, acts[l][k], st, NULL);
        if (!shard_grads[l])
            fs_malloc(a, 0, st, params / 8, FS_ALLOC_STREAM_ORDERED, &shard_grads[l]);
        fs_free_async(a, grad, st, NULL);
        fs_free_async(a, full, st, NULL);
    }
}

static double fragmentation(bool expandable, size_t *peak_res, size_t *peak_alloc)
{
    fs_alloc_config cfg;
    fs_alloc_config_default(&cfg);
    cfg.expandable_segments = expandable;
    fs_allocator *a = fs_allocator_create(&cfg, &zero_ops, 1);
    void *shard_grads[64] = {0};
    unsigned s = 12345;
    static const size_t seqs[] = {512, 2048, 1024, 4096, 1536, 3072, 768, 4000};
    for (int step = 0; step < 24; step++)
        fsdp_step(a, 24, seqs[step % 8] + rnd(&s) % 64, shard_grads, &s);
    fs_alloc_stats st;
    fs_alloc_get_stats(a, 0, &st);
    *peak_res = (size_t)st.reserved_bytes[FS_SIZE_ALL].peak;
    *peak_alloc = (size_t)st.allocated_bytes[FS_SIZE_ALL].peak;
    fs_allocator_destroy(a);
    return (double)*peak_res / (double)*peak_alloc;
}

/* ---- main ------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    bool quick = false, one_thread = false;
    int wide = 8; /* the many-thread count */
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--one-thread") == 0)
            one_thread = true;
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            wide = atoi(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: alloc_bench [--quick] [--only NAME] [--threads N] [--one-thread]\n");
            return 2;
        }
    }
    if (wide < 2 || wide > MAX_THREADS) {
        fprintf(stderr, "alloc_bench: --threads takes 2 to %d\n", MAX_THREADS);
        return 2;
    }
    long pairs = quick ? 20000 : 2000000;
    load_host_allocators();
    if (only)
        for (int c = 0; c < NCONT; c++)
            if (strcmp(cont[c].name, only) != 0) cont[c].present = false;
    static sequence fsdp[MAX_THREADS], uniform[MAX_THREADS];
    static sequence *mixes[2] = {fsdp, uniform};
    static const char *mix_name[2] = {"fsdp", "uniform"};
    for (int t = 0; t < wide; t++) {
        make_sequence(&fsdp[t], fsdp_size, 1u + (unsigned)t);
        make_sequence(&uniform[t], uniform_size, 101u + (unsigned)t);
    }
    fs_alloc_config cfg;
    fs_alloc_config_default(&cfg);
    shim = fs_allocator_create(&cfg, &zero_ops, 1);
    for (int t = 0; t < wide; t++)
        fs_alloc_stream_register(shim, 0, stream_of(t), FS_STREAM_NONBLOCKING);

    printf(
        "alloc_bench: ns per cached alloc+free pair (best of %d runs of %ld pairs per thread, %d "
        "live slots)\n",
        REPS, pairs / REPS, SLOTS);
    char wide_ns[16], wide_mp[16];
    snprintf(wide_ns, sizeof wide_ns, "%d threads", wide);
    snprintf(wide_mp, sizeof wide_mp, "Mpairs/s x%d", wide);
    printf("%-15s %-19s %12s %12s %12s %12s %9s\n", "mix/pattern", "allocator", "1 thread", wide_ns,
           "Mpairs/s x1", wide_mp, "scaling");
    double summary[NCONT] = {0};
    bool ok = true;
    static const char *pat_name[2] = {"pair", "churn"};
    for (int pat = PAIR; pat <= CHURN; pat++) {
        for (int m = 0; m < 2; m++) {
            char label[32];
            snprintf(label, sizeof label, "%s/%s", mix_name[m], pat_name[pat]);
            double ns1[NCONT], mp1[NCONT], ns8[NCONT] = {0}, mp8[NCONT] = {0};
            ok &= measure(mixes[m], (enum pattern)pat, 1, pairs, ns1, mp1);
            if (!one_thread)
                ok &= measure(mixes[m], (enum pattern)pat, wide, pairs / (quick ? 1 : 4), ns8, mp8);
            for (int c = 0; c < NCONT; c++) {
                if (!cont[c].present) {
                    if (!only) printf("%-15s %-19s %12s\n", label, cont[c].name, "(not found)");
                    continue;
                }
                printf("%-15s %-19s %9.1f ns %9.1f ns %12.1f %12.1f %8.2fx\n", label, cont[c].name,
                       ns1[c], ns8[c], mp1[c], mp8[c], mp8[c] / mp1[c]);
                if (m == 0 && pat == PAIR) summary[c] = ns1[c];
            }
        }
    }
    fs_alloc_stats st;
    fs_alloc_get_stats(shim, 0, &st);
    printf("fsdpshim after the runs: %lld device allocations, %lld retries, %lld OOMs\n",
           (long long)st.num_device_alloc, (long long)st.num_alloc_retries, (long long)st.num_ooms);
    fs_allocator_destroy(shim);

    size_t r0, a0, r1, a1;
    double f0 = fragmentation(false, &r0, &a0);
    double f1 = fragmentation(true, &r1, &a1);
    printf("fragmentation (24-layer FSDP steps, varying sequence length): peak reserved / peak "
           "allocated\n");
    printf("  expandable_segments:false  %.3f  (%zu MiB / %zu MiB)\n", f0, r0 / MiB, a0 / MiB);
    printf("  expandable_segments:true   %.3f  (%zu MiB / %zu MiB)\n", f1, r1 / MiB, a1 / MiB);
    printf("summary: fsdpshim=%.1f glibc=%.1f jemalloc=%.1f mimalloc=%.1f\n", summary[C_FS],
           summary[C_GLIBC], summary[C_JE], summary[C_MI]);
    return ok ? 0 : 1;
}
