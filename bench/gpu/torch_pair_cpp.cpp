// torch_pair_cpp.cpp - the cached alloc+free pair of whatever allocator
// PyTorch is running, timed from C++ with no Python around it: the figure to
// put beside the shim's own pair from C (pair_bench), allocator against
// allocator, as SPEC section 14 sets the shim beside glibc and jemalloc.
// C++ because PyTorch's allocator interface (c10::cuda::CUDACachingAllocator)
// is C++ only; torch_pair.py compiles it against the running PyTorch's headers
// and loads it after `import torch`, so it binds to that process's allocator.
#include <c10/cuda/CUDACachingAllocator.h>

#include <atomic>
#include <chrono>

// ns per raw_alloc_with_stream + raw_delete of `size` bytes on `stream`,
// timed over `pairs` pairs after a tenth as many to warm the cache.
extern "C" double fs_torch_cpp_pair_ns(size_t size, long pairs, void *stream)
{
    c10::cuda::CUDACachingAllocator::CUDAAllocator *allocator =
        c10::cuda::CUDACachingAllocator::get();
    cudaStream_t s = static_cast<cudaStream_t>(stream);

    for (long i = 0; i < pairs / 10 + 1; i++)
        allocator->raw_delete(allocator->raw_alloc_with_stream(size, s));
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < pairs; i++)
        allocator->raw_delete(allocator->raw_alloc_with_stream(size, s));
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / pairs;
}

// From now on a trace tracker is attached to the allocator, as PyTorch
// 2.15's default NCCL process group always attaches one (its buffer
// registration): like NCCL's, it looks at each entry and acts on segment
// events alone (here: counts them). Returns how many entries it has seen
// so far, attaching it on the first call; -1 when the allocator takes no
// trackers (PyTorch's cudaMallocAsync backend refuses them).
extern "C" long fs_torch_cpp_tracker_entries(void)
{
    static std::atomic<long> entries{0}, segments{0};
    static bool attached = [] {
        try {
            c10::cuda::CUDACachingAllocator::get()->attachAllocatorTraceTracker(
                [](const c10::CachingDeviceAllocator::TraceEntry &e) {
                    entries.fetch_add(1, std::memory_order_relaxed);
                    if (e.action_ == c10::CachingDeviceAllocator::TraceEntry::SEGMENT_ALLOC)
                        segments.fetch_add(1, std::memory_order_relaxed);
                });
            return true;
        } catch (const std::exception &) {
            return false;
        }
    }();
    return attached ? entries.load() : -1;
}
