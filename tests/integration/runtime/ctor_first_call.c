/* ctor_first_call.c - the process's first allocating CUDA call races with a
 * cudaMalloc made from a library constructor, and neither thread waits for
 * the other for ever.
 *
 * glibc runs a library's constructors under its loader lock, which dlopen,
 * dlsym and dladdr also take. Thread B dlopens ctor_first_call_lib.so; its
 * constructor (loader lock held) lets thread A start the process's first
 * cudaMalloc, gives A a moment to get into the shim's allocator creation,
 * and then calls cudaMalloc itself. A creation that looks symbols up while
 * it holds a lock B's call waits for deadlocks here: A waits for the loader
 * lock, B for the shim. The watchdog turns that hang into a failure.
 *
 *   ctor_first_call LIB [--expect-shim] */
#include "probe.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define WATCHDOG_S 15

enum { IDLE, IN_CTOR, A_STARTED };

static atomic_int phase = IDLE;
static cudaError_t a_result = cudaErrorUnknown;

static void spin_until(int want)
{
    const struct timespec tick = {0, 100000};

    while (atomic_load(&phase) != want)
        nanosleep(&tick, NULL);
}

/* Called by the library's constructor, under the loader lock: lets A make
 * its first call, then leaves it long enough to reach the shim's creation
 * (it needs microseconds; 50 ms is ample even under a sanitizer). */
__attribute__((visibility("default"))) void ctor_first_call_in_ctor(void)
{
    const struct timespec grace = {0, 50000000};

    atomic_store(&phase, IN_CTOR);
    spin_until(A_STARTED);
    nanosleep(&grace, NULL);
}

static void *first_call(void *arg)
{
    void *p = NULL;

    (void)arg;
    spin_until(IN_CTOR);
    atomic_store(&phase, A_STARTED);
    a_result = cudaMalloc(&p, 1 << 20);
    if (a_result == cudaSuccess) a_result = cudaFree(p);
    return NULL;
}

static void *load_lib(void *path)
{
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static void on_alarm(int sig)
{
    static const char msg[] =
        "ctor_first_call: deadlock: the first cudaMalloc (thread A) and a cudaMalloc from a "
        "library constructor under dlopen (thread B) are both still blocked\n";

    (void)sig;
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

int main(int argc, char **argv)
{
    int expect_shim = argc > 2 && !strcmp(argv[2], "--expect-shim");
    cudaError_t (*lib_result)(void);
    pthread_t a, b;
    void *lib;

    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);
    if (argc < 2) return 2;
    require_device();
    /* Resolves the shim's pointer to the real cudaMalloc (a lookup under the
     * loader lock) with a call the runtime rejects, so that A's first real
     * cudaMalloc goes straight to the allocator's creation. */
    EXPECT(cudaMalloc(NULL, 0) != cudaSuccess);
    (void)cudaGetLastError();
    /* (no look at the shim's statistics before: its API creates the allocator) */

    EXPECT(pthread_create(&a, NULL, first_call, NULL) == 0);
    EXPECT(pthread_create(&b, NULL, load_lib, argv[1]) == 0);
    EXPECT(pthread_join(b, &lib) == 0);
    EXPECT(pthread_join(a, NULL) == 0);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    lib_result = (cudaError_t(*)(void))dlsym(lib, "ctor_first_call_lib_result");
    EXPECT(lib_result != NULL);
    CHECK(a_result);
    CHECK(lib_result());
    /* Both served by the shim: B's call found A holding nothing it waits for,
     * so it created the allocator itself instead of passing through. */
    if (expect_shim) EXPECT(shim_stat("allocation.all.allocated", -1) == 2);
    printf("ctor_first_call: ok\n");
    return 0;
}
