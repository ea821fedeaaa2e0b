// ipc.cpp - sharing the shim's memory with other processes as PyTorch's
// own allocator does (torch.multiprocessing, Storage._share_cuda_), in
// PyTorch's own handles, so that either side may run without the shim:
//
//   'c'  a cudaMalloc'd segment: a version byte, 'c', the 64-byte
//        cudaIpcMemHandle_t of the segment's base; the offset is the
//        block's in the segment. The receiver opens the segment once
//        however many of its blocks it gets, and closes it when the last
//        of them is gone.
//   'e'  an expandable segment: a version byte, 'e', PyTorch's header
//        (the sender's pid, the page size, the number of pages and, from
//        version 3 on, the handle type) and one file descriptor number of
//        the sender's per page under the block; the offset is the block's
//        from the first of those pages. The receiver takes each
//        descriptor from the sender (pidfd_getfd), imports the page and
//        maps the pages side by side in an address range of its own.
//
// The version byte is PyTorch's: 2 up to 2.12, 3 from 2.13 on, which added
// the handle type to the 'e' header (PyTorch issue 179220). The shim's
// pages stay exported until they are unmapped (interpose/core/vmm.c), as
// PyTorch keeps its own.
#include "adapter.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cerrno>
#include <cstring>
#include <sys/syscall.h>
#include <unistd.h>

namespace fsdpshim
{

namespace
{

constexpr char kVersion = FS_TORCH_MINOR >= 13 ? 3 : 2;
constexpr char kCudaMalloc = 'c';
constexpr char kExpandable = 'e';

// PyTorch's 'e' header: pid (int32) at 0, page size (u64) at 8, number of
// pages (u64) at 16, and from version 3 the handle type (int32) at 24, in
// 32 bytes; 24 bytes before.
constexpr size_t header_size(char version)
{
    return version >= 3 ? 32 : 24;
}
constexpr int32_t kPosixFd = 1, kFabric = 2; // PyTorch's handle types (0: unspecified)

std::mutex opened_lock;
std::unordered_map<std::string, std::weak_ptr<void>> opened; // by handle

// The driver's virtual-memory calls, through the runtime (the adapter is
// not linked to libcuda).
struct Driver {
    decltype(&cuMemImportFromShareableHandle) import_handle = nullptr;
    decltype(&cuMemAddressReserve) reserve = nullptr;
    decltype(&cuMemAddressFree) address_free = nullptr;
    decltype(&cuMemMap) map = nullptr;
    decltype(&cuMemUnmap) unmap = nullptr;
    decltype(&cuMemSetAccess) set_access = nullptr;
    decltype(&cuMemRelease) release = nullptr;
};

template <typename F> void entry(const char *name, F &out)
{
    void *p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q));
    TORCH_CHECK(q == cudaDriverEntryPointSuccess && p, "fsdpshim: the driver has no ", name);
    out = reinterpret_cast<F>(p);
}

const Driver &driver()
{
    static const Driver d = [] {
        Driver v;
        entry("cuMemImportFromShareableHandle", v.import_handle);
        entry("cuMemAddressReserve", v.reserve);
        entry("cuMemAddressFree", v.address_free);
        entry("cuMemMap", v.map);
        entry("cuMemUnmap", v.unmap);
        entry("cuMemSetAccess", v.set_access);
        entry("cuMemRelease", v.release);
        return v;
    }();
    return d;
}

void check(CUresult r, const char *what)
{
    TORCH_CHECK(r == CUDA_SUCCESS, "fsdpshim: opening another process's expandable segment: ", what,
                " failed (CUDA driver error ", int(r), ")");
}

// Another process's pages, mapped here side by side: taken back whole.
struct Pages {
    int device = 0;
    size_t page = 0;
    CUdeviceptr base = 0;
    std::vector<CUmemGenericAllocationHandle> handles;
    size_t mapped = 0;

