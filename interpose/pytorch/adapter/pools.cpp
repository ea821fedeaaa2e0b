// pools.cpp - PyTorch's private pools (torch.cuda.MemPool, use_mem_pool,
// the pools of CUDA graph captures) over the shim's: each MempoolId_t gets a
// number of the shim's on its device, and what PyTorch's own allocator
// keeps about a pool is kept here as it keeps it (docs/pytorch.md):
//   - a use count: createOrIncrefPool and beginAllocateToPool add one,
//     releasePool takes one; at zero the pool is let go (the shim then
//     gives its free memory back at the next emptyCache, and the rest once
//     freed), and its number is forgotten at that emptyCache;
//   - the captures under way per device, each a pool and a filter on the
//     allocating stream: an allocation goes to the newest whose filter
//     takes its stream (a graph's capture stream, use_mem_pool's thread);
//   - use_on_oom, no_split and a MemPool's own allocator, which the shim's
//     pool is configured with: that allocator's raw_alloc gives whole
//     segments, and its raw_delete takes them back.
// The shim's pool does the rest: its memory serves only its own
// allocations, on the stream they were made for, and nothing of it goes
// while the pool is held.
#include "adapter.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace fsdpshim
{

namespace
{

// A MemPool's allocator as the shim's segment source. Kept alive with the
// process's (the shim may free a segment of the pool at any later
// emptyCache, after PyTorch dropped the pool).
struct Source {
    std::shared_ptr<cca::CUDAAllocator> allocator;
};

int source_alloc(void *ctx, int device, size_t size, void **out)
{
    auto *src = static_cast<Source *>(ctx);
    try {
        c10::cuda::CUDAGuard g(static_cast<c10::DeviceIndex>(device));
        // PyTorch calls its pools' allocators in relaxed capture mode, so
        // that a cudaMalloc inside one does not break a capture under way
        c10::cuda::CUDAStreamCaptureModeGuard relaxed(cudaStreamCaptureModeRelaxed);
        *out = src->allocator->raw_alloc(size);
    } catch (const std::exception &) {
        *out = nullptr;
    }
    return *out ? 0 : 1;
}

void source_free(void *ctx, int device, void *ptr, size_t /*size*/)
{
    auto *src = static_cast<Source *>(ctx);
    try {
        c10::cuda::CUDAGuard g(static_cast<c10::DeviceIndex>(device));
        src->allocator->raw_delete(ptr);
    } catch (const std::exception &e) {
        TORCH_WARN("fsdpshim: a MemPool's allocator failed to free ", ptr, ": ", e.what());
    }
}

} // namespace

Pools::Device &Pools::device(c10::DeviceIndex d)
{
    TORCH_CHECK(d >= 0, "fsdpshim: invalid device ", int(d));
    if (devices_.size() <= size_t(d)) devices_.resize(size_t(d) + 1);
    return devices_[size_t(d)];
}

Pools::Pool &Pools::pool(c10::DeviceIndex d, c10::MempoolId_t id, const char *what)
{
    auto &pools = device(d).pools;
    auto it = pools.find(id);
    TORCH_CHECK(it != pools.end(), what, ": no private pool (", id.first, ", ", id.second,
                ") on device ", int(d));
    return it->second;
}

void Pools::configure(c10::DeviceIndex d, const Pool &p)
{
    fs_torch_pool_conf c{};
    c.held = p.use_count > 0;
    c.lend_on_oom = p.use_on_oom;
    c.no_split = p.no_split;
    if (p.allocator) {
        static std::mutex sources_lock;
        static std::map<cca::CUDAAllocator *, Source *> sources; // never freed: see Source
        std::lock_guard<std::mutex> g(sources_lock);
        Source *&src = sources[p.allocator.get()];
        if (!src) src = new Source{p.allocator};
        c.segment_alloc = source_alloc;
        c.segment_free = source_free;
        c.segment_ctx = src;
    }
    api->pool_configure(d, p.number, &c);
}

void Pools::create_or_incref(c10::DeviceIndex d, c10::MempoolId_t id,
                             std::shared_ptr<cca::CUDAAllocator> allocator)
{
    std::lock_guard<std::mutex> g(lock_);
    auto &pools = device(d).pools;
    auto it = pools.find(id);
    if (it == pools.end()) {
        Pool p{next_++, 1, false, false, std::move(allocator)};
        ids_[p.number] = id;
        pools.emplace(id, p);
        configure(d, p);
        return;
    }
    // as PyTorch: sharing a pool needs it in use, and keeps its allocator
    TORCH_CHECK(it->second.use_count > 0, "fsdpshim: private pool (", id.first, ", ", id.second,
                ") was released and cannot be shared again");
    TORCH_CHECK(!allocator, "fsdpshim: private pool (", id.first, ", ", id.second,
                ") exists; an allocator can only be given when it is made");
    it->second.use_count++;
}

void Pools::begin(c10::DeviceIndex d, c10::MempoolId_t id, std::function<bool(cudaStream_t)> filter)
{
    create_or_incref(d, id, nullptr);
    std::lock_guard<std::mutex> g(lock_);
    auto &caps = device(d).captures;
    for (auto &c : caps) {
        if (c.first != id) continue;
        // undo the reference just taken before refusing, as nothing began
        pool(d, id, "beginAllocateToPool").use_count--;
        TORCH_CHECK(false, "beginAllocateToPool: already recording to mempool_id");
    }
    caps.emplace_back(id, std::move(filter));
    capturing_.fetch_add(1, std::memory_order_acq_rel);
}

void Pools::end(c10::DeviceIndex d, c10::MempoolId_t id, CaptureReuse &reuse)
{
    std::lock_guard<std::mutex> g(lock_);
    auto &caps = device(d).captures;
    auto it = std::find_if(caps.begin(), caps.end(), [&](auto &c) { return c.first == id; });
    TORCH_CHECK(it != caps.end(), "endAllocatePool: not currently recording to mempool_id");
    caps.erase(it);
    if (capturing_.fetch_sub(1, std::memory_order_acq_rel) == 1) reuse.captures_ended();
}

void Pools::release(c10::DeviceIndex d, c10::MempoolId_t id)
{
    std::lock_guard<std::mutex> g(lock_);
    Pool &p = pool(d, id, "releasePool");
    TORCH_CHECK(p.use_count > 0, "releasePool: private pool (", id.first, ", ", id.second,
                ") is not in use");
    if (--p.use_count == 0) configure(d, p); // let go
}

int Pools::use_count(c10::DeviceIndex d, c10::MempoolId_t id)
{
    std::lock_guard<std::mutex> g(lock_);
    return pool(d, id, "getPoolUseCount").use_count;
}

void Pools::set_use_on_oom(c10::DeviceIndex d, c10::MempoolId_t id, bool on)
{
    std::lock_guard<std::mutex> g(lock_);
    Pool &p = pool(d, id, "setUseOnOOM");
    p.use_on_oom = on;
    configure(d, p);
}

void Pools::set_no_split(c10::DeviceIndex d, c10::MempoolId_t id)
{
    std::lock_guard<std::mutex> g(lock_);
    Pool &p = pool(d, id, "setNoSplit");
    p.no_split = true;
    configure(d, p);
}

uint64_t Pools::route_slow(c10::DeviceIndex d, cudaStream_t stream)
{
    std::vector<std::pair<uint64_t, std::function<bool(cudaStream_t)>>> caps;
    {
        std::lock_guard<std::mutex> g(lock_);
        Device &dev = device(d);
        for (auto it = dev.captures.rbegin(); it != dev.captures.rend(); ++it)
            caps.emplace_back(dev.pools.at(it->first).number, it->second);
    }
    // the filters run outside the lock: one may ask CUDA about the stream
    for (auto &c : caps)
        if (c.second(stream)) return c.first;
    return 0;
}

void Pools::empty(int device_count, c10::MempoolId_t id)
{
    bool all = id.first == 0 && id.second == 0;
    std::lock_guard<std::mutex> g(lock_);
    for (int d = 0; d < device_count; d++) {
        Device &dev = device(c10::DeviceIndex(d));
        if (all) api->empty_cache(d); // the shared cache and every pool let go
        for (auto it = dev.pools.begin(); it != dev.pools.end();) {
            bool mine = all || it->first == id;
            if (!mine || it->second.use_count > 0) {
                ++it;
                continue;
            }
            if (!all) api->pool_empty(d, it->second.number);
            it = dev.pools.erase(it); // PyTorch forgets a released pool here too
        }
    }
}

uint64_t Pools::number(c10::DeviceIndex d, c10::MempoolId_t id)
{
    std::lock_guard<std::mutex> g(lock_);
    auto &pools = device(d).pools;
    auto it = pools.find(id);
    return it == pools.end() ? 0 : it->second.number;
}

c10::MempoolId_t Pools::id_of(uint64_t number)
{
    std::lock_guard<std::mutex> g(lock_);
    auto it = ids_.find(number);
    return it == ids_.end() ? c10::MempoolId_t{0, 0} : it->second;
}

// As PyTorch's: the pool's blocks handed out are exactly `expected`
// (frees still waiting for their streams do not count).
bool Pools::live_blocks_are(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                            const std::unordered_set<void *> &expected)
{
    uint64_t n = number(device, mempool_id);
    TORCH_CHECK(n != 0, "Could not find pool of id (", mempool_id.first, ", ", mempool_id.second,
                ")");
    size_t live = 0;
    for (const fs_torch_walk_entry &e : walk(device)) {
        if (e.state != FS_TORCH_LIVE || e.pool != n) continue;
        if (!expected.count(reinterpret_cast<void *>(e.addr))) return false;
        live++;
    }
    return live == expected.size();
}

} // namespace fsdpshim
