// alloc.cpp - PyTorch's allocator interface (class Adapter), the top of the
// adapter: allocation, streams and the cache here, each method one call of
// the shim's table (../torch_api.h), with PyTorch's semantics carried by the
// shim's allocator itself (a block freed on the stream it was allocated for,
// reusable there at once; recorded streams; statistics); every other method
// hands on to the file of its concern (adapter.h), none of which calls back.
#include "adapter.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <cuda_runtime_api.h>

namespace fsdpshim
{

namespace
{

// PyTorch's profiler (profile_memory=True) hears of every allocation and
// free with the device's totals after it, as from PyTorch's own allocator;
// only while it listens, since the figures cost a call of the shim's each.
void report_to_profiler(int device, void *ptr, int64_t size)
{
    fs_torch_stats st{};
    api->stats(device, &st);
    c10::reportMemoryUsageToProfiler(ptr, size, size_t(st.allocated_bytes[0].current),
                                     size_t(st.reserved_bytes[0].current),
                                     c10::Device(c10::DeviceType::CUDA, c10::DeviceIndex(device)));
}

// The deleter of every DataPtr the adapter hands out: PyTorch frees a
// tensor's memory on the stream it was allocated for.
void raw_free(void *ptr)
{
    if (!ptr) return;
    History &h = adapter().history();
    if (h.active()) h.free_requested(ptr);
    if (adapter().pools().capturing() && adapter().capture_reuse().hold_free(ptr)) return;
    fs_torch_block b{};
    bool profiled = c10::memoryProfilingEnabled() && api->block_of(ptr, &b) == FS_TORCH_OK;
    int st = api->free(ptr);
    TORCH_INTERNAL_ASSERT(st == FS_TORCH_OK, "fsdpshim: free of ", ptr,
                          " that is not a live block of the shim's (", st, ")");
    if (profiled) report_to_profiler(b.device, ptr, -int64_t(b.size));
}

// The deleter while PyTorch's caching is off (enable(false)): the memory
// came from the device itself.
void uncached_free(void *ptr)
{
    if (!ptr) return;
    int st = api->device_free(ptr);
    TORCH_INTERNAL_ASSERT(st == FS_TORCH_OK, "fsdpshim: cudaFree of ", ptr, " failed (", st, ")");
}

std::string bytes(size_t n)
{
    char buf[64];
    if (n >= (size_t(1) << 30))
        snprintf(buf, sizeof buf, "%.2f GiB", double(n) / double(size_t(1) << 30));
    else
        snprintf(buf, sizeof buf, "%.2f MiB", double(n) / double(size_t(1) << 20));
    return buf;
}

} // namespace

void *Adapter::alloc_on(c10::DeviceIndex device, size_t size, cudaStream_t stream)
{
    if (size == 0) return nullptr;
    // PyTorch's own refusal, before any device is asked
    constexpr size_t one_exabyte = size_t(1) << 60;
    TORCH_CHECK_WITH(OutOfMemoryError, size < one_exabyte,
                     "CUDA out of memory. Tried to allocate more than 1EB memory.");
    if (!enabled_.load(std::memory_order_relaxed)) return uncached_alloc(device, size);
    fs_torch_oom oom{};
    void *p = nullptr;
    bool traced = history_.active();
    if (traced) history_.begin_alloc();
    uint64_t pool = pools_.route(device, stream);
    bool reuse = pool && capture_reuse_.wanted();
    if (reuse) capture_reuse_.reclaim(stream);
    int st = api->malloc(device, stream, pool, size, &p, &oom);
    if (st == FS_TORCH_OK) {
        if (reuse) capture_reuse_.allocated(p);
        if (traced) history_.alloc(device, p, size, stream);
        if (c10::memoryProfilingEnabled()) {
            fs_torch_block b{};
            if (api->block_of(p, &b) == FS_TORCH_OK) report_to_profiler(device, p, int64_t(b.size));
        }
        return p;
    }
    if (traced && st == FS_TORCH_OOM) history_.oom(device, oom.device_free, size, stream);
    if (st == FS_TORCH_OOM && c10::memoryProfilingEnabled())
        c10::reportOutOfMemoryToProfiler(int64_t(size), oom.allocated, oom.reserved,
                                         c10::Device(c10::DeviceType::CUDA, device));
    TORCH_CHECK(st == FS_TORCH_OOM, "fsdpshim: the shim could not allocate ", size,
                " bytes on device ", int(device),
                " (the device failed a call, or the shim is off)");
    {
        // observers first, as PyTorch's allocator calls them before it throws
        std::lock_guard<std::mutex> g(observers_lock_);
        for (auto &obs : oom_observers_)
            obs(device, oom.allocated, oom.device_total, oom.device_free);
    }
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate ", bytes(size),
                     ". GPU ", int(device), " has a total capacity of ", bytes(oom.device_total),
                     " of which ", bytes(oom.device_free), " is free. Of the allocated memory ",
                     bytes(oom.allocated), " is allocated by PyTorch, and ",
                     bytes(oom.reserved > oom.allocated ? oom.reserved - oom.allocated : 0),
                     " is reserved by the shim but unallocated. ", oom.why);
}

