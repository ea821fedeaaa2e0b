/* props.c - what a simulated device says about itself: an H100-like part
 * (sm 9.0, 132 SMs) whose global memory is the configured capacity. */
#include <string.h>

#include "sim.h"

void sim_device_props(struct cudaDeviceProp *p, int device)
{
    memset(p, 0, sizeof *p);
    strcpy(p->name, "fsdpshim simulated device");
    for (int i = 0; i < 16; i++)
        p->uuid.bytes[i] = (char)(0xf5 ^ (i * 17) ^ device);
    p->totalGlobalMem = sim_cfg.capacity;
    p->sharedMemPerBlock = 48 << 10;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->memPitch = 2147483647;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024;
    p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = 65535;
    p->maxGridSize[2] = 65535;
    p->totalConstMem = 64 << 10;
    p->major = 9;
    p->minor = 0;
    p->textureAlignment = SIM_ALLOC_GRANULE;
    p->texturePitchAlignment = 32;
    p->multiProcessorCount = 132;
    p->canMapHostMemory = 1;
    p->concurrentKernels = 1;
    p->ECCEnabled = 1;
    p->pciBusID = 0x18 + 0x12 * device;
    p->asyncEngineCount = 3;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = 5120;
    p->l2CacheSize = 50 << 20;
    p->persistingL2CacheMaxSize = 32 << 20;
    p->maxThreadsPerMultiProcessor = 2048;
    p->streamPrioritiesSupported = 1;
    p->globalL1CacheSupported = 1;
    p->localL1CacheSupported = 1;
    p->sharedMemPerMultiprocessor = 228 << 10;
    p->regsPerMultiprocessor = 65536;
    p->managedMemory = 1;
    p->multiGpuBoardGroupID = device;
    p->concurrentManagedAccess = 1;
    p->computePreemptionSupported = 1;
    p->cooperativeLaunch = 1;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->maxBlocksPerMultiProcessor = 32;
    p->accessPolicyMaxWindowSize = 128 << 20;
    p->reservedSharedMemPerBlock = 1 << 10;
    p->hostRegisterSupported = 1;
    p->memoryPoolsSupported = 1;
    p->ipcEventSupported = 1; /* sim/core/ipc_event.c */
    p->memoryPoolSupportedHandleTypes = cudaMemHandleTypePosixFileDescriptor;
    p->clusterLaunch = 1;
    p->deviceNumaId = -1;
    p->hostNumaId = -1;
}

/* Shared with the driver's cuDeviceGetAttribute, whose numbering agrees with
 * the runtime's for every attribute both have. Returns -1 if unknown. */
