/* kernel_launch.c - kernel launches: the <<<>>> call configuration (a stack per
 * thread), cudaLaunchKernel, cudaLaunchKernelExC with its launch
 * attributes, cudaLaunchCooperativeKernel, and CUDA 13's
 * __cudaGetKernel/__cudaLaunchKernel that nvcc's generated stubs call.
 *
 * The sim has no device code: a launch is checked as the runtime checks it
 * (the kernel must be registered, the configuration must fit the device
 * and the kernel's attributes, the stream must be valid), loads the
 * kernel's module on the stream's device on first use, and is then one op
 * on its stream that computes nothing, ordered with copies, events and
 * other work exactly as a kernel is on a GPU. It never blocks the caller. */
#include "sim.h"

struct launch {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    int per_thread; /* stream 0 is the per-thread stream (_ptsz entry points) */
    int cooperative;
    dim3 cluster; /* x == 0: no cluster given */
};

/* Device limits of the sim's part (sim/core/props.c): maxThreadsDim, maxGridSize. */
static cudaError_t check_dims(dim3 grid, dim3 block)
{
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z)
        return cudaErrorInvalidConfiguration;
    if (block.x > 1024 || block.y > 1024 || block.z > 64 ||
        (unsigned long long)block.x * block.y * block.z > 1024)
        return cudaErrorInvalidConfiguration;
    if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
        return cudaErrorInvalidConfiguration;
    return cudaSuccess;
}

/* The device code the sim does not have: a launch is its place in the stream. */
static void kernel_body(void *arg)
{
    (void)arg;
}

/* Clusters, from the launch or the kernel's required cluster dimensions
 * (both given: they must agree; the kernel's: all three set or none): each
 * dimension divides the grid's, and a cluster holds at most 8 blocks (the
 * portable size) or 16 where the kernel allows non-portable sizes, as on an
 * H100. */
static cudaError_t check_cluster(struct sim_kernel *k, int device, const struct launch *l)
{
    dim3 c = l->cluster, req = sim_kernel_required_cluster(k, device);
    if (req.x || req.y || req.z) {
        if (!req.x || !req.y || !req.z) return cudaErrorInvalidClusterSize;
        if (c.x && (c.x != req.x || c.y != req.y || c.z != req.z))
            return cudaErrorInvalidClusterSize;
        c = req;
    }
    if (!c.x) return cudaSuccess;
    if (!c.y || !c.z || l->grid.x % c.x || l->grid.y % c.y || l->grid.z % c.z)
        return cudaErrorInvalidClusterSize;
    unsigned max = sim_kernel_nonportable_cluster(k, device) ? 16 : 8;
    if ((unsigned long long)c.x * c.y * c.z > max) return cudaErrorInvalidClusterSize;
    return cudaSuccess;
}

static cudaError_t launch(struct sim_kernel *k, const struct launch *l)
{
    struct sim_stream *s;
    cudaError_t err = check_dims(l->grid, l->block);
    if (err) return err;
    err = sim_stream_resolve(l->stream, l->per_thread, &s);
    if (err) return err;
    int device = s->dev->ordinal;
    /* Over the kernel's dynamic shared memory limit (48 KiB unless raised
     * with cudaFuncAttributeMaxDynamicSharedMemorySize) the runtime answers
     * "invalid argument". */
    if (l->smem > sim_kernel_max_dynamic_smem(k, device)) return cudaErrorInvalidValue;
    if (l->cooperative) {
        int threads = (int)(l->block.x * l->block.y * l->block.z);
        unsigned long long blocks = (unsigned long long)l->grid.x * l->grid.y * l->grid.z;
        int per_sm = sim_occupancy(k, device, threads, l->smem);
        int sms;
        if (sim_device_attribute(cudaDevAttrMultiProcessorCount, device, &sms))
            return cudaErrorInvalidDevice;
        /* Every block of a cooperative grid must be resident at once. */
        if (blocks > (unsigned long long)per_sm * (unsigned)sms)
            return cudaErrorCooperativeLaunchTooLarge;
    }
    err = check_cluster(k, device, l);
    if (err) return err;
    err = sim_module_load(k->mod, device);
    if (err) return err;
    /* An op without work: it runs, in order, and completes; on a capturing
     * stream it becomes a kernel node of the graph. */
    uint64_t seq;
    return sim_stream_add_work(
        s, &(struct sim_work){cudaGraphNodeTypeKernel, kernel_body, NULL, NULL, 0}, NULL, &seq);
}

