// adapter.h - the PyTorch adapter: PyTorch's CUDA allocator interface
// (c10::cuda::CUDACachingAllocator::CUDAAllocator, as declared by the
// headers of the PyTorch it is compiled against) over the shim's allocator,
// reached only through the C table of ../torch_api.h.
//
// The product's one C++ part (STYLE): each method translates to a call of
// that table, no policy of its own; one file per concern, each using only
// those below it:
//   install.cpp        the version check and the swap
//   alloc.cpp          the class PyTorch calls (Adapter): every method of
//                      its interface, allocation, streams and the cache
//                      itself, the rest handed to the file of its concern
//   snapshot.cpp       snapshot(), over pools and history
//   checkpoint.cpp     private pools' layouts, for CUDA graph trees, over
//                      pools and history
//   pools.cpp          private pools (MemPool, CUDA graphs), over
//                      capture_reuse
//   capture_reuse.cpp  frees during a capture
//   history.cpp        memory history and the trace trackers
//   settings.cpp       the memory fraction, settings changed at run time
//   stats.cpp          memory_stats
//   ipc.cpp            sharing memory with other processes
//   api.cpp            the table
// PyTorch's interface differs between releases; the build passes
// FS_TORCH_MINOR (the PyTorch 2.x it compiles against) and FS_TORCH_KEY
// (its version and git hash, which install.cpp checks).
#pragma once

#include "../torch_api.h"

#include <c10/cuda/CUDACachingAllocator.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#ifndef FS_TORCH_MINOR
#error "FS_TORCH_MINOR (the PyTorch 2.x minor version) must be defined by the build"
#endif

namespace fsdpshim
{

namespace cca = c10::cuda::CUDACachingAllocator;

// api.cpp: the table, set once by fsdpshim_torch_install before the
// adapter is used.
extern const fs_torch_api *api;

// api.cpp: the walk of one device's segments and blocks
std::vector<fs_torch_walk_entry> walk(int device);

// history.cpp: PyTorch's memory history (recordHistory) over the adapter's
// calls, with the stacks of live blocks, and the same entries for PyTorch's
// trace trackers (attachAllocatorTraceTracker); nothing is kept while
// neither listens.
class History
{
  public:
    // recording for the snapshot (_record_memory_history)
    bool on() const
    {
        return on_.load(std::memory_order_acquire);
    }
    // recording, or a tracker attached: the calls below are wanted
    bool active() const
    {
        return active_.load(std::memory_order_acquire);
    }
    // attachAllocatorTraceTracker: from now on, every entry to it too
    void attach_tracker(cca::AllocatorTraceTracker tracker);
    struct PerThread; // history.cpp: what each thread's calls keep
    void configure(bool enabled, cca::CreateContextFn recorder, size_t max_entries,
                   cca::RecordContext when, bool clear,
                   const std::vector<std::string> &skip_actions, int device_count);
    // an allocation is about to be asked for: its stack, for it and its segments
    void begin_alloc();
    // empty_cache is about to give segments back: its stack, at ALL
    void begin_release();
    void end_call();
    void alloc(int device, void *ptr, size_t requested, cudaStream_t stream);
    void record_use(void *ptr, cudaStream_t stream);
    // before the shim frees ptr
    void free_requested(void *ptr);
    // a segment event or a deferred free's completion from the table's hook
    void event(int action, int device, uintptr_t addr, size_t size, void *stream);
    void oom(int device, size_t device_free, size_t size, cudaStream_t stream);
    // the stacks of the snapshot's blocks and segments, and the traces
    void fill(cca::SnapshotInfo &out, bool include_traces);
    // the stack the live block containing ptr was allocated from
    std::shared_ptr<c10::GatheredContext> context_of(const void *ptr);
    // torch.compile's context and the user's metadata, put in every entry
    void push_compile_context(const std::string &md);
    void pop_compile_context();
    void set_user_metadata(const std::string &md); // the calling thread's
    std::string user_metadata();
    void annotate(const void *ptr, const std::string &md);
    // a program annotation (record_function's start and end, with
    // global_record_annotations): the snapshot's external_annotations
    void record_annotation(const std::vector<std::pair<std::string, std::string>> &md);
    // a checkpoint put back: the blocks it freed, those it made live
    void restored(int device, const std::vector<void *> &freed, const std::vector<void *> &made);

