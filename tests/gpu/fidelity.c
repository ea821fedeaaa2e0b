/* fidelity.c - the device's answers where docs/sim.md documents a specific one, side by side
 * with what docs/sim.md says, one line per check:
 *
 *     fidelity: <check>: <observed> [sim documents: <answer>] same|DIFFERS
 *
 * docs/sim.md says, in many places, how the simulated device answers where a GPU could answer
 * otherwise (the allocation granule, memory pools, cudaDeviceReset, VMM, the driver API, ...).
 * The table `documented` holds those answers, each with its section; the probes ask the device.
 * Built against the sim (sim_fidelity, test sim.fidelity with --strict) it holds the sim to its
 * documentation; built against the toolkit's runtime (gpu_fidelity, test gpu.fidelity) it
 * records what a GPU does, for docs/gpu-results.md.
 *
 * Each probe runs in a process of its own (this program again, `--probe NAME`): a GPU may
 * crash or lose its context on what the sim answers with an error, cudaDeviceReset must not
 * touch the other probes' state, and each probe's free-memory deltas start from a fresh
 * context. The driver is reached only through cudaGetDriverEntryPointByVersion, as PyTorch
 * reaches it. Exit status: 77 without a device; 1 when a check got no answer (a probe crashed,
 * or stopped after a failed step), or with --strict when a check DIFFERS; else 0. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "require_device.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* docs/sim.md sections, as the table cites them. */
#define SEC_MAPS     "How each CUDA concept maps"
#define SEC_GRANULE  "Device memory"
#define SEC_POOLS    "Memory pools"
#define SEC_VMM      "Virtual memory management"
#define SEC_DRIVER   "The driver API"
#define SEC_GRAPHS   "Stream capture and graphs"
#define SEC_ERRORS   "Errors"
#define SEC_BAD_ARGS "The bad-argument table"
#define SEC_IPC      "IPC between processes"
#define SEC_CANNOT   "Where the sim cannot behave like a GPU"

enum probe_id {
    PROBE_CONTEXT_INIT,
    PROBE_DEVICE,
    PROBE_GRANULE,
    PROBE_COPY_BOUNDS,
    PROBE_COPY_KIND,
    PROBE_ZERO_SIZE,
    PROBE_DEFAULT_POOL,
    PROBE_CREATED_POOL,
    PROBE_POOL_CHUNKS,
    PROBE_HOST_POOL,
    PROBE_HIGH_MARKS,
    PROBE_POOL_CUDAFREE,
    PROBE_POOL_HANDLES,
    PROBE_GRAPH_MEMORY,
    PROBE_ERRORS,
    PROBE_DRIVER,
    PROBE_IPC,
    PROBE_VMM,
    PROBE_RESET,
};

struct documented {
    enum probe_id probe;
    const char *check;   /* the line's name; never contains ": " */
    const char *answer;  /* what docs/sim.md says the device answers */
    const char *section; /* where docs/sim.md says so */
};

/* The pool sequence of probe_pool_sequence, for the default and for a created pool. */
#define POOL_ROWS(probe, pool, alloc)                                                              \
    {probe, pool ", " alloc " 4 KiB", "reserved 32 MiB, used 4 KiB, device free down 32 MiB",      \
     SEC_POOLS},                                                                                   \
        {probe, pool ", " alloc " 1 MiB", "reserved 32 MiB, used 1 MiB, device free down 32 MiB",  \
         SEC_POOLS},                                                                               \
        {probe, pool ", 64 x " alloc " 1 MiB",                                                     \
         "reserved 64 MiB, used 64 MiB, device free down 64 MiB", SEC_POOLS},                      \
        {probe, pool ", 64 x 1 MiB freed, before cudaStreamSynchronize",                           \
         "reserved 64 MiB, used 0, device free down 64 MiB", SEC_POOLS},                           \
        {probe, pool ", 64 x 1 MiB freed, after cudaStreamSynchronize, release threshold 0",       \
         "reserved 0, used 0, device free down 0", SEC_POOLS},                                     \
        {probe, pool ", 64 x 1 MiB freed, after cudaStreamSynchronize, release threshold max",     \
         "reserved 64 MiB, used 0, device free down 64 MiB", SEC_POOLS},                           \
    {                                                                                              \
        probe, pool ", then cudaMemPoolTrimTo 0", "reserved 0, used 0, device free down 0",        \
            SEC_POOLS                                                                              \
    }

