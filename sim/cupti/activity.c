/* activity.c - what the simulated CUPTI answers to the rest of CUPTI's API
 * that PyTorch links (libtorch_cpu.so's profiler, Kineto, needs these
 * symbols to load): the activity API, external correlation ids, the
 * version, callback names and finalisation.
 *
 * The simulated device records no activity: it runs no kernels and has no
 * clock of its own. So enabling a kind of activity, registering the buffer
 * callbacks, setting attributes and correlation ids answer
 * CUPTI_ERROR_NOT_SUPPORTED, which a profiler takes as "no GPU activity
 * here" and goes on without; flushing has nothing to flush, no record ever
 * comes back and none is dropped. The callback API (cupti.c) is the part
 * that works. */
#include <cupti.h>

#define SIM_CUPTI_API __attribute__((visibility("default")))

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
    if (!version) return CUPTI_ERROR_INVALID_PARAMETER;
    *version = CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

/* The headers hold no table of names, and the sim reports none */
SIM_CUPTI_API CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid,
                                                        const char **name)
{
    (void)domain;
    (void)cbid;
    if (!name) return CUPTI_ERROR_INVALID_PARAMETER;
    return CUPTI_ERROR_NOT_SUPPORTED;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiFinalize(void)
{
    return CUPTI_SUCCESS;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    (void)kind;
    return CUPTI_ERROR_NOT_SUPPORTED;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
    (void)kind;
    return CUPTI_SUCCESS; /* nothing was enabled */
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid,
                                                                uint8_t enable)
{
    (void)cbid;
    return enable ? CUPTI_ERROR_NOT_SUPPORTED : CUPTI_SUCCESS;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid,
                                                                 uint8_t enable)
{
    (void)cbid;
    return enable ? CUPTI_ERROR_NOT_SUPPORTED : CUPTI_SUCCESS;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiActivityEnableCudaEventDeviceTimestamps(uint8_t enable)
{
    return enable ? CUPTI_ERROR_NOT_SUPPORTED : CUPTI_SUCCESS;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed)
{
    if (!requested || !completed) return CUPTI_ERROR_INVALID_PARAMETER;
    return CUPTI_ERROR_NOT_SUPPORTED;
}

SIM_CUPTI_API CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc timestamp)
{
    if (!timestamp) return CUPTI_ERROR_INVALID_PARAMETER;
    return CUPTI_ERROR_NOT_SUPPORTED;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiActivitySetAttribute(CUpti_ActivityAttribute attr,
                                                             size_t *size, void *value)
{
    (void)attr;
    if (!size || !value) return CUPTI_ERROR_INVALID_PARAMETER;
    return CUPTI_ERROR_NOT_SUPPORTED;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    return CUPTI_SUCCESS;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
                                                              CUpti_Activity **record)
{
    (void)buffer;
    (void)valid;
    if (!record) return CUPTI_ERROR_INVALID_PARAMETER;
    return CUPTI_ERROR_MAX_LIMIT_REACHED; /* no record */
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context,
                                                                     uint32_t stream,
                                                                     size_t *dropped)
{
    (void)context;
    (void)stream;
    if (!dropped) return CUPTI_ERROR_INVALID_PARAMETER;
    *dropped = 0;
    return CUPTI_SUCCESS;
}

SIM_CUPTI_API CUptiResult CUPTIAPI
cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id)
{
    (void)kind;
    (void)id;
    return CUPTI_ERROR_NOT_SUPPORTED;
}

SIM_CUPTI_API CUptiResult CUPTIAPI
cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t *last)
{
    (void)kind;
    if (last) *last = 0;
    return CUPTI_ERROR_NOT_SUPPORTED;
}