  private:
    using Entry = c10::CachingDeviceAllocator::TraceEntry;
    struct Block {
        int device;
        cudaStream_t stream;
        size_t requested;
        std::shared_ptr<c10::GatheredContext> context;
        bool has_uses;
    };
    struct Awaiting { // a free waiting for its recorded streams
        int device;
        cudaStream_t stream;
        uintptr_t addr;
        size_t size, requested;
        std::shared_ptr<c10::GatheredContext> context;
    };
    struct Ring {
        std::vector<Entry> entries;
        size_t next = 0; // the oldest, once full
    };
    std::shared_ptr<c10::GatheredContext> gather(cca::RecordContext level);
    struct Outbox;
    void add(Outbox &out, Entry &&entry);
    void deliver(PerThread &t);
    void send(PerThread &t, Entry &&entry);
    // history off, a tracker attached: the trackers' own path
    void alloc_tracked(int device, uintptr_t addr, size_t requested, cudaStream_t stream);
    void free_tracked(void *ptr);
    void counts_changed();
    std::shared_ptr<c10::GatheredContext> in_trace(std::shared_ptr<c10::GatheredContext> c);
    // hands the entries this thread's call made to the trackers, outside lock_
    struct Outbox {
        History &h;
        PerThread &t;
        ~Outbox();
    };
    void set_active(); // lock_ held
    // the table's hook: segment events and deferred frees' completions
    void hear_segment_events();

    std::atomic<bool> on_{false};
    std::atomic<bool> active_{false};
    std::once_flag hook_once_;
    std::mutex lock_;
    // the trackers, replaced whole on attach (under lock_) and read without
    // a lock while they run (a tracker may allocate: NCCL's registration);
    // every set stays until the process ends, so a reader's stays valid
    using Trackers = std::vector<cca::AllocatorTraceTracker>;
    std::atomic<const Trackers *> trackers_{nullptr};
    std::vector<std::unique_ptr<const Trackers>> tracker_sets_;
    cca::CreateContextFn recorder_ = nullptr;
    cca::RecordContext when_ = cca::RecordContext::NEVER;
    size_t max_entries_ = 1;
    std::vector<Entry::Action> skip_;
    std::vector<Ring> rings_;
    std::unordered_map<uintptr_t, Block> blocks_;
    std::unordered_map<uintptr_t, std::shared_ptr<c10::GatheredContext>> segments_;
    std::map<uintptr_t, Awaiting> awaiting_; // by address: the one holding an address
    // history off: the live blocks used on another stream than their own
    std::unordered_set<uintptr_t> used_;
    std::atomic<bool> waiting_{false}, any_used_{false}; // awaiting_, used_ not empty
    std::vector<std::string> compile_contexts_;
    // the program's annotations, a ring of max_entries_ as the traces
    std::vector<c10::CachingDeviceAllocator::AnnotationEntry> annotations_;
    size_t annotations_next_ = 0; // the oldest, once full
};

// capture_reuse.cpp: PyTorch's graph_capture_record_stream_reuse, a block
// freed with recorded streams during a capture reusable once the captured
// graph orders their work.
class CaptureReuse
{
  public:
    bool wanted() const; // the setting, as PyTorch has it now
    // a block allocated during a capture; a stream recorded on one
    void allocated(void *ptr);
    void record_use(void *ptr, cudaStream_t stream);
    // true when the free of ptr is held here, to be made when the graph
    // orders its uses; false: the caller frees it as usual
    bool hold_free(void *ptr);
    // before an allocation on stream during a capture
    void reclaim(cudaStream_t stream);
    // no capture is under way any more: what is held is freed
    void captures_ended();

