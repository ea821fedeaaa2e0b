// capture_reuse.cpp - PyTorch's graph_capture_record_stream_reuse setting:
// during a CUDA graph capture, a block freed with streams recorded on it
// (record_stream) becomes reusable on its own stream as soon as the
// captured graph orders all the work on it before what the stream
// captures next, rather than only once the capture has ended.
//
// Without the setting (and for any block it cannot judge) the free goes to
// the shim as every free does: pending until its streams' work is done,
// which during a capture means after the capture. With it, the free of a
// block allocated during the capture is held here with markers: the nodes
// the block's stream and each recorded stream end with at the free (their
// capture dependencies). An allocation on the block's stream during the
// capture then walks back from that stream's own last nodes; once every
// marker is among their ancestors, the graph runs the block's uses before
// anything the stream does next, so the shim forgets the recorded streams
// and frees the block on its stream. What is still held when the last
// capture ends is freed as usual. Only blocks allocated during a capture
// are judged: uses recorded before it began are not in the graph.
#include "adapter.h"

#include <c10/cuda/CUDAAllocatorConfig.h>
#include <c10/util/Exception.h>

#include <cuda_runtime_api.h>

namespace fsdpshim
{

namespace
{

// The capture a stream is in, and the nodes it currently ends with.
struct CaptureInfo {
    bool active = false;
    unsigned long long id = 0;
    cudaGraph_t graph = nullptr;
    std::vector<cudaGraphNode_t> ends;
};

CaptureInfo capture_of(cudaStream_t s)
{
    CaptureInfo c;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaGraphNode_t *deps = nullptr;
    size_t n = 0;
    if (cudaStreamGetCaptureInfo(s, &status, &c.id, &c.graph, &deps, nullptr, &n) != cudaSuccess) {
        (void)cudaGetLastError();
        return c;
    }
    c.active = status == cudaStreamCaptureStatusActive;
    if (deps) c.ends.assign(deps, deps + n);
    return c;
}

std::vector<cudaGraphNode_t> parents(cudaGraphNode_t node)
{
    size_t n = 0;
    if (cudaGraphNodeGetDependencies(node, nullptr, nullptr, &n) != cudaSuccess || n == 0)
        return {};
    std::vector<cudaGraphNode_t> out(n);
    if (cudaGraphNodeGetDependencies(node, out.data(), nullptr, &n) != cudaSuccess) return {};
    out.resize(n);
    return out;
}

} // namespace

bool CaptureReuse::wanted() const
{
    return cca::CUDAAllocatorConfig::graph_capture_record_stream_reuse();
}

void CaptureReuse::allocated(void *ptr)
{
    std::lock_guard<std::mutex> g(lock_);
    in_capture_.insert(ptr);
}

void CaptureReuse::record_use(void *ptr, cudaStream_t stream)
{
    std::lock_guard<std::mutex> g(lock_);
    if (in_capture_.count(ptr)) uses_[ptr].push_back(stream);
}

bool CaptureReuse::hold_free(void *ptr)
{
    std::vector<cudaStream_t> streams;
    {
        std::lock_guard<std::mutex> g(lock_);
        if (!in_capture_.erase(ptr)) return false;
        auto it = uses_.find(ptr);
        if (it == uses_.end()) return false; // nothing recorded: freed at once anyway
        streams = std::move(it->second);
        uses_.erase(it);
    }
    fs_torch_block b{};
    if (api->block_of(ptr, &b) != FS_TORCH_OK) return false;
    streams.push_back(cudaStream_t(b.stream));
    Held held{cudaStream_t(b.stream), 0, {}};
    cudaGraph_t graph = nullptr;
    for (cudaStream_t s : streams) {
        CaptureInfo c = capture_of(s);
        if (!c.active) return false; // a stream outside the capture: after it
        TORCH_INTERNAL_ASSERT(!graph || graph == c.graph,
                              "All streams in the same capture should agree on the graph");
        graph = c.graph;
        held.capture = c.id;
        for (cudaGraphNode_t n : c.ends)
            if (std::find(held.markers.begin(), held.markers.end(), n) == held.markers.end())
                held.markers.push_back(n);
    }
    if (held.markers.empty()) return false;
    std::lock_guard<std::mutex> g(lock_);
    held_[ptr] = std::move(held);
    return true;
}

void CaptureReuse::reclaim(cudaStream_t stream)
{
    {
        std::lock_guard<std::mutex> g(lock_);
        if (held_.empty()) return;
    }
    CaptureInfo c = capture_of(stream);
    if (!c.active || c.ends.empty()) return;
    std::vector<void *> ready;
    {
        std::lock_guard<std::mutex> g(lock_);
        // every node the stream's work so far depends on, walked back once
        std::unordered_set<cudaGraphNode_t> &seen = visited_[{c.id, stream}];
        std::vector<cudaGraphNode_t> todo;
        for (cudaGraphNode_t n : c.ends)
            if (seen.insert(n).second) todo.push_back(n);
        while (!todo.empty()) {
            cudaGraphNode_t n = todo.back();
            todo.pop_back();
            for (cudaGraphNode_t p : parents(n))
                if (seen.insert(p).second) todo.push_back(p);
        }
        for (auto it = held_.begin(); it != held_.end();) {
            const Held &h = it->second;
            bool done = h.stream == stream && h.capture == c.id;
            for (size_t i = 0; done && i < h.markers.size(); i++)
                done = seen.count(h.markers[i]) > 0;
            if (done) {
                ready.push_back(it->first);
                it = held_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (void *p : ready) {
        api->forget_uses(p); // the graph orders them
        api->free(p);
    }
}

void CaptureReuse::captures_ended()
{
    std::vector<void *> left;
    {
        std::lock_guard<std::mutex> g(lock_);
        for (auto &h : held_)
            left.push_back(h.first);
        held_.clear();
        visited_.clear();
        in_capture_.clear();
        uses_.clear();
    }
    for (void *p : left)
        api->free(p); // after the recorded streams' work, as any free
}

} // namespace fsdpshim