static const struct documented documented[] = {
    {PROBE_CONTEXT_INIT, "primary contexts before any runtime call", "none", SEC_MAPS},
    {PROBE_CONTEXT_INIT, "cudaFree(0): device 0's primary context", "active", SEC_MAPS},
    {PROBE_CONTEXT_INIT, "cudaInitDevice of the last device: its primary context, current device",
     "active, still 0", SEC_MAPS},
    {PROBE_CONTEXT_INIT, "cudaSetDevice of the last device: its primary context", "active",
     SEC_MAPS},

    {PROBE_DEVICE, "cudaDeviceGetStreamPriorityRange", "[-5, 0]", SEC_CANNOT},
    {PROBE_DEVICE, "cudaStreamCreateWithPriority -10, then cudaStreamGetPriority", "-5",
     SEC_CANNOT},
    {PROBE_DEVICE, "cudaStreamCreateWithPriority 5, then cudaStreamGetPriority", "0", SEC_CANNOT},
    {PROBE_DEVICE, "compute capability", "9.0", SEC_MAPS},
    {PROBE_DEVICE, "multiProcessorCount", "132", SEC_MAPS},
    {PROBE_DEVICE, "textureAlignment", "512", SEC_GRANULE},

    {PROBE_GRANULE, "8 x cudaMalloc 1 byte, smallest distance between two", "512 B", SEC_GRANULE},
    {PROBE_GRANULE, "8 x cudaMalloc 1 byte, common alignment", "512 B", SEC_GRANULE},
    {PROBE_GRANULE, "cuMemGetAddressRange of a cudaMalloc 1 byte", "1 B", SEC_GRANULE},
    {PROBE_GRANULE, "cudaMalloc 1 byte, device free down", "2 MiB", SEC_GRANULE},
    {PROBE_GRANULE, "cudaMalloc 1 MiB, device free down", "2 MiB", SEC_GRANULE},
    {PROBE_GRANULE, "cudaMalloc 1 MiB + 1, device free down", "2 MiB", SEC_GRANULE},
    /* What the H100's answers above left open; an H200 answered it all so (docs/sim.md,
     * "Device memory", run 7). */
    {PROBE_GRANULE, "cudaMalloc 1 byte, then cudaFree, device free down", "0", SEC_GRANULE},
    {PROBE_GRANULE, "2 x cudaMalloc 1 MiB, device free down", "2 MiB", SEC_GRANULE},
    {PROBE_GRANULE, "2 x cudaMalloc 1 MiB, distance between them", "1 MiB", SEC_GRANULE},
    {PROBE_GRANULE, "2 x cudaMalloc 1 MiB + 1, device free down", "4 MiB", SEC_GRANULE},
    {PROBE_GRANULE, "cudaMalloc 2 MiB + 1, device free down", "4 MiB", SEC_GRANULE},
    {PROBE_GRANULE, "100 x cudaMalloc 4 KiB, device free down", "2 MiB", SEC_GRANULE},
    {PROBE_GRANULE, "1000 x cudaMalloc 4 KiB, device free down", "4 MiB", SEC_GRANULE},
    {PROBE_GRANULE, "cuMemGetAddressRange of a cudaMalloc 1 MiB + 1", "1048577 B", SEC_GRANULE},
    {PROBE_GRANULE, "4 x cudaMalloc 3 MiB, common alignment", "2 MiB or more", SEC_GRANULE},

    {PROBE_COPY_BOUNDS, "cudaMalloc 1000, cudaMemcpy of 1000, 1001, 1024 bytes",
     "cudaSuccess, cudaErrorInvalidValue, cudaErrorInvalidValue", SEC_GRANULE},
    {PROBE_COPY_BOUNDS, "cudaMallocAsync 1000, cudaMemcpy of 1000, 1001, 1024 bytes",
     "cudaSuccess, cudaErrorInvalidValue, cudaErrorInvalidValue", SEC_GRANULE},
    {PROBE_COPY_BOUNDS, "cudaMallocAsync 1000, cudaMemset of 1000, 1001 bytes",
     "cudaSuccess, cudaErrorInvalidValue", SEC_GRANULE},
    {PROBE_COPY_BOUNDS, "cudaMallocAsync 1000 freed, cudaMallocAsync 900, cudaMemcpy of 900, 901",
     "the same block, cudaSuccess, cudaErrorInvalidValue", SEC_GRANULE},

    {PROBE_COPY_KIND, "cudaMemcpy DeviceToHost from a freed cudaMalloc block",
     "cudaErrorInvalidValue", SEC_MAPS},
    {PROBE_COPY_KIND, "cudaMemcpy HostToDevice into a freed cudaMalloc block",
     "cudaErrorInvalidValue", SEC_MAPS},
    {PROBE_COPY_KIND, "cudaMemcpy DeviceToHost from pageable host memory", "cudaErrorInvalidValue",
     SEC_MAPS},

    {PROBE_ZERO_SIZE, "cudaMalloc 0 bytes", "cudaSuccess, NULL", SEC_BAD_ARGS},
    {PROBE_ZERO_SIZE, "cudaMallocAsync 0 bytes", "cudaSuccess, NULL", SEC_BAD_ARGS},
    {PROBE_ZERO_SIZE, "cuMemAlloc 0 bytes", "CUDA_ERROR_INVALID_VALUE", SEC_DRIVER},
    {PROBE_ZERO_SIZE, "cuMemAllocAsync 0 bytes", "CUDA_SUCCESS", SEC_DRIVER},
    {PROBE_ZERO_SIZE, "cuMemAllocAsync 0 bytes, the pointer", "NULL", SEC_DRIVER},

    POOL_ROWS(PROBE_DEFAULT_POOL, "default pool", "cudaMallocAsync"),
    {PROBE_CREATED_POOL, "created pool, cudaMemPoolCreate", "cudaSuccess, device free down 0",
     SEC_POOLS},
    POOL_ROWS(PROBE_CREATED_POOL, "created pool", "cudaMallocFromPoolAsync"),

    /* How a pool lays out its chunks: what the H100's answers left open, as an H200 answered
     * (run 7): a block larger than a chunk reserves whole chunks. */
    {PROBE_POOL_CHUNKS, "default pool, cudaMallocAsync 32 MiB: reserved", "32 MiB", SEC_POOLS},
    {PROBE_POOL_CHUNKS, "default pool, cudaMallocAsync 33 MiB: reserved", "64 MiB", SEC_POOLS},
    {PROBE_POOL_CHUNKS, "default pool, cudaMallocAsync 64 MiB + 1: reserved", "96 MiB", SEC_POOLS},
    {PROBE_POOL_CHUNKS, "default pool, cudaMallocAsync 100 MiB: reserved", "128 MiB", SEC_POOLS},
    {PROBE_POOL_CHUNKS, "default pool, 4 KiB then 32 MiB: reserved", "64 MiB", SEC_POOLS},
    {PROBE_POOL_CHUNKS, "default pool, 31 x 1 MiB then 2 MiB: reserved", "64 MiB", SEC_POOLS},
    {PROBE_POOL_CHUNKS, "default pool, 8 x cudaMallocAsync 1 byte, smallest distance between two",
     "512 B", SEC_POOLS},
    {PROBE_POOL_CHUNKS, "default pool, cudaMallocAsync 1000 bytes: used", "1000 B", SEC_POOLS},
    {PROBE_POOL_CHUNKS, "cuMemGetAddressRange of a cudaMallocAsync 1000 bytes", "1000 B",
     SEC_POOLS},

    {PROBE_HOST_POOL, "host pool, cudaMallocFromPoolAsync 4 KiB",
     "reserved 32 MiB, used 4 KiB, device free down 0", SEC_POOLS},
    {PROBE_HOST_POOL, "host pool block, written and read by the host", "data kept", SEC_POOLS},
    {PROBE_HOST_POOL, "host pool block, cudaPointerGetAttributes type", "cudaMemoryTypeHost",
     SEC_POOLS},
    {PROBE_HOST_POOL, "host pool, cudaMemPoolSetAccess device 0 read-write", "cudaSuccess",
     SEC_POOLS},
    {PROBE_HOST_POOL, "host pool block, cudaMemcpy to device memory and back",
     "cudaSuccess, data kept", SEC_POOLS},
    {PROBE_HOST_POOL, "host pool, block freed and synchronised, release threshold 0",
     "reserved 0, used 0", SEC_POOLS},

    {PROBE_HIGH_MARKS, "ReservedMemHigh set to 0", "cudaSuccess, then high = current", SEC_POOLS},
    {PROBE_HIGH_MARKS, "ReservedMemHigh set to 1", "cudaErrorInvalidValue", SEC_POOLS},
    {PROBE_HIGH_MARKS, "UsedMemHigh set to 0", "cudaSuccess, then high = current", SEC_POOLS},
    {PROBE_HIGH_MARKS, "UsedMemHigh set to 1", "cudaErrorInvalidValue", SEC_POOLS},

    {PROBE_POOL_CUDAFREE, "cudaFree of a cudaMallocAsync 1 MiB block",
     "cudaSuccess, then reserved 0, used 1 MiB", SEC_POOLS},
    {PROBE_POOL_CUDAFREE, "cudaFree of a pool block, then cudaStreamSynchronize",
     "reserved 0, used 1 MiB", SEC_POOLS},
    {PROBE_POOL_CUDAFREE, "cudaFree of a second 1 MiB block, release threshold max",
     "reserved 32 MiB, used 2 MiB", SEC_POOLS},
    {PROBE_POOL_CUDAFREE, "then cudaMemPoolTrimTo 0", "reserved 0, used 2 MiB", SEC_POOLS},

    {PROBE_POOL_HANDLES, "cudaDeviceGetMemPool", "the default pool", SEC_POOLS},
    {PROBE_POOL_HANDLES, "cudaDeviceSetMemPool with a created pool",
     "cudaSuccess, then cudaDeviceGetMemPool gives the created pool", SEC_POOLS},
    {PROBE_POOL_HANDLES, "cudaMallocAsync after cudaDeviceSetMemPool: a block of",
     "the created pool", SEC_POOLS},
    {PROBE_POOL_HANDLES, "cudaMemPoolDestroy of the current pool, then cudaDeviceGetMemPool",
     "the default pool", SEC_POOLS},
    {PROBE_POOL_HANDLES, "cudaMemPoolCreate on the host", "cudaSuccess", SEC_POOLS},
    {PROBE_POOL_HANDLES, "cudaMemPoolCreate on host NUMA node 0", "cudaSuccess", SEC_POOLS},
    {PROBE_POOL_HANDLES, "cudaMemPoolCreate on host NUMA node 9999", "cudaErrorInvalidValue",
     SEC_POOLS},
    {PROBE_POOL_HANDLES, "cudaDeviceSetMemPool with a host pool", "cudaErrorInvalidValue",
     SEC_POOLS},
    {PROBE_POOL_HANDLES, "cudaMemPoolCreate on device 9999", "cudaErrorInvalidValue", SEC_POOLS},
    {PROBE_POOL_HANDLES, "cudaMemPoolCreate of allocation type invalid", "cudaErrorInvalidValue",
     SEC_POOLS},
    {PROBE_POOL_HANDLES, "cudaMemPoolDestroy of the default pool", "cudaErrorInvalidValue",
     SEC_POOLS},
    {PROBE_POOL_HANDLES, "cudaMemPoolDestroy of a pool with a live 1 MiB block", "cudaSuccess",
     SEC_POOLS},
    {PROBE_POOL_HANDLES, "block of a destroyed pool, cudaMemcpy of 1 MiB", "cudaSuccess",
     SEC_POOLS},
    {PROBE_POOL_HANDLES, "block of a destroyed pool, cudaFreeAsync and cudaStreamSynchronize",
     "cudaSuccess, device free down 0", SEC_POOLS},

    {PROBE_GRAPH_MEMORY, "default pool after capturing cudaMallocAsync 1 MiB and cudaFreeAsync",
     "reserved 0, used 0", SEC_GRAPHS},
    {PROBE_GRAPH_MEMORY, "graph memory attributes after the capture, before a launch",
     "reserved 0, used 0, device free down 0", SEC_GRAPHS},
    {PROBE_GRAPH_MEMORY, "graph memory attributes after a launch of that graph",
     "reserved 32 MiB, used 32 MiB", SEC_GRAPHS},
    {PROBE_GRAPH_MEMORY, "default pool after the graph is destroyed and cudaDeviceSynchronize",
     "reserved 0, used 0", SEC_GRAPHS},
    {PROBE_GRAPH_MEMORY, "graph memory attributes after the graph is destroyed",
     "reserved 32 MiB, used 32 MiB, device free down 32 MiB", SEC_GRAPHS},
    {PROBE_GRAPH_MEMORY, "graph memory attributes after cudaDeviceGraphMemTrim",
     "reserved 0, used 0, device free down 0", SEC_GRAPHS},

    {PROBE_ERRORS,
     "cudaGetErrorString of cudaErrorInvalidValue, MemoryAllocation, "
     "InvalidResourceHandle",
     "invalid argument; out of memory; invalid resource handle", SEC_ERRORS},
    {PROBE_ERRORS, "cudaEventQuery not ready, then cudaGetLastError",
     "cudaErrorNotReady, then cudaSuccess", SEC_ERRORS},
    {PROBE_ERRORS, "a failed call, a successful one, then cudaPeekAtLastError",
     "cudaErrorInvalidValue", SEC_ERRORS},

    {PROBE_DRIVER, "cudaGetDriverEntryPointByVersion of an unknown name",
     "cudaSuccess, NULL, cudaDriverEntryPointSymbolNotFound", SEC_DRIVER},
    {PROBE_DRIVER, "cuInit with flags 1", "CUDA_ERROR_INVALID_VALUE", SEC_DRIVER},
    {PROBE_DRIVER, "cuCtxGetCurrent on a fresh thread", "NULL", SEC_DRIVER},
    {PROBE_DRIVER, "cuMemGetAddressRange of host memory", "CUDA_ERROR_NOT_FOUND", SEC_DRIVER},
    {PROBE_DRIVER, "cuPointerGetAttribute MEMORY_TYPE of host memory", "CUDA_ERROR_INVALID_VALUE",
     SEC_DRIVER},
    {PROBE_DRIVER, "cuDeviceGetAttribute of driver-only attributes",
     "multicast 0, fabric handles 1, win32 handles 0, GPUDirect RDMA 1, 64-bit stream mem ops 1, "
     "wait value NOR 1, host pointer for registered mem 1, read-only host register 1",
     SEC_DRIVER},
    {PROBE_DRIVER, "cuDeviceGetAttribute of GPUDirect RDMA with CUDA VMM, win32 KMT handles",
     "1, 0", SEC_DRIVER},

    {PROBE_IPC, "cudaIpcGetMemHandle of a cudaMalloc block", "cudaSuccess", SEC_IPC},
    {PROBE_IPC, "cudaIpcGetMemHandle of a pointer 4 KiB into that block", "the block's handle",
     SEC_IPC},
    {PROBE_IPC, "cudaIpcOpenMemHandle in the process that made it", "cudaErrorDeviceUninitialized",
     SEC_IPC},
    {PROBE_IPC, "cudaIpcGetMemHandle of a pool block", "cudaErrorInvalidValue", SEC_IPC},
    {PROBE_IPC, "cudaIpcGetMemHandle of pinned host memory", "cudaErrorInvalidValue", SEC_IPC},
    {PROBE_IPC, "cudaIpcGetEventHandle of an event without cudaEventInterprocess",
     "cudaErrorInvalidResourceHandle", SEC_IPC},
    {PROBE_IPC, "cudaIpcOpenEventHandle in the process that made it",
     "cudaErrorDeviceUninitialized", SEC_IPC},

    {PROBE_VMM, "cuMemGetAllocationGranularity minimum, pinned device memory", "2 MiB", SEC_VMM},
    {PROBE_VMM, "cuMemGetAllocationGranularity recommended, pinned device memory", "2 MiB",
     SEC_VMM},
    {PROBE_VMM, "cuMemAddressReserve 2 MiB, alignment 0", "aligned to the granularity", SEC_VMM},
    {PROBE_VMM, "cuMemAddressReserve 2 MiB, alignment 64 MiB", "aligned to 64 MiB", SEC_VMM},
    {PROBE_VMM, "cudaMemcpy across two adjacent mappings", "cudaSuccess", SEC_VMM},
    {PROBE_VMM, "cuMemUnmap of half a 4 MiB mapping", "CUDA_ERROR_INVALID_VALUE", SEC_VMM},
    {PROBE_VMM, "cuMemAddressFree of a reservation with a mapping", "CUDA_ERROR_INVALID_VALUE",
     SEC_VMM},
    {PROBE_VMM, "cudaMemcpy reaching an unmapped part of a reservation", "cudaErrorInvalidValue",
     SEC_VMM},
    {PROBE_VMM, "cuMemCreate 2 MiB asking for fabric handles", "CUDA_ERROR_NOT_PERMITTED", SEC_VMM},

    {PROBE_RESET, "cudaDeviceReset", "cudaSuccess", SEC_CANNOT},
    {PROBE_RESET, "default pool after cudaDeviceReset", "reserved 32 MiB, used 4 KiB", SEC_CANNOT},
    {PROBE_RESET, "cudaMalloc block after cudaDeviceReset, cuPointerGetAttribute MEMORY_TYPE",
     "CUDA_ERROR_INVALID_VALUE", SEC_CANNOT},
    {PROBE_RESET, "cudaMalloc block after cudaDeviceReset, cudaFree", "cudaErrorInvalidValue",
     SEC_CANNOT},
    {PROBE_RESET, "cudaMallocAsync block after cudaDeviceReset, copied back",
     "cudaSuccess, data kept", SEC_CANNOT},
    {PROBE_RESET, "cudaMallocAsync block after cudaDeviceReset, cudaFreeAsync", "cudaSuccess",
     SEC_CANNOT},
};

