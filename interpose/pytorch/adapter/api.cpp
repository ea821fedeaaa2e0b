// api.cpp - the shim's table (../torch_api.h) as the adapter holds it: the
// pointer fsdpshim_torch_install sets, and the one call of it that needs
// sizing (walk). The bottom of the adapter: every other file uses it, it
// uses none of them.
#include "adapter.h"

namespace fsdpshim
{

const fs_torch_api *api = nullptr;

// The walk of one device, sized by asking twice when the first guess was short.
std::vector<fs_torch_walk_entry> walk(int device)
{
    std::vector<fs_torch_walk_entry> w(256);
    for (;;) {
        size_t n = api->walk(device, w.data(), w.size());
        if (n <= w.size()) {
            w.resize(n);
            return w;
        }
        w.resize(n + n / 4 + 16); // what was freed or grown meanwhile
    }
}

} // namespace fsdpshim
