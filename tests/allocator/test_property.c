/* test_property.c - a seeded randomized property test: four threads, each
 * allocating, freeing (cudaFree and cudaFreeAsync on any stream),
 * recording uses and completing events across four streams, checked
 * against a reference model:
 *   - live blocks never overlap;
 *   - a freed block comes back before the events it waits for complete
 *     only on the one stream allowed to take it at once (the stream it
 *     was freed on; when other streams used it, only for a stream-ordered
 *     request, which the allocator makes wait for them on the GPU), or
 *     to a stream-ordered request whose stream was made to wait on the
 *     GPU since the free (the model sees that a wait was issued, not which
 *     events it covers);
 *   - at quiescent points the allocator's own walk (fs_alloc_check) agrees
 *     with the model and the device: allocated + cached + pending ==
 *     reserved == what the fake device has handed out, and the statistics
 *     count exactly the model's allocations and frees;
 *   - one allocation in ten goes to one of two private pools, and every live
 *     block is in the pool it was allocated in (no pool's memory serves
 *     another's request);
 *   - once everything is freed it all coalesces back and empty_cache gives
 *     every byte back (the private pools let go).
 * Usage: alloc_test_property [total-ops-per-config] (default 1000000). */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>

#define NTHREADS    4
#define NSTREAMS    4
#define NCOUNTERS   (NSTREAMS + 1) /* the four streams and the legacy stream */
#define MAX_LIVE    48
#define CHECK_EVERY 4096

static const fs_stream_t streams[NCOUNTERS] = {0x2001, 0x2002, 0x2003, 0x2004, LEG};

typedef struct live {
    uintptr_t addr;
    size_t size, requested;
    fs_stream_t stream;
    unsigned uses; /* bitmask over streams[] */
    bool ordered;  /* allocated stream-ordered */
    uint64_t priv; /* the private pool it was allocated in, 0 for the shared cache */
} live;

/* A freed range: until every stream in `need` has been completed since
 * `snap`, only `ok` (if any) may get it back, and with `ok_ordered` only
 * for a stream-ordered request; or a stream-ordered request on a stream
 * that the allocator made wait on the GPU after the free (the fake
 * device's stream_wait_event calls from number `waits_at` on); or any
 * request once every stream was made to wait so (a cudaMalloc's reuse of
 * a pending device-ordered free, which no stream orders). */
typedef struct guard {
    uintptr_t lo, hi;
    bool has_ok, ok_ordered;
    fs_stream_t ok;
    long waits_at;
    unsigned need;
    long snap[NCOUNTERS];
} guard;

typedef struct model {
    pthread_mutex_t mu;
    live *all; /* every live block, sorted by address */
    size_t nall;
    guard *g;
    size_t ng, capg;
    long done[NCOUNTERS]; /* completions requested per stream */
    long allocs, frees;
    fake_device *fake;
    atomic_long queries; /* of incomplete events */
    bool device_frees;   /* fs_free is device-ordered in this configuration */
    bool sync_frees;     /* fs_free synchronises the device */
} model;

typedef struct worker {
    env *e;
    model *m;
    pthread_barrier_t *bar;
    unsigned seed;
    long ops;
    live mine[MAX_LIVE];
    int nmine;
    bool failed;
    char why[256];
} worker;

