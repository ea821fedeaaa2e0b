/* dry_run.c - FSDPSHIM_SIM_DATA=0: a job larger than this machine's memory
 * runs, because nothing touches device memory.
 *
 * On two devices of FSDPSHIM_SIM_MEM=64G each, every device gets
 * DRY_RUN_MIB (default 40960: 40 GiB) in several blocks from cudaMalloc,
 * cudaMallocAsync and the VMM API; the program sets all of it, copies over
 * all of it (device to device, across devices, host to device from a small
 * pinned buffer again and again, 2D), runs NCCL collectives and send/recv
 * over whole blocks with one thread per rank, checks that argument and range
 * checks and an over-capacity request still fail as they do with data, and
 * that a device-to-host copy writes zeros into the host buffer (device
 * memory never written) while sets of host memory still set it. The process's
 * peak RSS must stay under 1 GiB. It prints "dry_run: ok" when every check
 * passed.
 *
 * `dry_run procs`: the ranks are processes instead (ncclCommInitRank), each
 * with the same amount of device memory, all-reducing and all-gathering
 * over it; each child's peak RSS must stay under 1 GiB. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>
#include <nccl.h>

#include "../nccl/nccl_check.h" /* CHECK, CHECK_CUDA, CHECK_NCCL */
#include "require_device.h"

#define NDEV         2
#define PINNED_BYTES ((size_t)16 << 20)
#define MAX_RSS_KIB  ((long)1 << 20)

#define CHECK_CU(call)                                                                             \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        CHECK(r_ == CUDA_SUCCESS, "CUresult %d", (int)r_);                                         \
    } while (0)

static CUresult (*mem_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
static CUresult (*mem_address_free)(CUdeviceptr, size_t);
static CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
static CUresult (*mem_release)(CUmemGenericAllocationHandle);
static CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
static CUresult (*mem_unmap)(CUdeviceptr, size_t);
static CUresult (*mem_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);

static void *entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult status;
    CHECK_CUDA(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &status));
    CHECK(status == cudaDriverEntryPointSuccess && fn, "%s", name);
    return fn;
}

/* What one device holds: a unit is an eighth of its total. Blocks 0..3 come
 * from cudaMalloc, 4..5 from cudaMallocAsync, 6..7 are one VMM allocation
 * mapped as two halves of one reservation. */
struct device {
    int ordinal;
    cudaStream_t stream;
    char *block[8];
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle;
    CUmemAllocationProp prop;
};

static size_t unit;

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}
static struct device devs[NDEV];
static char *pinned;

