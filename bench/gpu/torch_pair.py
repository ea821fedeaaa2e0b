#!/usr/bin/env python3
"""torch_pair.py - the cost of one cached allocation and its free through
PyTorch's allocator interface, whatever backend serves it:

    python3 torch_pair.py [PAIRS]                                     # PyTorch's caching allocator
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync python3 torch_pair.py   # CUDA's default pool
    fsdpshim run -- python3 torch_pair.py                             # the shim

Each pair is torch.cuda.caching_allocator_alloc(size, device, stream) and
torch.cuda.caching_allocator_delete(ptr), on the current stream, after a
warm-up; the whole run is ended by a synchronisation. The figure includes
the Python calls, which are the same for every backend: the line
`python_call` times the same loop around a do-nothing function of the same
arguments, the floor under every backend. One line per size:

    torch_pair: backend=native size=1048576 pairs=N ns_per_pair=X

caching_allocator_alloc is Python around the binding (a device guard, the
stream's conversion): about 1.1 us of each pair on the simulated device. A
second line per size times the binding itself
(torch._C._cuda_cudaCachingAllocator_raw_alloc and raw_delete, the stream
as an integer), where the backend is a larger share of the figure:

    torch_pair: backend=native size=1048576 pairs=N raw_ns_per_pair=X

A third line per size times the allocator's own raw_alloc_with_stream and
raw_delete from C++ (torch_pair_cpp.cpp, compiled here against this
PyTorch's headers with the system's c++), no Python at all: the figure to set
beside the shim's pair from C (pair_bench), allocator against allocator.
Without a compiler it says so and prints no such lines.

    torch_pair: backend=native size=1048576 pairs=N cpp_ns_per_pair=X

Then the same with a trace tracker attached, as PyTorch 2.15's default NCCL
process group always attaches one (entries: how many the tracker got,
about three per pair where the allocator gives them every action):

    torch_pair: backend=native size=1048576 pairs=N cpp_tracked_ns_per_pair=X entries=E
"""
import ctypes
import os
import subprocess
import sys
import tempfile
import time

import torch

SIZES = (4096, 1 << 20, 64 << 20)


def timed(pairs, alloc, delete, size, device, stream):
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(pairs):
        delete(alloc(size, device, stream))
    torch.cuda.synchronize()
    return (time.perf_counter_ns() - t0) / pairs


def cpp_pair():
    """torch_pair_cpp.cpp built against this PyTorch and loaded into this
    process: its pair function, or None (and a line saying why)."""
    torch_dir = os.path.dirname(torch.__file__)
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_pair_cpp.cpp")
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    lib = os.path.join(tempfile.mkdtemp(prefix="torch_pair_cpp."), "libtorch_pair_cpp.so")
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    errors = ""
    for std in ("c++20", "c++17"):
        cmd = ["c++", f"-std={std}", "-O2", "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
               "-I", os.path.join(torch_dir, "include"), "-I", os.path.join(cuda_home, "include"),
               src, "-o", lib, "-L", os.path.join(torch_dir, "lib"), "-lc10_cuda", "-lc10",
               "-Wl,-rpath," + os.path.join(torch_dir, "lib")]
        try:
            built = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            errors = str(e)
            break
        if built.returncode == 0:
            loaded = ctypes.CDLL(lib)
            pair = loaded.fs_torch_cpp_pair_ns
            pair.restype = ctypes.c_double
            pair.argtypes = [ctypes.c_size_t, ctypes.c_long, ctypes.c_void_p]
            pair.tracker_entries = loaded.fs_torch_cpp_tracker_entries
            pair.tracker_entries.restype = ctypes.c_long
            return pair
        errors = built.stderr.strip().splitlines()[-1:] or ["exit %d" % built.returncode]
    print(f"torch_pair: no C++ figures: {src} did not build: {errors}", flush=True)
    return None


def main():
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    backend = torch.cuda.get_allocator_backend()
    if os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1":
        backend += "_nocache"
    shim = "LD_PRELOAD" in os.environ and "fsdpshim" in os.environ["LD_PRELOAD"]
    name = "shim" if shim else backend
    torch.cuda.init()
    device = torch.cuda.current_device()
    stream = torch.cuda.current_stream()

    def nothing(size, dev, st):
        return 0

    def nothing_delete(ptr):
        return None

    floor = timed(pairs, nothing, nothing_delete, 4096, device, stream)
    print(f"torch_pair: backend={name} size=0 pairs={pairs} python_call={floor:.1f}", flush=True)
    alloc, delete = torch.cuda.caching_allocator_alloc, torch.cuda.caching_allocator_delete
    for size in SIZES:
        timed(pairs // 10 + 1, alloc, delete, size, device, stream)  # warm-up
        ns = timed(pairs, alloc, delete, size, device, stream)
        print(f"torch_pair: backend={name} size={size} pairs={pairs} ns_per_pair={ns:.1f}"
              f" (conf {conf or 'default'})", flush=True)

    raw_alloc = torch._C._cuda_cudaCachingAllocator_raw_alloc
    raw_delete = torch._C._cuda_cudaCachingAllocator_raw_delete
    handle = stream.cuda_stream

    def binding(size, dev, st):
        return raw_alloc(size, handle)

    for size in SIZES:
        timed(pairs // 10 + 1, binding, raw_delete, size, device, stream)
        ns = timed(pairs, binding, raw_delete, size, device, stream)
        print(f"torch_pair: backend={name} size={size} pairs={pairs} raw_ns_per_pair={ns:.1f}",
              flush=True)

    pair = cpp_pair()
    if pair is None:
        return
    for size in SIZES:
        ns = pair(size, pairs, handle)
        print(f"torch_pair: backend={name} size={size} pairs={pairs} cpp_ns_per_pair={ns:.1f}",
              flush=True)
    if pair.tracker_entries() < 0:  # attached from now on, where the backend takes one
        print(f"torch_pair: no tracked figures: backend {backend} takes no trace trackers",
              flush=True)
        return
    for size in SIZES:
        before = pair.tracker_entries()
        ns = pair(size, pairs, handle)
        print(f"torch_pair: backend={name} size={size} pairs={pairs} cpp_tracked_ns_per_pair={ns:.1f}"
              f" entries={pair.tracker_entries() - before}", flush=True)


if __name__ == "__main__":
    main()
