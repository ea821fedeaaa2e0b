/* context.c - driver initialisation, devices and contexts.
 *
 * Every device has its primary context, and cuCtxCreate makes others: a
 * created context is a handle of its own on the same device model (memory,
 * streams and events are the device's, whichever context made them), so
 * that a program, and the shim, can tell it from the primary one. The
 * thread's current device is kept by the device model (../core/devices.c)
 * together with the runtime's current device, so the two always agree, as
 * on a GPU: cudaSetDevice(d) makes d's primary context current,
 * cuCtxSetCurrent(ctx of d) makes cudaGetDevice answer d; which context of
 * that device is current, and the context stack below it, are the
 * driver's alone (per thread, here).
 *
 * A primary context is active (cuDevicePrimaryCtxGetState) while the driver
 * holds a retain on it or once the runtime has initialised it, until a
 * reset; its flags are the device flags that cudaSetDeviceFlags sets, one
 * value seen from both APIs. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_internal.h"

/* The opaque CUcontext of cuda.h: a primary one per device, and the
 * created ones. */
struct CUctx_st {
    int retains; /* cuDevicePrimaryCtxRetain minus Release; a created one: 1 while it lives
                    (under mu) */
    int device;  /* a created context's device; -1 once destroyed */
    unsigned long long id; /* cuCtxGetId: a created one's, set at creation (under mu) */
};

#define MAX_DEVICES 64 /* FSDPSHIM_SIM_DEVICES is at most 64 */

static struct CUctx_st primaries[MAX_DEVICES];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized; /* cuInit succeeded (atomic) */

/* The contexts pushed below the current one (NULL: none). A fixed depth:
 * deeper nesting is refused with CUDA_ERROR_OUT_OF_MEMORY. */
#define STACK_DEPTH 64
static __thread CUcontext stack[STACK_DEPTH];
static __thread int depth;
/* The created context current on this thread, while the device model's
 * current device is still its device; otherwise that device's primary
 * context is current. */
static __thread CUcontext created_current;

/* Created contexts, so that a handle can be checked (under mu). A destroyed
 * one keeps its slot, marked with device -1, until a new context reuses it:
 * another thread may still have it current and read it. */
#define MAX_CREATED 64
static struct CUctx_st created[MAX_CREATED];

CUresult sim_cu_ready(void)
{
    if (__atomic_load_n(&initialized, __ATOMIC_ACQUIRE) || sim_initialized()) return CUDA_SUCCESS;
    return CUDA_ERROR_NOT_INITIALIZED;
}

CUcontext sim_primary_ctx(int device)
{
    return sim_dev(device) ? &primaries[device] : NULL;
}

static bool is_created(CUcontext ctx)
{
    uintptr_t p = (uintptr_t)ctx, base = (uintptr_t)created;
    return p >= base && p < base + sizeof created && (p - base) % sizeof created[0] == 0;
}

int sim_ctx_device(CUcontext ctx)
{
    uintptr_t p = (uintptr_t)ctx, base = (uintptr_t)primaries;
    if (is_created(ctx)) return __atomic_load_n(&ctx->device, __ATOMIC_ACQUIRE);
    if (p < base || (p - base) % sizeof primaries[0]) return -1;
    size_t d = (p - base) / sizeof primaries[0];
    return d < MAX_DEVICES && sim_dev((int)d) ? (int)d : -1;
}

/* The thread's current context, NULL for none. */
static CUcontext current_ctx(void)
{
    int d = sim_ctx_current();
    if (created_current && __atomic_load_n(&created_current->device, __ATOMIC_ACQUIRE) == d)
        return created_current;
    return d < 0 ? NULL : sim_primary_ctx(d);
}

/* Makes ctx (valid, or NULL) the thread's current context. */
static void make_current(CUcontext ctx)
{
    int d = ctx ? sim_ctx_device(ctx) : -1;
    created_current = ctx && ctx != sim_primary_ctx(d) ? ctx : NULL;
    sim_ctx_set_current(d);
}

CUresult sim_cu_current_device(struct sim_device **out)
{
    int d = sim_ctx_current();
    if (d < 0) return CUDA_ERROR_INVALID_CONTEXT;
    *out = sim_dev(d);
    return CUDA_SUCCESS;
}

CUresult sim_cu_ready_in_context(struct sim_device **out)
{
    CUresult res = sim_cu_ready();
    return res ? res : sim_cu_current_device(out);
}