#define NDOCUMENTED (sizeof documented / sizeof documented[0])

/* ---- Reporting (in the probe's process) ---- */

static int answered[NDOCUMENTED];
static int any_differs;
/* The step that failed and made a probe stop, and its error, for the checks it did not
 * reach; both static strings. */
static const char *stopped_step, *stopped_error;

static size_t check_index(const char *check)
{
    for (size_t i = 0; i < NDOCUMENTED; i++)
        if (strcmp(documented[i].check, check) == 0) return i;
    fprintf(stderr, "fidelity: no documented answer for \"%s\"\n", check);
    exit(1);
}

static void print_line(size_t i, const char *observed)
{
    int same = strcmp(observed, documented[i].answer) == 0;
    if (!same) any_differs = 1;
    printf("fidelity: %s: %s [sim documents: %s] %s\n", documented[i].check, observed,
           documented[i].answer, same ? "same" : "DIFFERS");
    fflush(stdout);
}

/* Prints what the device answered to `check` and clears the last error the step left. */
static void observe(const char *check, const char *fmt, ...)
{
    char observed[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(observed, sizeof observed, fmt, ap);
    va_end(ap);
    size_t i = check_index(check);
    answered[i] = 1;
    print_line(i, observed);
    (void)cudaGetLastError();
}

/* A step a probe cannot go on without failed: the probe returns, and the checks it did not
 * reach say why. */
static void stop(const char *step, const char *error)
{
    stopped_step = step;
    stopped_error = error;
    (void)cudaGetLastError();
}

static void stop_cuda(const char *step, cudaError_t err)
{
    stop(step, cudaGetErrorName(err));
}

/* Byte counts as the table writes them: "0", "4 KiB", "64 MiB", "1049088 B"; negative when
 * memory came back. A C11 temporary: valid until the end of the full expression. */
struct size_text {
    char s[40];
};

static struct size_text bytes(long long v)
{
    struct size_text t;
    if (v == 0)
        snprintf(t.s, sizeof t.s, "0");
    else if (v % (long long)MIB == 0)
        snprintf(t.s, sizeof t.s, "%lld MiB", v / (long long)MIB);
    else if (v % (long long)KIB == 0)
        snprintf(t.s, sizeof t.s, "%lld KiB", v / (long long)KIB);
    else
        snprintf(t.s, sizeof t.s, "%lld B", v);
    return t;
}

static const char *err_name(cudaError_t err)
{
    return cudaGetErrorName(err);
}

/* The device's free memory (cudaMemGetInfo), or -1. */
static long long device_free(void)
{
    size_t free_bytes, total;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return (long long)free_bytes;
}

/* The lowest set bit of v: the largest power of two it is a multiple of. */
static uintptr_t alignment_of(uintptr_t v)
{
    return v & -v;
}

/* ---- The driver, through the runtime's entry-point lookup ---- */

static void *driver_entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found;
    cudaError_t err =
        cudaGetDriverEntryPointByVersion(name, &fn, CUDART_VERSION, cudaEnableDefault, &found);
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return fn;
}

static const char *cu_name(CUresult res)
{
    CUresult (*get_name)(CUresult, const char **) = driver_entry("cuGetErrorName");
    const char *name = NULL;
    if (!get_name || get_name(res, &name) != CUDA_SUCCESS || !name) return "an unnamed CUresult";
    return name;
}

/* cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE) of p: the CUresult's name. */
static const char *pointer_memory_type_result(const void *p)
{
    CUresult (*get_pointer_attribute)(void *, CUpointer_attribute, CUdeviceptr) =
        driver_entry("cuPointerGetAttribute");
    if (!get_pointer_attribute) return "no driver entry point";
    unsigned memory_type;
    return cu_name(
        get_pointer_attribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p));
}

/* ---- Probes ---- */

/* Whether `device`'s primary context is active ("active" or "inactive"), asked of the
 * driver. */
static const char *primary_context(int device)
{
    CUresult (*get_state)(CUdevice, unsigned *, int *) = driver_entry("cuDevicePrimaryCtxGetState");
    unsigned flags;
    int active = 0;
    if (!get_state || get_state(device, &flags, &active) != CUDA_SUCCESS) return "unknown";
    return active ? "active" : "inactive";
}

/* Which calls initialise a primary context (a context costs a GPU hundreds of MiB, so a
 * library that touches a device it does not use costs that device this much). Runs first, in
 * a process that has made no runtime call but cudaGetDeviceCount and the driver lookup. */
static void probe_context_init(void)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err) return stop_cuda("cudaGetDeviceCount", err);
    char held[128] = "";
    for (int d = 0; d < count && strlen(held) < sizeof held - 8; d++)
        if (strcmp(primary_context(d), "inactive") != 0)
            snprintf(held + strlen(held), sizeof held - strlen(held), "%s%d %s", *held ? ", " : "",
                     d, primary_context(d));
    observe("primary contexts before any runtime call", "%s", *held ? held : "none");

    err = cudaFree(0);
    observe("cudaFree(0): device 0's primary context", "%s",
            err ? err_name(err) : primary_context(0));

    int last = count - 1, current = -1;
    err = cudaInitDevice(last, 0, 0);
    cudaGetDevice(&current);
    if (err)
        observe("cudaInitDevice of the last device: its primary context, current device", "%s",
                err_name(err));
    else
        observe("cudaInitDevice of the last device: its primary context, current device",
                "%s, still %d", primary_context(last), current);
    err = cudaSetDevice(last);
    observe("cudaSetDevice of the last device: its primary context", "%s",
            err ? err_name(err) : primary_context(last));
}

static void probe_device(void)
{
    int least = 1, greatest = 1;
    cudaError_t err = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (err)
        observe("cudaDeviceGetStreamPriorityRange", "%s", err_name(err));
    else
        observe("cudaDeviceGetStreamPriorityRange", "[%d, %d]", greatest, least);

    static const int asked[] = {-10, 5};
    static const char *const checks[] = {
        "cudaStreamCreateWithPriority -10, then cudaStreamGetPriority",
        "cudaStreamCreateWithPriority 5, then cudaStreamGetPriority"};
    for (int i = 0; i < 2; i++) {
        cudaStream_t s;
        int priority = 99;
        err = cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, asked[i]);
        if (!err) {
            err = cudaStreamGetPriority(s, &priority);
            cudaStreamDestroy(s);
        }
        if (err)
            observe(checks[i], "%s", err_name(err));
        else
            observe(checks[i], "%d", priority);
    }

    struct cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, 0);
    if (err) return stop_cuda("cudaGetDeviceProperties", err);
    observe("compute capability", "%d.%d", prop.major, prop.minor);
    observe("multiProcessorCount", "%d", prop.multiProcessorCount);
    observe("textureAlignment", "%zu", prop.textureAlignment);
}

static int compare_addresses(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

/* How much the device's free memory drops for `n` cudaMallocs of `size` (at most 1000). */
static void observe_malloc_charge(const char *check, int n, size_t size)
{
    static void *ptrs[1000];
    long long before = device_free();
    for (int i = 0; i < n; i++) {
        cudaError_t err = cudaMalloc(&ptrs[i], size);
        if (err) {
            while (i--)
                cudaFree(ptrs[i]);
            return observe(check, "%s", err_name(err));
        }
    }
    observe(check, "%s", bytes(before - device_free()).s);
    for (int i = 0; i < n; i++)
        cudaFree(ptrs[i]);
}

/* What the H100's answers leave open about how cudaMalloc memory lies in the device's pages
 * (docs/sim.md, "Device memory"): whether a freed page goes back, where the sub-allocated
 * sizes end, how large allocations are aligned. */
static void probe_granule_pages(void)
{
    long long before = device_free();
    void *p, *q;
    cudaError_t err = cudaMalloc(&p, 1);
    if (!err) err = cudaFree(p);
    if (err)
        observe("cudaMalloc 1 byte, then cudaFree, device free down", "%s", err_name(err));
    else
        observe("cudaMalloc 1 byte, then cudaFree, device free down", "%s",
                bytes(before - device_free()).s);

    before = device_free();
    err = cudaMalloc(&p, MIB);
    if (!err && (err = cudaMalloc(&q, MIB))) cudaFree(p);
    if (err) {
        observe("2 x cudaMalloc 1 MiB, device free down", "%s", err_name(err));
        observe("2 x cudaMalloc 1 MiB, distance between them", "%s", err_name(err));
    } else {
        observe("2 x cudaMalloc 1 MiB, device free down", "%s", bytes(before - device_free()).s);
        uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
        observe("2 x cudaMalloc 1 MiB, distance between them", "%s",
                bytes((long long)(a > b ? a - b : b - a)).s);
        cudaFree(p);
        cudaFree(q);
    }
    observe_malloc_charge("2 x cudaMalloc 1 MiB + 1, device free down", 2, MIB + 1);
    observe_malloc_charge("cudaMalloc 2 MiB + 1, device free down", 1, 2 * MIB + 1);
    observe_malloc_charge("100 x cudaMalloc 4 KiB, device free down", 100, 4 * KIB);
    observe_malloc_charge("1000 x cudaMalloc 4 KiB, device free down", 1000, 4 * KIB);

    CUresult (*get_range)(CUdeviceptr *, size_t *, CUdeviceptr) =
        driver_entry("cuMemGetAddressRange");
    const char *check = "cuMemGetAddressRange of a cudaMalloc 1 MiB + 1";
    if (!get_range) {
        observe(check, "no driver entry point");
    } else if ((err = cudaMalloc(&p, MIB + 1))) {
        observe(check, "%s", err_name(err));
    } else {
        CUdeviceptr base;
        size_t extent = 0;
        CUresult res = get_range(&base, &extent, (CUdeviceptr)p);
        observe(check, "%s", res ? cu_name(res) : bytes((long long)extent).s);
        cudaFree(p);
    }

    void *big[4];
    uintptr_t all = 0;
    check = "4 x cudaMalloc 3 MiB, common alignment";
    for (int i = 0; i < 4; i++) {
        if ((err = cudaMalloc(&big[i], 3 * MIB))) {
            while (i--)
                cudaFree(big[i]);
            return observe(check, "%s", err_name(err));
        }
        all |= (uintptr_t)big[i];
    }
    if (alignment_of(all) >= 2 * MIB)
        observe(check, "2 MiB or more");
    else
        observe(check, "%s", bytes((long long)alignment_of(all)).s);
    for (int i = 0; i < 4; i++)
        cudaFree(big[i]);
}

static void probe_granule(void)
{
    enum { N = 8 };
    void *ptrs[N];
    uintptr_t sorted[N];
    for (int i = 0; i < N; i++) {
        cudaError_t err = cudaMalloc(&ptrs[i], 1);
        if (err) {
            while (i--)
                cudaFree(ptrs[i]);
            return stop_cuda("cudaMalloc 1 byte", err);
        }
        sorted[i] = (uintptr_t)ptrs[i];
    }
    qsort(sorted, N, sizeof sorted[0], compare_addresses);
    uintptr_t smallest = UINTPTR_MAX, all = 0;
    for (int i = 0; i < N; i++) {
        all |= sorted[i];
        if (i && sorted[i] - sorted[i - 1] < smallest) smallest = sorted[i] - sorted[i - 1];
    }
    observe("8 x cudaMalloc 1 byte, smallest distance between two", "%s",
            bytes((long long)smallest).s);
    observe("8 x cudaMalloc 1 byte, common alignment", "%s", bytes((long long)alignment_of(all)).s);

    CUresult (*get_range)(CUdeviceptr *, size_t *, CUdeviceptr) =
        driver_entry("cuMemGetAddressRange");
    CUdeviceptr base;
    size_t extent = 0;
    CUresult res = get_range ? get_range(&base, &extent, (CUdeviceptr)ptrs[0]) : CUDA_SUCCESS;
    if (!get_range)
        observe("cuMemGetAddressRange of a cudaMalloc 1 byte", "no driver entry point");
    else if (res)
        observe("cuMemGetAddressRange of a cudaMalloc 1 byte", "%s", cu_name(res));
    else
        observe("cuMemGetAddressRange of a cudaMalloc 1 byte", "%s", bytes((long long)extent).s);
    for (int i = 0; i < N; i++)
        cudaFree(ptrs[i]);

    observe_malloc_charge("cudaMalloc 1 byte, device free down", 1, 1);
    observe_malloc_charge("cudaMalloc 1 MiB, device free down", 1, MIB);
    observe_malloc_charge("cudaMalloc 1 MiB + 1, device free down", 1, MIB + 1);
    probe_granule_pages();
}

static unsigned char host_buffer[2 * MIB];

/* "cudaSuccess, cudaErrorInvalidValue, ...": a cudaMemcpy from the host of each size to p. */
static void observe_copies(const char *check, void *p, const size_t *sizes, int n)
{
    char text[256] = "";
    for (int i = 0; i < n; i++) {
        cudaError_t err = cudaMemcpy(p, host_buffer, sizes[i], cudaMemcpyHostToDevice);
        (void)cudaGetLastError();
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s", i ? ", " : "",
                 err_name(err));
    }
    observe(check, "%s", text);
}

