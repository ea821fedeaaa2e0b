/* cupti.c - the simulated CUPTI (libcupti.so.13): one subscriber, the
 * callback API's enable switches, and its callbacks on API enter and exit of
 * the simulated runtime and driver.
 *
 * What is reported: the entry points that bracket their work with
 * sim_api_enter/exit (sim.h, ../core/api_callback.c): cudaMalloc, cudaFree,
 * cudaMallocAsync, cudaFreeAsync, cudaMallocFromPoolAsync (and their _ptsz
 * forms), cudaStreamCreate(WithFlags, WithPriority), cudaStreamDestroy;
 * cuMemAlloc_v2, cuMemFree_v2, cuMemAllocAsync, cuMemFreeAsync (and _ptsz),
 * cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap, cuMemAddressReserve,
 * cuMemAddressFree. Every other id can be enabled and is never called. Ids,
 * domains, sites and params structs are the toolkit's headers'. No activity
 * API, no resource or synchronize domain: nothing in the tree uses them. */
#include "sim.h"

#include <cuda.h>
#include <cupti.h>
#include <stdatomic.h>
#include <stddef.h>

/* The CUPTI entry points are exported; the build hides everything else. */
#define SIM_CUPTI_API __attribute__((visibility("default")))

/* The one subscriber: as CUPTI, a second cuptiSubscribe is refused while it
 * holds the slot. */
struct CUpti_Subscriber_st {
    CUpti_CallbackFunc callback;
    void *userdata;
};
static struct CUpti_Subscriber_st subscriber;
static atomic_int taken;

static atomic_uchar driver_on[CUPTI_DRIVER_TRACE_CBID_SIZE];
static atomic_uchar runtime_on[CUPTI_RUNTIME_TRACE_CBID_SIZE];

static atomic_uchar *switch_of(CUpti_CallbackDomain domain, size_t *n)
{
    switch (domain) {
    case CUPTI_CB_DOMAIN_DRIVER_API:
        *n = CUPTI_DRIVER_TRACE_CBID_SIZE;
        return driver_on;
    case CUPTI_CB_DOMAIN_RUNTIME_API:
        *n = CUPTI_RUNTIME_TRACE_CBID_SIZE;
        return runtime_on;
    default:
        *n = 0;
        return NULL;
    }
}

/* The hook the runtime and driver call (sim.h, ../core/api_callback.c). The switch is read
 * with acquire: what the subscriber set up before enabling a callback is
 * seen by the thread that calls it. */
static void dispatch(struct sim_api_call *call, int exit)
{
    size_t n;
    atomic_uchar *on = switch_of((CUpti_CallbackDomain)call->domain, &n);
    if (!on || call->cbid >= n || !atomic_load_explicit(&on[call->cbid], memory_order_acquire))
        return;
    CUcontext ctx = NULL;
    CUdevice dev = 0;
    if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) ctx = NULL;
    if (ctx && cuCtxGetDevice(&dev) != CUDA_SUCCESS) ctx = NULL;
    CUpti_CallbackData data = {
        .callbackSite = exit ? CUPTI_API_EXIT : CUPTI_API_ENTER,
        .functionName = call->name,
        .functionParams = call->params,
        .functionReturnValue = exit ? call->ret : NULL,
        .context = ctx,
        .contextUid = ctx ? (uint32_t)dev + 1 : 0,
        .correlationData = &call->correlation,
        .correlationId = call->correlation_id,
    };
    subscriber.callback(subscriber.userdata, (CUpti_CallbackDomain)call->domain,
                        (CUpti_CallbackId)call->cbid, &data);
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *handle,
                                                  CUpti_CallbackFunc callback, void *userdata)
{
    int free_slot = 0;
    if (!handle) return CUPTI_ERROR_INVALID_PARAMETER;
    if (!atomic_compare_exchange_strong(&taken, &free_slot, 1))
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    subscriber = (struct CUpti_Subscriber_st){callback, userdata};
    *handle = &subscriber;
    if (callback) sim_api_hook_set(dispatch);
    return CUPTI_SUCCESS;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle handle)
{
    if (handle != &subscriber || !atomic_load(&taken)) return CUPTI_ERROR_INVALID_PARAMETER;
    sim_api_hook_set(NULL);
    for (size_t i = 0; i < CUPTI_DRIVER_TRACE_CBID_SIZE; i++)
        atomic_store(&driver_on[i], 0);
    for (size_t i = 0; i < CUPTI_RUNTIME_TRACE_CBID_SIZE; i++)
        atomic_store(&runtime_on[i], 0);
    atomic_store(&taken, 0);
    return CUPTI_SUCCESS;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable,
                                                       CUpti_SubscriberHandle handle,
                                                       CUpti_CallbackDomain domain,
                                                       CUpti_CallbackId cbid)
{
    size_t n;
    atomic_uchar *on = switch_of(domain, &n);
    if (handle != &subscriber || !on || cbid >= n) return CUPTI_ERROR_INVALID_PARAMETER;
    atomic_store(&on[cbid], enable != 0);
    return CUPTI_SUCCESS;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle handle,
                                                     CUpti_CallbackDomain domain)
{
    size_t n;
    atomic_uchar *on = switch_of(domain, &n);
    if (handle != &subscriber || !on) return CUPTI_ERROR_INVALID_PARAMETER;
    for (size_t i = 0; i < n; i++)
        atomic_store(&on[i], enable != 0);
    return CUPTI_SUCCESS;
}

/* The device of a context: the sim's contexts are its devices' primary
 * contexts, so the driver answers by making it current for a moment. */
SIM_CUPTI_API CUptiResult CUPTIAPI cuptiGetDeviceId(CUcontext context, uint32_t *device_id)
{
    CUdevice dev;
    if (!device_id) return CUPTI_ERROR_INVALID_PARAMETER;
    if (!context) {
        if (cuCtxGetDevice(&dev) != CUDA_SUCCESS) return CUPTI_ERROR_INVALID_CONTEXT;
    } else {
        if (cuCtxPushCurrent(context) != CUDA_SUCCESS) return CUPTI_ERROR_INVALID_CONTEXT;
        CUresult res = cuCtxGetDevice(&dev);
        cuCtxPopCurrent(&context);
        if (res != CUDA_SUCCESS) return CUPTI_ERROR_INVALID_CONTEXT;
    }
    *device_id = (uint32_t)dev;
    return CUPTI_SUCCESS;
}

SIM_CUPTI_API CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
    if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
    switch (result) {
    case CUPTI_SUCCESS:
        *str = "CUPTI_SUCCESS";
        return CUPTI_SUCCESS;
    case CUPTI_ERROR_INVALID_PARAMETER:
        *str = "CUPTI_ERROR_INVALID_PARAMETER";
        return CUPTI_SUCCESS;
    case CUPTI_ERROR_INVALID_CONTEXT:
        *str = "CUPTI_ERROR_INVALID_CONTEXT";
        return CUPTI_SUCCESS;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
        return CUPTI_SUCCESS;
    default:
        *str = "CUPTI_ERROR_UNKNOWN";
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
}
