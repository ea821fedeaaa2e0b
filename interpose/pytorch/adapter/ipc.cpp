// ipc.cpp - sharing the shim's memory with other processes as PyTorch's
// own allocator does (torch.multiprocessing, Storage._share_cuda_): a
// handle names the whole segment around the block, by CUDA's IPC handle of
// the segment's base (the shim's PyTorch segments are cudaMalloc'd, as
// PyTorch's are), and the block's offset in it; the receiving process
// opens the segment once however many of its blocks it gets, and closes it
// when the last of them is gone. The handle's bytes are PyTorch's own
// (a version byte, 'c', the 64-byte cudaIpcMemHandle_t), so either side
// may run without the shim.
#include "adapter.h"

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <cuda_runtime_api.h>

#include <cstring>

namespace fsdpshim
{

namespace
{

// The version byte PyTorch writes before a handle's type: 3 from 2.13 on,
// with the same layout after it for cudaMalloc'd memory as version 2.
constexpr char kVersion = FS_TORCH_MINOR >= 13 ? 3 : 2;
constexpr char kCudaMalloc = 'c';
constexpr char kExpandable = 'e';

std::mutex opened_lock;
std::unordered_map<std::string, std::weak_ptr<void>> opened; // by handle

} // namespace

cca::ShareableHandle Adapter::shareIpcHandle(void *ptr)
{
    void *base = nullptr;
    size_t size = 0;
    TORCH_CHECK(api->base_allocation(ptr, &base, &size) == FS_TORCH_OK, "fsdpshim: ", ptr,
                " is not a live block of the shim's");
    cudaIpcMemHandle_t h;
    cudaError_t err = cudaIpcGetMemHandle(&h, base);
    // the shim's expandable segments are mappings of the driver's, which
    // CUDA's IPC handles do not cover
    TORCH_CHECK(err == cudaSuccess, "fsdpshim: the segment of ", ptr,
                " cannot be shared with another process (", cudaGetErrorString(err),
                "); with expandable_segments the shim's segments are not shareable yet");
    std::string handle(2 + sizeof h, '\0');
    handle[0] = kVersion;
    handle[1] = kCudaMalloc;
    std::memcpy(&handle[2], &h, sizeof h);
    return {static_cast<char *>(ptr) - static_cast<char *>(base), handle};
}

std::shared_ptr<void> Adapter::getIpcDevPtr(std::string handle)
{
    std::lock_guard<std::mutex> g(opened_lock);
    auto it = opened.find(handle);
    if (it != opened.end())
        if (auto p = it->second.lock()) return p;
    cudaIpcMemHandle_t h;
    if (handle.size() == sizeof h) { // from a PyTorch before versioned handles
        std::memcpy(&h, handle.data(), sizeof h);
    } else {
        TORCH_CHECK(handle.size() >= 2 && handle[0] <= kVersion,
                    "fsdpshim: an IPC handle of a newer PyTorch (version ", int(handle[0]), ")");
        TORCH_CHECK(handle[1] != kExpandable,
                    "fsdpshim: opening another process's expandable segment is not served yet "
                    "(the sender ran PyTorch with expandable_segments)");
        TORCH_CHECK(handle[1] == kCudaMalloc && handle.size() == 2 + sizeof h,
                    "fsdpshim: an IPC handle of an unknown kind");
        std::memcpy(&h, handle.data() + 2, sizeof h);
    }
    c10::DeviceIndex device = c10::cuda::current_device();
    void *base = nullptr;
    C10_CUDA_CHECK(cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess));
    std::shared_ptr<void> p(base, [handle, device](void *q) {
        {
            std::lock_guard<std::mutex> g2(opened_lock);
            opened.erase(handle);
        }
        c10::cuda::CUDAGuard guard(device);
        C10_CUDA_CHECK_WARN(cudaIpcCloseMemHandle(q));
    });
    opened[handle] = p;
    return p;
}

} // namespace fsdpshim
