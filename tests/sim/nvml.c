/* nvml.c - the simulated NVML (libnvidia-ml.so.1), called by a program
 * linked to it beside the runtime: reference-counted initialisation, the
 * device count, handles by index, PCI bus id and UUID agreeing with what the
 * runtime and the driver report, memory info following cudaMalloc and
 * cudaFree, the process list, what an H100 without fabric or NVLink
 * answers, threads initialising and shutting down at once, and the error
 * cases. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "nvml_api.h"

/* Runs first: nothing works before nvmlInit but nvmlErrorString, and the
 * library stays initialised until as many shutdowns as inits. */
static void test_init_counting(void **state)
{
    (void)state;
    unsigned n = 99;
    nvmlDevice_t h = NULL;
    assert_int_equal(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(0, &h), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
    assert_string_equal(nvmlErrorString(NVML_ERROR_UNINITIALIZED), "Uninitialized");
    assert_string_equal(nvmlErrorString(NVML_ERROR_NOT_SUPPORTED), "Not Supported");
    assert_string_equal(nvmlErrorString((nvmlReturn_t)12345), "Unknown Error");
    assert_int_equal(nvmlInitWithFlags(0x100), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);

    assert_int_equal(nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nvmlInit(), NVML_SUCCESS); /* the legacy name, counted too */
    assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(nvmlDeviceGetCount_v2(&n), NVML_SUCCESS); /* one init left */
    assert_int_equal(n, 8);
    assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(nvmlDeviceGetCount(&n), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nvmlShutdown(), NVML_ERROR_UNINITIALIZED);

    assert_int_equal(nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS), NVML_SUCCESS);
    assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
    /* The rest of the tests run initialised. */
    assert_int_equal(nvmlInit_v2(), NVML_SUCCESS);
}

static void test_count_and_index(void **state)
{
    (void)state;
    unsigned n = 0, index = 99;
    nvmlDevice_t h = NULL, h2 = NULL;
    int cuda_n = 0;
    assert_int_equal(nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(cudaGetDeviceCount(&cuda_n), cudaSuccess);
    assert_int_equal(n, (unsigned)cuda_n);
    assert_int_equal(nvmlDeviceGetCount_v2(NULL), NVML_ERROR_INVALID_ARGUMENT);

    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(5, &h), NVML_SUCCESS);
    assert_int_equal(nvmlDeviceGetIndex(h, &index), NVML_SUCCESS);
    assert_int_equal(index, 5);
    assert_int_equal(nvmlDeviceGetHandleByIndex(5, &h2), NVML_SUCCESS);
    assert_ptr_equal(h, h2);
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(n, &h), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(0, NULL), NVML_ERROR_INVALID_ARGUMENT);
    /* A pointer that is no handle is an invalid argument, not a crash. */
    assert_int_equal(nvmlDeviceGetIndex((nvmlDevice_t)&index, &index), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetIndex(NULL, &index), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetIndex(h2, NULL), NVML_ERROR_INVALID_ARGUMENT);
}

