"""trace_alloc.py - trace_bench's Python workload: cudaMallocAsync/cudaFreeAsync
through ctypes, on a stream of its own, from a Python stack of known depth, so that trace:python records that
many Python frames per allocation. Like trace_alloc.c it knows nothing of the
shim. The runtime is loaded RTLD_GLOBAL and the entry points are looked up in
the global scope, as a program's own references would bind: a preloaded
library's definitions come first there.

    python3 trace_alloc.py DEPTH ITERS [held|released|gil]

held (the default) calls through ctypes.PyDLL, which keeps the GIL: the
frames are read as the thread allocates. released calls through ctypes.CDLL,
which lets the GIL go first, as PyTorch's operators do: the frames are read
as the GIL is let go. gil times ITERS CDLL calls of a C function that does
nothing (libc's abs), after one allocation has started the trace: the cost
of letting the GIL go and taking it back, which the shim's PyEval_SaveThread
and PyEval_RestoreThread wrap. It prints ns_per_pair (per call for gil),
wall time, and cpu_ns_per_pair, the calling thread's CPU time.
"""
import ctypes
import sys
import time


def main():
    depth, iters = int(sys.argv[1]), int(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else "held"
    ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
    if mode == "held":
        glob = ctypes.PyDLL(None)  # keeps the GIL across calls: frames are read then
    elif mode in ("released", "gil"):
        glob = ctypes.CDLL(None)  # lets the GIL go around each call
    else:
        sys.exit(f"trace_alloc.py: mode '{mode}': not held, released or gil")
    malloc, free = glob.cudaMallocAsync, glob.cudaFreeAsync
    malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p]
    free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    noop = glob.abs
    noop.argtypes = [ctypes.c_int]
    stream = ctypes.c_void_p()
    if glob.cudaStreamCreateWithFlags(ctypes.byref(stream), 1):
        sys.exit("cudaStreamCreateWithFlags failed")
    ptr = ctypes.c_void_p()

    def loop(n):
        if mode == "gil":
            for i in range(n):
                noop(i)
            return
        for i in range(n):
            if malloc(ctypes.byref(ptr), (1 + i % 4) << 20, stream) or free(ptr, stream):
                sys.exit("cudaMallocAsync/cudaFreeAsync failed")

    def descend(d, n):
        if d == 0:
            loop(n)
        else:
            descend(d - 1, n)

    if malloc(ctypes.byref(ptr), 1 << 20, stream) or free(ptr, stream):  # starts the trace
        sys.exit("cudaMallocAsync/cudaFreeAsync failed")
    descend(depth, iters // 10 + 1)  # warm up: context, segments, stacks
    t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
    descend(depth, iters)
    t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
    # the thread's CPU time too: on a busy machine the wall time counts
    # other processes' turns
    print(f"pairs={iters} cpu_ns_per_pair={(c1 - c0) / iters:.1f} ns_per_pair={(t1 - t0) / iters:.1f}")


if __name__ == "__main__":
    main()
