// stats.cpp - memory_stats() from the shim's own figures: the allocator
// keeps PyTorch's statistics under PyTorch's names (allocated, active,
// inactive split, reserved, requested, per pool, with the counters), so
// this only copies them into PyTorch's struct.
#include "adapter.h"

namespace fsdpshim
{

namespace
{

void copy(c10::CachingDeviceAllocator::Stat &out, const fs_torch_stat &in)
{
    out.current = in.current;
    out.peak = in.peak;
    out.allocated = in.allocated;
    out.freed = in.freed;
}

void copy(c10::CachingDeviceAllocator::StatArray &out, const fs_torch_stat in[3])
{
    for (size_t i = 0; i < 3; i++)
        copy(out[i], in[i]);
}

} // namespace

c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device)
{
    fs_torch_stats st{};
    api->stats(device, &st);
    c10::CachingDeviceAllocator::DeviceStats out;
    copy(out.allocation, st.allocation);
    copy(out.segment, st.segment);
    copy(out.active, st.active);
    copy(out.inactive_split, st.inactive_split);
    copy(out.allocated_bytes, st.allocated_bytes);
    copy(out.reserved_bytes, st.reserved_bytes);
    copy(out.active_bytes, st.active_bytes);
    copy(out.inactive_split_bytes, st.inactive_split_bytes);
    copy(out.requested_bytes, st.requested_bytes);
    out.num_alloc_retries = st.num_alloc_retries;
    out.num_ooms = st.num_ooms;
    out.num_sync_all_streams = st.num_sync_all_streams;
    out.num_device_alloc = st.num_device_alloc;
    out.num_device_free = st.num_device_free;
    // live blocks and whole segments of max_split_size or more
    copy(out.oversize_allocations, st.oversize_allocations);
    copy(out.oversize_segments, st.oversize_segments);
    out.max_split_size = st.max_split_size;
    return out;
}

} // namespace fsdpshim
