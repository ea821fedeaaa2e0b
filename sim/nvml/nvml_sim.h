/* nvml_sim.h - what the two files of the simulated NVML share: whether the
 * library is initialised (init.c) and the check every device query makes
 * first (device.c). */
#ifndef SIM_NVML_SIM_H
#define SIM_NVML_SIM_H

#include "sim.h"
#include "nvml_api.h"

/* Every NVML entry point is defined with this; libnvidia-ml.map exports
 * them without a version, as NVIDIA's library does. */
#define SIM_NVML_API __attribute__((visibility("default")))

/* Exports `legacy` as another name of `impl` (an older ABI the same). */
#define SIM_NVML_ALIAS(legacy, impl)                                                               \
    extern __typeof__(impl) sim_nvml_alias_##legacy __asm__(#legacy)                               \
        __attribute__((alias(#impl), visibility("default")))

/* NVML_SUCCESS while nvmlInit has been called more often than
 * nvmlShutdown, else NVML_ERROR_UNINITIALIZED. */
nvmlReturn_t sim_nvml_ready(void);

#endif /* SIM_NVML_SIM_H */
