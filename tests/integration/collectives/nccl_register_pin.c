/* nccl_register_pin.c - memory registered with NCCL is never given back to
 * the device while it is registered.
 *
 * NCCL keeps using a registered buffer's mapping until it is deregistered
 * (or its communicator destroyed). The program allocates and frees the
 * buffer as PyTorch's cudaMallocAsync backend does (cudaMallocAsync and
 * cudaFreeAsync on its stream) and empties the cache the way
 * torch.cuda.empty_cache() does on that route (cudaDeviceSynchronize +
 * cudaMemPoolTrimTo(default pool, 0)), then
 * reads the default pool's reserved bytes: while registered, the segment
 * must still be reserved; once deregistered, the trim must release it.
 * Covers ncclCommRegister, ncclCommWindowRegister (at an interior address)
 * and a registration dropped by ncclCommDestroy. Run it under the shim. */
#include "coll_test.h"

#include <stdint.h>

#define BYTES (64u << 20)

static cudaMemPool_t pool;
static cudaStream_t stream;

/* torch.cuda.empty_cache(), then torch.cuda.memory_reserved(). */
static uint64_t reserved_after_empty_cache(void)
{
    uint64_t reserved = 0;
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
    CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
    return reserved;
}

enum how { BUFFER, WINDOW, DESTROY };
static const char *const how_names[] = {"ncclCommRegister", "ncclCommWindowRegister",
                                        "ncclCommRegister + ncclCommDestroy"};

static void run(enum how how)
{
    int dev = 0;
    ncclComm_t comm;
    NCCL_CHECK(ncclCommInitAll(&comm, 1, &dev));

    char *buf;
    CUDA_CHECK(cudaMallocAsync((void **)&buf, BYTES, stream));
    void *handle = NULL;
    ncclWindow_t win = NULL;
    if (how == WINDOW)
        NCCL_CHECK(ncclCommWindowRegister(comm, buf + 4096, BYTES - 4096, &win, NCCL_WIN_DEFAULT));
    else
        NCCL_CHECK(ncclCommRegister(comm, buf, BYTES, &handle));
    CUDA_CHECK(cudaFreeAsync(buf, stream));

    uint64_t held = reserved_after_empty_cache();
    EXPECT(held >= BYTES,
           "%s: the freed registered buffer's memory was released while registered "
           "(reserved %llu bytes)",
           how_names[how], (unsigned long long)held);

    if (how == WINDOW)
        NCCL_CHECK(ncclCommWindowDeregister(comm, win));
    else if (how == BUFFER)
        NCCL_CHECK(ncclCommDeregister(comm, handle));
    NCCL_CHECK(ncclCommDestroy(comm));

    uint64_t left = reserved_after_empty_cache();
    EXPECT(left < BYTES, "%s: the memory stayed reserved after deregistration (%llu bytes)",
           how_names[how], (unsigned long long)left);
}

int main(void)
{
    coll_watchdog(60);
    coll_require_devices(1);
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    run(BUFFER);
    run(WINDOW);
    run(DESTROY);
    if (coll_failures) return 1;
    printf("nccl_register_pin: registered segments stayed until deregistered\n");
    return 0;
}
