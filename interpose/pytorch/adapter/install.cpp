// install.cpp - the adapter's one exported function: checks that it was
// compiled against the PyTorch the process has loaded and for this shim's
// table, then puts itself where PyTorch's changeCurrentAllocator would
// (c10::cuda::CUDACachingAllocator::allocator), before PyTorch initialises
// its allocator. No exception leaves it: the shim, which calls it, is C.
#include "adapter.h"

#include <cstdio>
#include <cstring>

#ifndef FS_TORCH_KEY
#error "FS_TORCH_KEY (\"<torch __version__>@<git_version>\") must be defined by the build"
#endif

extern "C" __attribute__((visibility("default"))) int
fsdpshim_torch_install(const fs_torch_api *table, const char *torch_key, char *why, size_t len)
{
    try {
        if (!table || table->version != FS_TORCH_API_VERSION) {
            snprintf(why, len,
                     "the adapter was built for another fsdpshim (table version %d, not %d)",
                     FS_TORCH_API_VERSION, table ? table->version : -1);
            return -1;
        }
        if (!torch_key || strcmp(torch_key, FS_TORCH_KEY) != 0) {
            snprintf(why, len, "the adapter was built for PyTorch %s, the process runs %s",
                     FS_TORCH_KEY, torch_key ? torch_key : "(unknown)");
            return -1;
        }
        namespace cca = c10::cuda::CUDACachingAllocator;
        cca::CUDAAllocator *current = cca::allocator.load();
        if (current && current->initialized()) {
            snprintf(why, len, "PyTorch's allocator (%s) was already in use; left in charge",
                     current->name().c_str());
            return 0;
        }
        if (current && current->name() != "native") {
            snprintf(why, len,
                     "the program chose PyTorch's allocator itself (%s); the shim stepped aside",
                     current->name().c_str());
            return 0;
        }
        fsdpshim::api = table;
        cca::allocator.store(&fsdpshim::adapter());
        // c10::GetAllocator(kCUDA), which storages made without ATen's CUDA
        // factory and torch.accelerator's memory calls use, was registered
        // beside it at PyTorch's static init, and is registered again (at
        // the default priority, 0) after the shim has installed the adapter:
        // priority 1 keeps the adapter there (at 0, torch.accelerator.
        // memory_stats() asked PyTorch's own allocator, never initialised,
        // and answered {})
        c10::SetAllocator(c10::DeviceType::CUDA, &fsdpshim::adapter(), 1);
        fsdpshim::adapter().watch_settings();
        snprintf(why, len, "fsdpshim's adapter, built for PyTorch %s", FS_TORCH_KEY);
        return 1;
    } catch (const std::exception &e) {
        snprintf(why, len, "the adapter failed to install: %s", e.what());
        return -1;
    } catch (...) {
        snprintf(why, len, "the adapter failed to install");
        return -1;
    }
}
