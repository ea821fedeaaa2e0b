/* device.c - the simulated NVML's devices: the sim's devices
 * (FSDPSHIM_SIM_DEVICES), in the runtime's order, with the runtime's
 * names, UUIDs and PCI bus ids, and the memory the sim has charged to each.
 *
 * The sim's device model lives in each process (docs/sim.md, "Simulated
 * NVML"): what a device reports as used is what this process has charged to
 * it, and the only process NVML lists on a device is this one. What an H100
 * without an NVSwitch fabric answers is answered: the fabric query succeeds
 * with NVML_GPU_FABRIC_STATE_NOT_SUPPORTED (PyTorch requires success),
 * NVLink and NUMA queries are NVML_ERROR_NOT_SUPPORTED. The sim has no
 * sensors, so temperature and power are NVML_ERROR_NOT_SUPPORTED too. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nvml_sim.h"

/* One per possible simulated device (FSDPSHIM_SIM_DEVICES is at most 64):
 * a handle is the address of the one of its ordinal, so a stray pointer is
 * recognised. */
struct nvmlDevice_st {
    char unused;
};
#define SIM_NVML_MAX_DEVICES 64
static struct nvmlDevice_st handles[SIM_NVML_MAX_DEVICES];

/* The H100 SXM5's PCI device id and NVIDIA's vendor id: the sim reports an
 * H100-like part (sim/core/props.c). */
#define SIM_PCI_DEVICE_ID 0x233010DEu
/* Bus numbers as cudaDeviceGetPCIBusId gives them (sim/cudart/device_management.c). */
static unsigned bus_of(int ordinal)
{
    return 0x18u + 0x12u * (unsigned)ordinal;
}

/* The checks every device query makes, in NVML's order: initialised, then a
 * valid handle (NVML_ERROR_INVALID_ARGUMENT otherwise). */
/* Every device query's checks, in NVML's order: initialised, a valid
 * handle (its device in *out, when out is not NULL), then the query's own
 * arguments (args_ok), else NVML_ERROR_INVALID_ARGUMENT. */
static nvmlReturn_t device_of(nvmlDevice_t h, struct sim_device **out, int args_ok)
{
    nvmlReturn_t res = sim_nvml_ready();
    if (res) return res;
    uintptr_t at = (uintptr_t)h - (uintptr_t)handles;
    if (at >= sizeof handles) return NVML_ERROR_INVALID_ARGUMENT;
    struct sim_device *d = sim_dev((int)(at / sizeof handles[0]));
    if (!d || !args_ok) return NVML_ERROR_INVALID_ARGUMENT;
    if (out) *out = d;
    return NVML_SUCCESS;
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    nvmlReturn_t res = sim_nvml_ready();
    if (res) return res;
    if (!deviceCount) return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = (unsigned)sim_cfg.ndevices;
    return NVML_SUCCESS;
}
/* The legacy ABI counts only devices it may initialise: all of the sim's. */
SIM_NVML_ALIAS(nvmlDeviceGetCount, nvmlDeviceGetCount_v2);

SIM_NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t res = sim_nvml_ready();
    if (res) return res;
    if (!device || index >= (unsigned)sim_cfg.ndevices) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &handles[index];
    return NVML_SUCCESS;
}
SIM_NVML_ALIAS(nvmlDeviceGetHandleByIndex, nvmlDeviceGetHandleByIndex_v2);

/* The forms NVML accepts, all numbers hexadecimal: domain:bus:device.function,
 * domain:bus:device and bus:device.function. Returns 0 for anything else. */