static unsigned rnd(unsigned *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static size_t pick_size(unsigned *s)
{
    unsigned r = rnd(s) % 100;
    if (r < 60) return 1 + rnd(s) % (64 * 1024);
    if (r < 85) return 64 * 1024 + rnd(s) % (MiB - 64 * 1024);
    if (r < 97) return MiB + rnd(s) % (7 * MiB);
    return 8 * MiB + rnd(s) % (32 * MiB);
}

static int stream_index(fs_stream_t s)
{
    for (int i = 0; i < NCOUNTERS; i++)
        if (streams[i] == s) return i;
    return -1;
}

static bool guard_met(const model *m, const guard *g)
{
    for (int i = 0; i < NCOUNTERS; i++)
        if ((g->need >> i & 1) && m->done[i] <= g->snap[i]) return false;
    return true;
}

static void guard_push(model *m, const guard *g)
{
    if (m->ng == m->capg) {
        m->capg = m->capg ? m->capg * 2 : 1024;
        m->g = realloc(m->g, m->capg * sizeof *m->g);
    }
    m->g[m->ng++] = *g;
}

/* Whether stream s was made to wait for an event on the GPU by the
 * stream_wait_event call numbered `from` or a later one. */
static bool waited_since(model *m, fs_stream_t s, long from)
{
    fs_stream_t waiter, on;
    for (long n = from; fake_wait_log(m->fake, n, &waiter, &on); n++)
        if (waiter == s) return true;
    return false;
}

/* Whether every stream of the model (all non-blocking, and the legacy
 * one) was made to wait on the GPU since call number `from`. */
static bool all_waited_since(model *m, long from)
{
    for (int i = 0; i < NCOUNTERS; i++)
        if (!waited_since(m, streams[i], from)) return false;
    return true;
}

/* Model lock held. Checks a fresh block and adds it; NULL or why not. */
static const char *model_alloc(model *m, const live *l)
{
    size_t lo = 0, hi = m->nall;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->all[mid].addr < l->addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < m->nall && m->all[lo].addr < l->addr + l->size) return "overlaps the next live block";
    if (lo > 0 && m->all[lo - 1].addr + m->all[lo - 1].size > l->addr)
        return "overlaps the previous live block";
    for (size_t i = 0; i < m->ng;) {
        guard *g = &m->g[i];
        if (guard_met(m, g)) {
            *g = m->g[--m->ng];
            continue;
        }
        if (g->lo < l->addr + l->size && l->addr < g->hi) {
            if (!(g->has_ok && g->ok == l->stream && (l->ordered || !g->ok_ordered)) &&
                !(l->ordered && waited_since(m, l->stream, g->waits_at)) &&
                !(!l->ordered && all_waited_since(m, g->waits_at))) {
                static char why[200];
                snprintf(why, sizeof why,
                         "handed out before the events it waits for completed (freed range "
                         "%lx+%lx, ok %d:%lx%s, need %x)",
                         (unsigned long)g->lo, (unsigned long)(g->hi - g->lo), g->has_ok,
                         (unsigned long)g->ok, g->ok_ordered ? " ordered" : "", g->need);
                return why;
            }
            /* Taken in stream order: from now on the program orders that
             * part (its next free says how). The rest stays guarded. */
            guard rest = *g;
            if (g->lo < l->addr) {
                g->hi = l->addr;
                if (rest.hi > l->addr + l->size) {
                    rest.lo = l->addr + l->size;
                    guard_push(m, &rest);
                }
            } else if (g->hi > l->addr + l->size) {
                g->lo = l->addr + l->size;
            } else {
                *g = m->g[--m->ng];
                continue;
            }
        }
        i++;
    }
    memmove(&m->all[lo + 1], &m->all[lo], (m->nall - lo) * sizeof *m->all);
    m->all[lo] = *l;
    m->nall++;
    m->allocs++;
    return NULL;
}

/* Model lock held: the block leaves the live set, its guard goes up.
 * `snap` was taken before the work notes that precede the free. */
static void model_free(model *m, const live *l, bool async, fs_stream_t on,
                       const long snap[NCOUNTERS])
{
    size_t i = 0;
    while (m->all[i].addr != l->addr)
        i++;
    memmove(&m->all[i], &m->all[i + 1], (m->nall - i - 1) * sizeof *m->all);
    m->nall--;
    m->frees++;
    if (!async && m->sync_frees) return; /* after a device synchronisation nothing waits */
    guard_push(m, &(guard){0});
    guard *g = &m->g[m->ng - 1];
    g->lo = l->addr;
    g->hi = l->addr + l->size;
    memcpy(g->snap, snap, sizeof g->snap);
    fake_counts c;
    fake_counts_get(m->fake, &c);
    g->waits_at = c.stream_wait;
    if (async || !m->device_frees) {
        fs_stream_t s = async ? on : l->stream;
        g->need = l->uses | 1u << stream_index(s);
        g->has_ok = true;
        g->ok_ordered = (l->uses & ~(1u << stream_index(s))) != 0;
        g->ok = s;
    } else {
        g->need = (1u << NCOUNTERS) - 1; /* the device: every stream */
        g->has_ok = false;
    }
}