// PyTorch's caching switched off (torch.cuda.caching_allocator_enable(False)):
// as PyTorch's uncached path, each allocation is the device's own
// cudaMalloc and each free its cudaFree, outside the shim's cache and its
// statistics (memory_stats() counts only what the cache serves, as natively).
void *Adapter::uncached_alloc(c10::DeviceIndex device, size_t size)
{
    void *p = nullptr;
    int st = api->device_malloc(device, size, &p);
    if (st == FS_TORCH_OK) return p;
    size_t free_bytes = 0, total = 0;
    {
        c10::cuda::CUDAGuard guard(device);
        (void)cudaMemGetInfo(&free_bytes, &total);
    }
    TORCH_CHECK_WITH(OutOfMemoryError, st != FS_TORCH_OOM, "CUDA out of memory. Tried to allocate ",
                     bytes(size), ". GPU ", int(device), " has a total capacity of ", bytes(total),
                     " of which ", bytes(free_bytes),
                     " is free. PyTorch's caching allocator is disabled: the request went to "
                     "cudaMalloc directly.");
    TORCH_CHECK(false, "fsdpshim: cudaMalloc of ", size, " bytes on device ", int(device),
                " failed");
    return nullptr;
}

c10::DataPtr Adapter::allocate(size_t size)
{
    c10::DeviceIndex device = c10::cuda::current_device();
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
    bool cached = enabled_.load(std::memory_order_relaxed);
    void *p = alloc_on(device, size, stream);
    return {p, p, cached ? &raw_free : &uncached_free, c10::Device(c10::DeviceType::CUDA, device)};
}

c10::DeleterFnPtr Adapter::raw_deleter() const
{
    return enabled_.load(std::memory_order_relaxed) ? &raw_free : &uncached_free;
}

void Adapter::copy_data(void *dest, const void *src, std::size_t count) const
{
    C10_CUDA_CHECK(cudaMemcpy(dest, src, count, cudaMemcpyDeviceToDevice));
}

void *Adapter::raw_alloc(size_t nbytes)
{
    c10::DeviceIndex device = c10::cuda::current_device();
    return alloc_on(device, nbytes, c10::cuda::getCurrentCUDAStream(device).stream());
}

void *Adapter::raw_alloc_with_stream(size_t nbytes, cudaStream_t stream)
{
    return alloc_on(c10::cuda::current_device(), nbytes, stream);
}

// As PyTorch's: the caching state at the delete decides, so memory taken
// while caching was off is given back while it is still off.
void Adapter::raw_delete(void *ptr)
{
    if (enabled_.load(std::memory_order_relaxed))
        raw_free(ptr);
    else
        uncached_free(ptr);
}

void Adapter::init(int device_count)
{
    device_count_ = device_count;
    settings_.start(device_count);
    initialized_.store(true);
}

bool Adapter::initialized()
{
    return initialized_.load();
}