static int parse_bus_id(const char *s, unsigned *domain, unsigned *bus, unsigned *dev, unsigned *fn)
{
    int end = -1;
    /* Digits and separators only: scanf's %x would also take a sign, blanks
     * or a 0x prefix. */
    if (s[strspn(s, "0123456789abcdefABCDEF:.")] != '\0') return 0;
    *domain = 0;
    *fn = 0;
    if (sscanf(s, "%x:%x:%x.%x%n", domain, bus, dev, fn, &end) == 4 && s[end] == '\0') return 1;
    end = -1;
    *fn = 0;
    if (sscanf(s, "%x:%x:%x%n", domain, bus, dev, &end) == 3 && s[end] == '\0') return 1;
    end = -1;
    *domain = 0;
    if (sscanf(s, "%x:%x.%x%n", bus, dev, fn, &end) == 3 && s[end] == '\0') return 1;
    return 0;
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId,
                                                           nvmlDevice_t *device)
{
    nvmlReturn_t res = sim_nvml_ready();
    if (res) return res;
    unsigned domain, bus, dev, fn;
    if (!pciBusId || !device || !parse_bus_id(pciBusId, &domain, &bus, &dev, &fn))
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < sim_cfg.ndevices; i++) {
        if (domain == 0 && bus == bus_of(i) && dev == 0 && fn == 0) {
            *device = &handles[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}
SIM_NVML_ALIAS(nvmlDeviceGetHandleByPciBusId, nvmlDeviceGetHandleByPciBusId_v2);

/* "GPU-" and the 16 bytes of cudaDeviceProp.uuid / cuDeviceGetUuid, as
 * nvidia-smi -L prints them. */
static void uuid_string(int ordinal, char out[NVML_DEVICE_UUID_BUFFER_SIZE])
{
    struct cudaDeviceProp p;
    const unsigned char *b = (const unsigned char *)p.uuid.bytes;
    if (cudaGetDeviceProperties(&p, ordinal) != cudaSuccess) memset(&p, 0, sizeof p);
    snprintf(out, NVML_DEVICE_UUID_BUFFER_SIZE,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    nvmlReturn_t res = sim_nvml_ready();
    if (res) return res;
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < sim_cfg.ndevices; i++) {
        char s[NVML_DEVICE_UUID_BUFFER_SIZE];
        uuid_string(i, s);
        if (strcmp(s, uuid) == 0) {
            *device = &handles[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    struct sim_device *d;
    nvmlReturn_t res = device_of(device, &d, index != NULL);
    if (res) return res;
    *index = (unsigned)d->ordinal;
    return NVML_SUCCESS;
}

/* /dev/nvidiaN: N is the index on a machine of one GPU kind. */
SIM_NVML_API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    return nvmlDeviceGetIndex(device, minorNumber);
}

static nvmlReturn_t put_string(const char *s, char *buf, unsigned int len)
{
    if (!buf) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    struct sim_device *d;
    nvmlReturn_t res = device_of(device, &d, 1);
    if (res) return res;
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, d->ordinal) != cudaSuccess) return NVML_ERROR_UNKNOWN;
    return put_string(p.name, name, length);
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    struct sim_device *d;
    nvmlReturn_t res = device_of(device, &d, 1);
    if (res) return res;
    char s[NVML_DEVICE_UUID_BUFFER_SIZE];
    uuid_string(d->ordinal, s);
    return put_string(s, uuid, length);
}

static void pci_info(int ordinal, nvmlPciInfo_t *pci)
{
    memset(pci, 0, sizeof *pci);
    pci->bus = bus_of(ordinal);
    pci->pciDeviceId = SIM_PCI_DEVICE_ID;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, 0u,
             pci->bus, 0u);
    snprintf(pci->busId, sizeof pci->busId, NVML_DEVICE_PCI_BUS_ID_FMT, 0u, pci->bus, 0u);
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    struct sim_device *d;
    nvmlReturn_t res = device_of(device, &d, pci != NULL);
    if (res) return res;
    pci_info(d->ordinal, pci);
    return NVML_SUCCESS;
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                             int *minor)
{
    struct sim_device *d;
    nvmlReturn_t res = device_of(device, &d, major && minor);
    if (res) return res;
    if (sim_device_attribute(cudaDevAttrComputeCapabilityMajor, d->ordinal, major) ||
        sim_device_attribute(cudaDevAttrComputeCapabilityMinor, d->ordinal, minor))
        return NVML_ERROR_UNKNOWN;
    return NVML_SUCCESS;
}

/* total: the device's capacity (FSDPSHIM_SIM_MEM); used: what the sim has
 * charged to it now; free: the rest. */
static void memory_of(struct sim_device *d, unsigned long long *total, unsigned long long *used)
{
    pthread_mutex_lock(&d->mu);
    *used = d->used;
    pthread_mutex_unlock(&d->mu);
    *total = sim_cfg.capacity;
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    struct sim_device *d;
    nvmlReturn_t res = device_of(device, &d, memory != NULL);
    if (res) return res;
    memory_of(d, &memory->total, &memory->used);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

/* As nvmlDeviceGetMemoryInfo; nothing is reserved by a driver in the sim. */
SIM_NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    struct sim_device *d;
    nvmlReturn_t res = device_of(device, &d, memory != NULL);
    if (res) return res;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory_of(d, &memory->total, &memory->used);
    memory->reserved = 0;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

/* The processes with a context on the device: in the sim only this one,
 * listed once it has a context there or memory charged to it. Fills
 * *pid and *used and returns 1 then, else returns 0. */
static int this_process(struct sim_device *d, unsigned *pid, unsigned long long *used)
{
    unsigned long long total;
    memory_of(d, &total, used);
    *pid = (unsigned)getpid();
    return *used > 0 || __atomic_load_n(&d->ctx_active, __ATOMIC_RELAXED);
}

/* NVML's protocol: *infoCount is the room in infos; with too little room,
 * NVML_ERROR_INSUFFICIENT_SIZE and *infoCount the room needed (infos may be
 * NULL when *infoCount is 0, to ask for the count). */
static nvmlReturn_t processes(nvmlDevice_t device, unsigned int *infoCount, void *infos, int legacy)
{
    struct sim_device *d;
    nvmlReturn_t res = device_of(device, &d, infoCount && (infos || !*infoCount));
    if (res) return res;
    unsigned pid;
    unsigned long long used;
    unsigned n = (unsigned)this_process(d, &pid, &used);
    if (*infoCount < n) {
        *infoCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *infoCount = n;
    if (n == 0) return NVML_SUCCESS;
    if (legacy) {
        nvmlProcessInfo_v1_t *p = infos;
        p->pid = pid;
        p->usedGpuMemory = used;
    } else {
        nvmlProcessInfo_t *p = infos;
        p->pid = pid;
        p->usedGpuMemory = used;
        p->gpuInstanceId = 0xFFFFFFFFu; /* no MIG */
        p->computeInstanceId = 0xFFFFFFFFu;
    }
    return NVML_SUCCESS;
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                  unsigned int *infoCount,
                                                                  nvmlProcessInfo_t *infos)
{
    return processes(device, infoCount, infos, 0);
}
SIM_NVML_ALIAS(nvmlDeviceGetComputeRunningProcesses_v2, nvmlDeviceGetComputeRunningProcesses_v3);

SIM_NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                               unsigned int *infoCount,
                                                               nvmlProcessInfo_v1_t *infos)
{
    return processes(device, infoCount, infos, 1);
}

/* The sim's device work takes no device time (kernels compute nothing), so
 * over any sample period the device was busy 0% of it. */
SIM_NVML_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                        nvmlUtilization_t *utilization)
{
    nvmlReturn_t res = device_of(device, NULL, utilization != NULL);
    if (res) return res;
    utilization->gpu = 0;
    utilization->memory = 0;
    return NVML_SUCCESS;
}

/* No sensors: what NVML answers for a device without them. */
SIM_NVML_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                   nvmlTemperatureSensors_t sensorType,
                                                   unsigned int *temp)
{
    nvmlReturn_t res = device_of(device, NULL, temp && sensorType == NVML_TEMPERATURE_GPU);
    return res ? res : NVML_ERROR_NOT_SUPPORTED;
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    nvmlReturn_t res = device_of(device, NULL, power != NULL);
    return res ? res : NVML_ERROR_NOT_SUPPORTED;
}