static void probe_copy_bounds(void)
{
    static const size_t past_1000[] = {1000, 1001, 1024};
    void *p;
    cudaError_t err = cudaMalloc(&p, 1000);
    if (err) return stop_cuda("cudaMalloc 1000", err);
    observe_copies("cudaMalloc 1000, cudaMemcpy of 1000, 1001, 1024 bytes", p, past_1000, 3);
    cudaFree(p);

    cudaStream_t s;
    err = cudaStreamCreate(&s);
    if (err) return stop_cuda("cudaStreamCreate", err);
    err = cudaMallocAsync(&p, 1000, s);
    if (!err) err = cudaStreamSynchronize(s);
    if (err) {
        cudaStreamDestroy(s);
        return stop_cuda("cudaMallocAsync 1000", err);
    }
    observe_copies("cudaMallocAsync 1000, cudaMemcpy of 1000, 1001, 1024 bytes", p, past_1000, 3);
    cudaError_t set_exact = cudaMemset(p, 0, 1000);
    (void)cudaGetLastError();
    cudaError_t set_past = cudaMemset(p, 0, 1001);
    observe("cudaMallocAsync 1000, cudaMemset of 1000, 1001 bytes", "%s, %s", err_name(set_exact),
            err_name(set_past));

    /* Freed on s and taken again on s: stream order lets the pool hand the block out again. */
    void *again;
    cudaFreeAsync(p, s);
    err = cudaMallocAsync(&again, 900, s);
    if (!err) err = cudaStreamSynchronize(s);
    if (err) {
        observe("cudaMallocAsync 1000 freed, cudaMallocAsync 900, cudaMemcpy of 900, 901", "%s",
                err_name(err));
    } else {
        cudaError_t fit = cudaMemcpy(again, host_buffer, 900, cudaMemcpyHostToDevice);
        (void)cudaGetLastError();
        cudaError_t past = cudaMemcpy(again, host_buffer, 901, cudaMemcpyHostToDevice);
        observe("cudaMallocAsync 1000 freed, cudaMallocAsync 900, cudaMemcpy of 900, 901",
                "%s, %s, %s", again == p ? "the same block" : "another block", err_name(fit),
                err_name(past));
        cudaFreeAsync(again, s);
    }
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
}

/* A copy whose kind names a side as device memory that is not: a freed block, pageable host
 * memory. Run late, in its own process: a GPU may fault where the sim answers. */
static void probe_copy_kind(void)
{
    void *freed;
    cudaError_t err = cudaMalloc(&freed, MIB);
    if (!err) err = cudaFree(freed);
    if (err) return stop_cuda("cudaMalloc and cudaFree 1 MiB", err);
    err = cudaMemcpy(host_buffer, freed, 64, cudaMemcpyDeviceToHost);
    (void)cudaGetLastError();
    observe("cudaMemcpy DeviceToHost from a freed cudaMalloc block", "%s", err_name(err));
    err = cudaMemcpy(freed, host_buffer, 64, cudaMemcpyHostToDevice);
    (void)cudaGetLastError();
    observe("cudaMemcpy HostToDevice into a freed cudaMalloc block", "%s", err_name(err));
    err = cudaMemcpy(host_buffer, host_buffer + MIB, 64, cudaMemcpyDeviceToHost);
    (void)cudaGetLastError();
    observe("cudaMemcpy DeviceToHost from pageable host memory", "%s", err_name(err));
}

static void probe_zero_size(void)
{
    void *p = &p;
    cudaError_t err = cudaMalloc(&p, 0);
    observe("cudaMalloc 0 bytes", "%s, %s", err_name(err), p ? "not NULL" : "NULL");
    if (p) cudaFree(p);

    p = &p;
    err = cudaMallocAsync(&p, 0, 0);
    observe("cudaMallocAsync 0 bytes", "%s, %s", err_name(err), p ? "not NULL" : "NULL");
    if (p) cudaFreeAsync(p, 0);
    cudaDeviceSynchronize();

    CUresult (*mem_alloc)(CUdeviceptr *, size_t) = driver_entry("cuMemAlloc");
    CUresult (*mem_alloc_async)(CUdeviceptr *, size_t, CUstream) = driver_entry("cuMemAllocAsync");
    CUdeviceptr dp = 0;
    if (mem_alloc)
        observe("cuMemAlloc 0 bytes", "%s", cu_name(mem_alloc(&dp, 0)));
    else
        observe("cuMemAlloc 0 bytes", "no driver entry point");
    if (mem_alloc_async) {
        const CUdeviceptr unwritten = 0x1230;
        dp = unwritten;
        CUresult res = mem_alloc_async(&dp, 0, NULL);
        observe("cuMemAllocAsync 0 bytes", "%s", cu_name(res));
        observe("cuMemAllocAsync 0 bytes, the pointer", "%s",
                dp == 0           ? "NULL"
                : dp == unwritten ? "not written"
                                  : "not NULL");
        if (!res && dp && dp != unwritten) cudaFree((void *)dp);
    } else {
        observe("cuMemAllocAsync 0 bytes", "no driver entry point");
        observe("cuMemAllocAsync 0 bytes, the pointer", "no driver entry point");
    }
}

static uint64_t pool_attribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr)
{
    uint64_t value = UINT64_MAX;
    if (cudaMemPoolGetAttribute(pool, attr, &value) != cudaSuccess) (void)cudaGetLastError();
    return value;
}

static void set_release_threshold(cudaMemPool_t pool, uint64_t threshold)
{
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
}

/* "reserved R, used U, device free down D", D against `baseline`. */
static void observe_pool(const char *check, cudaMemPool_t pool, long long baseline)
{
    observe(check, "reserved %s, used %s, device free down %s",
            bytes((long long)pool_attribute(pool, cudaMemPoolAttrReservedMemCurrent)).s,
            bytes((long long)pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent)).s,
            bytes(baseline - device_free()).s);
}

struct pool_under_test {
    cudaMemPool_t pool;
    int is_default; /* allocate with cudaMallocAsync, else cudaMallocFromPoolAsync */
    const char *name;
    const char *alloc;
    cudaStream_t stream;
    long long baseline; /* device free before the sequence */
};

static cudaError_t pool_alloc(const struct pool_under_test *t, void **p, size_t size)
{
    return t->is_default ? cudaMallocAsync(p, size, t->stream)
                         : cudaMallocFromPoolAsync(p, size, t->pool, t->stream);
}

/* One block of `size`: observed while allocated, then freed and synchronized. */
static int pool_one_block(const struct pool_under_test *t, size_t size, const char *size_text)
{
    char check[160];
    snprintf(check, sizeof check, "%s, %s %s", t->name, t->alloc, size_text);
    void *p;
    cudaError_t err = pool_alloc(t, &p, size);
    if (!err) err = cudaStreamSynchronize(t->stream);
    if (err) {
        stop_cuda(t->alloc, err);
        return -1;
    }
    observe_pool(check, t->pool, t->baseline);
    cudaFreeAsync(p, t->stream);
    cudaStreamSynchronize(t->stream);
    return 0;
}

/* 64 blocks of 1 MiB, all freed; observed before the synchronisation when `before_sync`. */
static int pool_64_blocks(const struct pool_under_test *t, const char *allocated_check,
                          const char *before_sync_check, const char *after_sync_check)
{
    void *blocks[64];
    for (int i = 0; i < 64; i++) {
        cudaError_t err = pool_alloc(t, &blocks[i], MIB);
        if (err) {
            while (i--)
                cudaFreeAsync(blocks[i], t->stream);
            cudaStreamSynchronize(t->stream);
            stop_cuda("the 64 blocks of 1 MiB", err);
            return -1;
        }
    }
    cudaStreamSynchronize(t->stream);
    if (allocated_check) observe_pool(allocated_check, t->pool, t->baseline);
    for (int i = 0; i < 64; i++)
        cudaFreeAsync(blocks[i], t->stream);
    if (before_sync_check) observe_pool(before_sync_check, t->pool, t->baseline);
    cudaStreamSynchronize(t->stream);
    observe_pool(after_sync_check, t->pool, t->baseline);
    return 0;
}

/* The sequence of POOL_ROWS. */
static void probe_pool_sequence(struct pool_under_test *t)
{
    char allocated[160], before_sync[160], after_sync[160], kept[160], trimmed[160];
    snprintf(allocated, sizeof allocated, "%s, 64 x %s 1 MiB", t->name, t->alloc);
    snprintf(before_sync, sizeof before_sync, "%s, 64 x 1 MiB freed, before cudaStreamSynchronize",
             t->name);
    snprintf(after_sync, sizeof after_sync,
             "%s, 64 x 1 MiB freed, after cudaStreamSynchronize, release threshold 0", t->name);
    snprintf(kept, sizeof kept,
             "%s, 64 x 1 MiB freed, after cudaStreamSynchronize, release threshold max", t->name);
    snprintf(trimmed, sizeof trimmed, "%s, then cudaMemPoolTrimTo 0", t->name);

    set_release_threshold(t->pool, 0);
    if (pool_one_block(t, 4 * KIB, "4 KiB") || pool_one_block(t, MIB, "1 MiB") ||
        pool_64_blocks(t, allocated, before_sync, after_sync))
        return;
    set_release_threshold(t->pool, UINT64_MAX);
    int failed = pool_64_blocks(t, NULL, NULL, kept);
    if (!failed) {
        cudaError_t err = cudaMemPoolTrimTo(t->pool, 0);
        if (err)
            observe(trimmed, "%s", err_name(err));
        else
            observe_pool(trimmed, t->pool, t->baseline);
    }
    set_release_threshold(t->pool, 0);
}

