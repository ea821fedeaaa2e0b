// settings.cpp - PyTorch's allocator settings that the adapter carries to
// the shim: the per-process memory fraction (setMemoryFraction, and
// PYTORCH_CUDA_ALLOC_CONF's per_process_memory_fraction at start) and the
// keys a program changes while it runs (torch.cuda.memory.
// _set_allocator_settings, which vLLM and others call around phases).
//
// PyTorch parses a new settings string itself, into its own configuration,
// then calls the device's parser hook; the adapter wraps that hook, so it
// learns of every change after PyTorch has checked it (a bad string raises
// there, before the shim hears of it) and passes on PyTorch's parsed
// values. Of the keys the shim implements, a string naming
// max_split_size_mb, roundup_power2_divisions or
// garbage_collection_threshold sets them and one that does not puts them
// back to what the shim started with (PyTorch puts back its defaults: the
// same unless PYTORCH_CUDA_ALLOC_CONF set them at start, whose values the
// route gave the shim); expandable_segments changes only when named, as in
// PyTorch.
#include "adapter.h"

#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDAAllocatorConfig.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <cuda_runtime_api.h>

#include <cstring>

namespace fsdpshim
{

namespace
{

using AC = c10::CachingAllocator::AcceleratorAllocatorConfig;

// Whether `key` is one of the string's keys (a token at its start or
// after a comma outside brackets, followed by a colon).
bool names(const std::string &env, const char *key)
{
    size_t n = strlen(key);
    int depth = 0;
    bool at_key = true;
    for (size_t i = 0; i < env.size(); i++) {
        char c = env[i];
        if (c == '[') depth++;
        if (c == ']') depth--;
        if (at_key && depth == 0 && env.compare(i, n, key) == 0) {
            size_t j = i + n;
            while (j < env.size() && env[j] == ' ')
                j++;
            if (j < env.size() && env[j] == ':') return true;
        }
        if (c == ',' && depth == 0)
            at_key = true;
        else if (c != ' ')
            at_key = false;
    }
    return false;
}

void tell_shim(const std::string &env)
{
    fs_torch_settings s{};
    s.named = (names(env, "max_split_size_mb") ? FS_TORCH_SET_MAX_SPLIT : 0) |
              (names(env, "roundup_power2_divisions") ? FS_TORCH_SET_ROUNDUP : 0) |
              (names(env, "garbage_collection_threshold") ? FS_TORCH_SET_GC : 0) |
              (names(env, "expandable_segments") ? FS_TORCH_SET_EXPANDABLE : 0);
    s.max_split_size = AC::max_split_size();
    const std::vector<size_t> &div = AC::roundup_power2_divisions();
    for (size_t i = 0; i < 16 && i < div.size(); i++)
        s.roundup_divisions[i] = unsigned(div[i]);
    s.garbage_collection_threshold = AC::garbage_collection_threshold();
    s.expandable_segments = AC::use_expandable_segments() ? 1 : 0;
    api->tune(&s);
}

} // namespace

void Settings::watch()
{
    // PyTorch's configuration parses PYTORCH_CUDA_ALLOC_CONF when first
    // asked: done now, so that only later changes reach the shim
    (void)AC::instance();
    (void)cca::CUDAAllocatorConfig::instance();
    auto &hook = AC::getConfigParserHook();
    std::function<void(const std::string &)> pytorch_s = hook;
    hook = [pytorch_s](const std::string &env) {
        if (pytorch_s) pytorch_s(env);
        tell_shim(env);
    };
}

double Settings::fraction(c10::DeviceIndex device) const
{
    return size_t(device) < fractions_.size() ? fractions_[size_t(device)] : 1.0;
}

// As PyTorch's: the cap is the fraction of the device's total memory, and
// a miss that would grow past it gives back the cache and retries, then
// raises OutOfMemoryError. The shim's cap covers everything it serves on
// the device (NCCL's or a library's cudaMalloc too), not only PyTorch's.
void Settings::set_fraction(double fraction, c10::DeviceIndex device)
{
    TORCH_CHECK(fraction >= 0 && fraction <= 1, "invalid fraction: ", fraction,
                ". Please set within [0, 1].");
    // one fraction per device the allocator was started with
    TORCH_CHECK(device >= 0 && size_t(device) < fractions_.size(), "invalid device ", int(device));
    cudaDeviceProp prop{};
    C10_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    size_t cap = static_cast<size_t>(fraction * static_cast<double>(prop.totalGlobalMem));
    api->set_limit(device, fraction >= 1.0 ? 0 : (cap ? cap : 1));
    fractions_[size_t(device)] = fraction;
}

// At the allocator's init, what PyTorch's configuration holds: settings
// the program changed before its first CUDA call, which reached PyTorch's
// configuration alone (the adapter is installed at that call), and
// PYTORCH_CUDA_ALLOC_CONF's per_process_memory_fraction, which PyTorch's
// allocator applies to every device at its init (the device's properties
// need no context on it).
void Settings::start(int device_count)
{
    fractions_.assign(size_t(device_count > 0 ? device_count : 0), 1.0);
    std::string last = AC::last_allocator_settings();
    if (!last.empty()) tell_shim(last);
    double f = cca::CUDAAllocatorConfig::per_process_memory_fraction();
    if (f >= 1.0) return;
    for (int d = 0; d < device_count; d++)
        set_fraction(f, c10::DeviceIndex(d));
}

} // namespace fsdpshim
