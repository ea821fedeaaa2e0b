/* test_stats.c - the statistics kept per pool ("stats.c"): peaks stay exact
 * while pools trade their rooms, checked one thread at a time against a
 * model that sees every change, and across threads at barriers, where the
 * exact peak is known; and what readers see while threads allocate. */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>

#define CAP      ((size_t)64 << 30)
#define NSTREAMS 4
#define KINDS    3 /* FS_SIZE_ALL, _SMALL, _LARGE */

static const fs_stream_t streams[NSTREAMS] = {LEG, S1, S2, S3};

static unsigned rnd(unsigned *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Small and large requests, now and then one that needs a segment of its
 * own, so that pools rise and fall by very different amounts. */
static size_t pick_size(unsigned *s)
{
    unsigned r = rnd(s) % 100;
    if (r < 60) return 1 + rnd(s) % MiB;
    if (r < 95) return MiB + 1 + rnd(s) % (9 * MiB);
    return 10 * MiB + rnd(s) % (54 * MiB);
}

/* The pool kind of a request: the small pool serves what rounds to 1 MiB
 * or less. */
static int pool_of(size_t size)
{
    return (size + 511) / 512 * 512 <= MiB ? FS_SIZE_SMALL : FS_SIZE_LARGE;
}

/* A failure in a worker thread, reported by the main one (cmocka's
 * assertions may only fail there). */
static atomic_int thread_failures;
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) atomic_fetch_add(&thread_failures, 1);                                        \
    } while (0)

/* The counters a block's life moves, as the allocator rounds them. */
enum { F_ALLOCATION, F_ALLOCATED, F_REQUESTED, F_ACTIVE, F_ACTIVE_BYTES, NFIELDS };

typedef struct model {
    int64_t cur[NFIELDS][KINDS], peak[NFIELDS][KINDS], total[NFIELDS][KINDS];
} model;

static void model_move(model *m, int pool, const int64_t by[NFIELDS])
{
    for (int f = 0; f < NFIELDS; f++) {
        const int slots[2] = {pool, FS_SIZE_ALL};
        for (int i = 0; i < 2; i++) {
            int k = slots[i];
            m->cur[f][k] += by[f];
            if (by[f] > 0) m->total[f][k] += by[f];
            if (m->cur[f][k] > m->peak[f][k]) m->peak[f][k] = m->cur[f][k];
        }
    }
}

static void model_reset_peak(model *m)
{
    for (int f = 0; f < NFIELDS; f++)
        for (int k = 0; k < KINDS; k++)
            m->peak[f][k] = m->cur[f][k];
}

static const fs_stat *field_of(const fs_alloc_stats *st, int f)
{
    switch (f) {
    case F_ALLOCATION:
        return st->allocation;
    case F_ALLOCATED:
        return st->allocated_bytes;
    case F_REQUESTED:
        return st->requested_bytes;
    case F_ACTIVE:
        return st->active;
    default:
        return st->active_bytes;
    }
}

/* Every field the model keeps, in every pool kind; `active` only when
 * frees complete at once (stream-ordered on the block's own stream). */
static void check_model(env *e, const model *m, bool active, long op)
{
    fs_alloc_stats st = stats(e);
    for (int f = 0; f < (active ? NFIELDS : F_ACTIVE); f++) {
        const fs_stat *s = field_of(&st, f);
        for (int k = 0; k < KINDS; k++) {
            if (s[k].current != m->cur[f][k] || s[k].peak != m->peak[f][k] ||
                s[k].allocated != m->total[f][k] || s[k].freed != m->total[f][k] - m->cur[f][k])
                fail_msg("op %ld field %d kind %d: current %lld peak %lld allocated %lld, model "
                         "%lld %lld %lld",
                         op, f, k, (long long)s[k].current, (long long)s[k].peak,
                         (long long)s[k].allocated, (long long)m->cur[f][k],
                         (long long)m->peak[f][k], (long long)m->total[f][k]);
        }
    }
}

typedef struct live {
    void *p;
    int stream, pool;
    int64_t size, requested;
} live;

#define MAX_LIVE 96

/* One thread on four streams, frees on the block's own stream (reusable
 * at once) or device-ordered, now and then a peak reset: every change
 * moves one pool's counters, so rooms change hands all the time, and each
 * figure must be the model's after every few operations. */