/* The legacy and the per-thread default stream (0 is the legacy one). */
static bool is_default_stream(CUstream s)
{
    return !s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

CUresult sim_cu_stream_context(CUstream s)
{
    struct sim_device *dev;
    return is_default_stream(s) ? sim_cu_current_device(&dev) : CUDA_SUCCESS;
}

/* CUDA_INJECTION64_PATH, as the driver does it at its first successful
 * cuInit: the library is loaded and its InitializeInjection called, once
 * per process, before cuInit returns (a tool such as CUPTI's injection
 * samples, or libfsdpshim.so, subscribes there). A library that cannot be
 * loaded or lacks the function is reported on stderr and initialisation
 * goes on. */
static void load_injection(void)
{
    const char *path = getenv("CUDA_INJECTION64_PATH");
    if (!path || !*path) return;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    int (*init)(void) = lib ? (int (*)(void))dlsym(lib, "InitializeInjection") : NULL;
    if (!init) {
        fprintf(stderr, "fsdpshim-sim: CUDA_INJECTION64_PATH=%s: %s\n", path,
                lib ? "no InitializeInjection" : dlerror());
        return;
    }
    init();
}

SIM_API CUresult cuInit(unsigned int flags)
{
    static pthread_once_t injection_once = PTHREAD_ONCE_INIT;
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    sim_init();
    if (sim_cfg.ndevices == 0) return CUDA_ERROR_NO_DEVICE;
    __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
    pthread_once(&injection_once, load_injection);
    return CUDA_SUCCESS;
}

/* Allowed before cuInit, as documented. */
SIM_API CUresult cuDriverGetVersion(int *version)
{
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    *version = CUDA_VERSION;
    return CUDA_SUCCESS;
}

/* The checks every call taking a CUdevice makes, in the driver's order. */
/* A device call's checks, in the driver's order: initialised, a valid
 * ordinal (its device in *out, when out is not NULL), then the call's own
 * arguments (args_ok), else CUDA_ERROR_INVALID_VALUE. */
static CUresult device_of(CUdevice dev, struct sim_device **out, int args_ok)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    struct sim_device *d = sim_dev(dev);
    if (!d) return CUDA_ERROR_INVALID_DEVICE;
    if (!args_ok) return CUDA_ERROR_INVALID_VALUE;
    if (out) *out = d;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if (!sim_dev(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetCount(int *count)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = sim_cfg.ndevices;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult res = device_of(dev, NULL, name && len > 0);
    if (res) return res;
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) return CUDA_ERROR_INVALID_DEVICE;
    strncpy(name, p.name, (size_t)len - 1);
    name[len - 1] = '\0';
    return CUDA_SUCCESS;
}

/* The same UUID that cudaGetDeviceProperties reports (no MIG instances, so
 * _v2's answer is the same as the original's). */
SIM_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult res = device_of(dev, NULL, uuid != NULL);
    if (res) return res;
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) return CUDA_ERROR_INVALID_DEVICE;
    memcpy(uuid->bytes, p.uuid.bytes, sizeof uuid->bytes);
    return CUDA_SUCCESS;
}
SIM_CU_ALIAS(cuDeviceGetUuid, cuDeviceGetUuid_v2);

SIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult res = device_of(dev, NULL, bytes != NULL);
    if (res) return res;
    *bytes = sim_cfg.capacity;
    return CUDA_SUCCESS;
}

/* Driver-only attributes: what an H100 SXM and an H200 (driver 580) in a
 * node without a multicast-capable NVSwitch fabric or IMEX answer
 * (GPUDirect RDMA with CUDA VMM: the H200's 1, run 7); dma-buf export,
 * decompression and remote write flushes are features the sim's driver
 * does not offer (absent.c, memop.c), said here so that callers that check
 * first take their fallback. Fabric handles are supported by the device
 * (1) even so: whether a fabric is there is NVML's answer (sim/nvml/,
 * NVML_GPU_FABRIC_STATE_NOT_SUPPORTED), and a cuMemCreate asking for
 * fabric handles is refused, the process having no IMEX channel (vmm.c).
 * cuMemCreate takes (and ignores) the GPUDirect RDMA flag. */
static int driver_attribute(CUdevice_attribute attr, int *value)
{
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK:
    case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES:
        *value = 0;
        return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR:
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
        *value = 1;
        return 1;
    default:
        return 0;
    }
}

