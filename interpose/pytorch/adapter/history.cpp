// history.cpp - PyTorch's memory history (torch.cuda.memory._record_memory_history)
// served by the adapter: the trace of allocator actions per device that
// _snapshot()["device_traces"], _dump_snapshot() and pytorch.org/memory_viz
// read, the stack each live block was allocated from, and the program's
// annotations (global_record_annotations: record_function's regions, the
// snapshot's external_annotations).
//
// What is recorded and with which stack follows PyTorch's RecordContext:
// STATE keeps the allocating stack of live blocks only (the snapshot's
// frames), ALLOC also puts it in the trace's alloc and free entries, ALL
// takes a stack at each free as well. Entries go to a ring of
// alloc_trace_max_entries per device, the oldest overwritten.
//
// The stacks are PyTorch's own objects (GatheredContext, from the recorder
// PyTorch passes), so they live here, in the adapter, keyed by block
// address, not in the shim's C allocator; no stack is gathered while
// history is off. A free whose block has recorded streams completes when
// the shim says so (the table's event hook, FS_TORCH_FREE_COMPLETED); one
// that completed outside a call of the adapter's (a host synchronisation
// retired it) is closed when its address is handed out again, so that
// memory_viz never sees two live blocks at one address.
//
// PyTorch's trace trackers (attachAllocatorTraceTracker: NCCL's buffer
// registration, which PyTorch 2.15's default process group sets up at init
// right after reading a snapshot) get the same entries, every action
// (skip_actions only thins the history), with or without history, as
// PyTorch's own allocator gives them: blocks allocated, frees requested and
// completed, segments allocated, freed, mapped and unmapped (the table's
// event hook), OOMs. They are called after the shim's call has returned,
// holding no lock of the shim's or the adapter's (the table queues the
// events), so a tracker may call NCCL and CUDA; PyTorch's own allocator
// calls them under its lock. With history on, each call's entries are handed to
// the trackers once the call has left every lock (Outbox). With history
// off (PyTorch 2.15's NCCL process group attaches a tracker to every
// distributed job) they take a path of their own, alloc_tracked and
// free_tracked: nothing is followed but the blocks used on other streams
// than their own, whose frees wait, and each entry goes to the trackers as
// it is made, no lock held.
#include "adapter.h"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace fsdpshim
{

namespace
{

using TE = c10::CachingDeviceAllocator::TraceEntry;

} // namespace

// What the history keeps per thread, in one thread_local: a call looks it
// up once (each lookup of a thread_local in a library loaded at run time is
// a call of the loader's).
struct History::PerThread {
    // The stack gathered for the call in progress: the segment events that
    // call causes are recorded with it, as PyTorch records a segment's
    // allocation with the context of the request that grew it.
    std::shared_ptr<c10::GatheredContext> call_context;
    // _set_memory_metadata's string: the calling thread's, on the entries
    // its calls make (PyTorch 2.15 keeps it per thread too)
    std::string metadata;
    // The entries the call in progress made, for the trackers; the room
    // kept from call to call. While they are handed on, the entries of a
    // tracker's own calls wait in `nested`, for the next round.
    std::vector<TE> outgoing, nested;
    bool delivering = false;
};

namespace
{
thread_local History::PerThread per_thread;

void on_event(void *ctx, int action, int device, uintptr_t addr, size_t size, void *stream)
{
    History *h = static_cast<History *>(ctx);
    if (h->active()) h->event(action, device, addr, size, stream);
}

} // namespace

void History::hear_segment_events()
{
    std::call_once(hook_once_, [this] { api->segment_hook(&on_event, this); });
}

void History::configure(bool enabled, cca::CreateContextFn recorder, size_t max_entries,
                        cca::RecordContext when, bool clear,
                        const std::vector<std::string> &skip_actions, int device_count)
{
    if (enabled) hear_segment_events(); // segment events and deferred frees' completions
    TORCH_CHECK(!enabled || when == cca::RecordContext::NEVER || recorder,
                "memory history with stacks needs a context recorder");
    std::lock_guard<std::mutex> g(lock_);
    recorder_ = enabled ? recorder : nullptr;
    when_ = enabled ? when : cca::RecordContext::NEVER;
    max_entries_ = std::max<size_t>(max_entries, 1);
    skip_.clear();
    for (const std::string &a : skip_actions)
        skip_.push_back(c10::CachingDeviceAllocator::parseTraceEntryAction(a));
    if (rings_.size() < size_t(device_count)) rings_.resize(size_t(device_count));
    if (!enabled || clear) {
        for (Ring &r : rings_) {
            r.entries.clear();
            r.next = 0;
        }
        annotations_.clear();
        annotations_next_ = 0;
    }
    segments_.clear(); // only stacks
    if (!enabled) {
        // the trackers go on without stacks, following only the blocks
        // whose frees will wait for their streams
        for (auto &b : blocks_)
            if (b.second.has_uses) used_.insert(b.first);
        blocks_.clear();
        for (auto &a : awaiting_)
            a.second.context.reset();
        if (!trackers_.load(std::memory_order_relaxed)) {
            used_.clear();
            awaiting_.clear();
        }
        counts_changed();
    }
    on_.store(enabled, std::memory_order_release);
    set_active();
}

void History::set_active()
{
    active_.store(on_.load(std::memory_order_relaxed) ||
                      trackers_.load(std::memory_order_relaxed) != nullptr,
                  std::memory_order_release);
}

void History::attach_tracker(cca::AllocatorTraceTracker tracker)
{
    hear_segment_events(); // segment events and deferred frees' completions
    std::lock_guard<std::mutex> g(lock_);
    auto grown = std::make_unique<Trackers>();
    if (const Trackers *now = trackers_.load(std::memory_order_relaxed)) *grown = *now;
    grown->push_back(std::move(tracker));
    trackers_.store(grown.get(), std::memory_order_release);
    tracker_sets_.push_back(std::move(grown));
    set_active();
}

History::Outbox::~Outbox()
{
    if (t.outgoing.empty() || t.delivering) return;
    h.deliver(t);
}

// Every entry in t.outgoing to every tracker, with the entries the
// trackers' own calls make meanwhile (in t.nested) after them.
void History::deliver(PerThread &t)
{
    const Trackers *trackers = trackers_.load(std::memory_order_acquire);
    if (!trackers) { // entries go out only once a tracker is there: never so
        t.outgoing.clear();
        return;
    }
    t.delivering = true;
    while (!t.outgoing.empty()) {
        for (const TE &e : t.outgoing) {
            for (const auto &tracker : *trackers) {
                try {
                    tracker(e);
                } catch (const std::exception &ex) {
                    TORCH_WARN("fsdpshim: an allocator trace tracker failed: ", ex.what());
                }
            }
        }
        t.outgoing.clear();
        t.outgoing.swap(t.nested);
    }
    t.delivering = false;
}

// With history off, an entry the trackers alone want, made outside every
// lock: to them at once, or after the round under way when a tracker's own
// call made it.
void History::send(PerThread &t, TE &&entry)
{
    entry.compile_context_ = "N/A"; // compile contexts are kept only while recording
    if (!t.metadata.empty()) entry.user_metadata_ = t.metadata;
    if (t.delivering) {
        t.nested.push_back(std::move(entry));
        return;
    }
    t.outgoing.push_back(std::move(entry));
    deliver(t);
}

std::shared_ptr<c10::GatheredContext> History::gather(cca::RecordContext level)
{
    if (!on()) return nullptr;
    cca::CreateContextFn recorder;
    {
        std::lock_guard<std::mutex> g(lock_);
        if (when_ < level || !recorder_) return nullptr;
        recorder = recorder_;
    }
    return recorder(); // outside the lock: it takes Python's stack (and GIL)
}

void History::begin_alloc()
{
    if (on()) per_thread.call_context = gather(cca::RecordContext::STATE);
}

// empty_cache's segment frees carry its stack only when every action takes
// one (ALL), as PyTorch's release of cached blocks
void History::begin_release()
{
    if (on()) per_thread.call_context = gather(cca::RecordContext::ALL);
}

void History::end_call()
{
    if (on()) per_thread.call_context.reset();
}

// Adds one entry (lock_ held): to the outbox while a tracker is attached,
// to the history while it records, unless its action is skipped.
void History::add(Outbox &out, TE &&entry)
{
    // PyTorch's entries outside a compiled region say "N/A"
    entry.compile_context_ = compile_contexts_.empty() ? "N/A" : compile_contexts_.back();
    if (entry.user_metadata_.empty() && !out.t.metadata.empty())
        entry.user_metadata_ = out.t.metadata;
    bool record = on_.load(std::memory_order_relaxed) &&
                  std::find(skip_.begin(), skip_.end(), entry.action_) == skip_.end();
    if (trackers_.load(std::memory_order_relaxed)) {
        std::vector<TE> &q = out.t.delivering ? out.t.nested : out.t.outgoing;
        if (!record) {
            q.push_back(std::move(entry));
            return;
        }
        q.push_back(entry);
    }
    if (!record) return;
    size_t d = size_t(entry.device_);
    if (d >= rings_.size()) rings_.resize(d + 1);
    Ring &r = rings_[d];
    if (r.entries.size() < max_entries_) {
        r.entries.push_back(std::move(entry));
    } else {
        r.entries[r.next] = std::move(entry);
        r.next = (r.next + 1) % max_entries_;
    }
}

// The context an entry carries: only from ALLOC up, as in PyTorch.
std::shared_ptr<c10::GatheredContext> History::in_trace(std::shared_ptr<c10::GatheredContext> c)
{
    return when_ >= cca::RecordContext::ALLOC ? std::move(c) : nullptr;
}

void History::alloc(int device, void *ptr, size_t requested, cudaStream_t stream)
{
    if (!on()) {
        alloc_tracked(device, uintptr_t(ptr), requested, stream);
        return;
    }
    Outbox out{*this, per_thread};
    std::shared_ptr<c10::GatheredContext> ctx = std::move(out.t.call_context);
    out.t.call_context.reset();
    uintptr_t addr = uintptr_t(ptr);
    std::lock_guard<std::mutex> g(lock_);
    if (!active()) return;
    // a free still awaiting its streams whose block is handed out again has
    // completed, though not in a call of ours
    auto it = awaiting_.upper_bound(addr);
    if (it != awaiting_.begin() && addr < (--it)->second.addr + it->second.size) {
        add(out, TE(TE::FREE_COMPLETED, c10::DeviceIndex(it->second.device), it->second.addr,
                    it->second.requested, it->second.stream, {0, 0}, c10::getApproximateTime(),
                    in_trace(it->second.context)));
        awaiting_.erase(it);
        counts_changed();
    }
    add(out, TE(TE::ALLOC, c10::DeviceIndex(device), addr, requested, stream, {0, 0},
                c10::getApproximateTime(), in_trace(ctx)));
    blocks_[addr] = Block{device, stream, requested, std::move(ctx), false};
    // A segment keeps the stack that allocated it only until its memory is
    // first split, as in PyTorch's snapshot, whose segment stack lives on
    // the segment's first block and is lost when a split makes a new one.
    if (segments_.empty()) return;
    fs_torch_block b{};
    void *base = nullptr;
    size_t seg_size = 0;
    if (api->block_of(ptr, &b) == FS_TORCH_OK &&
        api->base_allocation(ptr, &base, &seg_size) == FS_TORCH_OK && b.size != seg_size)
        segments_.erase(uintptr_t(base));
}

void History::record_use(void *ptr, cudaStream_t stream)
{
    fs_torch_block b{};
    bool tracked_only = !on();
    if (tracked_only && api->block_of(ptr, &b) != FS_TORCH_OK) return;
    std::lock_guard<std::mutex> g(lock_);
    // a use on the block's own stream delays nothing, in PyTorch as here
    if (tracked_only) {
        if (cudaStream_t(b.stream) != stream) used_.insert(b.addr);
        counts_changed();
        return;
    }
    auto it = blocks_.find(uintptr_t(ptr));
    if (it != blocks_.end() && it->second.stream != stream) it->second.has_uses = true;
}

// Whether the maps the trackers' path reads hold anything, kept in atomics
// so that it takes lock_ only then (lock_ held).
void History::counts_changed()
{
    waiting_.store(!awaiting_.empty(), std::memory_order_relaxed);
    any_used_.store(!used_.empty(), std::memory_order_relaxed);
}

// History off, a tracker attached: nothing is followed but the frees that
// wait for their streams (few), and the entries go straight to the trackers.
void History::alloc_tracked(int device, uintptr_t addr, size_t requested, cudaStream_t stream)
{
    PerThread &t = per_thread;
    if (waiting_.load(std::memory_order_relaxed)) {
        // a free still awaiting its streams whose block is handed out again
        // has completed, though not in a call of ours
        Awaiting done{};
        bool closed = false;
        {
            std::lock_guard<std::mutex> g(lock_);
            auto it = awaiting_.upper_bound(addr);
            if (it != awaiting_.begin() && addr < (--it)->second.addr + it->second.size) {
                done = std::move(it->second);
                awaiting_.erase(it);
                closed = true;
                counts_changed();
            }
        }
        if (closed)
            send(t, TE(TE::FREE_COMPLETED, c10::DeviceIndex(done.device), done.addr, done.requested,
                       done.stream, {0, 0}, c10::getApproximateTime(), nullptr));
    }
    send(t, TE(TE::ALLOC, c10::DeviceIndex(device), addr, requested, stream, {0, 0},
               c10::getApproximateTime(), nullptr));
}

void History::free_tracked(void *ptr)
{
    PerThread &t = per_thread;
    fs_torch_block b{};
    if (api->block_of(ptr, &b) != FS_TORCH_OK) return; // not the shim's: the free will say so
    cudaStream_t stream = cudaStream_t(b.stream);
    bool waits = false;
    if (any_used_.load(std::memory_order_relaxed)) {
        std::lock_guard<std::mutex> g(lock_);
        waits = used_.erase(b.addr) > 0;
        if (waits)
            awaiting_[b.addr] = Awaiting{b.device, stream, b.addr, b.size, b.requested, nullptr};
        counts_changed();
    }
    send(t, TE(TE::FREE_REQUESTED, c10::DeviceIndex(b.device), b.addr, b.requested, stream, {0, 0},
               c10::getApproximateTime(), nullptr));
    // reusable at once on its stream, as in PyTorch: completed now
    if (!waits)
        send(t, TE(TE::FREE_COMPLETED, c10::DeviceIndex(b.device), b.addr, b.requested, stream,
                   {0, 0}, c10::getApproximateTime(), nullptr));
}

void History::free_requested(void *ptr)
{
    if (!on()) {
        free_tracked(ptr);
        return;
    }
    std::shared_ptr<c10::GatheredContext> at_free = gather(cca::RecordContext::ALL);
    uintptr_t addr = uintptr_t(ptr);
    Outbox out{*this, per_thread};
    std::lock_guard<std::mutex> g(lock_);
    if (!active()) return;
    // the shim is asked only about blocks followed since before this
    // began, and for a free that waits: its rounded size
    fs_torch_block b{};
    Block blk{0, nullptr, 0, nullptr, false};
    auto it = blocks_.find(addr);
    if (it != blocks_.end()) {
        blk = std::move(it->second);
        blocks_.erase(it);
        b.size = blk.requested;
        if (blk.has_uses) (void)api->block_of(ptr, &b);
    } else if (api->block_of(ptr, &b) == FS_TORCH_OK) {
        blk = Block{b.device, cudaStream_t(b.stream), b.requested, nullptr, false};
    } else {
        return; // not the shim's: the free itself will say so
    }
    std::shared_ptr<c10::GatheredContext> ctx = at_free ? at_free : blk.context;
    add(out, TE(TE::FREE_REQUESTED, c10::DeviceIndex(blk.device), addr, blk.requested, blk.stream,
                {0, 0}, c10::getApproximateTime(), in_trace(ctx)));
    if (!blk.has_uses) {
        // reusable at once on its stream, as in PyTorch: completed now
        add(out, TE(TE::FREE_COMPLETED, c10::DeviceIndex(blk.device), addr, blk.requested,
                    blk.stream, {0, 0}, c10::getApproximateTime(), in_trace(ctx)));
        return;
    }
    awaiting_[addr] = Awaiting{blk.device, blk.stream, addr, b.size, blk.requested, ctx};
    counts_changed();
}

void History::event(int action, int device, uintptr_t addr, size_t size, void *stream)
{
    Outbox out{*this, per_thread};
    std::lock_guard<std::mutex> g(lock_);
    if (!active()) return;
    if (action == FS_TORCH_FREE_COMPLETED) {
        auto it = awaiting_.find(addr);
        if (it == awaiting_.end()) return; // not a free of PyTorch's, or already closed
        add(out, TE(TE::FREE_COMPLETED, c10::DeviceIndex(device), addr, it->second.requested,
                    stream, {0, 0}, c10::getApproximateTime(), in_trace(it->second.context)));
        awaiting_.erase(it);
        counts_changed();
        return;
    }
    TE::Action a = action == FS_TORCH_SEGMENT_ALLOC  ? TE::SEGMENT_ALLOC
                   : action == FS_TORCH_SEGMENT_FREE ? TE::SEGMENT_FREE
                   : action == FS_TORCH_SEGMENT_MAP  ? TE::SEGMENT_MAP
                                                     : TE::SEGMENT_UNMAP;
    add(out, TE(a, c10::DeviceIndex(device), addr, size, stream, {0, 0}, c10::getApproximateTime(),
                in_trace(out.t.call_context)));
    if (a == TE::SEGMENT_ALLOC && on_.load(std::memory_order_relaxed))
        segments_[addr] = out.t.call_context;
    else if (a == TE::SEGMENT_FREE)
        segments_.erase(addr);
}

void History::oom(int device, size_t device_free, size_t size, cudaStream_t stream)
{
    Outbox out{*this, per_thread};
    std::shared_ptr<c10::GatheredContext> ctx = std::move(out.t.call_context);
    out.t.call_context.reset();
    std::lock_guard<std::mutex> g(lock_);
    if (!active()) return;
    // PyTorch's OOM entry: addr holds the device's free bytes
    add(out, TE(TE::OOM, c10::DeviceIndex(device), device_free, size, stream, {0, 0},
                c10::getApproximateTime(), in_trace(ctx)));
}

void History::fill(cca::SnapshotInfo &out, bool include_traces)
{
    std::lock_guard<std::mutex> g(lock_);
    if (!on_.load(std::memory_order_relaxed)) return;
    for (auto &seg : out.segments) {
        auto s = segments_.find(uintptr_t(seg.address));
        if (s != segments_.end()) seg.context_when_allocated = s->second;
        size_t addr = seg.address;
        for (auto &b : seg.blocks) {
            if (b.allocated) {
                auto it = blocks_.find(uintptr_t(addr));
                if (it != blocks_.end()) b.context_when_allocated = it->second.context;
            }
            addr += b.size;
        }
    }
    if (!include_traces) return;
    out.external_annotations.assign(annotations_.begin() + long(annotations_next_),
                                    annotations_.end());
    out.external_annotations.insert(out.external_annotations.end(), annotations_.begin(),
                                    annotations_.begin() + long(annotations_next_));
    out.device_traces.resize(std::max(out.device_traces.size(), rings_.size()));
    for (size_t d = 0; d < rings_.size(); d++) {
        const Ring &r = rings_[d];
        std::vector<TE> &t = out.device_traces[d];
        t.clear();
        t.insert(t.end(), r.entries.begin() + long(r.next), r.entries.end());
        t.insert(t.end(), r.entries.begin(), r.entries.begin() + long(r.next));
    }
}

// As PyTorch's trace of a checkpoint put back: each block freed, then
// each block made live again, with no stack of its own. With history off
// the blocks freed are not followed, and the trackers hear only of those
// made live.
void History::restored(int device, const std::vector<void *> &freed,
                       const std::vector<void *> &made)
{
    std::vector<fs_torch_block> live(made.size());
    for (size_t i = 0; i < made.size(); i++)
        if (api->block_of(made[i], &live[i]) != FS_TORCH_OK) live[i].addr = 0;
    Outbox out{*this, per_thread};
    std::lock_guard<std::mutex> g(lock_);
    if (!active()) return;
    for (void *p : freed) {
        auto it = blocks_.find(uintptr_t(p));
        if (it == blocks_.end()) continue;
        const Block &b = it->second;
        for (TE::Action a : {TE::FREE_REQUESTED, TE::FREE_COMPLETED})
            add(out, TE(a, c10::DeviceIndex(b.device), uintptr_t(p), b.requested, b.stream, {0, 0},
                        c10::getApproximateTime(), nullptr));
        blocks_.erase(it);
    }
    for (const fs_torch_block &b : live) {
        if (!b.addr) continue;
        add(out, TE(TE::ALLOC, c10::DeviceIndex(device), b.addr, b.size, cudaStream_t(b.stream),
                    {0, 0}, c10::getApproximateTime(), nullptr));
        if (on()) blocks_[b.addr] = Block{device, cudaStream_t(b.stream), b.size, nullptr, false};
    }
}

std::shared_ptr<c10::GatheredContext> History::context_of(const void *ptr)
{
    if (!on()) return nullptr;
    fs_torch_block b{};
    if (api->block_of(ptr, &b) != FS_TORCH_OK) return nullptr;
    std::lock_guard<std::mutex> g(lock_);
    auto it = blocks_.find(b.addr);
    return it == blocks_.end() ? nullptr : it->second.context;
}

void History::push_compile_context(const std::string &md)
{
    std::lock_guard<std::mutex> g(lock_);
    if (on()) compile_contexts_.push_back(md); // as PyTorch: kept only while recording
}

void History::pop_compile_context()
{
    std::lock_guard<std::mutex> g(lock_);
    if (!compile_contexts_.empty()) compile_contexts_.pop_back();
}

void History::set_user_metadata(const std::string &md)
{
    per_thread.metadata = md;
}

std::string History::user_metadata()
{
    return per_thread.metadata;
}

void History::annotate(const void *ptr, const std::string &md)
{
#if FS_TORCH_MINOR >= 14
    if (!on()) return;
    fs_torch_block b{};
    if (api->block_of(ptr, &b) != FS_TORCH_OK) return;
    Outbox out{*this, per_thread};
    std::lock_guard<std::mutex> g(lock_);
    add(out, TE(TE::ANNOTATE, c10::DeviceIndex(b.device), b.addr, b.size, b.stream, {0, 0},
                c10::getApproximateTime(), nullptr, "", md));
#else
    (void)ptr;
    (void)md;
#endif
}

// As PyTorch's: kept while history records, stamped with the current
// device and the time.
void History::record_annotation(const std::vector<std::pair<std::string, std::string>> &md)
{
    if (!on()) return;
    c10::CachingDeviceAllocator::AnnotationEntry entry(c10::cuda::current_device(),
                                                       c10::getApproximateTime());
    for (const auto &[name, value] : md)
        entry.recordUserMetadata(name, value);
    std::lock_guard<std::mutex> g(lock_);
    if (annotations_.size() < max_entries_) {
        annotations_.push_back(std::move(entry));
    } else {
        annotations_[annotations_next_] = std::move(entry);
        annotations_next_ = (annotations_next_ + 1) % max_entries_;
    }
}

} // namespace fsdpshim