/* The clocks the runtime reports (cudaDevAttrClockRate, MemoryClockRate, in
 * kHz), in MHz; the sim's clocks never change, so current is maximum. The
 * graphics clock is the SM clock, as on an H100; there is no video clock. */
static nvmlReturn_t clock_of(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
    struct sim_device *d;
    nvmlReturn_t res = device_of(device, &d, clock && (unsigned)type < NVML_CLOCK_COUNT);
    if (res) return res;
    int khz;
    if (type == NVML_CLOCK_VIDEO) return NVML_ERROR_NOT_SUPPORTED;
    if (sim_device_attribute(type == NVML_CLOCK_MEM ? cudaDevAttrMemoryClockRate
                                                    : cudaDevAttrClockRate,
                             d->ordinal, &khz))
        return NVML_ERROR_UNKNOWN;
    *clock = (unsigned)khz / 1000;
    return NVML_SUCCESS;
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                 unsigned int *clock)
{
    return clock_of(device, type, clock);
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                    unsigned int *clock)
{
    return clock_of(device, type, clock);
}

/* Bare metal: no virtualisation. */
SIM_NVML_API nvmlReturn_t nvmlDeviceGetVirtualizationMode(nvmlDevice_t device,
                                                          nvmlGpuVirtualizationMode_t *pVirtualMode)
{
    nvmlReturn_t res = device_of(device, NULL, pVirtualMode != NULL);
    if (res) return res;
    *pVirtualMode = NVML_GPU_VIRTUALIZATION_MODE_NONE;
    return NVML_SUCCESS;
}

