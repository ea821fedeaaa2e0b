// pending.cpp - the methods of PyTorch's allocator interface the adapter
// does not serve yet (issue 26: private pools and CUDA graphs, IPC,
// checkpoint state).
// Each refuses with PyTorch's own kind of error, naming what is missing,
// rather than pretending: a caller that relies on one of them learns it at
// the call, as under PyTorch's cudaMallocAsync backend (the route the
// adapter is to replace, which refuses the same ones).
#include "adapter.h"

#include <c10/util/Exception.h>

namespace fsdpshim
{

namespace
{

[[noreturn]] void not_yet(const char *what)
{
    TORCH_CHECK(false, "fsdpshim's PyTorch adapter does not serve ", what,
                " yet; run without FSDPSHIM_CONF=torch_route:adapter for PyTorch's "
                "cudaMallocAsync route, or without the shim (docs/pytorch.md)");
}

} // namespace

void Adapter::beginAllocateToPool(c10::DeviceIndex, c10::MempoolId_t,
                                  std::function<bool(cudaStream_t)>)
{
    not_yet("private memory pools (torch.cuda.MemPool, CUDA graph capture)");
}

void Adapter::endAllocateToPool(c10::DeviceIndex, c10::MempoolId_t)
{
    not_yet("private memory pools (torch.cuda.MemPool, CUDA graph capture)");
}

void Adapter::releasePool(c10::DeviceIndex, c10::MempoolId_t)
{
    not_yet("private memory pools (torch.cuda.MemPool, CUDA graph capture)");
}

cca::ShareableHandle Adapter::shareIpcHandle(void *)
{
    not_yet("sharing CUDA tensors between processes (shareIpcHandle)");
}

std::shared_ptr<void> Adapter::getIpcDevPtr(std::string)
{
    not_yet("sharing CUDA tensors between processes (getIpcDevPtr)");
}

std::shared_ptr<cca::AllocatorState> Adapter::getCheckpointState(c10::DeviceIndex, c10::MempoolId_t)
{
    not_yet("checkpoint state (CUDA graph trees)");
}

cca::CheckpointDelta Adapter::setCheckpointPoolState(c10::DeviceIndex,
                                                     std::shared_ptr<cca::AllocatorState>)
{
    not_yet("checkpoint state (CUDA graph trees)");
}

} // namespace fsdpshim