static void allocate(struct device *d)
{
    CHECK_CUDA(cudaSetDevice(d->ordinal));
    CHECK_CUDA(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
    for (int i = 0; i < 4; i++)
        CHECK_CUDA(cudaMalloc((void **)&d->block[i], unit));
    for (int i = 4; i < 6; i++)
        CHECK_CUDA(cudaMallocAsync((void **)&d->block[i], unit, d->stream));

    d->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    d->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d->prop.location.id = d->ordinal;
    CHECK_CU(mem_reserve(&d->va, 2 * unit, 0, 0, 0));
    CHECK_CU(mem_create(&d->handle, 2 * unit, &d->prop, 0));
    for (int half = 0; half < 2; half++)
        CHECK_CU(mem_map(d->va + half * unit, unit, half * unit, d->handle, 0));
    CUmemAccessDesc access = {d->prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK_CU(mem_set_access(d->va, 2 * unit, &access, 1));
    d->block[6] = (char *)(uintptr_t)d->va;
    d->block[7] = (char *)(uintptr_t)(d->va + unit);

    size_t free_bytes, total;
    CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
    CHECK(total - free_bytes >= 8 * unit, "used %zu of %zu", total - free_bytes, total);
}

/* Over capacity is still out of memory, through each way in. */
static void over_capacity(struct device *d)
{
    size_t free_bytes, total;
    void *p = NULL;
    CHECK_CUDA(cudaSetDevice(d->ordinal));
    CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
    CHECK(cudaMalloc(&p, free_bytes + ((size_t)1 << 30)) == cudaErrorMemoryAllocation,
          "cudaMalloc");
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "last error");
    CHECK(cudaMallocAsync(&p, free_bytes + ((size_t)1 << 30), d->stream) ==
              cudaErrorMemoryAllocation,
          "cudaMallocAsync");
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "last error");
    CUmemGenericAllocationHandle h;
    size_t big = (free_bytes + ((size_t)1 << 30)) & ~(((size_t)2 << 20) - 1);
    CHECK(mem_create(&h, big, &d->prop, 0) == CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate");
}

/* Sets and copies over every byte of the device, all on its stream. */
static void move_everything(struct device *d, struct device *peer)
{
    CHECK_CUDA(cudaSetDevice(d->ordinal));
    for (int i = 0; i < 8; i++)
        CHECK_CUDA(cudaMemsetAsync(d->block[i], i, unit, d->stream));
    CHECK_CUDA(cudaMemset(d->block[0], 1, unit));
    for (int i = 0; i < 8; i++)
        CHECK_CUDA(cudaMemcpyAsync(d->block[(i + 1) % 8], d->block[i], unit,
                                   cudaMemcpyDeviceToDevice, d->stream));
    /* The two VMM halves as one range, as an expandable segment is. */
    CHECK_CUDA(
        cudaMemcpyAsync(d->block[0], d->block[6] + unit / 2, unit, cudaMemcpyDefault, d->stream));
    CHECK_CUDA(cudaMemsetAsync(d->block[6], 0, 2 * unit, d->stream));
    CHECK_CUDA(cudaMemcpyPeerAsync(peer->block[1], peer->ordinal, d->block[2], d->ordinal, unit,
                                   d->stream));
    CHECK_CUDA(cudaMemcpy2DAsync(d->block[3], 4096, d->block[4], 8192, 4096, unit / 8192,
                                 cudaMemcpyDeviceToDevice, d->stream));
    CHECK_CUDA(cudaMemset2DAsync(d->block[5], 8192, 7, 4096, unit / 8192, d->stream));
    for (int i = 0; i < 8; i++)
        for (size_t off = 0; off < unit; off += PINNED_BYTES)
            CHECK_CUDA(cudaMemcpyAsync(d->block[i] + off, pinned,
                                       min_size(PINNED_BYTES, unit - off), cudaMemcpyHostToDevice,
                                       d->stream));
    CHECK_CUDA(
        cudaMemcpy(d->block[7], pinned, min_size(PINNED_BYTES, unit), cudaMemcpyHostToDevice));

    /* Device to host reads device memory as never written: zeros. */
    size_t n = min_size(PINNED_BYTES, unit);
    char *host = malloc(n);
    CHECK(host, "malloc");
    memset(host, 0x5a, n);
    CHECK_CUDA(cudaMemcpyAsync(host, d->block[0], n, cudaMemcpyDeviceToHost, d->stream));
    CHECK_CUDA(cudaMemcpy(host, d->block[6] + unit - 4096, 4096, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        CHECK(host[i] == 0, "host byte %zu is %d after a dry device-to-host copy", i, host[i]);
    free(host);
    /* Host memory is real memory in a dry run too. */
    CHECK_CUDA(cudaMemset(pinned, 0x21, n));
    for (size_t i = 0; i < n; i++)
        CHECK(pinned[i] == 0x21, "pinned byte %zu is %d after a dry memset", i, pinned[i]);

    /* The checks stay: a copy one granule past a block, a bad direction. */
    CHECK(cudaMemcpy(pinned, d->block[0] + unit - 512, 1024, cudaMemcpyDeviceToHost) ==
              cudaErrorInvalidValue,
          "copy past the end");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "last error");
    CHECK(cudaMemsetAsync(d->block[1] + unit - 512, 0, 1024, d->stream) == cudaErrorInvalidValue,
          "set past the end");
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "last error");
    CHECK(cudaMemcpyAsync(d->block[0], d->block[1], 16, (enum cudaMemcpyKind)9, d->stream) ==
              cudaErrorInvalidMemcpyDirection,
          "bad direction");
    CHECK(cudaGetLastError() == cudaErrorInvalidMemcpyDirection, "last error");
}

struct rank {
    int r;
    ncclComm_t comm;
};

/* One rank: collectives over whole blocks, then a ring of send/recv. */
static void *rank_main(void *arg)
{
    struct rank *rk = arg;
    struct device *d = &devs[rk->r];
    CHECK_CUDA(cudaSetDevice(d->ordinal));
    CHECK_NCCL(ncclAllReduce(d->block[0], d->block[0], unit / 4, ncclFloat32, ncclSum, rk->comm,
                             d->stream));
    CHECK_NCCL(ncclAllGather(d->block[1], d->block[2], unit / NDEV, ncclInt8, rk->comm, d->stream));
    CHECK_NCCL(ncclReduceScatter(d->block[6], d->block[3], unit / NDEV / 2, ncclBfloat16, ncclMax,
                                 rk->comm, d->stream));
    CHECK_NCCL(ncclBroadcast(d->block[4], d->block[4], unit, ncclUint8, 1, rk->comm, d->stream));
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(d->block[5], unit, ncclInt8, (rk->r + 1) % NDEV, rk->comm, d->stream));
    CHECK_NCCL(
        ncclRecv(d->block[7], unit, ncclInt8, (rk->r + NDEV - 1) % NDEV, rk->comm, d->stream));
    CHECK_NCCL(ncclGroupEnd());
    CHECK_CUDA(cudaStreamSynchronize(d->stream));
    ncclResult_t async;
    CHECK_NCCL(ncclCommGetAsyncError(rk->comm, &async));
    CHECK_NCCL(async);
    return NULL;
}