SIM_API CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult res = device_of(dev, NULL, value != NULL);
    if (res) return res;
    if (driver_attribute(attrib, value)) return CUDA_SUCCESS;
    return sim_device_attribute((int)attrib, dev, value) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult res = device_of(dev, NULL, pctx != NULL);
    if (res) return res;
    pthread_mutex_lock(&mu);
    primaries[dev].retains++;
    pthread_mutex_unlock(&mu);
    *pctx = &primaries[dev];
    return CUDA_SUCCESS;
}

SIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult res = device_of(dev, NULL, 1);
    if (res) return res;
    pthread_mutex_lock(&mu);
    if (primaries[dev].retains == 0)
        res = CUDA_ERROR_INVALID_CONTEXT; /* nothing of ours to release */
    else
        primaries[dev].retains--;
    pthread_mutex_unlock(&mu);
    return res;
}
SIM_CU_ALIAS(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2);

SIM_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    struct sim_device *d;
    CUresult res = device_of(dev, &d, flags && active);
    if (res) return res;
    pthread_mutex_lock(&mu);
    *active = primaries[dev].retains > 0 || __atomic_load_n(&d->ctx_active, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&mu);
    pthread_mutex_lock(&d->mu);
    *flags = d->flags;
    pthread_mutex_unlock(&d->mu);
    return CUDA_SUCCESS;
}

/* One scheduling policy (spin, yield, blocking sync or automatic) plus
 * CU_CTX_MAP_HOST, CU_CTX_LMEM_RESIZE_TO_MAX and CU_CTX_SYNC_MEMOPS: the
 * values cudaSetDeviceFlags takes, stored where it stores them. */
SIM_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    struct sim_device *d;
    CUresult res = device_of(dev, &d, 1);
    if (res) return res;
    unsigned sched = flags & CU_CTX_SCHED_MASK;
    unsigned known =
        CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX | CU_CTX_SYNC_MEMOPS;
    if ((flags & ~known) || (sched & (sched - 1))) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&d->mu);
    d->flags = flags;
    pthread_mutex_unlock(&d->mu);
    return CUDA_SUCCESS;
}
SIM_CU_ALIAS(cuDevicePrimaryCtxSetFlags, cuDevicePrimaryCtxSetFlags_v2);

/* What cudaDeviceReset does to the device: memory, streams and events are
 * gone and the context is inactive whatever its retain count was. */
SIM_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    struct sim_device *d;
    CUresult res = device_of(dev, &d, 1);
    if (res) return res;
    sim_device_reset(d);
    pthread_mutex_lock(&mu);
    primaries[dev].retains = 0;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}
SIM_CU_ALIAS(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2);

SIM_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = current_ctx();
    return CUDA_SUCCESS;
}

/* Replaces the current context; NULL pops it (a no-op with none). */
SIM_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!ctx) {
        if (current_ctx()) make_current(depth ? stack[--depth] : NULL);
        return CUDA_SUCCESS;
    }
    if (sim_ctx_device(ctx) < 0) return CUDA_ERROR_INVALID_CONTEXT;
    make_current(ctx);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (sim_ctx_device(ctx) < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (depth == STACK_DEPTH) return CUDA_ERROR_OUT_OF_MEMORY;
    stack[depth++] = current_ctx();
    make_current(ctx);
    return CUDA_SUCCESS;
}
SIM_CU_ALIAS(cuCtxPushCurrent, cuCtxPushCurrent_v2);

SIM_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    CUcontext cur = current_ctx();
    if (!cur) return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx) *pctx = cur;
    make_current(depth ? stack[--depth] : NULL);
    return CUDA_SUCCESS;
}
SIM_CU_ALIAS(cuCtxPopCurrent, cuCtxPopCurrent_v2);

/* A new context of dev, pushed as the current one; the flags are checked
 * as cuDevicePrimaryCtxSetFlags checks them and otherwise ignored. */
static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    struct sim_device *d;
    CUresult res = device_of(dev, &d, 1);
    CUcontext ctx = NULL;

    if (res) return res;
    if (!pctx || (flags & ~(CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX |
                            CU_CTX_SYNC_MEMOPS)))
        return CUDA_ERROR_INVALID_VALUE;
    if (depth == STACK_DEPTH) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAX_CREATED && !ctx; i++)
        if (!created[i].retains) ctx = &created[i];
    if (ctx) {
        static unsigned long long next_id = MAX_DEVICES + 1; /* after the primaries' */
        ctx->retains = 1;                                    /* the slot is taken */
        ctx->id = next_id++;
        __atomic_store_n(&ctx->device, dev, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&mu);
    if (!ctx) return CUDA_ERROR_OUT_OF_MEMORY;
    stack[depth++] = current_ctx();
    make_current(ctx);
    *pctx = ctx;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev);
}

