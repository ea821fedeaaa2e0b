"""py_alloc.py - run by py_embed: device allocations from Python through
ctypes. PyDLL keeps the GIL across the call, so the shim sees this thread's
Python frames; CDLL releases it, so that allocation must carry native frames
only. The third allocation looks cudaMalloc up on the runtime's own handle,
as `ctypes.PyDLL("libcudart.so.13").cudaMalloc` does: the shim must serve
and trace it as it does the global scope's. The lines marked PY_SITE_* are
what the test looks for."""
import ctypes

ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
with_gil = ctypes.PyDLL(None)
without_gil = ctypes.CDLL(None)
runtime_handle = ctypes.PyDLL("libcudart.so.13")


def alloc(lib, size):
    p = ctypes.c_void_p()
    fn = lib.cudaMalloc
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    if fn(ctypes.byref(p), size):  # PY_SITE_CALL
        raise SystemExit("cudaMalloc failed")
    return p


def layer_forward():
    return alloc(with_gil, 11 << 20)  # PY_SITE_FORWARD


def released():
    return alloc(without_gil, 13 << 20)


def by_handle():
    return alloc(runtime_handle, 15 << 20)  # PY_SITE_HANDLE


a = layer_forward()
b = released()
c = by_handle()
print("py_alloc: ok")