/* MIG-capable like an H100, and not in MIG mode. */
SIM_NVML_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                               unsigned int *pendingMode)
{
    nvmlReturn_t res = device_of(device, NULL, currentMode && pendingMode);
    if (res) return res;
    *currentMode = NVML_DEVICE_MIG_DISABLE;
    *pendingMode = NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}

/* Only a GPU whose memory is a NUMA node of the host (a coherent platform)
 * has one; the sim's devices report no NUMA id (cudaDevAttrNumaId -1). */
SIM_NVML_API nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
    nvmlReturn_t res = device_of(device, NULL, node != NULL);
    return res ? res : NVML_ERROR_NOT_SUPPORTED;
}

/* An H100 outside an NVSwitch fabric: the query succeeds and says the
 * fabric is not supported, so fabric memory handles are never tried. */
SIM_NVML_API nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device,
                                                      nvmlGpuFabricInfoV_t *gpuFabricInfo)
{
    nvmlReturn_t res = device_of(device, NULL, gpuFabricInfo != NULL);
    if (res) return res;
    unsigned version = gpuFabricInfo->version;
    size_t size;
    if (version == nvmlGpuFabricInfo_v2)
        size = sizeof(nvmlGpuFabricInfo_v2_t);
    else if (version == nvmlGpuFabricInfo_v3)
        size = sizeof(nvmlGpuFabricInfo_v3_t);
    else
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memset(gpuFabricInfo, 0, size);
    gpuFabricInfo->version = version;
    gpuFabricInfo->status = NVML_SUCCESS;
    gpuFabricInfo->state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

/* The sim's devices reach each other over PCIe (cudaDeviceCanAccessPeer),
 * with no NVLink: every link of a valid number is not supported. */
static nvmlReturn_t nvlink_check(nvmlDevice_t device, unsigned int link, const void *out)
{
    nvmlReturn_t res = device_of(device, NULL, out && link < NVML_NVLINK_MAX_LINKS);
    return res ? res : NVML_ERROR_NOT_SUPPORTED;
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(
    nvmlDevice_t device, unsigned int link, nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType)
{
    return nvlink_check(device, link, pNvLinkDeviceType);
}

SIM_NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device,
                                                              unsigned int link, nvmlPciInfo_t *pci)
{
    return nvlink_check(device, link, pci);
}