/* Name, UUID and PCI bus id are the runtime's and the driver's. */
static void test_identity_matches_runtime(void **state)
{
    (void)state;
    for (int d = 0; d < 8; d++) {
        nvmlDevice_t h = NULL, by = NULL;
        assert_int_equal(nvmlDeviceGetHandleByIndex_v2((unsigned)d, &h), NVML_SUCCESS);
        struct cudaDeviceProp p;
        assert_int_equal(cudaGetDeviceProperties(&p, d), cudaSuccess);

        char name[NVML_DEVICE_NAME_BUFFER_SIZE];
        assert_int_equal(nvmlDeviceGetName(h, name, sizeof name), NVML_SUCCESS);
        assert_string_equal(name, p.name);
        assert_int_equal(nvmlDeviceGetName(h, name, 4), NVML_ERROR_INSUFFICIENT_SIZE);

        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], want[64];
        CUuuid cu;
        assert_int_equal(cuDeviceGetUuid(&cu, d), CUDA_SUCCESS);
        assert_memory_equal(cu.bytes, p.uuid.bytes, 16);
        const unsigned char *b = (const unsigned char *)cu.bytes;
        snprintf(want, sizeof want,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
        assert_int_equal(nvmlDeviceGetUUID(h, uuid, sizeof uuid), NVML_SUCCESS);
        assert_string_equal(uuid, want);
        assert_int_equal(nvmlDeviceGetUUID(h, uuid, 40), NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(nvmlDeviceGetUUID(h, uuid, 41), NVML_SUCCESS); /* 40 and a NUL */
        assert_int_equal(nvmlDeviceGetHandleByUUID(want, &by), NVML_SUCCESS);
        assert_ptr_equal(by, h);

        char bus[64];
        nvmlPciInfo_t pci;
        assert_int_equal(cudaDeviceGetPCIBusId(bus, sizeof bus, d), cudaSuccess);
        assert_int_equal(nvmlDeviceGetPciInfo_v3(h, &pci), NVML_SUCCESS);
        assert_string_equal(pci.busId, bus);
        assert_int_equal(pci.bus, (unsigned)p.pciBusID);
        assert_int_equal(pci.domain, (unsigned)p.pciDomainID);
        assert_int_equal(pci.device, (unsigned)p.pciDeviceID);
        assert_int_equal(pci.pciDeviceId & 0xFFFF, 0x10DE); /* NVIDIA */
        assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2(bus, &by), NVML_SUCCESS);
        assert_ptr_equal(by, h);
        /* PyTorch's form (NVML_DEVICE_PCI_BUS_ID_FMT from cudaDeviceProp) and
         * the legacy short one name the same device. */
        snprintf(bus, sizeof bus, NVML_DEVICE_PCI_BUS_ID_FMT, (unsigned)p.pciDomainID,
                 (unsigned)p.pciBusID, (unsigned)p.pciDeviceID);
        by = NULL;
        assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2(bus, &by), NVML_SUCCESS);
        assert_ptr_equal(by, h);
        by = NULL;
        assert_int_equal(nvmlDeviceGetHandleByPciBusId(pci.busIdLegacy, &by), NVML_SUCCESS);
        assert_ptr_equal(by, h);

        int major = 0, minor = -1;
        assert_int_equal(nvmlDeviceGetCudaComputeCapability(h, &major, &minor), NVML_SUCCESS);
        assert_int_equal(major, p.major);
        assert_int_equal(minor, p.minor);
    }
    nvmlDevice_t h = NULL;
    char bus[32];
    snprintf(bus, sizeof bus, "%x:00.0", 0x18 + 0x12 * 8); /* where a 9th device would be */
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2(bus, &h), NVML_ERROR_NOT_FOUND);
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("18:00.0", &h), NVML_SUCCESS);
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("not a bus id", &h),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("0000:18:00.0x", &h),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2(NULL, &h), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &h),
                     NVML_ERROR_NOT_FOUND);
    assert_int_equal(nvmlDeviceGetHandleByUUID(NULL, &h), NVML_ERROR_INVALID_ARGUMENT);
}

/* The device's use is what the sim charged to it: a cudaMalloc shows, a
 * cudaFree gives it back; this process is listed while it uses the device. */