    ~Pages()
    {
        const Driver &d = driver();
        c10::cuda::CUDAGuard guard{c10::DeviceIndex(device)};
        // the other process's work on them is its own; ours is done first
        if (mapped) C10_CUDA_CHECK_WARN(cudaDeviceSynchronize());
        for (size_t i = 0; i < mapped; i++)
            (void)d.unmap(base + i * page, page);
        for (CUmemGenericAllocationHandle h : handles)
            (void)d.release(h);
        if (base) (void)d.address_free(base, handles.size() * page);
    }
};

std::shared_ptr<void> open_expandable(const std::string &handle)
{
    const char version = handle[0];
    const size_t hs = header_size(version);
    TORCH_CHECK(handle.size() >= 2 + hs, "fsdpshim: a truncated expandable-segment IPC handle");
    const char *h = handle.data() + 2;
    int32_t pid = 0, type = kPosixFd;
    uint64_t page = 0, n = 0;
    std::memcpy(&pid, h, sizeof pid);
    std::memcpy(&page, h + 8, sizeof page);
    std::memcpy(&n, h + 16, sizeof n);
    if (version >= 3) std::memcpy(&type, h + 24, sizeof type);
    TORCH_CHECK(type != kFabric,
                "fsdpshim: expandable segments shared through fabric handles are not served");
    TORCH_CHECK(type == 0 || type == kPosixFd,
                "Unknown Expandable_Segments_Handle_Type in IPC share header");
    TORCH_CHECK(n > 0 && page > 0 && handle.size() == 2 + hs + n * sizeof(int32_t),
                "fsdpshim: a malformed expandable-segment IPC handle (", n, " pages of ", page,
                " bytes in ", handle.size(), " bytes)");

    const Driver &d = driver();
    auto pages = std::make_unique<Pages>();
    pages->device = c10::cuda::current_device();
    pages->page = page;
    int pidfd = int(syscall(SYS_pidfd_open, pid, 0));
    TORCH_CHECK(pidfd >= 0, "fsdpshim: pidfd_open of the sharing process ", pid,
                " failed: ", strerror(errno));
    for (uint64_t i = 0; i < n; i++) {
        int32_t remote = 0;
        std::memcpy(&remote, h + hs + i * sizeof remote, sizeof remote);
        int fd = int(syscall(SYS_pidfd_getfd, pidfd, remote, 0));
        if (fd < 0) {
            int e = errno;
            close(pidfd);
            TORCH_CHECK(false, "fsdpshim: pidfd_getfd of descriptor ", remote, " of process ", pid,
                        " failed: ", strerror(e));
        }
        CUmemGenericAllocationHandle mh = 0;
        CUresult r = d.import_handle(&mh, reinterpret_cast<void *>(uintptr_t(fd)),
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        close(fd);
        if (r != CUDA_SUCCESS) close(pidfd);
        check(r, "cuMemImportFromShareableHandle");
        pages->handles.push_back(mh);
    }
    close(pidfd);
    check(d.reserve(&pages->base, n * page, 0, 0, 0), "cuMemAddressReserve");
    for (uint64_t i = 0; i < n; i++) {
        check(d.map(pages->base + i * page, page, 0, pages->handles[i], 0), "cuMemMap");
        pages->mapped++;
    }
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = pages->device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    check(d.set_access(pages->base, n * page, &access, 1), "cuMemSetAccess");
    void *base = reinterpret_cast<void *>(pages->base);
    std::shared_ptr<Pages> keep(std::move(pages));
    return std::shared_ptr<void>(base, [keep](void *) mutable { keep.reset(); });
}

std::shared_ptr<void> open_cuda_malloc(const cudaIpcMemHandle_t &h)
{
    void *base = nullptr;
    C10_CUDA_CHECK(cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess));
    c10::DeviceIndex device = c10::cuda::current_device();
    return std::shared_ptr<void>(base, [device](void *q) {
        c10::cuda::CUDAGuard guard(device);
        C10_CUDA_CHECK_WARN(cudaIpcCloseMemHandle(q));
    });
}

} // namespace