static void probe_default_pool(void)
{
    struct pool_under_test t = {
        .is_default = 1, .name = "default pool", .alloc = "cudaMallocAsync"};
    cudaError_t err = cudaStreamCreate(&t.stream);
    if (!err) err = cudaDeviceGetDefaultMemPool(&t.pool, 0);
    if (err) return stop_cuda("cudaStreamCreate, cudaDeviceGetDefaultMemPool", err);
    t.baseline = device_free();
    probe_pool_sequence(&t);
    cudaStreamDestroy(t.stream);
}

static cudaError_t create_device_pool(cudaMemPool_t *pool)
{
    struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                     .location = {.type = cudaMemLocationTypeDevice, .id = 0}};
    return cudaMemPoolCreate(pool, &props);
}

static void probe_created_pool(void)
{
    struct pool_under_test t = {.name = "created pool", .alloc = "cudaMallocFromPoolAsync"};
    cudaError_t err = cudaStreamCreate(&t.stream);
    if (err) return stop_cuda("cudaStreamCreate", err);
    t.baseline = device_free();
    err = create_device_pool(&t.pool);
    if (err) {
        observe("created pool, cudaMemPoolCreate", "%s", err_name(err));
        cudaStreamDestroy(t.stream);
        return stop_cuda("cudaMemPoolCreate", err);
    }
    observe("created pool, cudaMemPoolCreate", "cudaSuccess, device free down %s",
            bytes(t.baseline - device_free()).s);
    probe_pool_sequence(&t);
    cudaMemPoolDestroy(t.pool);
    cudaStreamDestroy(t.stream);
}

/* The default pool's reserved memory while blocks of `sizes` (n of them, in order) are
 * allocated on s; they are then freed and, with the release threshold 0, given back. */
static void observe_chunks(const char *check, cudaMemPool_t pool, cudaStream_t s,
                           const size_t *sizes, int n)
{
    void *blocks[32];
    for (int i = 0; i < n; i++) {
        cudaError_t err = cudaMallocAsync(&blocks[i], sizes[i], s);
        if (err) {
            while (i--)
                cudaFreeAsync(blocks[i], s);
            cudaStreamSynchronize(s);
            return observe(check, "%s", err_name(err));
        }
    }
    cudaStreamSynchronize(s);
    observe(check, "%s",
            bytes((long long)pool_attribute(pool, cudaMemPoolAttrReservedMemCurrent)).s);
    for (int i = 0; i < n; i++)
        cudaFreeAsync(blocks[i], s);
    cudaStreamSynchronize(s);
}

/* How the default pool lays its blocks out in its chunks (docs/sim.md, "Memory pools"):
 * blocks of more than a chunk, a block that does not fit what is left of a chunk, the
 * distance between small blocks, what a 1000-byte block counts as used. */
static void probe_pool_chunks(void)
{
    cudaMemPool_t pool;
    cudaStream_t s;
    cudaError_t err = cudaDeviceGetDefaultMemPool(&pool, 0);
    if (!err) err = cudaStreamCreate(&s);
    if (err) return stop_cuda("cudaDeviceGetDefaultMemPool, cudaStreamCreate", err);
    set_release_threshold(pool, 0);
    static const size_t one_32[] = {32 * MIB}, one_33[] = {33 * MIB}, one_64p[] = {64 * MIB + 1},
                        one_100[] = {100 * MIB}, small_then_32[] = {4 * KIB, 32 * MIB};
    observe_chunks("default pool, cudaMallocAsync 32 MiB: reserved", pool, s, one_32, 1);
    observe_chunks("default pool, cudaMallocAsync 33 MiB: reserved", pool, s, one_33, 1);
    observe_chunks("default pool, cudaMallocAsync 64 MiB + 1: reserved", pool, s, one_64p, 1);
    observe_chunks("default pool, cudaMallocAsync 100 MiB: reserved", pool, s, one_100, 1);
    observe_chunks("default pool, 4 KiB then 32 MiB: reserved", pool, s, small_then_32, 2);
    size_t ones_then_2[32];
    for (int i = 0; i < 31; i++)
        ones_then_2[i] = MIB;
    ones_then_2[31] = 2 * MIB;
    observe_chunks("default pool, 31 x 1 MiB then 2 MiB: reserved", pool, s, ones_then_2, 32);

    enum { N = 8 };
    void *ptrs[N];
    uintptr_t sorted[N];
    const char *check = "default pool, 8 x cudaMallocAsync 1 byte, smallest distance between two";
    for (int i = 0; i < N; i++) {
        if ((err = cudaMallocAsync(&ptrs[i], 1, s))) {
            while (i--)
                cudaFreeAsync(ptrs[i], s);
            break;
        }
        sorted[i] = (uintptr_t)ptrs[i];
    }
    if (err) {
        observe(check, "%s", err_name(err));
    } else {
        qsort(sorted, N, sizeof sorted[0], compare_addresses);
        uintptr_t smallest = UINTPTR_MAX;
        for (int i = 1; i < N; i++)
            if (sorted[i] - sorted[i - 1] < smallest) smallest = sorted[i] - sorted[i - 1];
        observe(check, "%s", bytes((long long)smallest).s);
        for (int i = 0; i < N; i++)
            cudaFreeAsync(ptrs[i], s);
    }
    cudaStreamSynchronize(s);

    void *p;
    err = cudaMallocAsync(&p, 1000, s);
    if (!err) err = cudaStreamSynchronize(s);
    if (err) {
        observe("default pool, cudaMallocAsync 1000 bytes: used", "%s", err_name(err));
        observe("cuMemGetAddressRange of a cudaMallocAsync 1000 bytes", "%s", err_name(err));
    } else {
        observe("default pool, cudaMallocAsync 1000 bytes: used", "%s",
                bytes((long long)pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent)).s);
        CUresult (*get_range)(CUdeviceptr *, size_t *, CUdeviceptr) =
            driver_entry("cuMemGetAddressRange");
        CUdeviceptr base;
        size_t extent = 0;
        CUresult res = get_range ? get_range(&base, &extent, (CUdeviceptr)p) : CUDA_SUCCESS;
        observe("cuMemGetAddressRange of a cudaMallocAsync 1000 bytes", "%s",
                !get_range ? "no driver entry point"
                : res      ? cu_name(res)
                           : bytes((long long)extent).s);
        cudaFreeAsync(p, s);
    }
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
}

static cudaError_t create_host_pool(cudaMemPool_t *pool, enum cudaMemLocationType where, int id)
{
    struct cudaMemPoolProps props = {.allocType = cudaMemAllocationTypePinned,
                                     .location = {.type = where, .id = id}};
    return cudaMemPoolCreate(pool, &props);
}

/* A pool of pinned host memory (CUDA 13): what it reserves, that the host reads and writes its
 * blocks, and that a copy reaches them once the device was granted access. */
static void probe_host_pool(void)
{
    cudaStream_t s;
    cudaMemPool_t pool;
    cudaError_t err = cudaStreamCreate(&s);
    if (err) return stop_cuda("cudaStreamCreate", err);
    long long baseline = device_free();
    err = create_host_pool(&pool, cudaMemLocationTypeHost, 0);
    if (err) {
        cudaStreamDestroy(s);
        return stop_cuda("cudaMemPoolCreate on the host", err);
    }
    set_release_threshold(pool, 0);
    unsigned char *p;
    err = cudaMallocFromPoolAsync((void **)&p, 4 * KIB, pool, s);
    if (!err) err = cudaStreamSynchronize(s);
    if (err) {
        cudaMemPoolDestroy(pool);
        cudaStreamDestroy(s);
        return stop_cuda("cudaMallocFromPoolAsync 4 KiB from a host pool", err);
    }
    observe_pool("host pool, cudaMallocFromPoolAsync 4 KiB", pool, baseline);
    for (int i = 0; i < 4096; i++)
        p[i] = (unsigned char)(i * 5 + 3);
    int kept = 1;
    for (int i = 0; i < 4096; i++)
        kept &= p[i] == (unsigned char)(i * 5 + 3);
    observe("host pool block, written and read by the host", "%s",
            kept ? "data kept" : "data lost");
    struct cudaPointerAttributes attr;
    err = cudaPointerGetAttributes(&attr, p);
    observe("host pool block, cudaPointerGetAttributes type", "%s",
            err                                  ? err_name(err)
            : attr.type == cudaMemoryTypeHost    ? "cudaMemoryTypeHost"
            : attr.type == cudaMemoryTypeDevice  ? "cudaMemoryTypeDevice"
            : attr.type == cudaMemoryTypeManaged ? "cudaMemoryTypeManaged"
                                                 : "cudaMemoryTypeUnregistered");
    struct cudaMemAccessDesc access = {.location = {.type = cudaMemLocationTypeDevice, .id = 0},
                                       .flags = cudaMemAccessFlagsProtReadWrite};
    err = cudaMemPoolSetAccess(pool, &access, 1);
    observe("host pool, cudaMemPoolSetAccess device 0 read-write", "%s", err_name(err));
    void *dev;
    unsigned char back[4096];
    memset(back, 0, sizeof back);
    if (!err) err = cudaMalloc(&dev, 4 * KIB);
    if (!err) {
        err = cudaMemcpy(dev, p, 4 * KIB, cudaMemcpyDefault);
        if (!err) err = cudaMemcpy(back, dev, 4 * KIB, cudaMemcpyDefault);
        cudaFree(dev);
    }
    if (err)
        observe("host pool block, cudaMemcpy to device memory and back", "%s", err_name(err));
    else
        observe("host pool block, cudaMemcpy to device memory and back", "cudaSuccess, %s",
                memcmp(back, p, sizeof back) ? "data lost" : "data kept");
    cudaFreeAsync(p, s);
    cudaStreamSynchronize(s);
    observe("host pool, block freed and synchronised, release threshold 0", "reserved %s, used %s",
            bytes((long long)pool_attribute(pool, cudaMemPoolAttrReservedMemCurrent)).s,
            bytes((long long)pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent)).s);
    cudaMemPoolDestroy(pool);
    cudaStreamDestroy(s);
}

/* Writes `value` to a high-water mark; with 0, also whether it then equals the current. */
static void observe_high_reset(const char *check, cudaMemPool_t pool, enum cudaMemPoolAttr high,
                               enum cudaMemPoolAttr current, uint64_t value)
{
    cudaError_t err = cudaMemPoolSetAttribute(pool, high, &value);
    if (err || value) return observe(check, "%s", err_name(err));
    uint64_t high_now = pool_attribute(pool, high), current_now = pool_attribute(pool, current);
    if (high_now == current_now)
        observe(check, "cudaSuccess, then high = current");
    else
        observe(check, "cudaSuccess, then high %s, current %s", bytes((long long)high_now).s,
                bytes((long long)current_now).s);
}