/* Looks the kernel up (by host stub or handle) and launches it. */
static cudaError_t launch_func(const void *func, const struct launch *l)
{
    sim_init();
    sim_modules_rdlock();
    struct sim_kernel *k = sim_kernel_find(func);
    cudaError_t err = k ? launch(k, l) : cudaErrorInvalidDeviceFunction;
    sim_modules_unlock();
    return sim_record_error(err);
}

SIM_API cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args,
                                     size_t smem, cudaStream_t stream)
{
    (void)args; /* nothing reads the parameters */
    return launch_func(func, &(struct launch){grid, block, smem, stream, 0, 0, {0, 0, 0}});
}

SIM_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
                                          size_t smem, cudaStream_t stream)
{
    (void)args;
    return launch_func(func, &(struct launch){grid, block, smem, stream, 1, 0, {0, 0, 0}});
}

SIM_API cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 grid, dim3 block,
                                                void **args, size_t smem, cudaStream_t stream)
{
    (void)args;
    return launch_func(func, &(struct launch){grid, block, smem, stream, 0, 1, {0, 0, 0}});
}

SIM_API cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 grid, dim3 block,
                                                     void **args, size_t smem, cudaStream_t stream)
{
    (void)args;
    return launch_func(func, &(struct launch){grid, block, smem, stream, 1, 1, {0, 0, 0}});
}

/* The events a launch attribute asks to have recorded when the kernel is
 * done (programmatic and completion events): the sim's kernel has no blocks
 * that could trigger earlier, so both are recorded after the launch. */
struct launch_events {
    cudaEvent_t ev[2];
    int n;
};

/* Reads cudaLaunchKernelExC's attributes into l and ev. */
static cudaError_t read_attrs(const cudaLaunchConfig_t *c, struct launch *l,
                              struct launch_events *ev)
{
    if (c->numAttrs && !c->attrs) return cudaErrorInvalidValue;
    for (unsigned i = 0; i < c->numAttrs; i++) {
        const cudaLaunchAttribute *a = &c->attrs[i];
        switch ((int)a->id) {
        case cudaLaunchAttributeCooperative:
            l->cooperative = a->val.cooperative != 0;
            break;
        case cudaLaunchAttributeClusterDimension:
            l->cluster = (dim3){a->val.clusterDim.x, a->val.clusterDim.y, a->val.clusterDim.z};
            if (!l->cluster.x) return cudaErrorInvalidClusterSize;
            break;
        case cudaLaunchAttributeProgrammaticStreamSerialization:
            if (a->val.programmaticStreamSerializationAllowed > 1) return cudaErrorInvalidValue;
            break;
        case cudaLaunchAttributeProgrammaticEvent:
            if (ev->n == 2) return cudaErrorInvalidValue;
            ev->ev[ev->n++] = a->val.programmaticEvent.event;
            break;
        case cudaLaunchAttributeLaunchCompletionEvent:
            if (ev->n == 2) return cudaErrorInvalidValue;
            ev->ev[ev->n++] = a->val.launchCompletionEvent.event;
            break;
        /* Hints and policies: valid, and nothing a launch that computes
         * nothing could act on. */
        case cudaLaunchAttributeIgnore:
        case cudaLaunchAttributeAccessPolicyWindow:
        case cudaLaunchAttributeSynchronizationPolicy:
        case cudaLaunchAttributeClusterSchedulingPolicyPreference:
        case cudaLaunchAttributePriority:
        case cudaLaunchAttributeMemSyncDomainMap:
        case cudaLaunchAttributeMemSyncDomain:
        case cudaLaunchAttributePreferredClusterDimension:
        case cudaLaunchAttributeDeviceUpdatableKernelNode:
        case cudaLaunchAttributePreferredSharedMemoryCarveout:
        case cudaLaunchAttributeNvlinkUtilCentricScheduling:
            break;
        default:
            return cudaErrorInvalidValue;
        }
    }
    return cudaSuccess;
}

