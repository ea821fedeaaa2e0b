/* event_management.c - the runtime's event entry points (cudaEventCreate*,
 * cudaEventDestroy, cudaEventRecord*, cudaEventQuery,
 * cudaEventSynchronize, cudaEventElapsedTime, cudaStreamWaitEvent) onto the
 * events of sim/core/event.c. */
#include <stdlib.h>
#include <time.h>

#include "sim.h"

SIM_API cudaError_t cudaEventCreate(cudaEvent_t *out)
{
    return sim_event_create(out, cudaEventDefault);
}

SIM_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags)
{
    return sim_event_create(out, flags);
}

SIM_API cudaError_t cudaEventDestroy(cudaEvent_t h)
{
    return sim_event_destroy(h);
}

SIM_API cudaError_t cudaEventRecord(cudaEvent_t h, cudaStream_t s)
{
    return sim_event_record(h, s, 0, 0);
}

SIM_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t h, cudaStream_t s)
{
    return sim_event_record(h, s, 0, 1);
}

SIM_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t h, cudaStream_t s, unsigned int flags)
{
    return sim_event_record(h, s, flags, 0);
}

SIM_API cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t h, cudaStream_t s, unsigned int flags)
{
    return sim_event_record(h, s, flags, 1);
}

SIM_API cudaError_t cudaEventQuery(cudaEvent_t h)
{
    return sim_event_query(h);
}

SIM_API cudaError_t cudaEventSynchronize(cudaEvent_t h)
{
    return sim_event_synchronize(h);
}

SIM_API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
    return sim_stream_wait_event(s, ev, flags, 0);
}

SIM_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
    return sim_stream_wait_event(s, ev, flags, 1);
}

SIM_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!ms) return sim_record_error(cudaErrorInvalidValue);
    int64_t ns;
    cudaError_t err = sim_event_elapsed_ns(start, end, &ns);
    if (err) return sim_record_error(err);
    *ms = (float)((double)ns / 1e6);
    return cudaSuccess;
}
SIM_RT_ALIAS(cudaEventElapsedTime);