#define FAIL(w, ...)                                                                               \
    do {                                                                                           \
        snprintf((w)->why, sizeof(w)->why, __VA_ARGS__);                                           \
        (w)->failed = true;                                                                        \
        return;                                                                                    \
    } while (0)

/* The count and the completion happen together under the model lock: a
 * free's snapshot is then wholly before or wholly after both. */
static void complete(worker *w, int i)
{
    model *m = w->m;
    pthread_mutex_lock(&m->mu);
    if (i < 0) {
        for (int k = 0; k < NCOUNTERS; k++)
            m->done[k]++;
        fake_complete_all(w->e->fake);
    } else {
        m->done[i]++;
        fake_complete_stream(w->e->fake, streams[i]);
    }
    pthread_mutex_unlock(&m->mu);
}

/* The allocator waits on the host for an event of stream s (empty_cache,
 * release and retry): the stream's work so far completes, counted with it
 * as complete() does. */
static void on_host_wait(void *ctx, fs_stream_t s)
{
    model *m = ctx;
    pthread_mutex_lock(&m->mu);
    m->done[stream_index(s)]++;
    fake_complete_stream(m->fake, s);
    pthread_mutex_unlock(&m->mu);
}

/* Every fourth query of an incomplete event, the device catches up with
 * that stream: a miss that polls for pending frees sees them complete. The
 * query may come with the allocator's locks held, which a worker holding
 * the model lock may be waiting for: then there is no progress this time. */
static void on_query(void *ctx, fs_stream_t s)
{
    model *m = ctx;
    if (atomic_fetch_add(&m->queries, 1) % 4 != 3 || pthread_mutex_trylock(&m->mu)) return;
    m->done[stream_index(s)]++;
    fake_complete_stream(m->fake, s);
    pthread_mutex_unlock(&m->mu);
}

static void do_alloc(worker *w)
{
    fs_stream_t s = streams[rnd(&w->seed) % NSTREAMS];
    size_t size = pick_size(&w->seed);
    void *p = NULL;
    unsigned flags = rnd(&w->seed) % 2 ? FS_ALLOC_STREAM_ORDERED : 0;
    /* one in ten into one of two private pools */
    uint64_t priv = rnd(&w->seed) % 10 == 0 ? 1 + rnd(&w->seed) % 2 : 0;
    fs_status st = fs_malloc_private(w->e->a, 0, s, priv, size, flags, &p);
    if (st != FS_OK) FAIL(w, "fs_malloc(%zu) failed: %d", size, st);
    fs_block_info bi;
    if (fs_alloc_block_info(w->e->a, p, &bi) != FS_OK || bi.block != p || bi.block_size < size ||
        bi.block_size % 512 || bi.requested != size || bi.stream != s)
        FAIL(w, "block_info disagrees for %p", p);
    live l = {(uintptr_t)p, bi.block_size, size, s, 0, flags & FS_ALLOC_STREAM_ORDERED, priv};
    pthread_mutex_lock(&w->m->mu);
    const char *why = model_alloc(w->m, &l);
    pthread_mutex_unlock(&w->m->mu);
    if (why) FAIL(w, "block %p (+%zu) on stream %lx: %s", p, l.size, (unsigned long)s, why);
    w->mine[w->nmine++] = l;
}

