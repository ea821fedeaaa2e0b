// snapshot.cpp - PyTorch's snapshot() from a walk of the shim's segments:
// each segment with its blocks, in PyTorch's structure
// (torch.cuda.memory_snapshot(), _snapshot()["segments"], and what PyTorch
// 2.15's NCCL process group reads at init). A block is `allocated` while
// handed out and `active` while handed out or freed but still waiting for
// its streams' work, as PyTorch counts them. With memory history on
// (history.cpp) blocks and segments carry the stacks they were allocated
// from and the per-device traces are filled; without, they are empty.
#include "adapter.h"

#include <c10/util/Exception.h>

#include <limits>

namespace fsdpshim
{

cca::SnapshotInfo snapshot_of(int device_count, c10::MempoolId_t mempool_id, bool include_traces,
                              Pools &pools, History &history)
{
    // one pool's segments when a pool is named, every segment otherwise,
    // each with the pool it belongs to
    bool one = mempool_id.first != 0 || mempool_id.second != 0;
    cca::SnapshotInfo out{}; // value-initialised: config_metadata's scalars are 0
    for (int d = 0; d < device_count; d++) {
        uint64_t only = one ? pools.number(c10::DeviceIndex(d), mempool_id) : 0;
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
                seg->owner_private_pool_id = e.pool ? pools.id_of(e.pool) : c10::MempoolId_t{0, 0};
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
    out.device_traces.resize(size_t(device_count));
    history.fill(out, include_traces);
    fs_torch_stats st{};
    api->stats(0, &st);
    out.config_metadata.max_split_size =
        st.max_split_size ? size_t(st.max_split_size) : std::numeric_limits<size_t>::max();
    out.config_metadata.last_allocator_settings = "fsdpshim";
    return out;
}

} // namespace fsdpshim