static void test_memory_follows_malloc(void **state)
{
    (void)state;
    nvmlDevice_t h = NULL;
    nvmlMemory_t m0, m1, m2;
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(2, &h), NVML_SUCCESS);
    assert_int_equal(nvmlDeviceGetMemoryInfo(h, &m0), NVML_SUCCESS);
    size_t free_b = 0, total = 0;
    assert_int_equal(cudaSetDevice(2), cudaSuccess);
    assert_int_equal(cudaMemGetInfo(&free_b, &total), cudaSuccess);
    assert_int_equal(m0.total, total);
    assert_int_equal(m0.used, total - free_b);
    assert_int_equal(m0.free + m0.used, m0.total);

    /* 4 MiB: the device's whole pages (docs/sim.md, "Device memory"). */
    void *p = NULL;
    assert_int_equal(cudaMalloc(&p, 3 << 20), cudaSuccess);
    assert_int_equal(nvmlDeviceGetMemoryInfo(h, &m1), NVML_SUCCESS);
    assert_int_equal(m1.used, m0.used + (4 << 20));
    assert_int_equal(m1.free, m0.free - (4 << 20));
    assert_int_equal(m1.total, m0.total);

    nvmlMemory_v2_t v2;
    memset(&v2, 0, sizeof v2);
    assert_int_equal(nvmlDeviceGetMemoryInfo_v2(h, &v2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    v2.version = nvmlMemory_v2;
    assert_int_equal(nvmlDeviceGetMemoryInfo_v2(h, &v2), NVML_SUCCESS);
    assert_int_equal(v2.used, m1.used);
    assert_int_equal(v2.reserved, 0);
    assert_int_equal(v2.free + v2.used + v2.reserved, v2.total);

    /* The process list: this process, with what it uses, in each ABI; the
     * count query first, as callers make it. */
    unsigned count = 0;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(h, &count, NULL),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(count, 1);
    nvmlProcessInfo_t procs[4];
    count = 4;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(h, &count, procs), NVML_SUCCESS);
    assert_int_equal(count, 1);
    assert_int_equal(procs[0].pid, (unsigned)getpid());
    assert_int_equal(procs[0].usedGpuMemory, m1.used);
    assert_int_equal(procs[0].gpuInstanceId, 0xFFFFFFFFu);
    nvmlProcessInfo_v1_t old[2];
    count = 2;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses(h, &count, old), NVML_SUCCESS);
    assert_int_equal(count, 1);
    assert_int_equal(old[0].pid, (unsigned)getpid());
    assert_int_equal(old[0].usedGpuMemory, m1.used);
    count = 2;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(h, &count, NULL),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(h, NULL, procs),
                     NVML_ERROR_INVALID_ARGUMENT);

    assert_int_equal(cudaFree(p), cudaSuccess);
    assert_int_equal(nvmlDeviceGetMemoryInfo(h, &m2), NVML_SUCCESS);
    assert_int_equal(m2.used, m0.used);
    assert_int_equal(nvmlDeviceGetMemoryInfo(h, NULL), NVML_ERROR_INVALID_ARGUMENT);

    /* A device this process never touched lists nothing. */
    nvmlDevice_t idle = NULL;
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(7, &idle), NVML_SUCCESS);
    count = 0;
    assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(idle, &count, NULL), NVML_SUCCESS);
    assert_int_equal(count, 0);
}

