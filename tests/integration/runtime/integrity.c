/* integrity.c - a freed block must not be handed out while a stream may
 * still use it.
 *
 * A stream is held busy with a host function (a gate the test opens last);
 * behind the gate the buffer is read out to pinned host memory, by the host
 * function itself (as a kernel would read it) or by a cudaMemcpyAsync. The buffer
 * is freed while the gate is closed and memory of the same size is requested
 * again and overwritten on a stream other than the busy one, which finishes. Then the gate
 * opens: the copy must still see the original bytes. If the allocator handed
 * the block out too early, it sees the other stream's bytes.
 *
 *   integrity free      cudaFree of a cudaMalloc block a busy non-blocking
 *                       stream still reads (device-ordered free), then
 *                       cudaMalloc again
 *   integrity free_new  the same, the block overwritten on a stream created
 *                       after the second cudaMalloc (which the shim may
 *                       serve with the pending block, every stream waiting
 *                       for its free: a new stream must wait too)
 *   integrity async     cudaFreeAsync on the busy stream itself, then
 *                       cudaMallocAsync on another stream
 *   integrity memcpy    cudaFreeAsync on an idle stream of a block that a
 *                       cudaMemcpyAsync on the busy stream reads, then
 *                       cudaMallocAsync on the idle stream again
 *   integrity legacy    the same with the legacy default stream as the idle one
 *
 * async and memcpy run on a GPU as well (the gpu suite); free needs the
 * simulated device, whose memory a host function can read.
 *
 * The gate also opens by itself 300 ms after the new request began: an
 * allocator may serve that request with the freed block by making its
 * stream wait for the busy one on the GPU (as CUDA's stream-ordered pools
 * do), and the test's synchronisation of that stream then returns once
 * the gate opens, rather than never; the overwrite lands after the read
 * either way, and only a block handed out without any wait is corrupted.
 *
 * Exit 0 when the data is intact, 1 when corrupted (or on error). With
 * --expect-corruption the meaning is inverted: used to show that the test
 * detects reuse that is too early (free_semantics:stream). */
#include "probe.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#define SIZE (12u << 20) /* a segment of its own: nothing but the freed block fits */

static atomic_int gate_open;

/* Work on the busy stream: wait for the gate, then (if given) read the
 * buffer the way a kernel would. The simulated device's memory is host
 * memory, so a host function can stand in for a kernel the shim cannot see
 * into: it knows only that the stream had work. */
struct gate_work {
    const unsigned char *read;
    unsigned char *into;
};

static void CUDART_CB gate(void *arg)
{
    struct gate_work *w = arg;
    struct timespec ts = {0, 1000000};

    while (!atomic_load(&gate_open))
        nanosleep(&ts, NULL);
    if (w->read) memcpy(w->into, w->read, SIZE);
}

/* Opens the gate 300 ms after it starts. */
static void *open_later(void *unused)
{
    struct timespec ms300 = {0, 300000000};

    (void)unused;
    nanosleep(&ms300, NULL);
    atomic_store(&gate_open, 1);
    return NULL;
}

