/* create_stall.c - a call made while another thread has been creating the
 * allocator for longer than the shim waits for it (200 ms, shim.c
 * create_lock_take): the call goes to the runtime, unmanaged, and the
 * program goes on; once the creation ends, calls are served again.
 *
 * The creator is held up where a real one can be: opening the file that
 * lists the run's traces (FSDPSHIM_TRACE_LIST), here a FIFO that
 * create_stall.sh opens for reading only when this program has written
 * RELEASE, as a hung network filesystem would hold it. (The case the wait
 * exists for, a creator waiting for the loader lock a library constructor
 * holds, is runtime.ctor_first_call; there the creation no longer waits.)
 *
 *   create_stall RELEASE */
#include "probe.h"

#include <pthread.h>
#include <time.h>

#define MiB (1u << 20)

static void *creator_block;
static cudaError_t creator_result = cudaErrorUnknown;

static void *creator(void *arg)
{
    (void)arg;
    creator_result = cudaMalloc(&creator_block, MiB);
    return NULL;
}

static double now_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    const struct timespec settle = {0, 100 * 1000000};
    pthread_t a;
    void *p, *q;
    double t0, waited;
    FILE *release;

    EXPECT(argc == 2);
    watchdog(30);
    require_device();
    EXPECT(pthread_create(&a, NULL, creator, NULL) == 0);
    nanosleep(&settle, NULL); /* the creator is inside the creation, held up */

    t0 = now_s();
    CHECK(cudaMalloc(&p, MiB)); /* waits, then goes to the runtime */
    waited = now_s() - t0;
    printf("waited %.0f ms\n", waited * 1e3);
    EXPECT(waited >= 0.15);
    EXPECT(shim_stat("allocation.all.allocated", 0) == -1); /* still not created */
    t0 = now_s();
    CHECK(cudaMalloc(&q, MiB)); /* once given up on, a creator is not waited for again */
    EXPECT(now_s() - t0 < 0.1);

    release = fopen(argv[1], "w");
    EXPECT(release && fclose(release) == 0);
    EXPECT(pthread_join(a, NULL) == 0);
    CHECK(creator_result);
    /* the creator's block is the shim's; the two made meanwhile are not */
    EXPECT(shim_stat("allocation.all.allocated", 0) == 1);
    CHECK(cudaFree(p));
    CHECK(cudaFree(q));
    CHECK(cudaFree(creator_block));
    CHECK(cudaMalloc(&p, MiB)); /* served from the cache now */
    EXPECT(shim_stat("allocation.all.allocated", 0) == 2);
    CHECK(cudaFree(p));
    printf("create_stall: ok\n");
    return 0;
}