static void probe_high_marks(void)
{
    cudaMemPool_t pool;
    cudaStream_t s;
    cudaError_t err = cudaDeviceGetDefaultMemPool(&pool, 0);
    if (!err) err = cudaStreamCreate(&s);
    if (err) return stop_cuda("cudaDeviceGetDefaultMemPool, cudaStreamCreate", err);
    /* Two blocks, one freed: both marks are then above their current values. */
    void *kept, *freed;
    err = cudaMallocAsync(&kept, MIB, s);
    if (!err) err = cudaMallocAsync(&freed, MIB, s);
    if (err) {
        cudaStreamDestroy(s);
        return stop_cuda("cudaMallocAsync 1 MiB", err);
    }
    cudaFreeAsync(freed, s);
    cudaStreamSynchronize(s);
    observe_high_reset("ReservedMemHigh set to 0", pool, cudaMemPoolAttrReservedMemHigh,
                       cudaMemPoolAttrReservedMemCurrent, 0);
    observe_high_reset("ReservedMemHigh set to 1", pool, cudaMemPoolAttrReservedMemHigh,
                       cudaMemPoolAttrReservedMemCurrent, 1);
    observe_high_reset("UsedMemHigh set to 0", pool, cudaMemPoolAttrUsedMemHigh,
                       cudaMemPoolAttrUsedMemCurrent, 0);
    observe_high_reset("UsedMemHigh set to 1", pool, cudaMemPoolAttrUsedMemHigh,
                       cudaMemPoolAttrUsedMemCurrent, 1);
    cudaFreeAsync(kept, s);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
}

/* "reserved R, used U" of a pool. */
static void observe_reserved_used(const char *check, cudaMemPool_t pool)
{
    observe(check, "reserved %s, used %s",
            bytes((long long)pool_attribute(pool, cudaMemPoolAttrReservedMemCurrent)).s,
            bytes((long long)pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent)).s);
}

static void probe_pool_cudafree(void)
{
    cudaMemPool_t pool;
    cudaStream_t s;
    cudaError_t err = cudaDeviceGetDefaultMemPool(&pool, 0);
    if (!err) err = cudaStreamCreate(&s);
    if (err) return stop_cuda("cudaDeviceGetDefaultMemPool, cudaStreamCreate", err);
    set_release_threshold(pool, 0);
    void *p;
    err = cudaMallocAsync(&p, MIB, s);
    if (err) {
        cudaStreamDestroy(s);
        return stop_cuda("cudaMallocAsync 1 MiB", err);
    }
    err = cudaFree(p);
    observe("cudaFree of a cudaMallocAsync 1 MiB block", "%s, then reserved %s, used %s",
            err_name(err),
            bytes((long long)pool_attribute(pool, cudaMemPoolAttrReservedMemCurrent)).s,
            bytes((long long)pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent)).s);
    cudaStreamSynchronize(s);
    observe_reserved_used("cudaFree of a pool block, then cudaStreamSynchronize", pool);

    /* Whether cudaFree gives the memory back whatever the threshold, and whether the used
     * count it leaves behind adds up. */
    set_release_threshold(pool, UINT64_MAX);
    err = cudaMallocAsync(&p, MIB, s);
    if (!err) err = cudaStreamSynchronize(s);
    if (!err) err = cudaFree(p);
    if (err)
        observe("cudaFree of a second 1 MiB block, release threshold max", "%s", err_name(err));
    else
        observe_reserved_used("cudaFree of a second 1 MiB block, release threshold max", pool);
    cudaMemPoolTrimTo(pool, 0);
    observe_reserved_used("then cudaMemPoolTrimTo 0", pool);
    set_release_threshold(pool, 0);
    cudaStreamDestroy(s);
}

/* cudaMemPoolCreate with a location other than this device's memory; a pool a GPU makes
 * anyway is destroyed again. */
static void observe_pool_create(const char *check, enum cudaMemAllocationType type,
                                enum cudaMemLocationType where, int id)
{
    struct cudaMemPoolProps props = {.allocType = type, .location = {.type = where, .id = id}};
    cudaMemPool_t pool;
    cudaError_t err = cudaMemPoolCreate(&pool, &props);
    observe(check, "%s", err_name(err));
    if (!err) cudaMemPoolDestroy(pool);
}

/* A created pool destroyed while a block of it is allocated: is the block still usable and
 * freeable, and does its memory come back? */
static void destroy_with_live_block(cudaStream_t s)
{
    long long baseline = device_free();
    cudaMemPool_t pool;
    void *p;
    cudaError_t err = create_device_pool(&pool);
    if (err) return stop_cuda("cudaMemPoolCreate", err);
    err = cudaMallocFromPoolAsync(&p, MIB, pool, s);
    if (!err) err = cudaStreamSynchronize(s);
    if (err) {
        cudaMemPoolDestroy(pool);
        return stop_cuda("cudaMallocFromPoolAsync 1 MiB", err);
    }
    err = cudaMemPoolDestroy(pool);
    observe("cudaMemPoolDestroy of a pool with a live 1 MiB block", "%s", err_name(err));
    err = cudaMemcpy(p, host_buffer, MIB, cudaMemcpyHostToDevice);
    observe("block of a destroyed pool, cudaMemcpy of 1 MiB", "%s", err_name(err));
    err = cudaFreeAsync(p, s);
    if (!err) err = cudaStreamSynchronize(s);
    observe("block of a destroyed pool, cudaFreeAsync and cudaStreamSynchronize",
            "%s, device free down %s", err_name(err), bytes(baseline - device_free()).s);
}

static void probe_pool_handles(void)
{
    cudaMemPool_t default_pool, current, created;
    cudaError_t err = cudaDeviceGetDefaultMemPool(&default_pool, 0);
    if (!err) err = cudaDeviceGetMemPool(&current, 0);
    if (err) return stop_cuda("cudaDeviceGetDefaultMemPool, cudaDeviceGetMemPool", err);
    observe("cudaDeviceGetMemPool", "%s",
            current == default_pool ? "the default pool" : "another pool");

    err = create_device_pool(&created);
    if (err) return stop_cuda("cudaMemPoolCreate", err);
    cudaError_t set = cudaDeviceSetMemPool(0, created);
    (void)cudaGetLastError();
    err = cudaDeviceGetMemPool(&current, 0);
    observe("cudaDeviceSetMemPool with a created pool", "%s, then cudaDeviceGetMemPool gives %s",
            err_name(set),
            err                       ? err_name(err)
            : current == created      ? "the created pool"
            : current == default_pool ? "the default pool"
                                      : "another pool");
    /* cudaMallocAsync allocates from the current pool: whose used memory grows? */
    void *p;
    uint64_t used_before = pool_attribute(created, cudaMemPoolAttrUsedMemCurrent);
    err = cudaMallocAsync(&p, MIB, 0);
    if (!err) err = cudaStreamSynchronize(0);
    if (err) {
        observe("cudaMallocAsync after cudaDeviceSetMemPool: a block of", "%s", err_name(err));
    } else {
        observe("cudaMallocAsync after cudaDeviceSetMemPool: a block of", "%s",
                pool_attribute(created, cudaMemPoolAttrUsedMemCurrent) > used_before
                    ? "the created pool"
                    : "another pool");
        cudaFreeAsync(p, 0);
        cudaStreamSynchronize(0);
    }
    err = cudaMemPoolDestroy(created);
    cudaError_t get = err ? err : cudaDeviceGetMemPool(&current, 0);
    observe("cudaMemPoolDestroy of the current pool, then cudaDeviceGetMemPool", "%s",
            get                       ? err_name(get)
            : current == default_pool ? "the default pool"
            : current == created      ? "the destroyed pool"
                                      : "another pool");
    cudaDeviceSetMemPool(0, default_pool);
    (void)cudaGetLastError();

    observe_pool_create("cudaMemPoolCreate on the host", cudaMemAllocationTypePinned,
                        cudaMemLocationTypeHost, 0);
    observe_pool_create("cudaMemPoolCreate on host NUMA node 0", cudaMemAllocationTypePinned,
                        cudaMemLocationTypeHostNuma, 0);
    observe_pool_create("cudaMemPoolCreate on host NUMA node 9999", cudaMemAllocationTypePinned,
                        cudaMemLocationTypeHostNuma, 9999);
    cudaMemPool_t host_pool;
    err = create_host_pool(&host_pool, cudaMemLocationTypeHost, 0);
    if (err) {
        observe("cudaDeviceSetMemPool with a host pool", "cudaMemPoolCreate %s", err_name(err));
    } else {
        observe("cudaDeviceSetMemPool with a host pool", "%s",
                err_name(cudaDeviceSetMemPool(0, host_pool)));
        cudaDeviceSetMemPool(0, default_pool);
        cudaMemPoolDestroy(host_pool);
    }
    observe_pool_create("cudaMemPoolCreate on device 9999", cudaMemAllocationTypePinned,
                        cudaMemLocationTypeDevice, 9999);
    observe_pool_create("cudaMemPoolCreate of allocation type invalid",
                        cudaMemAllocationTypeInvalid, cudaMemLocationTypeDevice, 0);
    err = cudaMemPoolDestroy(default_pool);
    observe("cudaMemPoolDestroy of the default pool", "%s", err_name(err));

    cudaStream_t s;
    err = cudaStreamCreate(&s);
    if (err) return stop_cuda("cudaStreamCreate", err);
    destroy_with_live_block(s);
    cudaStreamDestroy(s);
}

static void observe_default_pool(const char *check)
{
    cudaMemPool_t pool;
    cudaError_t err = cudaDeviceGetDefaultMemPool(&pool, 0);
    if (err) return observe(check, "%s", err_name(err));
    observe(check, "reserved %s, used %s",
            bytes((long long)pool_attribute(pool, cudaMemPoolAttrReservedMemCurrent)).s,
            bytes((long long)pool_attribute(pool, cudaMemPoolAttrUsedMemCurrent)).s);
}

/* "reserved R, used U" of device 0's graph memory, and ", device free down D" against
 * `baseline` unless it is negative. */
static void observe_graph_memory(const char *check, long long baseline)
{
    uint64_t reserved = UINT64_MAX, used = UINT64_MAX;
    cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrReservedMemCurrent, &reserved);
    cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used);
    if (baseline < 0)
        observe(check, "reserved %s, used %s", bytes((long long)reserved).s,
                bytes((long long)used).s);
    else
        observe(check, "reserved %s, used %s, device free down %s", bytes((long long)reserved).s,
                bytes((long long)used).s, bytes(baseline - device_free()).s);
}