  private:
    struct Held {
        cudaStream_t stream;
        unsigned long long capture;
        std::vector<cudaGraphNode_t> markers;
    };
    std::mutex lock_;
    std::unordered_set<void *> in_capture_;
    std::unordered_map<void *, std::vector<cudaStream_t>> uses_;
    std::unordered_map<void *, Held> held_;
    std::map<std::pair<unsigned long long, cudaStream_t>, std::unordered_set<cudaGraphNode_t>>
        visited_;
};

// pools.cpp: PyTorch's private pools (MempoolId_t) over the shim's, which
// are numbered: the use counts, the captures under way with their filters,
// and each pool's options, as PyTorch's own allocator keeps them.
class Pools
{
  public:
    // The private pool an allocation on `stream` goes to, 0 for the shared
    // cache: the newest capture under way on the device whose filter takes
    // the stream, as PyTorch's get_pool.
    uint64_t route(c10::DeviceIndex device, cudaStream_t stream)
    {
        if (capturing_.load(std::memory_order_acquire) == 0) return 0;
        return route_slow(device, stream);
    }
    bool capturing() const
    {
        return capturing_.load(std::memory_order_acquire) > 0;
    }
    void create_or_incref(c10::DeviceIndex device, c10::MempoolId_t id,
                          std::shared_ptr<cca::CUDAAllocator> allocator);
    void begin(c10::DeviceIndex device, c10::MempoolId_t id,
               std::function<bool(cudaStream_t)> filter);
    // the capture ends; when it was the last one under way, `reuse` hears so
    void end(c10::DeviceIndex device, c10::MempoolId_t id, CaptureReuse &reuse);
    void release(c10::DeviceIndex device, c10::MempoolId_t id);
    int use_count(c10::DeviceIndex device, c10::MempoolId_t id);
    void set_use_on_oom(c10::DeviceIndex device, c10::MempoolId_t id, bool on);
    void set_no_split(c10::DeviceIndex device, c10::MempoolId_t id);
    // emptyCache: the shared cache and every pool let go, or one pool
    void empty(int device_count, c10::MempoolId_t id);
    // The shim's number for id (0: none), and back (the pool's MempoolId_t,
    // {0, 0} for the shared cache).
    uint64_t number(c10::DeviceIndex device, c10::MempoolId_t id);
    c10::MempoolId_t id_of(uint64_t number);
    // checkPoolLiveAllocations: whether the pool's blocks handed out are
    // exactly `expected`
    bool live_blocks_are(c10::DeviceIndex device, c10::MempoolId_t id,
                         const std::unordered_set<void *> &expected);

  private:
    struct Pool {
        uint64_t number;
        int use_count;
        bool use_on_oom, no_split;
        std::shared_ptr<cca::CUDAAllocator> allocator; // its segments' source, or null
    };
    struct Device {
        std::map<c10::MempoolId_t, Pool> pools;
        std::vector<std::pair<c10::MempoolId_t, std::function<bool(cudaStream_t)>>> captures;
    };
    uint64_t route_slow(c10::DeviceIndex device, cudaStream_t stream);
    Device &device(c10::DeviceIndex d);                                         // lock_ held
    Pool &pool(c10::DeviceIndex device, c10::MempoolId_t id, const char *what); // lock_ held
    void configure(c10::DeviceIndex device, const Pool &p);                     // lock_ held

    std::mutex lock_;
    std::atomic<int> capturing_{0};
    std::vector<Device> devices_;
    std::map<uint64_t, c10::MempoolId_t> ids_; // every number ever given
    uint64_t next_ = 1;
};

// settings.cpp: PyTorch's allocator settings carried to the shim: the
// memory fraction per device, and the settings PyTorch parses at run time.
class Settings
{
  public:
    // the allocator's init: no limit of PyTorch's on any device, then what
    // PyTorch's configuration held at start
    void start(int device_count);
    double fraction(c10::DeviceIndex device) const;
    void set_fraction(double fraction, c10::DeviceIndex device);
    // from now on, settings PyTorch parses reach the shim
    static void watch();

  private:
    std::vector<double> fractions_; // per device; 1.0 = no limit of PyTorch's
};

// stats.cpp: memory_stats() of one device
c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device);

// snapshot.cpp: snapshot() of the devices, or of one private pool, with
// the history's stacks and traces
cca::SnapshotInfo snapshot_of(int device_count, c10::MempoolId_t mempool_id, bool include_traces,
                              Pools &pools, History &history);

// checkpoint.cpp: a private pool's layout taken, and put back; the blocks
// made live again are handed out with `deleter` (the cache's)
std::shared_ptr<cca::AllocatorState> checkpoint_of(c10::DeviceIndex device, c10::MempoolId_t id,
                                                   Pools &pools);
cca::CheckpointDelta restore_checkpoint(c10::DeviceIndex device,
                                        std::shared_ptr<cca::AllocatorState> pps, Pools &pools,
                                        History &history, c10::DeleterFnPtr deleter);

// ipc.cpp: a block shared with another process, and another process's
// block opened here, in PyTorch's own handles
cca::ShareableHandle share_ipc_handle(void *ptr);
std::shared_ptr<void> open_ipc_handle(const std::string &handle);