static void collectives(void)
{
    ncclComm_t comms[NDEV];
    int ordinals[NDEV];
    for (int i = 0; i < NDEV; i++)
        ordinals[i] = devs[i].ordinal;
    CHECK_NCCL(ncclCommInitAll(comms, NDEV, ordinals));
    pthread_t threads[NDEV];
    struct rank ranks[NDEV];
    for (int i = 0; i < NDEV; i++) {
        ranks[i] = (struct rank){i, comms[i]};
        CHECK(pthread_create(&threads[i], NULL, rank_main, &ranks[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < NDEV; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < NDEV; i++)
        CHECK_NCCL(ncclCommDestroy(comms[i]));
}

static void release(struct device *d)
{
    CHECK_CUDA(cudaSetDevice(d->ordinal));
    for (int i = 4; i < 6; i++)
        CHECK_CUDA(cudaFreeAsync(d->block[i], d->stream));
    CHECK_CUDA(cudaStreamSynchronize(d->stream));
    for (int i = 0; i < 4; i++)
        CHECK_CUDA(cudaFree(d->block[i]));
    CHECK_CU(mem_unmap(d->va, 2 * unit));
    CHECK_CU(mem_release(d->handle));
    CHECK_CU(mem_address_free(d->va, 2 * unit));
    CHECK_CUDA(cudaStreamDestroy(d->stream));
}

/* Fails unless the process's peak RSS is under MAX_RSS_KIB; returns it. */
static long check_peak_rss(int who, size_t total)
{
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0, "getrusage");
    CHECK(ru.ru_maxrss < MAX_RSS_KIB, "process %d: peak RSS %ld KiB for %zu MiB of device memory",
          who, ru.ru_maxrss, total >> 20);
    return ru.ru_maxrss;
}

/* One rank of `procs`: its device's memory in four blocks, collectives
 * over all of it. */
static int rank_process(ncclUniqueId id, int rank)
{
    struct device *d = &devs[rank];
    ncclComm_t comm;
    CHECK_CUDA(cudaSetDevice(rank));
    CHECK_NCCL(ncclCommInitRank(&comm, NDEV, id, rank));
    CHECK_CUDA(cudaStreamCreate(&d->stream));
    for (int i = 0; i < 4; i++)
        CHECK_CUDA(cudaMalloc((void **)&d->block[i], 2 * unit));
    CHECK_NCCL(ncclAllReduce(d->block[0], d->block[0], 2 * unit / 4, ncclFloat32, ncclSum, comm,
                             d->stream));
    CHECK_NCCL(ncclAllGather(d->block[1], d->block[2], 2 * unit / NDEV, ncclInt8, comm, d->stream));
    CHECK_NCCL(ncclAllReduce(d->block[3], d->block[3], 2 * unit / 2, ncclBfloat16, ncclMax, comm,
                             d->stream));
    CHECK_CUDA(cudaStreamSynchronize(d->stream));
    ncclResult_t async;
    CHECK_NCCL(ncclCommGetAsyncError(comm, &async));
    CHECK_NCCL(async);
    CHECK_NCCL(ncclCommDestroy(comm));
    for (int i = 0; i < 4; i++)
        CHECK_CUDA(cudaFree(d->block[i]));
    long rss = check_peak_rss(rank, 8 * unit);
    printf("dry_run procs: rank %d peak RSS %ld KiB\n", rank, rss);
    return 0;
}

/* The parent makes no CUDA call: it only names the clique and waits. */
static void procs(void)
{
    ncclUniqueId id;
    CHECK_NCCL(ncclGetUniqueId(&id));
    pid_t pids[NDEV];
    for (int r = 0; r < NDEV; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0, "fork");
        if (pids[r] == 0) exit(rank_process(id, r));
    }
    for (int r = 0; r < NDEV; r++) {
        int status;
        CHECK(waitpid(pids[r], &status, 0) == pids[r], "waitpid");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d: status %d", r, status);
    }
}

int main(int argc, char **argv)
{
    const char *mib = getenv("DRY_RUN_MIB");
    size_t total = (size_t)(mib ? atoi(mib) : 40960) << 20;
    /* A unit must be a whole number of VMM granules (2 MiB). */
    CHECK(total && total % ((size_t)16 << 20) == 0, "DRY_RUN_MIB must be a multiple of 16");
    unit = total / 8;
    if (argc > 1 && strcmp(argv[1], "procs") == 0) {
        procs();
        printf("dry_run procs: ok, %zu MiB on each of %d devices\n", total >> 20, NDEV);
        return 0;
    }

    fs_test_require_device();
    int n = 0;
    CHECK_CUDA(cudaGetDeviceCount(&n));
    CHECK(n >= NDEV, "needs %d devices, has %d", NDEV, n);

    *(void **)&mem_reserve = entry("cuMemAddressReserve");
    *(void **)&mem_address_free = entry("cuMemAddressFree");
    *(void **)&mem_create = entry("cuMemCreate");
    *(void **)&mem_release = entry("cuMemRelease");
    *(void **)&mem_map = entry("cuMemMap");
    *(void **)&mem_unmap = entry("cuMemUnmap");
    *(void **)&mem_set_access = entry("cuMemSetAccess");

    CHECK_CUDA(cudaMallocHost((void **)&pinned, PINNED_BYTES));
    memset(pinned, 0x33, PINNED_BYTES);
    for (int i = 0; i < NDEV; i++) {
        devs[i].ordinal = i;
        allocate(&devs[i]);
    }
    for (int i = 0; i < NDEV; i++)
        over_capacity(&devs[i]);
    for (int i = 0; i < NDEV; i++)
        move_everything(&devs[i], &devs[(i + 1) % NDEV]);
    collectives();
    for (int i = 0; i < NDEV; i++)
        release(&devs[i]);
    CHECK_CUDA(cudaFreeHost(pinned));

    long rss = check_peak_rss(0, NDEV * total);
    printf("dry_run: ok, %zu MiB on each of %d devices, peak RSS %ld KiB\n", total >> 20, NDEV,
           rss);
    fflush(stdout);
    return 0;
}
