/* userobject.c - user objects: the destructor runs exactly once, after the
 * last reference is released (retains count), on another thread than the
 * releasing one; zero or oversized counts, a missing destructor, flags other
 * than cudaUserObjectNoDestructorSync, releasing more than is held and a
 * destroyed handle are refused with cudaErrorInvalidValue. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "require_device.h"

struct probe {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int runs;
    pthread_t thread; /* the thread the destructor ran on */
};

static void destroy_probe(void *arg)
{
    struct probe *p = arg;
    pthread_mutex_lock(&p->mu);
    p->runs++;
    p->thread = pthread_self();
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void probe_init(struct probe *p)
{
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->runs = 0;
}

/* The number of destructor runs, after waiting up to 2 s for the first. */
static int probe_runs(struct probe *p)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    pthread_mutex_lock(&p->mu);
    while (p->runs == 0 && pthread_cond_timedwait(&p->cv, &p->mu, &deadline) == 0)
        ;
    int runs = p->runs;
    pthread_mutex_unlock(&p->mu);
    return runs;
}

static int probe_runs_now(struct probe *p)
{
    pthread_mutex_lock(&p->mu);
    int runs = p->runs;
    pthread_mutex_unlock(&p->mu);
    return runs;
}

/* Static: a destructor thread may still be leaving the probe's lock after
 * the test has seen its run. */
static struct probe first_probe, second_probe;

static void test_destructor_after_last_release(void **state)
{
    (void)state;
    struct probe *p = &first_probe;
    probe_init(p);
    cudaUserObject_t obj;
    assert_int_equal(
        cudaUserObjectCreate(&obj, p, destroy_probe, 2, cudaUserObjectNoDestructorSync),
        cudaSuccess);
    assert_int_equal(cudaUserObjectRetain(obj, 3), cudaSuccess);
    assert_int_equal(cudaUserObjectRelease(obj, 4), cudaSuccess);
    assert_int_equal(probe_runs_now(p), 0);
    assert_int_equal(cudaUserObjectRelease(obj, 1), cudaSuccess);
    assert_int_equal(probe_runs(p), 1);
    pthread_mutex_lock(&p->mu);
    assert_false(pthread_equal(p->thread, pthread_self()));
    pthread_mutex_unlock(&p->mu);
    /* The handle is dead now. */
    assert_int_equal(cudaUserObjectRelease(obj, 1), cudaErrorInvalidValue);
    assert_int_equal(cudaUserObjectRetain(obj, 1), cudaErrorInvalidValue);
    assert_int_equal(probe_runs_now(p), 1);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    struct probe *p = &second_probe;
    probe_init(p);
    cudaUserObject_t obj;
    assert_int_equal(cudaUserObjectCreate(&obj, p, destroy_probe, 1, 0), cudaErrorInvalidValue);
    assert_int_equal(cudaUserObjectCreate(&obj, p, NULL, 1, cudaUserObjectNoDestructorSync),
                     cudaErrorInvalidValue);
    assert_int_equal(
        cudaUserObjectCreate(&obj, p, destroy_probe, 0, cudaUserObjectNoDestructorSync),
        cudaErrorInvalidValue);
    assert_int_equal(cudaUserObjectCreate(&obj, p, destroy_probe, (unsigned)INT_MAX + 1,
                                          cudaUserObjectNoDestructorSync),
                     cudaErrorInvalidValue);
    assert_int_equal(
        cudaUserObjectCreate(NULL, p, destroy_probe, 1, cudaUserObjectNoDestructorSync),
        cudaErrorInvalidValue);
    assert_int_equal(
        cudaUserObjectCreate(&obj, p, destroy_probe, 2, cudaUserObjectNoDestructorSync),
        cudaSuccess);
    assert_int_equal(cudaUserObjectRetain(obj, 0), cudaErrorInvalidValue);
    assert_int_equal(cudaUserObjectRelease(obj, 0), cudaErrorInvalidValue);
    assert_int_equal(cudaUserObjectRelease(obj, 3), cudaErrorInvalidValue);
    assert_int_equal(cudaUserObjectRelease(obj, (unsigned)INT_MAX + 1), cudaErrorInvalidValue);
    /* None of the refused calls touched the count. */
    assert_int_equal(cudaUserObjectRelease(obj, 2), cudaSuccess);
    assert_int_equal(probe_runs(p), 1);
    (void)cudaGetLastError();
}
int main(void)
{
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_destructor_after_last_release),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