// alloc.cpp: PyTorch's allocator interface; allocation, streams and the
// cache here, every other method handed to the file of its concern.
class Adapter final : public cca::CUDAAllocator
{
  public:
    // ---- allocation, streams, the cache
    c10::DataPtr allocate(size_t size) override;
    c10::DeleterFnPtr raw_deleter() const override;
    void copy_data(void *dest, const void *src, std::size_t count) const override;
    void *raw_alloc(size_t nbytes) override;
    void *raw_alloc_with_stream(size_t nbytes, cudaStream_t stream) override;
    void raw_delete(void *ptr) override;
    void init(int device_count) override;
    bool initialized() override;
    void emptyCache(c10::MempoolId_t mempool_id) override;
    void enable(bool value) override;
    bool isEnabled() const override;
    void cacheInfo(c10::DeviceIndex device, size_t *largestBlock) override;
    void *getBaseAllocation(void *ptr, size_t *size) override;
    void recordStream(const c10::DataPtr &ptr, c10::cuda::CUDAStream stream) override;
    std::vector<cca::StreamSegmentSize> getExpandableSegmentSizes(c10::DeviceIndex device) override;
    void enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex dev_to_access) override;
    cudaError_t memcpyAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
                            cudaStream_t stream, bool p2p_enabled) override;
    void attachOutOfMemoryObserver(cca::OutOfMemoryObserver observer) override;
#if FS_TORCH_MINOR >= 12
    void attachOomRejectionObserver(cca::OomRejectionObserver observer) override;
#endif
    std::string name() override;

    // ---- settings (Settings, settings.cpp)
    double getMemoryFraction(c10::DeviceIndex device) override;
    void setMemoryFraction(double fraction, c10::DeviceIndex device) override;
    // from now on, settings PyTorch parses reach the shim
    void watch_settings();

    // ---- statistics (stats.cpp)
    c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
    void resetAccumulatedStats(c10::DeviceIndex device) override;
    void resetPeakStats(c10::DeviceIndex device) override;

    // ---- snapshot (snapshot.cpp)
    cca::SnapshotInfo snapshot(c10::MempoolId_t mempool_id, bool include_traces) override;

    // ---- memory history and the trace trackers (History, history.cpp)
    void attachAllocatorTraceTracker(cca::AllocatorTraceTracker tracker) override;
    bool isHistoryEnabled() override;
    void recordHistory(bool enabled, cca::CreateContextFn context_recorder,
                       size_t alloc_trace_max_entries, cca::RecordContext when, bool clearHistory,
                       const std::vector<std::string> &skip_actions) override;
    History &history()
    {
        return history_;
    }
#if FS_TORCH_MINOR >= 12
    std::shared_ptr<c10::GatheredContext> getContextForPointer(const void *ptr) override;
#endif
    void recordAnnotation(const std::vector<std::pair<std::string, std::string>> &md) override;
    void pushCompileContext(std::string &md) override;
    void popCompileContext() override;
    void setUserMetadata(const std::string &metadata) override;
    std::string getUserMetadata() override;
#if FS_TORCH_MINOR >= 14
    bool supportsUserMetadata() override;
    void annotateMemory(const void *ptr, const std::string &metadata) override;
#endif

    // ---- private pools (Pools, pools.cpp; CaptureReuse, capture_reuse.cpp)
    void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                             std::function<bool(cudaStream_t)> filter) override;
    void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override;
    void releasePool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override;
    int getPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override;
    void createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                            std::shared_ptr<cca::CUDAAllocator> allocator) override;
    void setUseOnOOM(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                     bool use_on_oom) override;
    void setNoSplit(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override;
    bool checkPoolLiveAllocations(c10::DeviceIndex device, c10::MempoolId_t mempool_id,
                                  const std::unordered_set<void *> &expected) override;
    Pools &pools()
    {
        return pools_;
    }
    CaptureReuse &capture_reuse()
    {
        return capture_reuse_;
    }

    // ---- a private pool's layout taken and put back (checkpoint.cpp)
    std::shared_ptr<cca::AllocatorState> getCheckpointState(c10::DeviceIndex device,
                                                            c10::MempoolId_t id) override;
    cca::CheckpointDelta setCheckpointPoolState(c10::DeviceIndex device,
                                                std::shared_ptr<cca::AllocatorState> pps) override;

    // ---- IPC (ipc.cpp)
    cca::ShareableHandle shareIpcHandle(void *ptr) override;
    std::shared_ptr<void> getIpcDevPtr(std::string handle) override;

  private:
    void *alloc_on(c10::DeviceIndex device, size_t size, cudaStream_t stream);
    void *uncached_alloc(c10::DeviceIndex device, size_t size);

    std::atomic<bool> initialized_{false};
    std::atomic<bool> enabled_{true};
    int device_count_ = 0;
    std::mutex observers_lock_;
    std::vector<cca::OutOfMemoryObserver> oom_observers_;
#if FS_TORCH_MINOR >= 12
    std::vector<cca::OomRejectionObserver> rejection_observers_;
#endif
    Settings settings_;
    History history_;
    Pools pools_;
    CaptureReuse capture_reuse_;
};

// alloc.cpp: the one instance PyTorch's allocator pointer is set to.
Adapter &adapter();

} // namespace fsdpshim