static void probe_graph_memory(void)
{
    cudaStream_t s;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    void *p;
    cudaError_t err = cudaStreamCreate(&s);
    if (err) return stop_cuda("cudaStreamCreate", err);
    long long baseline = device_free();
    err = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    if (!err) err = cudaMallocAsync(&p, MIB, s);
    if (!err) err = cudaFreeAsync(p, s);
    cudaError_t end = cudaStreamEndCapture(s, &graph);
    if (err || end) {
        cudaStreamDestroy(s);
        return stop_cuda("the capture of cudaMallocAsync and cudaFreeAsync", err ? err : end);
    }
    observe_default_pool("default pool after capturing cudaMallocAsync 1 MiB and cudaFreeAsync");
    observe_graph_memory("graph memory attributes after the capture, before a launch", baseline);

    err = cudaGraphInstantiate(&exec, graph, 0);
    if (!err) err = cudaGraphLaunch(exec, s);
    if (!err) err = cudaStreamSynchronize(s);
    if (err) {
        cudaGraphDestroy(graph);
        cudaStreamDestroy(s);
        return stop_cuda("cudaGraphInstantiate, cudaGraphLaunch", err);
    }
    observe_graph_memory("graph memory attributes after a launch of that graph", -1);

    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaDeviceSynchronize();
    observe_default_pool("default pool after the graph is destroyed and cudaDeviceSynchronize");
    observe_graph_memory("graph memory attributes after the graph is destroyed", baseline);
    err = cudaDeviceGraphMemTrim(0);
    if (err)
        observe("graph memory attributes after cudaDeviceGraphMemTrim", "%s", err_name(err));
    else
        observe_graph_memory("graph memory attributes after cudaDeviceGraphMemTrim", baseline);
    cudaStreamDestroy(s);
}

static void CUDART_CB sleep_200ms(void *unused)
{
    (void)unused;
    fs_test_sleep_ms(200);
}

static void probe_errors(void)
{
    observe("cudaGetErrorString of cudaErrorInvalidValue, MemoryAllocation, InvalidResourceHandle",
            "%s; %s; %s", cudaGetErrorString(cudaErrorInvalidValue),
            cudaGetErrorString(cudaErrorMemoryAllocation),
            cudaGetErrorString(cudaErrorInvalidResourceHandle));

    cudaStream_t s;
    cudaEvent_t ev;
    cudaError_t err = cudaStreamCreate(&s);
    if (!err) err = cudaEventCreate(&ev);
    if (err) return stop_cuda("cudaStreamCreate, cudaEventCreate", err);
    err = cudaLaunchHostFunc(s, sleep_200ms, NULL);
    if (!err) err = cudaEventRecord(ev, s);
    if (err) {
        observe("cudaEventQuery not ready, then cudaGetLastError", "%s", err_name(err));
    } else {
        cudaError_t query = cudaEventQuery(ev);
        cudaError_t last = cudaGetLastError();
        observe("cudaEventQuery not ready, then cudaGetLastError", "%s, then %s", err_name(query),
                err_name(last));
    }
    cudaStreamSynchronize(s);
    cudaEventDestroy(ev);
    cudaStreamDestroy(s);

    cudaMalloc(NULL, 1);
    int count;
    cudaGetDeviceCount(&count);
    observe("a failed call, a successful one, then cudaPeekAtLastError", "%s",
            err_name(cudaPeekAtLastError()));
}

static void *current_context(void *out)
{
    CUresult (*get_current)(CUcontext *) = driver_entry("cuCtxGetCurrent");
    CUcontext ctx = NULL;
    CUresult res = get_current ? get_current(&ctx) : CUDA_ERROR_NOT_FOUND;
    snprintf(out, 64, "%s", res ? cu_name(res) : ctx ? "a context" : "NULL");
    return NULL;
}

static void probe_driver_attributes(void)
{
    static const struct {
        CUdevice_attribute attr;
        const char *name;
    } attrs[] = {
        {CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, "multicast"},
        {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, "fabric handles"},
        {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED, "win32 handles"},
        {CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, "GPUDirect RDMA"},
        {CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, "64-bit stream mem ops"},
        {CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, "wait value NOR"},
        {CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
         "host pointer for registered mem"},
        {CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, "read-only host register"},
    };
    const char *check = "cuDeviceGetAttribute of driver-only attributes";
    CUresult (*get_attribute)(int *, CUdevice_attribute, CUdevice) =
        driver_entry("cuDeviceGetAttribute");
    if (!get_attribute) {
        observe("cuDeviceGetAttribute of GPUDirect RDMA with CUDA VMM, win32 KMT handles",
                "no driver entry point");
        return observe(check, "no driver entry point");
    }
    char text[400] = "";
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        int value = -1;
        CUresult res = get_attribute(&value, attrs[i].attr, 0);
        size_t used = strlen(text);
        if (res)
            snprintf(text + used, sizeof text - used, "%s%s %s", i ? ", " : "", attrs[i].name,
                     cu_name(res));
        else
            snprintf(text + used, sizeof text - used, "%s%s %d", i ? ", " : "", attrs[i].name,
                     value);
    }
    observe(check, "%s", text);

    int rdma_vmm = -1, kmt = -1;
    CUresult res =
        get_attribute(&rdma_vmm, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, 0);
    if (!res)
        res = get_attribute(&kmt, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED, 0);
    if (res)
        observe("cuDeviceGetAttribute of GPUDirect RDMA with CUDA VMM, win32 KMT handles", "%s",
                cu_name(res));
    else
        observe("cuDeviceGetAttribute of GPUDirect RDMA with CUDA VMM, win32 KMT handles", "%d, %d",
                rdma_vmm, kmt);
}

static void probe_driver(void)
{
    cudaFree(0); /* the runtime initialises the driver and the primary context */
    void *fn = &fn;
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSuccess;
    cudaError_t err = cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &fn, CUDART_VERSION,
                                                       cudaEnableDefault, &found);
    observe("cudaGetDriverEntryPointByVersion of an unknown name", "%s, %s, %s", err_name(err),
            fn ? "not NULL" : "NULL",
            found == cudaDriverEntryPointSymbolNotFound ? "cudaDriverEntryPointSymbolNotFound"
            : found == cudaDriverEntryPointSuccess      ? "cudaDriverEntryPointSuccess"
                                                   : "cudaDriverEntryPointVersionNotSufficent");

    CUresult (*init)(unsigned) = driver_entry("cuInit");
    observe("cuInit with flags 1", "%s", init ? cu_name(init(1)) : "no driver entry point");

    char context[64];
    pthread_t thread;
    if (pthread_create(&thread, NULL, current_context, context) != 0) {
        observe("cuCtxGetCurrent on a fresh thread", "no thread");
    } else {
        pthread_join(thread, NULL);
        observe("cuCtxGetCurrent on a fresh thread", "%s", context);
    }

    CUresult (*get_range)(CUdeviceptr *, size_t *, CUdeviceptr) =
        driver_entry("cuMemGetAddressRange");
    CUdeviceptr base;
    size_t size;
    observe("cuMemGetAddressRange of host memory", "%s",
            get_range ? cu_name(get_range(&base, &size, (CUdeviceptr)host_buffer))
                      : "no driver entry point");

    observe("cuPointerGetAttribute MEMORY_TYPE of host memory", "%s",
            pointer_memory_type_result(host_buffer));
    probe_driver_attributes();
}

static void probe_ipc(void)
{
    void *block, *pool_block, *pinned;
    cudaError_t err = cudaMalloc(&block, 64 * KIB);
    if (err) return stop_cuda("cudaMalloc 64 KiB", err);
    cudaIpcMemHandle_t handle, interior;
    err = cudaIpcGetMemHandle(&handle, block);
    observe("cudaIpcGetMemHandle of a cudaMalloc block", "%s", err_name(err));
    cudaError_t interior_err = cudaIpcGetMemHandle(&interior, (char *)block + 4 * KIB);
    if (err || interior_err)
        observe("cudaIpcGetMemHandle of a pointer 4 KiB into that block", "%s",
                err_name(interior_err));
    else
        observe("cudaIpcGetMemHandle of a pointer 4 KiB into that block", "%s",
                memcmp(&handle, &interior, sizeof handle) ? "another handle"
                                                          : "the block's handle");
    void *opened = NULL;
    err = err ? err : cudaIpcOpenMemHandle(&opened, handle, cudaIpcMemLazyEnablePeerAccess);
    observe("cudaIpcOpenMemHandle in the process that made it", "%s", err_name(err));
    if (!err) cudaIpcCloseMemHandle(opened);
    cudaFree(block);

    err = cudaMallocAsync(&pool_block, 64 * KIB, 0);
    if (!err) err = cudaStreamSynchronize(0);
    if (!err) {
        observe("cudaIpcGetMemHandle of a pool block", "%s",
                err_name(cudaIpcGetMemHandle(&handle, pool_block)));
        cudaFreeAsync(pool_block, 0);
        cudaStreamSynchronize(0);
    } else {
        observe("cudaIpcGetMemHandle of a pool block", "%s", err_name(err));
    }
    err = cudaMallocHost(&pinned, 64 * KIB);
    if (!err) {
        observe("cudaIpcGetMemHandle of pinned host memory", "%s",
                err_name(cudaIpcGetMemHandle(&handle, pinned)));
        cudaFreeHost(pinned);
    } else {
        observe("cudaIpcGetMemHandle of pinned host memory", "%s", err_name(err));
    }

    cudaEvent_t plain, shared, opened_event;
    cudaIpcEventHandle_t event_handle;
    err = cudaEventCreate(&plain);
    if (err) return stop_cuda("cudaEventCreate", err);
    observe("cudaIpcGetEventHandle of an event without cudaEventInterprocess", "%s",
            err_name(cudaIpcGetEventHandle(&event_handle, plain)));
    cudaEventDestroy(plain);
    err = cudaEventCreateWithFlags(&shared, cudaEventInterprocess | cudaEventDisableTiming);
    if (err) return stop_cuda("cudaEventCreateWithFlags interprocess", err);
    err = cudaIpcGetEventHandle(&event_handle, shared);
    if (!err) err = cudaIpcOpenEventHandle(&opened_event, event_handle);
    observe("cudaIpcOpenEventHandle in the process that made it", "%s", err_name(err));
    if (!err) cudaEventDestroy(opened_event);
    cudaEventDestroy(shared);
}

/* The driver's VMM entry points this probe uses. */
struct vmm {
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *,
                            CUmemAllocationGranularity_flags);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
};

static const CUmemAllocationProp device_memory = {
    .type = CU_MEM_ALLOCATION_TYPE_PINNED,
    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
};

/* Maps a new allocation of `size` at `at` (its handle released: the mapping holds it) and
 * grants this device read-write access. */