static void run_model(const char *conf, bool device_frees, unsigned seed, long ops)
{
    env e = env_make(conf, CAP);
    fake_auto_complete(e.fake, true); /* a miss never waits for frees */
    model m = {0};
    live l[MAX_LIVE];
    int n = 0;
    unsigned s = seed;
    bool active = !device_frees; /* device-ordered frees stay active until retired */
    for (long op = 0; op < ops; op++) {
        unsigned r = rnd(&s) % 100;
        if (n < MAX_LIVE && (n == 0 || r < 52)) {
            int i = (int)(rnd(&s) % NSTREAMS);
            size_t size = pick_size(&s);
            void *p = must_alloc_ordered(&e, streams[i], size);
            fs_block_info bi;
            assert_int_equal(fs_alloc_block_info(e.a, p, &bi), FS_OK);
            int pool = pool_of(size);
            l[n++] = (live){p, i, pool, (int64_t)bi.block_size, (int64_t)size};
            const int64_t by[NFIELDS] = {1, (int64_t)bi.block_size, (int64_t)size, 1,
                                         (int64_t)bi.block_size};
            model_move(&m, pool, by);
        } else if (r < 99) {
            int j = (int)(rnd(&s) % (unsigned)n);
            live b = l[j];
            l[j] = l[--n];
            if (device_frees)
                assert_int_equal(fs_free(e.a, b.p, NULL), FS_OK);
            else
                assert_int_equal(fs_free_async(e.a, b.p, streams[b.stream], NULL), FS_OK);
            const int64_t by[NFIELDS] = {-1, -b.size, -b.requested, device_frees ? 0 : -1,
                                         device_frees ? 0 : -b.size};
            model_move(&m, b.pool, by);
        } else {
            fs_alloc_reset_peak(e.a, 0);
            model_reset_peak(&m);
        }
        if (op % 7 == 0 || op == ops - 1) check_model(&e, &m, active, op);
    }
    for (int i = 0; i < n; i++)
        assert_int_equal(fs_free_async(e.a, l[i].p, streams[l[i].stream], NULL), FS_OK);
    fs_alloc_census c;
    const char *err = fs_alloc_check(e.a, 0, &c);
    if (err) fail_msg("%s", err);
    env_free(&e);
}

static void test_model_own_stream(void **state)
{
    (void)state;
    run_model("cross_stream_reuse:none", false, 11, 20000);
}

/* Other streams' free blocks are taken (lent from the top, or adopted):
 * a block then counts in its segment's pool, not its stream's. */
static void test_model_borrowing(void **state)
{
    (void)state;
    run_model(NULL, true, 23, 20000);
    run_model("cross_stream_reuse:wait", true, 29, 20000);
}

/* ---- threads ------------------------------------------------------------------- */

#define NTHREADS 4
#define ROUNDS   200

typedef struct worker {
    env *e;
    pthread_barrier_t *bar;
    int t;
    unsigned seed;
    int64_t got[ROUNDS][NFIELDS][KINDS]; /* what it held at round r's barrier */
} worker;

/* Each round: every thread allocates a few blocks on its own stream (the
 * device's sums only rise), all meet, then free everything (they only
 * fall), and meet again. So each sum's greatest value is at a barrier, the
 * sum of what the threads held there, and the peaks must be exactly the
 * greatest of those however the threads' operations interleaved. */
static void *round_worker(void *arg)
{
    worker *w = arg;
    fs_stream_t st = streams[w->t];
    for (int r = 0; r < ROUNDS; r++) {
        void *p[8];
        int n = 1 + (int)(rnd(&w->seed) % 8);
        for (int i = 0; i < n; i++) {
            size_t size = pick_size(&w->seed);
            CHECK(fs_malloc(w->e->a, 0, st, size, FS_ALLOC_STREAM_ORDERED, &p[i]) == FS_OK);
            fs_block_info bi = {0};
            CHECK(fs_alloc_block_info(w->e->a, p[i], &bi) == FS_OK);
            int pool = pool_of(size);
            const int64_t by[NFIELDS] = {1, (int64_t)bi.block_size, (int64_t)size, 1,
                                         (int64_t)bi.block_size};
            for (int f = 0; f < NFIELDS; f++) {
                w->got[r][f][pool] += by[f];
                w->got[r][f][FS_SIZE_ALL] += by[f];
            }
        }
        pthread_barrier_wait(w->bar);
        for (int i = 0; i < n; i++)
            CHECK(fs_free_async(w->e->a, p[i], st, NULL) == FS_OK);
        pthread_barrier_wait(w->bar);
    }
    return NULL;
}