static void do_free(worker *w)
{
    int i = (int)(rnd(&w->seed) % (unsigned)w->nmine);
    live l = w->mine[i];
    w->mine[i] = w->mine[--w->nmine];
    bool async = rnd(&w->seed) % 2;
    fs_stream_t on = streams[rnd(&w->seed) % NSTREAMS];
    long snap[NCOUNTERS];
    pthread_mutex_lock(&w->m->mu);
    memcpy(snap, w->m->done, sizeof snap);
    pthread_mutex_unlock(&w->m->mu);
    /* every stream may have touched it: say so, as the interposer would
     * (after the work, so after the model's snapshot) */
    for (int k = 0; k < NSTREAMS; k++)
        fs_alloc_stream_note_work(w->e->a, 0, streams[k]);
    pthread_mutex_lock(&w->m->mu);
    model_free(w->m, &l, async, on, snap);
    fs_status st;
    if (!async && w->m->sync_frees) {
        /* its device synchronisation completes every event: counted first,
         * under the model lock like any completion */
        for (int k = 0; k < NCOUNTERS; k++)
            w->m->done[k]++;
        st = fs_free(w->e->a, (void *)l.addr, NULL);
        pthread_mutex_unlock(&w->m->mu);
    } else {
        pthread_mutex_unlock(&w->m->mu);
        st = async ? fs_free_async(w->e->a, (void *)l.addr, on, NULL)
                   : fs_free(w->e->a, (void *)l.addr, NULL);
    }
    if (st != FS_OK) FAIL(w, "free of %lx failed: %d", (unsigned long)l.addr, st);
}

static void step(worker *w)
{
    unsigned r = rnd(&w->seed) % 100;
    if (r < 45 || (r < 85 && w->nmine == 0)) {
        if (w->nmine < MAX_LIVE)
            do_alloc(w);
        else
            do_free(w);
    } else if (r < 85) {
        do_free(w);
    } else if (r < 90 && w->nmine) {
        live *l = &w->mine[rnd(&w->seed) % (unsigned)w->nmine];
        int k = (int)(rnd(&w->seed) % NSTREAMS);
        if (fs_record_stream(w->e->a, (char *)l->addr + rnd(&w->seed) % l->size, streams[k]) !=
            FS_OK)
            FAIL(w, "record_stream on a live block failed");
        if (streams[k] != l->stream) l->uses |= 1u << k;
    } else if (r < 94) {
        complete(w, (int)(rnd(&w->seed) % NCOUNTERS));
    } else if (r < 95) {
        complete(w, -1);
    } else if (r < 96) {
        fs_alloc_note_host_sync(w->e->a, 0);
    } else if (r < 98 && w->nmine) {
        live *l = &w->mine[rnd(&w->seed) % (unsigned)w->nmine];
        size_t off = rnd(&w->seed) % l->size;
        fs_block_info bi;
        if (fs_alloc_block_info(w->e->a, (char *)l->addr + off, &bi) != FS_OK ||
            (uintptr_t)bi.block != l->addr || bi.block_size != l->size)
            FAIL(w, "interior lookup failed");
    } else if (w->nmine) {
        live *l = &w->mine[rnd(&w->seed) % (unsigned)w->nmine];
        if (l->size > 512 && fs_free(w->e->a, (char *)l->addr + 512, NULL) != FS_ERR_INVALID)
            FAIL(w, "an interior free was not refused");
    }
}

/* All threads stopped: the walk, the model and the device must agree. */
/* Every live block is in the pool it was allocated in: no private pool's
 * memory served another pool's request, nor the other way round. */
static const char *private_check(env *e, model *m)
{
    size_t n = fs_alloc_walk(e->a, 0, NULL, 0);
    fs_walk_entry *w = malloc((n + 1) * sizeof *w);
    const char *why = NULL;
    if (!w) return NULL;
    n = fs_alloc_walk(e->a, 0, w, n + 1);
    for (size_t i = 0; i < n && !why; i++) {
        if (w[i].state != FS_WALK_LIVE) continue;
        size_t lo = 0, hi = m->nall;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (m->all[mid].addr < w[i].addr)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == m->nall || m->all[lo].addr != w[i].addr)
            why = "a live block the model does not have";
        else if (m->all[lo].priv != w[i].priv)
            why = "a block served from another pool's memory (private pools)";
    }
    free(w);
    return why;
}