int sim_device_attribute(int attr, int device, int *value)
{
    struct cudaDeviceProp p;
    sim_device_props(&p, device);
    int v;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
        v = p.maxThreadsPerBlock;
        break;
    case cudaDevAttrMaxBlockDimX:
        v = p.maxThreadsDim[0];
        break;
    case cudaDevAttrMaxBlockDimY:
        v = p.maxThreadsDim[1];
        break;
    case cudaDevAttrMaxBlockDimZ:
        v = p.maxThreadsDim[2];
        break;
    case cudaDevAttrMaxGridDimX:
        v = p.maxGridSize[0];
        break;
    case cudaDevAttrMaxGridDimY:
        v = p.maxGridSize[1];
        break;
    case cudaDevAttrMaxGridDimZ:
        v = p.maxGridSize[2];
        break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
        v = (int)p.sharedMemPerBlock;
        break;
    case cudaDevAttrTotalConstantMemory:
        v = (int)p.totalConstMem;
        break;
    case cudaDevAttrWarpSize:
        v = p.warpSize;
        break;
    case cudaDevAttrMaxPitch:
        v = (int)p.memPitch;
        break;
    case cudaDevAttrMaxRegistersPerBlock:
        v = p.regsPerBlock;
        break;
    case cudaDevAttrClockRate:
        v = 1980000;
        break;
    case cudaDevAttrMemoryClockRate:
        v = 2619000;
        break;
    case cudaDevAttrGpuOverlap:
        v = 1;
        break;
    case cudaDevAttrMultiProcessorCount:
        v = p.multiProcessorCount;
        break;
    case cudaDevAttrIntegrated:
        v = 0;
        break;
    case cudaDevAttrCanMapHostMemory:
        v = 1;
        break;
    case cudaDevAttrComputeMode:
        v = cudaComputeModeDefault;
        break;
    case cudaDevAttrConcurrentKernels:
        v = 1;
        break;
    case cudaDevAttrEccEnabled:
        v = 1;
        break;
    case cudaDevAttrPciBusId:
        v = p.pciBusID;
        break;
    case cudaDevAttrPciDeviceId:
        v = 0;
        break;
    case cudaDevAttrPciDomainId:
        v = 0;
        break;
    case cudaDevAttrGlobalMemoryBusWidth:
        v = p.memoryBusWidth;
        break;
    case cudaDevAttrL2CacheSize:
        v = p.l2CacheSize;
        break;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
        v = p.maxThreadsPerMultiProcessor;
        break;
    case cudaDevAttrAsyncEngineCount:
        v = p.asyncEngineCount;
        break;
    case cudaDevAttrUnifiedAddressing:
        v = 1;
        break;
    case cudaDevAttrComputeCapabilityMajor:
        v = p.major;
        break;
    case cudaDevAttrComputeCapabilityMinor:
        v = p.minor;
        break;
    case cudaDevAttrStreamPrioritiesSupported:
        v = 1;
        break;
    case cudaDevAttrGlobalL1CacheSupported:
        v = 1;
        break;
    case cudaDevAttrLocalL1CacheSupported:
        v = 1;
        break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
        v = (int)p.sharedMemPerMultiprocessor;
        break;
    case cudaDevAttrMaxRegistersPerMultiprocessor:
        v = p.regsPerMultiprocessor;
        break;
    case cudaDevAttrManagedMemory:
        v = 1;
        break;
    case cudaDevAttrIsMultiGpuBoard:
        v = 0;
        break;
    case cudaDevAttrMultiGpuBoardGroupID:
        v = device;
        break;
    case cudaDevAttrConcurrentManagedAccess:
        v = 1;
        break;
    case cudaDevAttrComputePreemptionSupported:
        v = 1;
        break;
    case cudaDevAttrCooperativeLaunch:
        v = 1;
        break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
        v = (int)p.sharedMemPerBlockOptin;
        break;
    case cudaDevAttrHostRegisterSupported:
        v = 1;
        break;
    case cudaDevAttrMaxBlocksPerMultiprocessor:
        v = p.maxBlocksPerMultiProcessor;
        break;
    case cudaDevAttrMaxPersistingL2CacheSize:
        v = p.persistingL2CacheMaxSize;
        break;
    case cudaDevAttrMaxAccessPolicyWindowSize:
        v = p.accessPolicyMaxWindowSize;
        break;
    case cudaDevAttrReservedSharedMemoryPerBlock:
        v = (int)p.reservedSharedMemPerBlock;
        break;
    case cudaDevAttrMemoryPoolsSupported:
        v = 1;
        break;
    case cudaDevAttrIpcEventSupport:
        v = p.ipcEventSupported;
        break;
    case cudaDevAttrMemoryPoolSupportedHandleTypes:
        v = (int)p.memoryPoolSupportedHandleTypes;
        break;
    case cudaDevAttrClusterLaunch:
        v = 1;
        break;
    case cudaDevAttrNumaConfig:
        v = 0;
        break;
    case cudaDevAttrNumaId:
        v = -1;
        break;
    case cudaDevAttrHostNumaId:
        v = -1;
        break;
    case cudaDevAttrMpsEnabled:
        v = 0;
        break;
    /* Driver-only attributes, same numbering space. */
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        v = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
        v = 1;
        break;
    default:
        return -1;
    }
    *value = v;
    return 0;
}
