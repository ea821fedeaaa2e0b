/* init.c - the simulated NVML's initialisation, its error strings and what
 * it says about the system (driver and CUDA versions).
 *
 * As NVML documents, nvmlInit may be called more than once and counts its
 * calls: only the nvmlShutdown that matches the first nvmlInit shuts the
 * library down, and every other call fails with NVML_ERROR_UNINITIALIZED
 * while it is not initialised (nvmlErrorString excepted). Initialising
 * reads the sim's configuration (FSDPSHIM_SIM_DEVICES, _MEM) and creates no
 * CUDA context, as NVML's does not. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "nvml_sim.h"

/* The display driver that ships with the CUDA version the sim's driver
 * reports (CUDA 13.0: 580.65.06), as nvidia-smi shows them side by side. */
#define SIM_DRIVER_VERSION "580.65.06"

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned init_count; /* under init_mu; read atomically elsewhere */

nvmlReturn_t sim_nvml_ready(void)
{
    return __atomic_load_n(&init_count, __ATOMIC_ACQUIRE) ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

SIM_NVML_API nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    if (flags & ~(unsigned)(NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH))
        return NVML_ERROR_INVALID_ARGUMENT;
    sim_init();
    pthread_mutex_lock(&init_mu);
    __atomic_store_n(&init_count, init_count + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&init_mu);
    return NVML_SUCCESS;
}

SIM_NVML_API nvmlReturn_t nvmlInit_v2(void)
{
    return nvmlInitWithFlags(0);
}
/* The legacy entry point differs only in that it fails when any GPU cannot
 * be attached; every simulated device can. */
SIM_NVML_ALIAS(nvmlInit, nvmlInit_v2);

SIM_NVML_API nvmlReturn_t nvmlShutdown(void)
{
    nvmlReturn_t res = NVML_SUCCESS;
    pthread_mutex_lock(&init_mu);
    if (init_count == 0)
        res = NVML_ERROR_UNINITIALIZED;
    else
        __atomic_store_n(&init_count, init_count - 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&init_mu);
    return res;
}

/* NVML's own wording. Allowed before nvmlInit, as documented. */
SIM_NVML_API const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
        return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
        return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
        return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
        return "Interrupt request issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
        return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
        return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM:
        return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE:
        return "In use by another client";
    case NVML_ERROR_MEMORY:
        return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
        return "No data";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
        return "Insufficient resources for request";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
        return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED:
        return "Deprecated";
    case NVML_ERROR_NOT_READY:
        return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND:
        return "GPU not found";
    case NVML_ERROR_INVALID_STATE:
        return "Invalid state";
    default:
        return "Unknown Error";
    }
}

/* Copies s into buf of length len: NVML_ERROR_INSUFFICIENT_SIZE when it
 * does not fit with its terminator. */
static nvmlReturn_t put_string(const char *s, char *buf, unsigned int len)
{
    nvmlReturn_t res = sim_nvml_ready();
    if (res) return res;
    if (!buf) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

SIM_NVML_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    return put_string(SIM_DRIVER_VERSION, version, length);
}

/* NVML's version is the CUDA major version before the driver's. */
SIM_NVML_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    char v[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
    snprintf(v, sizeof v, "%d.%s", CUDA_VERSION / 1000, SIM_DRIVER_VERSION);
    return put_string(v, version, length);
}

/* What cuDriverGetVersion gives (the sim's libcuda.so.1). */
SIM_NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    nvmlReturn_t res = sim_nvml_ready();
    if (res) return res;
    if (!cudaDriverVersion) return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = CUDA_VERSION;
    return NVML_SUCCESS;
}
SIM_NVML_ALIAS(nvmlSystemGetCudaDriverVersion, nvmlSystemGetCudaDriverVersion_v2);