/* No execution affinity or CIG parameters: the sim has no partitions. */
SIM_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                                CUdevice dev)
{
    if (params) return CUDA_ERROR_NOT_SUPPORTED;
    return ctx_create(pctx, flags, dev);
}

/* The CUDA 11.4 ABI: an SM count affinity needs MPS, which the sim's
 * devices, like a GPU without it, do not offer. */
SIM_API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int nparams,
                                unsigned int flags, CUdevice dev)
{
    if (nparams < 0 || (nparams && !params)) return CUDA_ERROR_INVALID_VALUE;
    if (nparams) return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
    return ctx_create(pctx, flags, dev);
}

/* Destroys a created context; where it is the calling thread's current
 * one, it is popped, as cuCtxDestroy documents. Its device's memory,
 * streams and events stay the device's. */
SIM_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult res = sim_cu_ready();
    bool found = false;

    if (res) return res;
    pthread_mutex_lock(&mu);
    if (is_created(ctx) && ctx->retains && ctx->device >= 0) {
        __atomic_store_n(&ctx->device, -1, __ATOMIC_RELEASE);
        ctx->retains = 0;
        found = true;
    }
    pthread_mutex_unlock(&mu);
    if (!found) return CUDA_ERROR_INVALID_CONTEXT;
    if (created_current == ctx) make_current(depth ? stack[--depth] : NULL);
    for (int i = 0; i < depth; i++)
        if (stack[i] == ctx) stack[i] = NULL;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetDevice(CUdevice *device)
{
    CUresult res = sim_cu_ready();
    struct sim_device *d;
    if (res) return res;
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if ((res = sim_cu_current_device(&d))) return res;
    *device = d->ordinal;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetFlags(unsigned int *flags)
{
    CUresult res = sim_cu_ready();
    struct sim_device *d;
    if (res) return res;
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    if ((res = sim_cu_current_device(&d))) return res;
    pthread_mutex_lock(&d->mu);
    *flags = d->flags;
    pthread_mutex_unlock(&d->mu);
    return CUDA_SUCCESS;
}

/* Waits for all work of the current context's device. */
SIM_API CUresult cuCtxSynchronize(void)
{
    struct sim_device *d;
    CUresult res = sim_cu_ready_in_context(&d);
    if (res) return res;
    sim_device_sync(d);
    return CUDA_SUCCESS;
}

/* The device of ctx, the current context's for NULL (the CUDA 13 ABIs that
 * name a context). */
static CUresult device_of_ctx(CUcontext ctx, struct sim_device **out)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!ctx) return sim_cu_current_device(out);
    int d = sim_ctx_device(ctx);
    if (d < 0) return CUDA_ERROR_INVALID_CONTEXT;
    *out = sim_dev(d);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    struct sim_device *d;
    CUresult res = device_of_ctx(ctx, &d);
    if (res) return res;
    sim_device_sync(d);
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    struct sim_device *d;
    CUresult res = device_of_ctx(ctx, &d);
    if (res) return res;
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    *device = d->ordinal;
    return CUDA_SUCCESS;
}

/* Primary contexts are numbered 1 to the device count, created ones after
 * them, never again the same: unique in the process, as documented. */
SIM_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!id) return CUDA_ERROR_INVALID_VALUE;
    if (!ctx && !(ctx = current_ctx())) return CUDA_ERROR_INVALID_CONTEXT;
    int d = sim_ctx_device(ctx);
    if (d < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (!is_created(ctx)) {
        *id = (unsigned long long)d + 1;
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&mu);
    *id = ctx->id;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

/* Every context the sim makes is made with the CUDA 3.2 ABI
 * (cuCtxCreate_v2 and later, and the primary contexts), whose version the
 * call documents as 3020. */
SIM_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    CUresult res = sim_cu_ready();
    if (res) return res;
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    if (!ctx && !current_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx && sim_ctx_device(ctx) < 0) return CUDA_ERROR_INVALID_CONTEXT;
    *version = 3020;
    return CUDA_SUCCESS;
}

