/* ipc_handles.c - the runtime's CUDA IPC entry points: memory handles
 * (cudaIpcGetMemHandle, cudaIpcOpenMemHandle, cudaIpcCloseMemHandle) and
 * event handles (cudaIpcGetEventHandle, cudaIpcOpenEventHandle), onto
 * sim/core/ipc.c and sim/core/ipc_event.c. */
#include <string.h>
#include <unistd.h>

#include "sim.h"

SIM_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr)
{
    sim_init();
    struct sim_range r;
    struct sim_backing b;
    if (!handle || !devPtr || !sim_registry_find((uintptr_t)devPtr, &r) ||
        r.kind != SIM_RANGE_MALLOC || !r.live || !sim_vram_backing((void *)r.base, &b))
        return sim_record_error(cudaErrorInvalidValue);
    /* A forked child's inherited memory is its private copy. */
    if (!b.owned) return sim_record_error(cudaErrorNotSupported);
    struct sim_ipc_wire w = {
        SIM_IPC_MEM_MAGIC, (int32_t)getpid(), b.fd, r.device, b.ino, b.offset, r.size, {0}};
    memcpy(handle, &w, sizeof w);
    return cudaSuccess;
}

SIM_API cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle,
                                         unsigned int flags)
{
    sim_init();
    struct sim_ipc_wire w;
    memcpy(&w, &handle, sizeof w);
    /* cudaIpcMemLazyEnablePeerAccess changes nothing: every device of the
     * sim reaches all memory. */
    if (!devPtr || (flags & ~(unsigned)cudaIpcMemLazyEnablePeerAccess) ||
        w.magic != SIM_IPC_MEM_MAGIC || w.size == 0)
        return sim_record_error(cudaErrorInvalidValue);
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return sim_record_error(cudaErrorNoDevice);
    if (w.pid == (int32_t)getpid()) return sim_record_error(cudaErrorDeviceUninitialized);
    cudaError_t err = sim_ipc_mem_open(&w, dev->ordinal, devPtr);
    return err ? sim_record_error(err) : cudaSuccess;
}

SIM_API cudaError_t cudaIpcCloseMemHandle(void *devPtr)
{
    sim_init();
    cudaError_t err = sim_ipc_mem_close(devPtr);
    return err ? sim_record_error(err) : cudaSuccess;
}

SIM_API cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t event)
{
    sim_init();
    if (!handle) return sim_record_error(cudaErrorInvalidValue);
    struct sim_ipc_wire w;
    cudaError_t err = sim_event_ipc_wire(event, &w);
    if (err) return sim_record_error(err);
    memcpy(handle, &w, sizeof w);
    return cudaSuccess;
}

SIM_API cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *event, cudaIpcEventHandle_t handle)
{
    sim_init();
    struct sim_ipc_wire w;
    memcpy(&w, &handle, sizeof w);
    if (!event || w.magic != SIM_IPC_EVENT_MAGIC) return sim_record_error(cudaErrorInvalidValue);
    if (!sim_cur_dev()) return sim_record_error(cudaErrorNoDevice);
    struct sim_ipc_event *e;
    cudaError_t err = sim_ipc_event_open(&w, &e);
    if (!err) {
        err = sim_event_from_ipc(e, event);
        if (err) sim_ipc_event_free(e);
    }
    return err ? sim_record_error(err) : cudaSuccess;
}
