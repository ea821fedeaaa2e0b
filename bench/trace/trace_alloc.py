"""trace_alloc.py - trace_bench's Python workload: cudaMalloc/cudaFree through
ctypes from a Python stack of known depth, so that trace:python records that
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
    glob = ctypes.CDLL(None)
    malloc, free = glob.cudaMalloc, glob.cudaFree
    malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    free.argtypes = [ctypes.c_void_p]
    ptr = ctypes.c_void_p()

    def loop(n):
        for i in range(n):
            if malloc(ctypes.byref(ptr), (1 + i % 4) << 20) or free(ptr):
                sys.exit("cudaMalloc/cudaFree failed")

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