cca::ShareableHandle share_ipc_handle(void *ptr)
{
    size_t page = 0;
    uintptr_t first = 0;
    int n = 0;
    std::vector<int> fds(16);
    int st = api->share_pages(ptr, &page, &first, fds.data(), int(fds.size()), &n);
    if (st == FS_TORCH_OK && n > int(fds.size())) {
        fds.resize(size_t(n));
        st = api->share_pages(ptr, &page, &first, fds.data(), n, &n);
    }
    TORCH_CHECK(st != FS_TORCH_NOT_OWNED, "fsdpshim: ", ptr, " is not a live block of the shim's");
    if (page) {
        TORCH_CHECK(st == FS_TORCH_OK,
                    "Cannot share an expandable_segments allocation: its pages could not be "
                    "exported (TORCH_CUDA_EXPANDABLE_SEGMENTS_IPC=0, or the driver refused); "
                    "disable expandable_segments for cross-process tensors");
        std::string handle(2 + header_size(kVersion) + size_t(n) * sizeof(int32_t), '\0');
        handle[0] = kVersion;
        handle[1] = kExpandable;
        char *h = &handle[2];
        int32_t pid = int32_t(getpid()), type = kPosixFd;
        uint64_t page64 = page, n64 = uint64_t(n);
        std::memcpy(h, &pid, sizeof pid);
        std::memcpy(h + 8, &page64, sizeof page64);
        std::memcpy(h + 16, &n64, sizeof n64);
        if (kVersion >= 3) std::memcpy(h + 24, &type, sizeof type);
        for (int i = 0; i < n; i++) {
            int32_t fd = fds[size_t(i)];
            std::memcpy(h + header_size(kVersion) + size_t(i) * sizeof fd, &fd, sizeof fd);
        }
        return {static_cast<char *>(ptr) - reinterpret_cast<char *>(first), handle};
    }
    void *base = nullptr;
    size_t size = 0;
    TORCH_CHECK(api->base_allocation(ptr, &base, &size) == FS_TORCH_OK, "fsdpshim: ", ptr,
                " is not a live block of the shim's");
    cudaIpcMemHandle_t h;
    C10_CUDA_CHECK(cudaIpcGetMemHandle(&h, base));
    std::string handle(2 + sizeof h, '\0');
    handle[0] = kVersion;
    handle[1] = kCudaMalloc;
    std::memcpy(&handle[2], &h, sizeof h);
    return {static_cast<char *>(ptr) - static_cast<char *>(base), handle};
}

std::shared_ptr<void> open_ipc_handle(const std::string &handle)
{
    std::lock_guard<std::mutex> g(opened_lock);
    auto it = opened.find(handle);
    if (it != opened.end())
        if (auto p = it->second.lock()) return p;
    std::shared_ptr<void> p;
    cudaIpcMemHandle_t h;
    if (handle.size() == sizeof h) { // from a PyTorch before versioned handles
        std::memcpy(&h, handle.data(), sizeof h);
        p = open_cuda_malloc(h);
    } else {
        TORCH_CHECK(handle.size() >= 2 && handle[0] <= kVersion,
                    "fsdpshim: an IPC handle of a newer PyTorch (version ", int(handle[0]), ")");
        if (handle[1] == kExpandable) {
            p = open_expandable(handle);
        } else {
            TORCH_CHECK(handle[1] == kCudaMalloc && handle.size() == 2 + sizeof h,
                        "fsdpshim: an IPC handle of an unknown kind");
            std::memcpy(&h, handle.data() + 2, sizeof h);
            p = open_cuda_malloc(h);
        }
    }
    // the cache forgets the handle when the last user lets go
    void *base = p.get();
    std::shared_ptr<void> tracked(base, [p, handle](void *) mutable {
        {
            std::lock_guard<std::mutex> g2(opened_lock);
            auto e = opened.find(handle);
            if (e != opened.end() && e->second.expired()) opened.erase(e);
        }
        p.reset();
    });
    opened[handle] = tracked;
    return tracked;
}

} // namespace fsdpshim
