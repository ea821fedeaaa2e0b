"""perfetto_stacks.py - run under `fsdpshim run --trace --conf trace:python`
by perfetto_test.sh: N device blocks live at once, each allocated from a
Python function of its own (site_I, made with exec at line 2I + 2 of
perfetto_sites.py) through ctypes with the GIL held, so that the shim sees
the Python frames. The heap profile at the peak then has N stacks, Python
frames merged into native ones, and for N = 20000 takes several packets.

    python3 perfetto_stacks.py N

An embedding program (tests/integration/trace/py_embed.c) passes no
arguments: N is then 20000."""
import ctypes
import sys

ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
shim = ctypes.PyDLL(None)  # the preloaded shim's cudaMalloc, called with the GIL held
shim.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
shim.cudaFree.argtypes = [ctypes.c_void_p]


def alloc(size):
    p = ctypes.c_void_p()
    if shim.cudaMalloc(ctypes.byref(p), size):
        raise SystemExit("perfetto_stacks: cudaMalloc failed")
    return p


n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
source = "".join(f"def site_{i}(alloc):\n    return alloc({512 * (i % 7 + 1)})\n" for i in range(n))
sites = {}
exec(compile(source, "perfetto_sites.py", "exec"), sites)
blocks = [sites[f"site_{i}"](alloc) for i in range(n)]
for p in blocks:
    if shim.cudaFree(p):
        raise SystemExit("perfetto_stacks: cudaFree failed")
print(f"perfetto_stacks: {n} sites")
