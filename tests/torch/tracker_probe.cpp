// tracker_probe.cpp - a trace tracker on whatever allocator PyTorch has
// (its own, or fsdpshim's adapter), attached as NCCL's buffer registration
// attaches one (CUDAAllocator::attachAllocatorTraceTracker, which Python
// cannot reach), keeping every entry it is given for adapter.py's Trackers
// tests, which read them through ctypes. Built against the PyTorch of the
// torch tests, as the adapter is.
#include <c10/cuda/CUDACachingAllocator.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

namespace
{

struct Entry {
    int action;
    uint64_t addr, size;
    uintptr_t stream;
};

std::mutex lock;
std::vector<Entry> entries;

} // namespace

extern "C" {

// From now on, every entry the current allocator gives its trackers is kept.
__attribute__((visibility("default"))) void fs_probe_attach(void)
{
    c10::cuda::CUDACachingAllocator::get()->attachAllocatorTraceTracker(
        [](const c10::CachingDeviceAllocator::TraceEntry &e) {
            std::lock_guard<std::mutex> g(lock);
            entries.push_back(
                Entry{int(e.action_), uint64_t(e.addr_), uint64_t(e.size_), uintptr_t(e.stream_)});
        });
}

// The action's name, as PyTorch's snapshot writes it (alloc, free_requested, ...).
__attribute__((visibility("default"))) const char *fs_probe_action_name(int action)
{
    using A = c10::CachingDeviceAllocator::TraceEntry::Action;
    switch (A(action)) {
    case A::ALLOC:
        return "alloc";
    case A::FREE_REQUESTED:
        return "free_requested";
    case A::FREE_COMPLETED:
        return "free_completed";
    case A::SEGMENT_ALLOC:
        return "segment_alloc";
    case A::SEGMENT_FREE:
        return "segment_free";
    case A::SEGMENT_MAP:
        return "segment_map";
    case A::SEGMENT_UNMAP:
        return "segment_unmap";
    case A::SNAPSHOT:
        return "snapshot";
    case A::OOM:
        return "oom";
    default:
        return "other";
    }
}

// Moves up to max kept entries out, oldest first; returns how many.
__attribute__((visibility("default"))) int fs_probe_take(int *action, uint64_t *addr,
                                                         uint64_t *size, uintptr_t *stream, int max)
{
    std::lock_guard<std::mutex> g(lock);
    int n = int(std::min<size_t>(entries.size(), size_t(max)));
    for (int i = 0; i < n; i++) {
        action[i] = entries[size_t(i)].action;
        addr[i] = entries[size_t(i)].addr;
        size[i] = entries[size_t(i)].size;
        stream[i] = entries[size_t(i)].stream;
    }
    entries.erase(entries.begin(), entries.begin() + n);
    return n;
}
}