// As PyTorch's: {0, 0} gives back the shared cache and every private pool
// let go (use count 0); a pool's id, that pool if it is let go.
void Adapter::emptyCache(c10::MempoolId_t mempool_id)
{
    bool traced = history_.active();
    if (traced) history_.begin_release();
    pools_.empty(device_count_, mempool_id);
    if (traced) history_.end_call();
}

void Adapter::enable(bool value)
{
    enabled_.store(value);
}

bool Adapter::isEnabled() const
{
    return enabled_.load();
}

void Adapter::cacheInfo(c10::DeviceIndex device, size_t *largestBlock)
{
    fs_torch_stats st{};
    api->stats(device, &st);
    *largestBlock = size_t(st.largest_free_block);
}

void *Adapter::getBaseAllocation(void *ptr, size_t *size)
{
    void *base = nullptr;
    size_t n = 0;
    TORCH_CHECK(api->base_allocation(ptr, &base, &n) == FS_TORCH_OK, "fsdpshim: ", ptr,
                " is not a live block of the shim's");
    if (size) *size = n;
    return base;
}

void Adapter::recordStream(const c10::DataPtr &ptr, c10::cuda::CUDAStream stream)
{
    // PyTorch records only memory of its own cache's: a DataPtr with
    // another deleter (from_blob, uncached) is left alone, as natively
    if (!ptr.get() || ptr.get_deleter() != &raw_free) return;
    if (api->record_stream(ptr.get(), stream.stream()) != FS_TORCH_OK) return;
    if (history_.active()) history_.record_use(ptr.get(), stream.stream());
    if (pools_.capturing()) capture_reuse_.record_use(ptr.get(), stream.stream());
}

std::vector<cca::StreamSegmentSize> Adapter::getExpandableSegmentSizes(c10::DeviceIndex /*device*/)
{
    return {};
}

void Adapter::enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex dev_to_access)
{
    c10::cuda::CUDAGuard g(dev);
    cudaError_t err = cudaDeviceEnablePeerAccess(dev_to_access, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError(); // clear the error
    } else {
        C10_CUDA_CHECK(err);
    }
}

cudaError_t Adapter::memcpyAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                 size_t count, cudaStream_t stream, bool p2p_enabled)
{
    // the shim's blocks come from cudaMalloc'd or stream-ordered segments;
    // across devices without peer access only the peer copy works for both
    if (p2p_enabled || dstDevice == srcDevice)
        return cudaMemcpyAsync(dst, src, count, cudaMemcpyDeviceToDevice, stream);
    return cudaMemcpyPeerAsync(dst, dstDevice, src, srcDevice, count, stream);
}

void Adapter::attachOutOfMemoryObserver(cca::OutOfMemoryObserver observer)
{
    std::lock_guard<std::mutex> g(observers_lock_);
    oom_observers_.push_back(std::move(observer));
}

#if FS_TORCH_MINOR >= 12
// Called by PyTorch's allocator when a request is refused before the device
// is asked (a memory fraction); the shim's cap refuses as the device would,
// an out-of-memory error the OOM observers hear of.
void Adapter::attachOomRejectionObserver(cca::OomRejectionObserver observer)
{
    std::lock_guard<std::mutex> g(observers_lock_);
    rejection_observers_.push_back(std::move(observer));
}
#endif

std::string Adapter::name()
{
    return "fsdpshim";
}

// ---- settings

double Adapter::getMemoryFraction(c10::DeviceIndex device)
{
    return settings_.fraction(device);
}

void Adapter::setMemoryFraction(double fraction, c10::DeviceIndex device)
{
    settings_.set_fraction(fraction, device);
}

void Adapter::watch_settings()
{
    Settings::watch();
}

// ---- statistics

c10::CachingDeviceAllocator::DeviceStats Adapter::getDeviceStats(c10::DeviceIndex device)
{
    return device_stats(device);
}

void Adapter::resetAccumulatedStats(c10::DeviceIndex device)
{
    api->reset_accumulated(device);
}

void Adapter::resetPeakStats(c10::DeviceIndex device)
{
    api->reset_peak(device);
}

// ---- snapshot