static CUresult vmm_map_new(const struct vmm *v, CUdeviceptr at, size_t size)
{
    CUmemGenericAllocationHandle handle;
    CUresult res = v->create(&handle, size, &device_memory, 0);
    if (res) return res;
    res = v->map(at, size, 0, handle, 0);
    v->release(handle);
    if (res) return res;
    CUmemAccessDesc access = {.location = device_memory.location,
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    return v->set_access(at, size, &access, 1);
}

static void observe_reserve_alignment(const struct vmm *v, const char *check, size_t size,
                                      size_t alignment, size_t expected, const char *expected_text)
{
    CUdeviceptr at;
    CUresult res = v->reserve(&at, size, alignment, 0, 0);
    if (res) return observe(check, "%s", cu_name(res));
    if (alignment_of((uintptr_t)at) >= expected)
        observe(check, "aligned to %s", expected_text);
    else
        observe(check, "aligned to %s only", bytes((long long)alignment_of((uintptr_t)at)).s);
    v->address_free(at, size);
}

static void probe_vmm(void)
{
    struct vmm v = {driver_entry("cuMemGetAllocationGranularity"),
                    driver_entry("cuMemAddressReserve"),
                    driver_entry("cuMemAddressFree"),
                    driver_entry("cuMemCreate"),
                    driver_entry("cuMemRelease"),
                    driver_entry("cuMemMap"),
                    driver_entry("cuMemUnmap"),
                    driver_entry("cuMemSetAccess")};
    if (!v.granularity || !v.reserve || !v.address_free || !v.create || !v.release || !v.map ||
        !v.unmap || !v.set_access)
        return stop("cudaGetDriverEntryPointByVersion of the VMM calls", "no entry point");
    cudaFree(0);

    size_t minimum = 0, recommended = 0;
    CUresult res = v.granularity(&minimum, &device_memory, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    observe("cuMemGetAllocationGranularity minimum, pinned device memory", "%s",
            res ? cu_name(res) : bytes((long long)minimum).s);
    res = v.granularity(&recommended, &device_memory, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    observe("cuMemGetAllocationGranularity recommended, pinned device memory", "%s",
            res ? cu_name(res) : bytes((long long)recommended).s);
    if (!minimum) return stop("cuMemGetAllocationGranularity", cu_name(res));
    size_t page = minimum;

    observe_reserve_alignment(&v, "cuMemAddressReserve 2 MiB, alignment 0", 2 * MIB, 0, page,
                              "the granularity");
    observe_reserve_alignment(&v, "cuMemAddressReserve 2 MiB, alignment 64 MiB", 2 * MIB, 64 * MIB,
                              64 * MIB, "64 MiB");

    /* A reservation of 4 pages: pages 0 and 1 mapped separately, page 2 and 3 as one. */
    CUdeviceptr base;
    res = v.reserve(&base, 4 * page, 0, 0, 0);
    if (res) return stop("cuMemAddressReserve", cu_name(res));
    res = vmm_map_new(&v, base, page);
    if (!res) res = vmm_map_new(&v, base + page, page);
    if (res) {
        v.address_free(base, 4 * page);
        return stop("cuMemCreate, cuMemMap, cuMemSetAccess", cu_name(res));
    }
    unsigned char *page_buffer = calloc(1, page);
    if (!page_buffer) abort();
    observe(
        "cudaMemcpy across two adjacent mappings", "%s",
        err_name(cudaMemcpy((void *)(base + page / 2), page_buffer, page, cudaMemcpyHostToDevice)));
    res = vmm_map_new(&v, base + 2 * page, 2 * page);
    if (res) {
        observe("cuMemUnmap of half a 4 MiB mapping", "cuMemMap %s", cu_name(res));
    } else {
        observe("cuMemUnmap of half a 4 MiB mapping", "%s",
                cu_name(v.unmap(base + 2 * page, page)));
        v.unmap(base + 2 * page, 2 * page);
    }
    observe("cuMemAddressFree of a reservation with a mapping", "%s",
            cu_name(v.address_free(base, 4 * page)));
    /* Last: where the sim answers with an error, a GPU may fault. */
    observe("cudaMemcpy reaching an unmapped part of a reservation", "%s",
            err_name(cudaMemcpy((void *)(base + page + page / 2), page_buffer, page,
                                cudaMemcpyHostToDevice)));
    free(page_buffer);
    v.unmap(base, 2 * page);
    v.address_free(base, 4 * page);

    /* The device says it supports fabric handles (probe_driver); without an IMEX channel, can
     * one have them? */
    CUmemAllocationProp fabric = device_memory;
    fabric.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
    CUmemGenericAllocationHandle handle;
    res = v.create(&handle, page, &fabric, 0);
    observe("cuMemCreate 2 MiB asking for fabric handles", "%s", cu_name(res));
    if (!res) v.release(handle);
}

static void probe_reset(void)
{
    enum { SIZE = 4 * KIB };
    unsigned char pattern[SIZE], back[SIZE];
    for (int i = 0; i < SIZE; i++)
        pattern[i] = (unsigned char)(i * 7 + 1);
    void *pool_block, *plain;
    cudaError_t err = cudaMallocAsync(&pool_block, SIZE, 0);
    if (!err) err = cudaMalloc(&plain, SIZE);
    if (!err) err = cudaMemcpy(pool_block, pattern, SIZE, cudaMemcpyHostToDevice);
    if (!err) err = cudaMemcpy(plain, pattern, SIZE, cudaMemcpyHostToDevice);
    if (err) return stop_cuda("cudaMallocAsync, cudaMalloc, cudaMemcpy of 4 KiB", err);

    observe("cudaDeviceReset", "%s", err_name(cudaDeviceReset()));
    observe_default_pool("default pool after cudaDeviceReset");
    /* First what cannot crash. Not copied from: the sim takes a pointer it no longer knows for host
     * memory (docs/sim.md, "copies") and would fault reading it. */
    observe("cudaMalloc block after cudaDeviceReset, cuPointerGetAttribute MEMORY_TYPE", "%s",
            pointer_memory_type_result(plain));
    observe("cudaMalloc block after cudaDeviceReset, cudaFree", "%s", err_name(cudaFree(plain)));
    memset(back, 0, sizeof back);
    err = cudaMemcpy(back, pool_block, SIZE, cudaMemcpyDeviceToHost);
    if (err)
        observe("cudaMallocAsync block after cudaDeviceReset, copied back", "%s", err_name(err));
    else
        observe("cudaMallocAsync block after cudaDeviceReset, copied back", "cudaSuccess, %s",
                memcmp(back, pattern, SIZE) ? "data lost" : "data kept");
    err = cudaFreeAsync(pool_block, 0);
    if (!err) err = cudaStreamSynchronize(0);
    observe("cudaMallocAsync block after cudaDeviceReset, cudaFreeAsync", "%s", err_name(err));
}

struct probe {
    enum probe_id id;
    const char *name;
    void (*run)(void);
};

/* In the order they run; the ones most likely to break a GPU's context last. */
static const struct probe probes[] = {
    {PROBE_CONTEXT_INIT, "context-init", probe_context_init},
    {PROBE_DEVICE, "device", probe_device},
    {PROBE_GRANULE, "granule", probe_granule},
    {PROBE_COPY_BOUNDS, "copy-bounds", probe_copy_bounds},
    {PROBE_ZERO_SIZE, "zero-size", probe_zero_size},
    {PROBE_DEFAULT_POOL, "default-pool", probe_default_pool},
    {PROBE_CREATED_POOL, "created-pool", probe_created_pool},
    {PROBE_POOL_CHUNKS, "pool-chunks", probe_pool_chunks},
    {PROBE_HOST_POOL, "host-pool", probe_host_pool},
    {PROBE_HIGH_MARKS, "high-marks", probe_high_marks},
    {PROBE_POOL_CUDAFREE, "pool-cudafree", probe_pool_cudafree},
    {PROBE_POOL_HANDLES, "pool-handles", probe_pool_handles},
    {PROBE_GRAPH_MEMORY, "graph-memory", probe_graph_memory},
    {PROBE_ERRORS, "errors", probe_errors},
    {PROBE_DRIVER, "driver", probe_driver},
    {PROBE_IPC, "ipc", probe_ipc},
    {PROBE_COPY_KIND, "copy-kind", probe_copy_kind},
    {PROBE_VMM, "vmm", probe_vmm},
    {PROBE_RESET, "reset", probe_reset},
};

#define NPROBES (sizeof probes / sizeof probes[0])

/* ---- In the probe's process ---- */

/* Runs one probe; every check of it prints a line. Exit status: 0 all same, 2 some differ,
 * 1 some not reached. */
static int run_probe(const struct probe *p)
{
    p->run();
    (void)cudaGetLastError();
    int unreached = 0;
    for (size_t i = 0; i < NDOCUMENTED; i++) {
        if (documented[i].probe != p->id || answered[i]) continue;
        char observed[256];
        if (stopped_step)
            snprintf(observed, sizeof observed, "not reached: %s gave %s", stopped_step,
                     stopped_error);
        else
            snprintf(observed, sizeof observed, "not reached: the probe skipped it");
        print_line(i, observed);
        unreached = 1;
    }
    return unreached ? 1 : any_differs ? 2 : 0;
}

/* ---- In the parent ---- */

extern char **environ;

/* Runs probe p in a process of its own and echoes its lines. Returns 1 when a check got no
 * line (the probe crashed), else the probe's exit status. */
static int spawn_probe(const struct probe *p)
{
    int out[2];
    if (pipe(out) != 0) return 1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addclose(&actions, out[1]);
    char *args[] = {"fidelity", "--probe", (char *)p->name, NULL};
    pid_t pid;
    int spawned = posix_spawn(&pid, "/proc/self/exe", &actions, NULL, args, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (spawned != 0) {
        close(out[0]);
        fprintf(stderr, "fidelity: cannot start probe %s: %s\n", p->name, strerror(spawned));
        return 1;
    }

    size_t len = 0, cap = 4096;
    char *text = malloc(cap + 1);
    if (!text) abort();
    ssize_t got;
    while ((got = read(out[0], text + len, cap - len)) > 0) {
        len += (size_t)got;
        if (len == cap && !(text = realloc(text, (cap *= 2) + 1))) abort();
    }
    text[len] = '\0';
    close(out[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
    fputs(text, stdout);

    char how[64];
    if (WIFSIGNALED(status))
        snprintf(how, sizeof how, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
    int missing = 0;
    for (size_t i = 0; i < NDOCUMENTED; i++) {
        if (documented[i].probe != p->id) continue;
        char line_start[300];
        snprintf(line_start, sizeof line_start, "fidelity: %s: ", documented[i].check);
        const char *at = strstr(text, line_start);
        if (at && (at == text || at[-1] == '\n')) continue;
        char observed[160];
        snprintf(observed, sizeof observed, "no answer: probe %s %s", p->name, how);
        print_line(i, observed);
        missing = 1;
    }
    free(text);
    fflush(stdout);
    if (missing || !WIFEXITED(status)) return 1;
    return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
    int strict = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--strict") == 0) {
            strict = 1;
        } else if (strcmp(argv[i], "--probe") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--strict] [--probe NAME]\n", argv[0]);
            return 2;
        }
    }
    if (only) {
        for (size_t i = 0; i < NPROBES; i++)
            if (strcmp(probes[i].name, only) == 0) return run_probe(&probes[i]);
        fprintf(stderr, "fidelity: no probe named %s\n", only);
        return 2;
    }

    fs_test_require_device();
    int not_run = 0, differs = 0;
    for (size_t i = 0; i < NPROBES; i++) {
        int status = spawn_probe(&probes[i]);
        if (status == 2)
            differs = 1;
        else if (status != 0)
            not_run = 1;
    }
    printf("fidelity done, %zu checks in %zu probes: %s\n", NDOCUMENTED, NPROBES,
           not_run   ? "a probe crashed or left checks without an answer"
           : differs ? "some DIFFER from docs/sim.md"
                     : "all as docs/sim.md documents");
    return not_run || (strict && differs) ? 1 : 0;
}
