/* sim_private.h - the private seam between the simulated runtime and the
 * simulated NCCL.
 *
 * libnccl.so.2 (sim) runs its collectives as device work on the caller's
 * stream, like a kernel: in stream order, not serialised with host functions
 * the way cudaLaunchHostFunc work is. The simulated libcudart.so.13 exports
 * these functions (under a private version node) for that purpose only. */
#ifndef SIM_PRIVATE_H
#define SIM_PRIVATE_H

#include <cuda_runtime_api.h>

typedef void (*sim_work_fn)(void *arg);

/* Enqueues fn(arg) on `stream` as device work. Stream 0 means what it means
 * for the calling thread (legacy, or per-thread under the _ptsz variants:
 * pass per_thread accordingly). Returns cudaErrorInvalidResourceHandle for a
 * destroyed or unknown stream. */
cudaError_t sim_stream_enqueue(cudaStream_t stream, int per_thread, sim_work_fn fn, void *arg);

/* As sim_stream_enqueue, for work a CUDA graph may hold: while the stream
 * captures, the work becomes a graph node of `type` (it is then run at each
 * launch of the graph) instead of running now. run(arg) does the work and
 * leaves arg alone; drop(arg), unless NULL, frees arg once nothing will run
 * it again. sim_stream_enqueue itself is refused while the stream
 * captures (cudaErrorStreamCaptureUnsupported: its work cannot be replayed).
 * On failure arg is the caller's again. */
cudaError_t sim_stream_enqueue_work(cudaStream_t stream, int per_thread,
                                    enum cudaGraphNodeType type, sim_work_fn run, sim_work_fn drop,
                                    void *arg);

/* The device a stream belongs to, or -1 for an unknown stream. */
int sim_stream_device(cudaStream_t stream);

/* 0 under FSDPSHIM_SIM_DATA=0 (a dry run): device work then moves no bytes
 * and must not touch device memory, which stays PROT_NONE. */
int sim_moves_data(void);

#endif /* SIM_PRIVATE_H */
