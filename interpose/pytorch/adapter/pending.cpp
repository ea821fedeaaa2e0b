// pending.cpp - the methods of PyTorch's allocator interface the adapter
// does not serve yet: checkpoint state (CUDA graph trees, torch.compile's
// mode="reduce-overhead").
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