cca::SnapshotInfo Adapter::snapshot(c10::MempoolId_t mempool_id, bool include_traces)
{
    return snapshot_of(device_count_, mempool_id, include_traces, pools_, history_);
}

// ---- memory history and the trace trackers

void Adapter::attachAllocatorTraceTracker(cca::AllocatorTraceTracker tracker)
{
    history_.attach_tracker(std::move(tracker));
}

bool Adapter::isHistoryEnabled()
{
    return history_.on();
}

void Adapter::recordHistory(bool enabled, cca::CreateContextFn context_recorder,
                            size_t alloc_trace_max_entries, cca::RecordContext when,
                            bool clearHistory, const std::vector<std::string> &skip_actions)
{
    history_.configure(enabled, context_recorder, alloc_trace_max_entries, when, clearHistory,
                       skip_actions, device_count_);
}

// getContextForPointer from PyTorch 2.12 on; annotations from 2.14
#if FS_TORCH_MINOR >= 12
std::shared_ptr<c10::GatheredContext> Adapter::getContextForPointer(const void *ptr)
{
    return history_.context_of(ptr);
}
#endif

void Adapter::recordAnnotation(const std::vector<std::pair<std::string, std::string>> &md)
{
    history_.record_annotation(md);
}

void Adapter::pushCompileContext(std::string &md)
{
    history_.push_compile_context(md);
}

void Adapter::popCompileContext()
{
    history_.pop_compile_context();
}

void Adapter::setUserMetadata(const std::string &metadata)
{
    history_.set_user_metadata(metadata);
}

std::string Adapter::getUserMetadata()
{
    return history_.user_metadata();
}

#if FS_TORCH_MINOR >= 14
bool Adapter::supportsUserMetadata()
{
    return true;
}

void Adapter::annotateMemory(const void *ptr, const std::string &metadata)
{
    history_.annotate(ptr, metadata);
}
#endif

// ---- private pools

void Adapter::createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                                 std::shared_ptr<cca::CUDAAllocator> allocator)
{
    pools_.create_or_incref(device, mempool_id, std::move(allocator));
}

void Adapter::beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                                  std::function<bool(cudaStream_t)> filter)
{
    pools_.begin(device, mempool_id, std::move(filter));
}

void Adapter::endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id)
{
    pools_.end(device, mempool_id, capture_reuse_);
}

void Adapter::releasePool(c10::DeviceIndex device, c10::MempoolId_t mempool_id)
{
    pools_.release(device, mempool_id);
}

int Adapter::getPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t mempool_id)
{
    return pools_.use_count(device, mempool_id);
}

void Adapter::setUseOnOOM(c10::DeviceIndex device, c10::MempoolId_t mempool_id, bool use_on_oom)
{
    pools_.set_use_on_oom(device, mempool_id, use_on_oom);
}

void Adapter::setNoSplit(c10::DeviceIndex device, c10::MempoolId_t mempool_id)
{
    pools_.set_no_split(device, mempool_id);
}

bool Adapter::checkPoolLiveAllocations(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                                       const std::unordered_set<void *> &expected)
{
    return pools_.live_blocks_are(device, mempool_id, expected);
}

// ---- checkpoints of private pools

std::shared_ptr<cca::AllocatorState> Adapter::getCheckpointState(c10::DeviceIndex device,
                                                                 c10::MempoolId_t id)
{
    return checkpoint_of(device, id, pools_);
}

// the blocks made live again are the cache's, freed through its deleter
cca::CheckpointDelta Adapter::setCheckpointPoolState(c10::DeviceIndex device,
                                                     std::shared_ptr<cca::AllocatorState> pps)
{
    return restore_checkpoint(device, std::move(pps), pools_, history_, &raw_free);
}

// ---- IPC

cca::ShareableHandle Adapter::shareIpcHandle(void *ptr)
{
    return share_ipc_handle(ptr);
}

std::shared_ptr<void> Adapter::getIpcDevPtr(std::string handle)
{
    return open_ipc_handle(handle);
}

Adapter &adapter()
{
    static Adapter *the = new Adapter(); // never destroyed: PyTorch may free at exit
    return *the;
}

} // namespace fsdpshim