static const char *quiescent_check(env *e, model *m, bool drain)
{
    static char why[256];
    const char *why_priv;
    fs_alloc_census c;
    const char *err = fs_alloc_check(e->a, 0, &c);
    if (err) return err;
    size_t bytes = 0, req = 0;
    for (size_t i = 0; i < m->nall; i++) {
        bytes += m->all[i].size;
        req += m->all[i].requested;
    }
    if (c.live_blocks != m->nall || c.live_bytes != bytes || c.requested_bytes != req)
        return "the live blocks differ from the model";
    if (c.free_bytes + c.live_bytes + c.pending_bytes != c.mapped_bytes)
        return "allocated + cached + pending != reserved";
    if ((why_priv = private_check(e, m))) return why_priv;
    if (c.mapped_bytes != fake_used(e->fake, 0)) {
        snprintf(why, sizeof why, "reserved %zu but the device has %zu out", c.mapped_bytes,
                 fake_used(e->fake, 0));
        return why;
    }
    fs_alloc_stats st = stats(e);
    if (st.allocation[FS_SIZE_ALL].allocated != m->allocs ||
        st.allocation[FS_SIZE_ALL].freed != m->frees)
        return "allocation counts differ from the model";
    if (st.allocated_bytes[FS_SIZE_ALL].peak < (int64_t)bytes ||
        st.reserved_bytes[FS_SIZE_ALL].peak < (int64_t)c.mapped_bytes)
        return "a peak is below a current value";
    if (drain) {
        /* empty_cache waits for every event: all streams complete; private
         * pool 2 is let go for it (its free memory goes) and held again */
        for (int k = 0; k < NCOUNTERS; k++)
            m->done[k]++;
        fs_private_conf conf = {.held = false};
        fs_alloc_private_configure(e->a, 0, 2, &conf);
        fs_alloc_empty_cache(e->a, 0);
        conf.held = true;
        fs_alloc_private_configure(e->a, 0, 2, &conf);
        err = fs_alloc_check(e->a, 0, &c);
        if (err) return err;
        if (c.pending_blocks) return "empty_cache left pending blocks";
        if (c.free_bytes != c.mapped_bytes - c.live_bytes)
            return "empty_cache left bytes unaccounted for";
    }
    return NULL;
}

static void *run(void *arg)
{
    worker *w = arg;
    /* a failed worker stops working but keeps meeting the barriers */
    for (long i = 0; i < w->ops; i++) {
        if (!w->failed) step(w);
        if ((i + 1) % CHECK_EVERY == 0) {
            pthread_barrier_wait(w->bar);
            pthread_barrier_wait(w->bar); /* the checker runs in between */
        }
    }
    return NULL;
}