/* event_management.c's entry point for the per-thread default stream; the toolkit's
 * header declares it only under CUDA_API_PER_THREAD_DEFAULT_STREAM. */
cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);

static cudaError_t launch_ex(const cudaLaunchConfig_t *c, const void *func, int pt)
{
    sim_init();
    if (!c) return sim_record_error(cudaErrorInvalidValue);
    struct launch l = {c->gridDim, c->blockDim, c->dynamicSmemBytes, c->stream, pt, 0, {0, 0, 0}};
    struct launch_events ev = {{0}, 0};
    cudaError_t err = read_attrs(c, &l, &ev);
    if (err) return sim_record_error(err);
    err = launch_func(func, &l);
    for (int i = 0; !err && i < ev.n; i++)
        err = pt ? cudaEventRecord_ptsz(ev.ev[i], c->stream) : cudaEventRecord(ev.ev[i], c->stream);
    return sim_record_error(err);
}

SIM_API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
                                        void **args)
{
    (void)args;
    return launch_ex(config, func, 0);
}
SIM_RT_ALIAS(cudaLaunchKernelExC);

SIM_API cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func,
                                             void **args)
{
    (void)args;
    return launch_ex(config, func, 1);
}
SIM_RT_ALIAS(cudaLaunchKernelExC_ptsz);

/* ---- what nvcc's generated host code calls (crt/host_runtime.h) ---- */

/* kernel<<<grid, block, smem, stream>>>(args) pushes its configuration,
 * then calls the host stub, which pops it and launches. A stack, per thread,
 * since a launch's arguments are evaluated between push and pop. */
#define CALL_DEPTH 16
struct call_config {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};
static __thread struct call_config calls[CALL_DEPTH];
static __thread int ncalls;

SIM_API unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem,
                                             struct CUstream_st *stream)
{
    if (ncalls == CALL_DEPTH) return 1;
    calls[ncalls++] = (struct call_config){grid, block, smem, stream};
    return 0;
}

SIM_API cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *smem, void *stream)
{
    if (ncalls == 0) return sim_record_error(cudaErrorMissingConfiguration);
    struct call_config c = calls[--ncalls];
    *grid = c.grid;
    *block = c.block;
    *smem = c.smem;
    *(cudaStream_t *)stream = c.stream;
    return cudaSuccess;
}

static cudaError_t get_kernel(cudaKernel_t *out, const void *func)
{
    sim_init();
    if (!out) return sim_record_error(cudaErrorInvalidValue);
    sim_modules_rdlock();
    struct sim_kernel *k = sim_kernel_find(func);
    if (k) *out = k->handle;
    sim_modules_unlock();
    return k ? cudaSuccess : sim_record_error(cudaErrorInvalidDeviceFunction);
}

SIM_API cudaError_t __cudaGetKernel(cudaKernel_t *out, const void *func)
{
    return get_kernel(out, func);
}

SIM_API cudaError_t cudaGetKernel(cudaKernel_t *out, const void *func)
{
    return get_kernel(out, func);
}

SIM_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args,
                                       size_t smem, cudaStream_t stream)
{
    (void)args;
    return launch_func(kernel, &(struct launch){grid, block, smem, stream, 0, 0, {0, 0, 0}});
}

SIM_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void **args,
                                            size_t smem, cudaStream_t stream)
{
    (void)args;
    return launch_func(kernel, &(struct launch){grid, block, smem, stream, 1, 0, {0, 0, 0}});
}
