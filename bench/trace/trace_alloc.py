"""trace_alloc.py - trace_bench's Python workload: cudaMallocAsync/cudaFreeAsync
through ctypes, on a stream of its own, from a Python stack of known depth, so that trace:python records that
many Python frames per allocation. Like trace_alloc.c it knows nothing of the
shim. The runtime is loaded RTLD_GLOBAL and the entry points are looked up in
the global scope, as a program's own references would bind: a preloaded
library's definitions come first there.

    python3 trace_alloc.py DEPTH ITERS
"""
import ctypes
import sys
import time


def main():
    depth, iters = int(sys.argv[1]), int(sys.argv[2])
    ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
    glob = ctypes.PyDLL(None)  # keeps the GIL across calls: frames are read then
    malloc, free = glob.cudaMallocAsync, glob.cudaFreeAsync
    malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p]
    free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    stream = ctypes.c_void_p()
    if glob.cudaStreamCreateWithFlags(ctypes.byref(stream), 1):
        sys.exit("cudaStreamCreateWithFlags failed")
    ptr = ctypes.c_void_p()

    def loop(n):
        for i in range(n):
            if malloc(ctypes.byref(ptr), (1 + i % 4) << 20, stream) or free(ptr, stream):
                sys.exit("cudaMallocAsync/cudaFreeAsync failed")

    def descend(d, n):
        if d == 0:
            loop(n)
        else:
            descend(d - 1, n)

    descend(depth, iters // 10 + 1)  # warm up: context, segments, stacks
    t0 = time.perf_counter_ns()
    descend(depth, iters)
    t1 = time.perf_counter_ns()
    print(f"pairs={iters} ns_per_pair={(t1 - t0) / iters:.1f}")


if __name__ == "__main__":
    main()