static int run(const char *mode)
{
    bool legacy = !strcmp(mode, "legacy"), record = legacy || !strcmp(mode, "memcpy");
    bool fresh = !strcmp(mode, "free_new"), device_ordered = fresh || !strcmp(mode, "free");
    cudaStream_t busy, idle = NULL, other, again, late = NULL;
    unsigned char *x = NULL, *y = NULL, *host;
    struct gate_work work = {NULL, NULL};
    int corrupted = 0;

    CHECK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
    if (!legacy) CHECK(cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    CHECK(cudaMallocHost((void **)&host, SIZE));
    memset(host, 0, SIZE);

    if (device_ordered) {
        CHECK(cudaMalloc((void **)&x, SIZE));
        CHECK(cudaMemset(x, 0xAA, SIZE));
        work = (struct gate_work){x, host};
        CHECK(cudaLaunchHostFunc(busy, gate, &work));
        CHECK(cudaFree(x));
    } else if (!strcmp(mode, "async")) {
        CHECK(cudaMallocAsync((void **)&x, SIZE, busy));
        CHECK(cudaMemsetAsync(x, 0xAA, SIZE, busy));
        CHECK(cudaStreamSynchronize(busy));
        CHECK(cudaLaunchHostFunc(busy, gate, &work));
        CHECK(cudaMemcpyAsync(host, x, SIZE, cudaMemcpyDeviceToHost, busy));
        CHECK(cudaFreeAsync(x, busy));
    } else if (record) {
        CHECK(cudaMallocAsync((void **)&x, SIZE, idle));
        CHECK(cudaMemsetAsync(x, 0xAA, SIZE, idle));
        CHECK(cudaStreamSynchronize(idle));
        CHECK(cudaLaunchHostFunc(busy, gate, &work));
        CHECK(cudaMemcpyAsync(host, x, SIZE, cudaMemcpyDeviceToHost, busy));
        CHECK(cudaFreeAsync(x, idle));
    } else {
        fprintf(stderr, "integrity: unknown mode %s\n", mode);
        return 2;
    }
    /* Host synchronisation the program is entitled to: it does not involve
     * the busy stream, but lets an allocator retire every free that is
     * really complete. */
    CHECK(cudaStreamSynchronize(idle));
    CHECK(cudaStreamSynchronize(0));

    /* The memory again, overwritten on a stream other than the busy one.
     * free: through cudaMalloc (the freed block's own legacy stream), used on
     * `other`. async: stream-ordered on `other`, where only the completion of
     * the free on the busy stream makes the block safe. memcpy, legacy: on
     * the block's own stream, where stream order would make it reusable at
     * once, were it not for the use recorded on the busy stream. */
    again = record ? idle : other;
    pthread_t opener;
    if (pthread_create(&opener, NULL, open_later, NULL) != 0) return 2;
    if (device_ordered)
        CHECK(cudaMalloc((void **)&y, SIZE));
    else
        CHECK(cudaMallocAsync((void **)&y, SIZE, again));
    if (fresh) {
        CHECK(cudaStreamCreateWithFlags(&late, cudaStreamNonBlocking));
        again = late;
    }
    CHECK(cudaMemsetAsync(y, 0xBB, SIZE, again));
    CHECK(cudaStreamSynchronize(again));

    atomic_store(&gate_open, 1);
    pthread_join(opener, NULL);
    CHECK(cudaDeviceSynchronize());
    for (size_t i = 0; i < SIZE; i++)
        if (host[i] != 0xAA) {
            corrupted = 1;
            fprintf(stderr,
                    "integrity %s: byte %zu is 0x%02x, not 0xaa: block reused too early "
                    "(x=%p y=%p)\n",
                    mode, i, host[i], (void *)x, (void *)y);
            break;
        }
    CHECK(device_ordered ? cudaFree(y) : cudaFreeAsync(y, again));
    CHECK(cudaFreeHost(host));
    CHECK(cudaStreamDestroy(busy));
    if (idle) CHECK(cudaStreamDestroy(idle));
    CHECK(cudaStreamDestroy(other));
    if (late) CHECK(cudaStreamDestroy(late));
    CHECK(cudaDeviceSynchronize());
    if (!corrupted) printf("integrity %s: intact (x=%p y=%p)\n", mode, (void *)x, (void *)y);
    return corrupted;
}

int main(int argc, char **argv)
{
    int expect_corruption = argc > 2 && !strcmp(argv[2], "--expect-corruption");
    int r;

    if (argc < 2) {
        fprintf(stderr,
                "usage: integrity free|free_new|async|memcpy|legacy [--expect-corruption]\n");
        return 2;
    }
    watchdog(30);
    require_device();
    r = run(argv[1]);
    if (r == 2) return 2;
    return expect_corruption ? !r : r;
}