/* The current context's flags: its device's, as cuDevicePrimaryCtxSetFlags
 * sets them (one value seen from both APIs and every context of the
 * device). */
SIM_API CUresult cuCtxSetFlags(unsigned int flags)
{
    struct sim_device *d;
    CUresult res = sim_cu_ready_in_context(&d);
    return res ? res : cuDevicePrimaryCtxSetFlags_v2(d->ordinal, flags);
}

SIM_API CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
    struct sim_device *d;
    CUresult res = sim_cu_ready_in_context(&d);
    return res ? res : SIM_RT(sim_rt_cudaDeviceGetStreamPriorityRange(least, greatest));
}

/* The sim has no L2 cache to reset. */
SIM_API CUresult cuCtxResetPersistingL2Cache(void)
{
    struct sim_device *d;
    return sim_cu_ready_in_context(&d);
}

/* Without MPS, a context may use every SM of its device. */
SIM_API CUresult cuCtxGetExecAffinity(CUexecAffinityParam *param, CUexecAffinityType type)
{
    struct sim_device *d;
    CUresult res = sim_cu_ready_in_context(&d);
    if (res) return res;
    if (!param) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_EXEC_AFFINITY_TYPE_SM_COUNT) return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
    int sms;
    if (sim_device_attribute(cudaDevAttrMultiProcessorCount, d->ordinal, &sms))
        return CUDA_ERROR_INVALID_CONTEXT;
    param->type = type;
    param->param.smCount.val = (unsigned)sms;
    return CUDA_SUCCESS;
}

/* Peer access from the current context's device to the peer context's
 * (../cudart/peer.c keeps it per pair of devices). */
SIM_API CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
    struct sim_device *d;
    CUresult res = sim_cu_ready_in_context(&d);
    if (res) return res;
    int p = sim_ctx_device(peer);
    if (p < 0) return CUDA_ERROR_INVALID_CONTEXT;
    return SIM_RT(sim_rt_cudaDeviceEnablePeerAccess(p, flags));
}

SIM_API CUresult cuCtxDisablePeerAccess(CUcontext peer)
{
    struct sim_device *d;
    CUresult res = sim_cu_ready_in_context(&d);
    if (res) return res;
    int p = sim_ctx_device(peer);
    if (p < 0) return CUDA_ERROR_INVALID_CONTEXT;
    return SIM_RT(sim_rt_cudaDeviceDisablePeerAccess(p));
}

/* ---- a context's settings: per device here, as the runtime keeps them
 * (a created context shares its device's) ---- */

struct ctx_settings {
    CUfunc_cache cache;
    size_t limits[CU_LIMIT_MAX];
};

/* Until set: no cache preference, and the defaults cuda.h and the CUDA
 * programming guide give (a 1 KiB stack per thread, a 1 MiB printf FIFO,
 * an 8 MiB device heap, 2048 pending device-runtime launches), no
 * persisting L2 lines, and a 64-byte L2 fetch granularity (a hint; not
 * read from a GPU). */
static struct ctx_settings settings[MAX_DEVICES];
static bool settings_set[MAX_DEVICES];