static void run_config(const char *conf, long total, unsigned seed, size_t capacity)
{
    env e = env_make(conf, capacity);
    for (int k = 0; k < NSTREAMS; k++)
        fs_alloc_stream_register(e.a, 0, streams[k], FS_STREAM_NONBLOCKING);
    model m = {0};
    pthread_mutex_init(&m.mu, NULL);
    m.all = calloc(NTHREADS * MAX_LIVE + 1, sizeof *m.all);
    m.fake = e.fake;
    fake_on_sync(e.fake, on_host_wait, &m);
    fake_on_query(e.fake, on_query, &m);
    m.device_frees = !conf || !strstr(conf, "free_semantics");
    m.sync_frees = conf && strstr(conf, "free_semantics:sync");
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NTHREADS + 1);
    worker *w = calloc(NTHREADS, sizeof *w);
    pthread_t t[NTHREADS];
    /* whole rounds, so every thread reaches every barrier; never fewer ops */
    long per = (total / NTHREADS + CHECK_EVERY - 1) / CHECK_EVERY * CHECK_EVERY;
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker){
            .e = &e, .m = &m, .bar = &bar, .seed = seed * 7919u + (unsigned)i + 1, .ops = per};
        pthread_create(&t[i], NULL, run, &w[i]);
    }
    const char *why = NULL;
    for (long r = 0; r < per / CHECK_EVERY; r++) {
        pthread_barrier_wait(&bar);
        bool failed = false;
        for (int i = 0; i < NTHREADS; i++)
            failed |= w[i].failed;
        if (!why && !failed) why = quiescent_check(&e, &m, r % 16 == 15);
        if (why || failed) {
            /* the workers idle through their remaining rounds */
            for (int i = 0; i < NTHREADS; i++)
                w[i].failed = true;
        }
        pthread_barrier_wait(&bar);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NTHREADS; i++)
        if (w[i].failed && w[i].why[0])
            fail_msg("[%s] thread %d: %s", conf ? conf : "defaults", i, w[i].why);
    if (why) fail_msg("[%s] %s", conf ? conf : "defaults", why);
    /* free everything: it must all coalesce and go back to the device */
    for (int i = 0; i < NTHREADS; i++)
        for (int j = 0; j < w[i].nmine; j++)
            assert_int_equal(fs_free(e.a, (void *)w[i].mine[j].addr, NULL), FS_OK);
    fs_private_conf let_go = {.held = false};
    fs_alloc_private_configure(e.a, 0, 1, &let_go);
    fs_alloc_private_configure(e.a, 0, 2, &let_go);
    fs_alloc_empty_cache(e.a, 0);
    fs_alloc_census c;
    const char *err = fs_alloc_check(e.a, 0, &c);
    if (err) fail_msg("[%s] at the end: %s", conf ? conf : "defaults", err);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(c.segments, 0);
    assert_int_equal(fake_used(e.fake, 0), 0);
    assert_int_equal(fake_live_segments(e.fake, 0), 0);
    assert_int_equal(st.reserved_bytes[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.active[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.inactive_split[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.pending_frees, 0);
    assert_int_equal(st.allocation[FS_SIZE_ALL].allocated, st.allocation[FS_SIZE_ALL].freed);
    fake_counts fc = counts(&e);
    assert_int_equal(fc.records_on_capturing, 0);
    assert_int_equal(fc.vm_refused, 0);
    /* each segment and each page is one device allocation, given back */
    assert_int_equal(st.num_device_alloc, st.num_device_free);
    assert_true(st.num_device_alloc > 0 && st.num_device_alloc <= fc.segment_alloc + fc.vm_map);
    printf("  [%s] %ld ops, %ld allocations, %ld events recorded, %ld segments allocated\n",
           conf ? conf : "defaults", per * NTHREADS, m.allocs, fc.event_record, fc.segment_alloc);
    free(w);
    free(m.all);
    free(m.g);
    pthread_barrier_destroy(&bar);
    fake_on_sync(e.fake, NULL, NULL);
    fake_on_query(e.fake, NULL, NULL);
    pthread_mutex_destroy(&m.mu);
    env_free(&e);
}

static long total_ops = 1000000;

static void test_defaults(void **state)
{
    (void)state;
    run_config(NULL, total_ops, 1, (size_t)1 << 40);
}

static void test_stream_semantics(void **state)
{
    (void)state;
    run_config("free_semantics:stream", total_ops / 4, 2, (size_t)1 << 40);
}

static void test_expandable_no_cross(void **state)
{
    (void)state;
    run_config("expandable_segments:true;cross_stream_reuse:none", total_ops / 4, 3,
               (size_t)1 << 40);
}

static void test_sync_gc(void **state)
{
    (void)state;
    /* 1% of 16 GiB: collection runs whenever more than 164 MiB is reserved */
    run_config("free_semantics:sync;garbage_collection_threshold:0.01", total_ops / 4, 5,
               (size_t)16 << 30);
}

static void test_rounding_split_limit(void **state)
{
    (void)state;
    run_config("roundup_power2_divisions:4;max_split_size_mb:24;free_semantics:stream",
               total_ops / 4, 4, (size_t)1 << 40);
}

int main(int argc, char **argv)
{
    if (argc > 1) total_ops = atol(argv[1]);
    if (total_ops < NTHREADS * CHECK_EVERY * 4) total_ops = NTHREADS * CHECK_EVERY * 4;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_stream_semantics),
        cmocka_unit_test(test_expandable_no_cross),
        cmocka_unit_test(test_rounding_split_limit),
        cmocka_unit_test(test_sync_gc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
