/* stream_capture.c - the runtime's stream capture entry points
 * (cudaStreamBeginCapture[ToGraph], cudaStreamEndCapture,
 * cudaStreamIsCapturing, cudaStreamGetCaptureInfo,
 * cudaStreamUpdateCaptureDependencies, cudaThreadExchangeStreamCaptureMode)
 * onto the captures of sim/core/capture.c. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

SIM_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    return sim_record_error(sim_capture_begin(stream, 0, NULL, NULL, NULL, 0, mode));
}
SIM_RT_ALIAS(cudaStreamBeginCapture);

SIM_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream,
                                                enum cudaStreamCaptureMode mode)
{
    return sim_record_error(sim_capture_begin(stream, 1, NULL, NULL, NULL, 0, mode));
}
SIM_RT_ALIAS(cudaStreamBeginCapture_ptsz);

SIM_API cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                                  const cudaGraphNode_t *dependencies,
                                                  const cudaGraphEdgeData *dependencyData,
                                                  size_t numDependencies,
                                                  enum cudaStreamCaptureMode mode)
{
    if (!graph) return sim_record_error(cudaErrorInvalidValue);
    return sim_record_error(
        sim_capture_begin(stream, 0, graph, dependencies, dependencyData, numDependencies, mode));
}
SIM_RT_ALIAS(cudaStreamBeginCaptureToGraph);

SIM_API cudaError_t cudaStreamBeginCaptureToGraph_ptsz(cudaStream_t stream, cudaGraph_t graph,
                                                       const cudaGraphNode_t *dependencies,
                                                       const cudaGraphEdgeData *dependencyData,
                                                       size_t numDependencies,
                                                       enum cudaStreamCaptureMode mode)
{
    if (!graph) return sim_record_error(cudaErrorInvalidValue);
    return sim_record_error(
        sim_capture_begin(stream, 1, graph, dependencies, dependencyData, numDependencies, mode));
}
SIM_RT_ALIAS(cudaStreamBeginCaptureToGraph_ptsz);

SIM_API cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t *graph_out)
{
    return sim_record_error(sim_capture_end(h, 0, graph_out));
}
SIM_RT_ALIAS(cudaStreamEndCapture);

SIM_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t h, cudaGraph_t *graph_out)
{
    return sim_record_error(sim_capture_end(h, 1, graph_out));
}
SIM_RT_ALIAS(cudaStreamEndCapture_ptsz);

SIM_API cudaError_t cudaStreamIsCapturing(cudaStream_t h, enum cudaStreamCaptureStatus *status)
{
    return sim_record_error(sim_capture_info(h, 0, status, NULL, NULL, NULL, NULL, NULL));
}

SIM_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t h, enum cudaStreamCaptureStatus *status)
{
    return sim_record_error(sim_capture_info(h, 1, status, NULL, NULL, NULL, NULL, NULL));
}

SIM_API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t h, enum cudaStreamCaptureStatus *status,
                                             unsigned long long *id, cudaGraph_t *graph,
                                             const cudaGraphNode_t **deps,
                                             const cudaGraphEdgeData **edges, size_t *ndeps)
{
    return sim_record_error(sim_capture_info(h, 0, status, id, graph, deps, edges, ndeps));
}
SIM_RT_ALIAS(cudaStreamGetCaptureInfo);

SIM_API cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t h,
                                                  enum cudaStreamCaptureStatus *status,
                                                  unsigned long long *id, cudaGraph_t *graph,
                                                  const cudaGraphNode_t **deps,
                                                  const cudaGraphEdgeData **edges, size_t *ndeps)
{
    return sim_record_error(sim_capture_info(h, 1, status, id, graph, deps, edges, ndeps));
}
SIM_RT_ALIAS(cudaStreamGetCaptureInfo_ptsz);

SIM_API cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t h, cudaGraphNode_t *deps,
                                                        const cudaGraphEdgeData *edges, size_t n,
                                                        unsigned int flags)
{
    return sim_record_error(sim_capture_update_deps(h, 0, deps, edges, n, flags));
}
SIM_RT_ALIAS(cudaStreamUpdateCaptureDependencies);

SIM_API cudaError_t cudaStreamUpdateCaptureDependencies_ptsz(cudaStream_t h, cudaGraphNode_t *deps,
                                                             const cudaGraphEdgeData *edges,
                                                             size_t n, unsigned int flags)
{
    return sim_record_error(sim_capture_update_deps(h, 1, deps, edges, n, flags));
}
SIM_RT_ALIAS(cudaStreamUpdateCaptureDependencies_ptsz);

SIM_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    if (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed)
        return sim_record_error(cudaErrorInvalidValue);
    *mode = sim_capture_exchange_mode(*mode);
    return cudaSuccess;
}