static struct ctx_settings *settings_of(int device) /* under mu */
{
    if (!settings_set[device]) {
        settings[device] = (struct ctx_settings){CU_FUNC_CACHE_PREFER_NONE, {0}};
        settings[device].limits[CU_LIMIT_STACK_SIZE] = 1024;
        settings[device].limits[CU_LIMIT_PRINTF_FIFO_SIZE] = (size_t)1 << 20;
        settings[device].limits[CU_LIMIT_MALLOC_HEAP_SIZE] = (size_t)8 << 20;
        settings[device].limits[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
        settings[device].limits[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64;
        settings_set[device] = true;
    }
    return &settings[device];
}

SIM_API CUresult cuCtxGetCacheConfig(CUfunc_cache *config)
{
    struct sim_device *d;
    CUresult res = sim_cu_ready_in_context(&d);
    if (res) return res;
    if (!config) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    *config = settings_of(d->ordinal)->cache;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

/* A preference, kept and answered; the sim has no L1 to split. */
SIM_API CUresult cuCtxSetCacheConfig(CUfunc_cache config)
{
    struct sim_device *d;
    CUresult res = sim_cu_ready_in_context(&d);
    if (res) return res;
    if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    settings_of(d->ordinal)->cache = config;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

/* Deprecated; on a device without configurable banks the get answers the
 * hardware's fixed size and the set does nothing (cuda.h). The sim's
 * device, like every one since compute capability 5.0, has 4-byte banks. */
SIM_API CUresult cuCtxGetSharedMemConfig(CUsharedconfig *config)
{
    struct sim_device *d;
    CUresult res = sim_cu_ready_in_context(&d);
    if (res) return res;
    if (!config) return CUDA_ERROR_INVALID_VALUE;
    *config = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
    return CUDA_SUCCESS;
}

SIM_API CUresult cuCtxSetSharedMemConfig(CUsharedconfig config)
{
    struct sim_device *d;
    CUresult res = sim_cu_ready_in_context(&d);
    if (res) return res;
    return (unsigned)config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE ? CUDA_ERROR_INVALID_VALUE
                                                                        : CUDA_SUCCESS;
}

/* The limits a context of compute capability 9.0 has: the device runtime's
 * sync depth is only for older devices, and the shared memory limits only
 * for CIG contexts, which the sim never makes (CU_LIMIT_CIG_ENABLED: 0). */
static CUresult limit_known(CUlimit limit)
{
    switch (limit) {
    case CU_LIMIT_STACK_SIZE:
    case CU_LIMIT_PRINTF_FIFO_SIZE:
    case CU_LIMIT_MALLOC_HEAP_SIZE:
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
    case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
    case CU_LIMIT_CIG_ENABLED:
        return CUDA_SUCCESS;
    case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH:
    case CU_LIMIT_SHMEM_SIZE:
    case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED:
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

SIM_API CUresult cuCtxGetLimit(size_t *value, CUlimit limit)
{
    struct sim_device *d;
    CUresult res = sim_cu_ready_in_context(&d);
    if (res) return res;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    if ((res = limit_known(limit))) return res;
    pthread_mutex_lock(&mu);
    *value = settings_of(d->ordinal)->limits[limit];
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

/* The two L2 limits are hints, clamped as documented: the fetch granularity
 * to 128 bytes, the persisting lines to the device's maximum. */
SIM_API CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    struct sim_device *d;
    CUresult res = sim_cu_ready_in_context(&d);
    if (res) return res;
    if ((res = limit_known(limit))) return res;
    if (limit == CU_LIMIT_CIG_ENABLED) return CUDA_ERROR_INVALID_VALUE; /* query only */
    int max_persisting = 0;
    if (limit == CU_LIMIT_PERSISTING_L2_CACHE_SIZE &&
        !sim_device_attribute(cudaDevAttrMaxPersistingL2CacheSize, d->ordinal, &max_persisting) &&
        value > (size_t)max_persisting)
        value = (size_t)max_persisting;
    if (limit == CU_LIMIT_MAX_L2_FETCH_GRANULARITY && value > 128) value = 128;
    pthread_mutex_lock(&mu);
    settings_of(d->ordinal)->limits[limit] = value;
    pthread_mutex_unlock(&mu);
    return CUDA_SUCCESS;
}

/* A stream's context: its device's primary context; the default streams'
 * is the current one. */
SIM_API CUresult cuStreamGetCtx(CUstream stream, CUcontext *pctx)
{
    CUresult res = sim_cu_ready();
    struct sim_device *d;
    if (res) return res;
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (is_default_stream(stream)) {
        if ((res = sim_cu_current_device(&d))) return res;
        *pctx = sim_primary_ctx(d->ordinal);
        return CUDA_SUCCESS;
    }
    int device = sim_stream_device((cudaStream_t)stream);
    if (device < 0) return CUDA_ERROR_INVALID_HANDLE;
    *pctx = sim_primary_ctx(device);
    return CUDA_SUCCESS;
}

/* The same, and no green context: the sim makes none. */
SIM_API CUresult cuStreamGetCtx_v2(CUstream stream, CUcontext *pctx, CUgreenCtx *pgreen)
{
    if (!pgreen) return CUDA_ERROR_INVALID_VALUE;
    CUresult res = cuStreamGetCtx(stream, pctx);
    if (res == CUDA_SUCCESS) *pgreen = NULL;
    return res;
}
/* Stream 0 names the current context's device either way, so the _ptsz
 * variants are the same functions. */
SIM_CU_ALIAS(cuStreamGetCtx_ptsz, cuStreamGetCtx);
SIM_CU_ALIAS(cuStreamGetCtx_v2_ptsz, cuStreamGetCtx_v2);
