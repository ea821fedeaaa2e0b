/* test_live.c - the live statistics page's shared pieces (format/live.h):
 * names round-trip and odd names are refused, fs_live_check refuses what
 * cannot be read, a reader racing the writer never accepts a torn copy
 * (run under TSan by the tsan preset: the seqlock must be race-free as C11
 * defines it), and a reader keeps to the fields it knows of a page written
 * with bigger records. */
#include "live.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static void test_names(void **state)
{
    char name[64];
    unsigned uid;
    int pid;
    static const char *const bad[] = {
        "fsdpshim-",        "fsdpshim-1",
        "fsdpshim-1-",      "fsdpshim-x-1",
        "fsdpshim-1-0",     "fsdpshim-1-12a",
        "fsdpshim--1-2",    "fsdpshim-1-99999999999",
        "sem.fsdpshim-1-2", "fsdpshim-4294967296-1",
    };

    (void)state;
    fs_live_name(name, sizeof name, 1000, 4242);
    assert_string_equal(name, "/fsdpshim-1000-4242");
    assert_true(fs_live_parse_name(name + 1, &uid, &pid));
    assert_int_equal(uid, 1000);
    assert_int_equal(pid, 4242);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(fs_live_parse_name(bad[i], &uid, &pid));
}

/* A page for ndev devices, its head as a writer fills it. */
static fs_live_head *page_new(uint32_t ndev)
{
    fs_live_head *h = aligned_alloc(64, (fs_live_page_size(ndev) + 63) / 64 * 64);
    assert_non_null(h);
    memset(h, 0, fs_live_page_size(ndev));
    h->version = FS_LIVE_VERSION;
    h->head_size = sizeof *h;
    h->proc_size = sizeof(fs_live_proc);
    h->device_size = sizeof(fs_live_device);
    h->ndev = ndev;
    h->pid = 1;
    atomic_store(&h->magic, FS_LIVE_MAGIC);
    return h;
}

static void test_check(void **state)
{
    fs_live_head *h = page_new(2);
    size_t size = fs_live_page_size(2);

    (void)state;
    assert_null(fs_live_check(h, size));
    assert_non_null(fs_live_check(h, size - 8)); /* cut short */
    assert_non_null(fs_live_check(h, sizeof *h - 1));
    h->ndev = FS_LIVE_DEVICES + 1;
    assert_non_null(fs_live_check(h, size));
    h->ndev = 2;
    h->device_size = 12; /* not words */
    assert_non_null(fs_live_check(h, size));
    h->device_size = sizeof(fs_live_device);
    h->version = FS_LIVE_VERSION + 1;
    assert_non_null(strstr(fs_live_check(h, size), "newer"));
    h->version = FS_LIVE_VERSION;
    atomic_store(&h->magic, 0);
    assert_non_null(strstr(fs_live_check(h, size), "being made"));
    atomic_store(&h->magic, 42);
    assert_non_null(strstr(fs_live_check(h, size), "not an fsdpshim"));
    free(h);
}

/* Every word of the payload holds the update's number. */
static void fill(fs_live_proc *p, fs_live_device *d, uint32_t ndev, uint64_t v)
{
    uint64_t *w = (uint64_t *)p;
    for (size_t i = 0; i < sizeof *p / 8; i++)
        w[i] = v;
    w = (uint64_t *)d;
    for (size_t i = 0; i < ndev * sizeof *d / 8; i++)
        w[i] = v;
}

static bool same_everywhere(const fs_live_proc *p, const fs_live_device *d, uint32_t ndev)
{
    const uint64_t *w = (const uint64_t *)p, v = w[0];
    for (size_t i = 0; i < sizeof *p / 8; i++)
        if (w[i] != v) return false;
    w = (const uint64_t *)d;
    for (size_t i = 0; i < ndev * sizeof *d / 8; i++)
        if (w[i] != v) return false;
    return true;
}

#define NDEV    4
#define UPDATES 20000

struct race {
    fs_live_head *h;
    atomic_bool done;
    atomic_uint_fast64_t reads; /* whole copies the reader got */
    uint64_t written;           /* the last update */
};

/* UPDATES updates, and on until the reader has read 100 times: on a busy
 * machine the reader may not run at all during the first UPDATES */
static void *writer(void *arg)
{
    struct race *r = arg;
    static fs_live_proc p;
    static fs_live_device d[NDEV];
    uint64_t v = 0;
    while (++v <= UPDATES || atomic_load(&r->reads) < 100) {
        fill(&p, d, NDEV, v);
        fs_live_publish(r->h, &p, d);
    }
    r->written = v - 1;
    atomic_store(&r->done, true);
    return NULL;
}

static void test_seqlock(void **state)
{
    struct race r = {.h = page_new(NDEV)};
    fs_live_proc *p = malloc(sizeof *p);
    fs_live_device *d = malloc(NDEV * sizeof *d);
    uint64_t last = 0;
    pthread_t t;

    (void)state;
    assert_int_equal(pthread_create(&t, NULL, writer, &r), 0);
    while (!atomic_load(&r.done)) {
        if (!fs_live_read(r.h, p, d, 1)) continue; /* mid-update: tried again */
        assert_true(same_everywhere(p, d, NDEV));
        /* updates are seen in order, never one from the past */
        assert_true(p->rank >= (int64_t)last);
        last = (uint64_t)p->rank;
        atomic_fetch_add(&r.reads, 1);
    }
    pthread_join(t, NULL);
    assert_true(fs_live_read(r.h, p, d, 1));
    assert_int_equal(p->rank, r.written);
    assert_true(same_everywhere(p, d, NDEV));
    assert_true(atomic_load(&r.reads) >= 100);
    free(p);
    free(d);
    free(r.h);
}

/* A newer writer's records carry a word more each: the reader takes what
 * it knows, in the right place. */
static void test_bigger_records(void **state)
{
    const uint32_t ndev = 2, extra = 8;
    size_t psize = sizeof(fs_live_proc) + extra, dsize = sizeof(fs_live_device) + extra;
    fs_live_head *h = aligned_alloc(64, (sizeof *h + psize + ndev * dsize + 63) / 64 * 64);
    fs_live_proc p;
    fs_live_device d[2];

    (void)state;
    memset(h, 0, sizeof *h + psize + ndev * dsize);
    h->version = FS_LIVE_VERSION;
    h->head_size = sizeof *h;
    h->proc_size = (uint32_t)psize;
    h->device_size = (uint32_t)dsize;
    h->ndev = ndev;
    atomic_store(&h->magic, FS_LIVE_MAGIC);
    atomic_store(&h->payload[0], 7);                             /* proc.rank */
    atomic_store(&h->payload[psize / 8 - 1], 99);                /* the proc's extra word */
    atomic_store(&h->payload[psize / 8 + dsize / 8], 1);         /* device 1's number */
    atomic_store(&h->payload[psize / 8 + dsize / 8 + 1], 12345); /* its allocated */
    assert_null(fs_live_check(h, sizeof *h + psize + ndev * dsize));
    assert_true(fs_live_read(h, &p, d, 1));
    assert_int_equal(p.rank, 7);
    assert_int_equal(d[0].device, 0);
    assert_int_equal(d[1].device, 1);
    assert_int_equal(d[1].allocated, 12345);
    assert_int_equal(d[1].rl_in_flight_bytes, 0);
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_seqlock),
        cmocka_unit_test(test_bigger_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