/* An H100 without NVSwitch fabric or NVLink, without sensors, on bare metal. */
static void test_what_is_not_there(void **state)
{
    (void)state;
    nvmlDevice_t h = NULL;
    assert_int_equal(nvmlDeviceGetHandleByIndex_v2(0, &h), NVML_SUCCESS);

    nvmlGpuFabricInfoV_t f;
    memset(&f, 0xff, sizeof f);
    f.version = nvmlGpuFabricInfo_v2;
    assert_int_equal(nvmlDeviceGetGpuFabricInfoV(h, &f), NVML_SUCCESS);
    assert_int_equal(f.state, NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);
    assert_int_equal(f.version, nvmlGpuFabricInfo_v2);
    f.version = nvmlGpuFabricInfo_v3;
    assert_int_equal(nvmlDeviceGetGpuFabricInfoV(h, &f), NVML_SUCCESS);
    assert_int_equal(f.state, NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);
    f.version = 1;
    assert_int_equal(nvmlDeviceGetGpuFabricInfoV(h, &f), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    assert_int_equal(nvmlDeviceGetGpuFabricInfoV(h, NULL), NVML_ERROR_INVALID_ARGUMENT);

    nvmlIntNvLinkDeviceType_t type;
    nvmlPciInfo_t pci;
    assert_int_equal(nvmlDeviceGetNvLinkRemoteDeviceType(h, 0, &type), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetNvLinkRemotePciInfo_v2(h, 0, &pci), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetNvLinkRemoteDeviceType(h, NVML_NVLINK_MAX_LINKS, &type),
                     NVML_ERROR_INVALID_ARGUMENT);

    unsigned v = 0, cur = 9, pend = 9;
    assert_int_equal(nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU, &v),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetPowerUsage(h, &v), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetNumaNodeId(h, &v), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(nvmlDeviceGetMigMode(h, &cur, &pend), NVML_SUCCESS);
    assert_int_equal(cur, 0);
    assert_int_equal(pend, 0);
    nvmlGpuVirtualizationMode_t mode = (nvmlGpuVirtualizationMode_t)7;
    assert_int_equal(nvmlDeviceGetVirtualizationMode(h, &mode), NVML_SUCCESS);
    assert_int_equal(mode, NVML_GPU_VIRTUALIZATION_MODE_NONE);

    nvmlUtilization_t u = {7, 7};
    assert_int_equal(nvmlDeviceGetUtilizationRates(h, &u), NVML_SUCCESS);
    assert_int_equal(u.gpu, 0);
    assert_int_equal(u.memory, 0);

    int khz = 0;
    unsigned mhz = 0;
    assert_int_equal(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), cudaSuccess);
    assert_int_equal(nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM, &mhz), NVML_SUCCESS);
    assert_int_equal(mhz, (unsigned)khz / 1000);
    assert_int_equal(nvmlDeviceGetMaxClockInfo(h, NVML_CLOCK_GRAPHICS, &mhz), NVML_SUCCESS);
    assert_int_equal(mhz, (unsigned)khz / 1000);
    assert_int_equal(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, 0), cudaSuccess);
    assert_int_equal(nvmlDeviceGetClockInfo(h, NVML_CLOCK_MEM, &mhz), NVML_SUCCESS);
    assert_int_equal(mhz, (unsigned)khz / 1000);
    assert_int_equal(nvmlDeviceGetClockInfo(h, NVML_CLOCK_COUNT, &mhz),
                     NVML_ERROR_INVALID_ARGUMENT);
}

/* Threads initialising, querying and shutting down at once: each one's
 * init keeps the library up for its queries, whatever the others do. */
static void *init_query_shutdown(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++) {
        unsigned n = 0;
        nvmlDevice_t h = NULL;
        nvmlMemory_t m;
        if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetCount_v2(&n) != NVML_SUCCESS || n != 8 ||
            nvmlDeviceGetHandleByIndex_v2((unsigned)i % n, &h) != NVML_SUCCESS ||
            nvmlDeviceGetMemoryInfo(h, &m) != NVML_SUCCESS || nvmlShutdown() != NVML_SUCCESS)
            return (void *)1;
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, init_query_shutdown, NULL), 0);
    void *p = NULL;
    assert_int_equal(cudaMalloc(&p, 1 << 20), cudaSuccess); /* charges while they read */
    assert_int_equal(cudaFree(p), cudaSuccess);
    for (int i = 0; i < 4; i++) {
        void *ret = (void *)1;
        assert_int_equal(pthread_join(t[i], &ret), 0);
        assert_null(ret);
    }
    unsigned n = 0;
    assert_int_equal(nvmlDeviceGetCount_v2(&n), NVML_SUCCESS); /* the tests' own init stays */
}

static void test_system(void **state)
{
    (void)state;
    char v[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    int cuda = 0, driver = 0;
    assert_int_equal(nvmlSystemGetDriverVersion(v, sizeof v), NVML_SUCCESS);
    assert_true(strlen(v) > 0 && v[0] >= '1' && v[0] <= '9');
    assert_int_equal(nvmlSystemGetDriverVersion(v, 2), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(nvmlSystemGetNVMLVersion(v, sizeof v), NVML_SUCCESS);
    assert_int_equal(nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
    assert_int_equal(cuDriverGetVersion(&driver), CUDA_SUCCESS);
    assert_int_equal(cuda, driver);
    assert_int_equal(nvmlSystemGetCudaDriverVersion(NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_ERROR_UNINITIALIZED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_counting),
        cmocka_unit_test(test_count_and_index),
        cmocka_unit_test(test_identity_matches_runtime),
        cmocka_unit_test(test_memory_follows_malloc),
        cmocka_unit_test(test_what_is_not_there),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_system),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