/* reset_accumulated: PyTorch's `allocated` and `freed` count from the reset,
 * `current` and the peaks stay, and the event counters restart at 0; pool
 * figures (allocations) and the device's own (segments) alike. */
static void test_reset_accumulated(void **state)
{
    (void)state;
    env e = env_make(NULL, (size_t)64 << 30);
    void *a = must_alloc(&e, S1, 4096), *b = must_alloc(&e, S1, 4096);
    fs_free_async(e.a, b, S1, NULL);
    fs_alloc_reset_accumulated(e.a, 0);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.allocation[FS_SIZE_ALL].current, 1);
    assert_int_equal(st.allocation[FS_SIZE_ALL].allocated, 0);
    assert_int_equal(st.allocation[FS_SIZE_ALL].freed, 0);
    assert_int_equal(st.allocation[FS_SIZE_ALL].peak, 2);
    assert_int_equal(st.segment[FS_SIZE_ALL].allocated, 0);
    assert_int_equal(st.segment[FS_SIZE_ALL].current, 1);
    assert_int_equal(st.num_device_alloc, 0);
    void *c = must_alloc(&e, S1, 4096), *d = must_alloc(&e, S1, (size_t)4 << 20);
    fs_free_async(e.a, a, S1, NULL);
    st = stats(&e);
    assert_int_equal(st.allocation[FS_SIZE_ALL].allocated, 2);
    assert_int_equal(st.allocation[FS_SIZE_ALL].freed, 1);
    assert_int_equal(st.allocation[FS_SIZE_ALL].current, 2);
    assert_int_equal(st.allocation[FS_SIZE_SMALL].allocated, 1);
    assert_int_equal(st.segment[FS_SIZE_ALL].allocated, 1); /* d's segment */
    assert_int_equal(st.segment[FS_SIZE_ALL].freed, 0);
    assert_int_equal(st.num_device_alloc, 1);
    fs_free_async(e.a, c, S1, NULL);
    fs_free_async(e.a, d, S1, NULL);
    env_free(&e);
}

/* PyTorch's oversize figures: live blocks and whole segments of
 * max_split_size or more, with their peaks and accumulated counts. */
static void test_oversize(void **state)
{
    (void)state;
    env e = env_make("free_semantics:stream;max_split_size_mb:32", (size_t)64 << 30);
    void *small = must_alloc(&e, S1, 8 * MiB);
    void *a = must_alloc(&e, S1, 40 * MiB), *b = must_alloc(&e, S1, 64 * MiB);
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.oversize_allocations.current, 2);
    assert_int_equal(st.oversize_segments.current, 2); /* not the 20 MiB one */
    fs_free_async(e.a, a, S1, NULL);
    st = stats(&e);
    assert_int_equal(st.oversize_allocations.current, 1);
    assert_int_equal(st.oversize_allocations.peak, 2);
    assert_int_equal(st.oversize_allocations.allocated, 2);
    assert_int_equal(st.oversize_allocations.freed, 1);
    assert_int_equal(st.oversize_segments.current, 2); /* cached */
    assert_int_equal(fs_alloc_empty_cache(e.a, 0), FS_OK);
    st = stats(&e);
    assert_int_equal(st.oversize_segments.current, 1);
    assert_int_equal(st.oversize_segments.freed, 1);
    fs_alloc_reset_accumulated(e.a, 0);
    fs_alloc_reset_peak(e.a, 0);
    st = stats(&e);
    assert_int_equal(st.oversize_allocations.allocated, 0);
    assert_int_equal(st.oversize_allocations.freed, 0);
    assert_int_equal(st.oversize_allocations.peak, 1);
    assert_int_equal(st.oversize_segments.peak, 1);
    fs_free_async(e.a, b, S1, NULL);
    fs_free_async(e.a, small, S1, NULL);
    st = stats(&e);
    assert_int_equal(st.oversize_allocations.current, 0);
    env_free(&e);
    /* unlimited max_split_size: nothing is oversize, as in PyTorch */
    e = env_make(NULL, (size_t)64 << 30);
    fs_free_async(e.a, must_alloc(&e, S1, 64 * MiB), S1, NULL);
    st = stats(&e);
    assert_int_equal(st.oversize_allocations.allocated, 0);
    assert_int_equal(st.oversize_segments.allocated, 0);
    env_free(&e);
}

