// snapshot.cpp - PyTorch's snapshot() from a walk of the shim's segments:
// each segment with its blocks, in PyTorch's structure
// (torch.cuda.memory_snapshot(), _snapshot()["segments"], and what PyTorch
// 2.15's NCCL process group reads at init). A block is `allocated` while
// handed out and `active` while handed out or freed but still waiting for
// its streams' work, as PyTorch counts them. With memory history on
// (history.cpp) blocks and segments carry the stacks they were allocated
// from and the per-device traces are filled; without, they are empty.
//
// The trace trackers (attachAllocatorTraceTracker: NCCL's buffer
// registration, which PyTorch 2.15's default process group sets up at init
// right after reading a snapshot) get every entry PyTorch's own allocator
// gives them: blocks allocated, frees requested and completed, segments
// allocated, freed, mapped and unmapped, OOMs (history.cpp makes the
// entries, history on or off). They are called after the shim's call has
// returned, holding no lock of the shim's or the adapter's (the table
// queues the events), so a tracker may call NCCL and CUDA; PyTorch's own
// allocator calls them under its lock.
#include "adapter.h"

#include <c10/util/Exception.h>

#include <limits>

namespace fsdpshim
{

// The walk of one device, sized by asking twice when the first guess was short.
std::vector<fs_torch_walk_entry> walk(int device)
{
    std::vector<fs_torch_walk_entry> w(256);
    for (;;) {
        size_t n = api->walk(device, w.data(), w.size());
        if (n <= w.size()) {
            w.resize(n);
            return w;
        }
        w.resize(n + n / 4 + 16); // what was freed or grown meanwhile
    }
}

cca::SnapshotInfo Adapter::snapshot(c10::MempoolId_t mempool_id, bool include_traces)
{
    // one pool's segments when a pool is named, every segment otherwise,
    // each with the pool it belongs to
    bool one = mempool_id.first != 0 || mempool_id.second != 0;
    cca::SnapshotInfo out{}; // value-initialised: config_metadata's scalars are 0
    for (int d = 0; d < device_count_; d++) {
        uint64_t only = one ? pools_.number(c10::DeviceIndex(d), mempool_id) : 0;
        if (one && !only) continue;
        c10::CachingDeviceAllocator::SegmentInfo *seg = nullptr;
        for (const fs_torch_walk_entry &e : walk(d)) {
            if (e.state == FS_TORCH_SEGMENT && one && e.pool != only) {
                seg = nullptr;
                continue;
            }
            if (e.state == FS_TORCH_SEGMENT) {
                out.segments.emplace_back();
                seg = &out.segments.back();
                seg->device = c10::DeviceIndex(d);
                seg->address = size_t(e.addr);
                seg->total_size = e.size;
                seg->stream = e.stream;
                seg->is_large = e.large != 0;
                seg->is_expandable = e.expandable != 0;
                seg->owner_private_pool_id = e.pool ? pools_.id_of(e.pool) : c10::MempoolId_t{0, 0};
                continue;
            }
            if (!seg) continue;
            c10::CachingDeviceAllocator::BlockInfo b;
            b.size = e.size;
            b.requested_size = e.requested;
            b.allocated = e.state == FS_TORCH_LIVE;
            b.active = e.state == FS_TORCH_LIVE || e.state == FS_TORCH_PENDING;
            if (b.allocated) {
                seg->allocated_size += b.size;
                seg->requested_size += b.requested_size;
            }
            if (b.active) seg->active_size += b.size;
            seg->blocks.push_back(std::move(b));
        }
    }
    out.device_traces.resize(size_t(device_count_));
    history_.fill(out, include_traces);
    fs_torch_stats st{};
    api->stats(0, &st);
    out.config_metadata.max_split_size =
        st.max_split_size ? size_t(st.max_split_size) : std::numeric_limits<size_t>::max();
    out.config_metadata.last_allocator_settings = "fsdpshim";
    return out;
}

namespace
{

void on_event(void *ctx, int action, int device, uintptr_t addr, size_t size, void *stream)
{
    static_cast<Adapter *>(ctx)->hook_event(action, device, addr, size, stream);
}

} // namespace

void Adapter::install_hook()
{
    std::call_once(hook_once_, [this] { api->segment_hook(&on_event, this); });
}

void Adapter::attachAllocatorTraceTracker(cca::AllocatorTraceTracker tracker)
{
    install_hook(); // segment events and deferred frees' completions
    history_.attach_tracker(std::move(tracker));
}

void Adapter::hook_event(int action, int device, uintptr_t addr, size_t size, void *stream)
{
    if (history_.active()) history_.event(action, device, addr, size, stream);
}

} // namespace fsdpshim
