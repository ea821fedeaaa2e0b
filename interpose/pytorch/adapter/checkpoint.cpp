// checkpoint.cpp - PyTorch's checkpoint state of a private pool
// (getCheckpointState, setCheckpointPoolState), with which CUDA graph trees
// (torch.compile's mode="reduce-overhead") take a graph pool back to the
// memory a recorded graph left live. The layout is the shim's
// (allocator/checkpoint.c: fs_alloc_checkpoint, fs_alloc_restore); the
// adapter wraps it in PyTorch's opaque AllocatorState and turns what the
// shim made live again into DataPtrs with the cache's own deleter (given by
// alloc.cpp, whose it is), which PyTorch hands to the tensors that own them.
#include "adapter.h"

#include <c10/util/Exception.h>

namespace fsdpshim
{

namespace
{

// PyTorch's AllocatorState is opaque to it: its users only pass it back.
struct State final : cca::AllocatorState {
    c10::DeviceIndex device = 0;
    c10::MempoolId_t id{0, 0};
    void *layout = nullptr; // the shim's
    ~State() override
    {
        if (layout) api->checkpoint_free(layout);
    }
};

struct Restored {
    std::vector<void *> freed, made;
};

void on_freed(void *ctx, uintptr_t addr)
{
    static_cast<Restored *>(ctx)->freed.push_back(reinterpret_cast<void *>(addr));
}

void on_made(void *ctx, uintptr_t addr)
{
    static_cast<Restored *>(ctx)->made.push_back(reinterpret_cast<void *>(addr));
}

} // namespace

std::shared_ptr<cca::AllocatorState> checkpoint_of(c10::DeviceIndex device, c10::MempoolId_t id,
                                                   Pools &pools)
{
    uint64_t number = pools.number(device, id);
    TORCH_CHECK(number, "Could not find pool of id (", id.first, ", ", id.second, ")");
    char why[512] = "";
    auto state = std::make_shared<State>();
    state->device = device;
    state->id = id;
    state->layout = api->checkpoint(device, number, why, sizeof why);
    TORCH_CHECK(state->layout, "fsdpshim: cannot checkpoint private pool (", id.first, ", ",
                id.second, "): ", why);
    return state;
}

cca::CheckpointDelta restore_checkpoint(c10::DeviceIndex device,
                                        std::shared_ptr<cca::AllocatorState> pps, Pools &pools,
                                        History &history, c10::DeleterFnPtr deleter)
{
    auto state = std::dynamic_pointer_cast<State>(pps);
    TORCH_CHECK(state, "Expected PrivatePoolState");
    TORCH_CHECK(state->device == device, "the checkpoint is of device ", int(state->device),
                ", not ", int(device));
    TORCH_CHECK(pools.number(device, state->id), "Could not find private pool id (",
                state->id.first, ", ", state->id.second, ")");
    Restored r;
    char why[512] = "";
    int st = api->restore(state->layout, on_freed, on_made, &r, why, sizeof why);
    if (history.active()) history.restored(device, r.freed, r.made);
    TORCH_CHECK(st == FS_TORCH_OK, "fsdpshim: cannot put the checkpoint of private pool (",
                state->id.first, ", ", state->id.second, ") back: ", why);
    cca::CheckpointDelta delta;
    delta.ptrs_freed = std::move(r.freed);
    for (void *p : r.made)
        delta.dataptrs_allocd.emplace_back(p, p, deleter,
                                           c10::Device(c10::DeviceType::CUDA, device));
    return delta;
}

} // namespace fsdpshim
