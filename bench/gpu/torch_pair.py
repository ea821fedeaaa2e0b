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
"""
import os
import sys
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


if __name__ == "__main__":
    main()
