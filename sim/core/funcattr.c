/* funcattr.c - what a kernel says about itself and how many of its blocks
 * fit on an SM (the runtime's entry points are in
 * sim/cudart/function_attributes.c, the driver's cuFuncGetAttribute goes
 * through sim_drv_func_attributes).
 *
 * With no compiled code to measure, every kernel reports the same plausible
 * resources: SIM_KERNEL_REGS registers per thread, no static shared, local
 * or constant memory, up to 1024 threads per block, PTX and binary version
 * 9.0. The settable attributes are validated and kept per device (as the
 * runtime keeps them per context), and launches (cudart/kernel_launch.c)
 * and occupancy honour them. Occupancy follows the occupancy calculator's
 * arithmetic on the sim's H100-like SM (props.c): 2048 threads, 65536
 * registers allocated per warp in 256-register units, 228 KiB of shared
 * memory with 1 KiB reserved per block, at most 32 blocks. */
#include <stdlib.h>

#include "sim.h"

struct sim_kernel_attrs {
    int max_dynamic_smem;
    int carveout;
    int cluster[3];
    int nonportable_cluster;
    int cluster_policy;
};

static const struct sim_kernel_attrs defaults = {SIM_SMEM_DEFAULT_LIMIT, -1, {0, 0, 0}, 0, 0};

#define SMEM_OPTIN    (227 << 10) /* sharedMemPerBlockOptin */
#define SMEM_PER_SM   (228 << 10) /* sharedMemPerMultiprocessor */
#define SMEM_RESERVED (1 << 10)   /* reservedSharedMemPerBlock */
#define REGS_PER_SM   65536
#define WARPS_PER_SM  64
#define BLOCKS_PER_SM 32
#define MAX_THREADS   1024

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static struct sim_kernel_attrs get(struct sim_kernel *k, int device)
{
    pthread_mutex_lock(&mu);
    struct sim_kernel_attrs a = k->attrs ? k->attrs[device] : defaults;
    pthread_mutex_unlock(&mu);
    return a;
}

size_t sim_kernel_max_dynamic_smem(struct sim_kernel *k, int device)
{
    return (size_t)get(k, device).max_dynamic_smem;
}

int sim_kernel_nonportable_cluster(struct sim_kernel *k, int device)
{
    return get(k, device).nonportable_cluster;
}

dim3 sim_kernel_required_cluster(struct sim_kernel *k, int device)
{
    struct sim_kernel_attrs a = get(k, device);
    return (dim3){(unsigned)a.cluster[0], (unsigned)a.cluster[1], (unsigned)a.cluster[2]};
}

void sim_kernel_attrs_free(struct sim_kernel *k)
{
    free(k->attrs);
    k->attrs = NULL;
}

int sim_occupancy(struct sim_kernel *k, int device, int block, size_t dyn_smem)
{
    if (block <= 0 || block > MAX_THREADS || dyn_smem > sim_kernel_max_dynamic_smem(k, device))
        return 0;
    int warps = (block + 31) / 32;
    int by_threads = WARPS_PER_SM / warps;
    int regs_per_warp = (SIM_KERNEL_REGS * 32 + 255) / 256 * 256;
    int by_regs = REGS_PER_SM / (regs_per_warp * warps);
    size_t smem = (dyn_smem + SMEM_RESERVED + 127) / 128 * 128;
    int by_smem = (int)(SMEM_PER_SM / smem);
    int n = BLOCKS_PER_SM;
    if (by_threads < n) n = by_threads;
    if (by_regs < n) n = by_regs;
    if (by_smem < n) n = by_smem;
    return n;
}

/* Validates and stores one attribute of k on `device`. */
cudaError_t sim_kernel_set_attribute(struct sim_kernel *k, int device, enum cudaFuncAttribute attr,
                                     int value)
{
    int ok;
    switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
        ok = value >= 0 && value <= SMEM_OPTIN;
        break;
    case cudaFuncAttributePreferredSharedMemoryCarveout:
        ok = value >= -1 && value <= 100;
        break;
    case cudaFuncAttributeRequiredClusterWidth:
    case cudaFuncAttributeRequiredClusterHeight:
    case cudaFuncAttributeRequiredClusterDepth:
        ok = value >= 0; /* checked against the grid at launch */
        break;
    case cudaFuncAttributeNonPortableClusterSizeAllowed:
        ok = value == 0 || value == 1;
        break;
    case cudaFuncAttributeClusterSchedulingPolicyPreference:
        ok = value >= cudaClusterSchedulingPolicyDefault &&
             value <= cudaClusterSchedulingPolicyLoadBalancing;
        break;
    default: /* unknown, or read-only (cudaFuncAttributeClusterDimMustBeSet) */
        ok = 0;
    }
    if (!ok) return cudaErrorInvalidValue;

    pthread_mutex_lock(&mu);
    if (!k->attrs) {
        k->attrs = malloc((size_t)sim_cfg.ndevices * sizeof *k->attrs);
        for (int d = 0; k->attrs && d < sim_cfg.ndevices; d++)
            k->attrs[d] = defaults;
    }
    if (!k->attrs) {
        pthread_mutex_unlock(&mu);
        return cudaErrorMemoryAllocation;
    }
    struct sim_kernel_attrs *a = &k->attrs[device];
    switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
        a->max_dynamic_smem = value;
        break;
    case cudaFuncAttributePreferredSharedMemoryCarveout:
        a->carveout = value;
        break;
    case cudaFuncAttributeRequiredClusterWidth:
    case cudaFuncAttributeRequiredClusterHeight:
    case cudaFuncAttributeRequiredClusterDepth:
        a->cluster[attr - cudaFuncAttributeRequiredClusterWidth] = value;
        break;
    case cudaFuncAttributeNonPortableClusterSizeAllowed:
        a->nonportable_cluster = value;
        break;
    default:
        a->cluster_policy = value;
    }
    pthread_mutex_unlock(&mu);
    return cudaSuccess;
}

/* A kernel's attributes as a launch on `device` sees them. */
cudaError_t sim_func_get_attributes(struct cudaFuncAttributes *attr, const void *func, int device)
{
    sim_init();
    if (!attr) return cudaErrorInvalidValue;
    if (!sim_dev(device)) return sim_cfg.ndevices ? cudaErrorInvalidDevice : cudaErrorNoDevice;
    sim_modules_rdlock();
    struct sim_kernel *k = sim_kernel_find(func);
    struct sim_kernel_attrs a = k ? get(k, device) : defaults;
    sim_modules_unlock();
    if (!k) return cudaErrorInvalidDeviceFunction;
    *attr = (struct cudaFuncAttributes){
        .maxThreadsPerBlock = MAX_THREADS,
        .numRegs = SIM_KERNEL_REGS,
        .ptxVersion = 90,
        .binaryVersion = 90,
        .maxDynamicSharedSizeBytes = a.max_dynamic_smem,
        .preferredShmemCarveout = a.carveout,
        .requiredClusterWidth = a.cluster[0],
        .requiredClusterHeight = a.cluster[1],
        .requiredClusterDepth = a.cluster[2],
        .clusterSchedulingPolicyPreference = a.cluster_policy,
        .nonPortableClusterSizeAllowed = a.nonportable_cluster,
    };
    return cudaSuccess;
}

/* The driver's cuFuncGetAttribute and cuKernelGetAttribute, which name the
 * device (sim/cuda/launch.c). */
SIM_SEAM cudaError_t sim_drv_func_attributes(struct cudaFuncAttributes *attr, const void *func,
                                             int device)
{
    return sim_func_get_attributes(attr, func, device);
}
