/* note_order.c - the shim must note a stream's work after the runtime has
 * it, never before: a batch fence taken in between would clear the note
 * with its event ahead of the work, the next batch would leave the stream
 * out, and a block freed after the work was issued would be handed out
 * again while the work still runs.
 *
 * note_hook.so, preloaded after the shim, runs an allocation that misses
 * the cache (so the allocator takes a batch fence) at the moment the shim
 * hands a host function on to the runtime. The host function holds its
 * non-blocking stream (blocking streams are always covered through the
 * legacy stream) until released; the block freed after it was issued must
 * not come back from cudaMalloc meanwhile (run under malloc_reuse:grow,
 * where a cudaMalloc waits for a pending free's fence to complete). Sizes are large enough that
 * every block has a segment of its own. */
#include "probe.h"

#include <time.h>

#define MIB ((size_t)1 << 20)

static void *fence_taker;
static volatile int released;

static void take_fence(void)
{
    CHECK(cudaMalloc(&fence_taker, 64 * MIB));
}

static void CUDART_CB hold(void *unused)
{
    struct timespec ms = {0, 1000000};

    (void)unused;
    for (int i = 0; i < 5000 && !__atomic_load_n(&released, __ATOMIC_ACQUIRE); i++)
        nanosleep(&ms, NULL);
}

int main(void)
{
    void (*arm)(void (*)(void)) = (void (*)(void (*)(void)))dlsym(RTLD_DEFAULT, "note_hook_arm");
    struct timespec settle = {0, 50000000};
    void *small, *block, *trigger, *again;
    cudaStream_t s;

    watchdog(30);
    require_device();
    EXPECT(arm != NULL); /* note_hook.so must be preloaded */
    EXPECT(shim_stat("allocation.all.allocated", -1) >= 0);
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&block, 32 * MIB));
    CHECK(cudaMalloc(&small, 512));
    CHECK(cudaFree(small)); /* unfenced: the hook's allocation fences it */

    arm(take_fence);
    CHECK(cudaLaunchHostFunc(s, hold, NULL)); /* stands for work on `block` */
    CHECK(cudaFree(block));
    CHECK(cudaMalloc(&trigger, 96 * MIB)); /* a miss: the batch fence for `block` */
    nanosleep(&settle, NULL);              /* whatever that fence waits for, bar s */
    CHECK(cudaMalloc(&again, 32 * MIB));
    int early = again == block && !__atomic_load_n(&released, __ATOMIC_ACQUIRE);

    __atomic_store_n(&released, 1, __ATOMIC_RELEASE);
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFree(again));
    CHECK(cudaFree(trigger));
    CHECK(cudaFree(fence_taker));
    CHECK(cudaStreamDestroy(s));
    if (early) {
        fprintf(stderr, "note_order: a block came back while work issued before its free ran\n");
        return 1;
    }
    printf("note_order: ok\n");
    return 0;
}