static void test_threads_exact_peaks(void **state)
{
    (void)state;
    /* no borrowing: a borrowed block's free would stay pending (active) */
    env e = env_make("cross_stream_reuse:none", CAP);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NTHREADS);
    worker *w = calloc(NTHREADS, sizeof *w);
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker){.e = &e, .bar = &bar, .t = i, .seed = 7u * (unsigned)i + 3};
        pthread_create(&t[i], NULL, round_worker, &w[i]);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&thread_failures), 0);
    fs_alloc_stats st = stats(&e);
    for (int f = 0; f < NFIELDS; f++) {
        const fs_stat *s = field_of(&st, f);
        for (int k = 0; k < KINDS; k++) {
            int64_t want = 0;
            for (int r = 0; r < ROUNDS; r++) {
                int64_t sum = 0;
                for (int i = 0; i < NTHREADS; i++)
                    sum += w[i].got[r][f][k];
                if (sum > want) want = sum;
            }
            if (s[k].peak != want || s[k].current != 0)
                fail_msg("field %d kind %d: peak %lld (want %lld), current %lld", f, k,
                         (long long)s[k].peak, (long long)want, (long long)s[k].current);
        }
    }
    free(w);
    pthread_barrier_destroy(&bar);
    env_free(&e);
}

/* Threads allocate and free at random while another reads: every reading
 * must be a consistent snapshot, each peak at least its current value. */
typedef struct churner {
    env *e;
    int t;
    unsigned seed;
    atomic_bool *stop;
} churner;

static void *churn(void *arg)
{
    churner *c = arg;
    void *p[32] = {0};
    long i = 0;
    while (!atomic_load(c->stop) || i < 2000) {
        int k = (int)(rnd(&c->seed) % 32);
        if (p[k]) CHECK(fs_free_async(c->e->a, p[k], streams[c->t], NULL) == FS_OK);
        p[k] = NULL;
        if (rnd(&c->seed) % 4)
            CHECK(fs_malloc(c->e->a, 0, streams[c->t], pick_size(&c->seed), FS_ALLOC_STREAM_ORDERED,
                            &p[k]) == FS_OK);
        if (++i % 500 == 0) fs_alloc_reset_peak(c->e->a, 0);
    }
    for (int k = 0; k < 32; k++)
        if (p[k]) CHECK(fs_free_async(c->e->a, p[k], streams[c->t], NULL) == FS_OK);
    return NULL;
}

static void test_threads_readers(void **state)
{
    (void)state;
    env e = env_make(NULL, CAP);
    fake_auto_complete(e.fake, true); /* borrowed blocks' frees complete */
    atomic_bool stop = false;
    churner c[NTHREADS];
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        c[i] = (churner){&e, i, 91u * (unsigned)i + 5, &stop};
        pthread_create(&t[i], NULL, churn, &c[i]);
    }
    for (int r = 0; r < 400; r++) {
        fs_alloc_stats st = stats(&e);
        for (int f = 0; f < NFIELDS; f++) {
            const fs_stat *s = field_of(&st, f);
            for (int k = 0; k < KINDS; k++) {
                if (s[k].peak < s[k].current || s[k].current < 0)
                    fail_msg("reading %d field %d kind %d: current %lld peak %lld", r, f, k,
                             (long long)s[k].current, (long long)s[k].peak);
                if (s[k].allocated - s[k].freed != s[k].current)
                    fail_msg("reading %d field %d kind %d: allocated - freed != current", r, f, k);
            }
            if (s[FS_SIZE_SMALL].current + s[FS_SIZE_LARGE].current != s[FS_SIZE_ALL].current)
                fail_msg("reading %d field %d: small + large != all", r, f);
        }
        if (r % 50 == 0) {
            fs_alloc_census cs;
            const char *err = fs_alloc_check(e.a, 0, &cs);
            if (err) fail_msg("reading %d: %s", r, err);
        }
    }
    atomic_store(&stop, true);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&thread_failures), 0);
    fs_alloc_empty_cache(e.a, 0); /* what is still pending retires */
    fs_alloc_stats st = stats(&e);
    assert_int_equal(st.allocation[FS_SIZE_ALL].current, 0);
    assert_int_equal(st.allocated_bytes[FS_SIZE_ALL].current, 0);
    env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_own_stream),    cmocka_unit_test(test_model_borrowing),
        cmocka_unit_test(test_reset_accumulated),   cmocka_unit_test(test_oversize),
        cmocka_unit_test(test_threads_exact_peaks), cmocka_unit_test(test_threads_readers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
