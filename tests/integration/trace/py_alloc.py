"""py_alloc.py - run by python_test.sh under an interpreter (py_embed, or a
python executable): device allocations from Python through ctypes. PyDLL
keeps the GIL across the call, so the shim reads this thread's Python frames
as it allocates; CDLL lets the GIL go first, so the frames are the ones the
shim read as the GIL was let go, which must be the same. The third
allocation looks cudaMalloc up on the runtime's own handle, as
`ctypes.PyDLL("libcudart.so.13").cudaMalloc` does: the shim must serve and
trace it as it does the global scope's. Then releases nest: a CDLL call into
C (PY_NEST_LIB, py_nest.c) runs a Python callback that allocates through
CDLL, and allocates itself once the callback is done, with the outer call's
frames. Last, a fork child allocates through CDLL. The lines marked PY_SITE_*
are what the test looks for."""
import ctypes
import os
import sys

ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
with_gil = ctypes.PyDLL(None)
without_gil = ctypes.CDLL(None)
runtime_handle = ctypes.PyDLL("libcudart.so.13")
nest = ctypes.CDLL(os.environ["PY_NEST_LIB"])
CALLBACK = ctypes.CFUNCTYPE(None)


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
    return alloc(without_gil, 13 << 20)  # PY_SITE_RELEASED


def by_handle():
    return alloc(runtime_handle, 15 << 20)  # PY_SITE_HANDLE


def inner():
    alloc(without_gil, 17 << 20)  # PY_SITE_INNER


def nested():
    p = ctypes.c_void_p()
    fn = nest.call_then_alloc
    fn.argtypes = [CALLBACK, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    cb = CALLBACK(inner)
    malloc = ctypes.cast(without_gil.cudaMalloc, ctypes.c_void_p)
    if fn(cb, malloc, ctypes.byref(p), 19 << 20):  # PY_SITE_NESTED
        raise SystemExit("call_then_alloc failed")


def in_child():
    alloc(without_gil, 21 << 20)  # PY_SITE_CHILD


a = layer_forward()
b = released()
c = by_handle()
nested()
if os.environ.get("PY_ALLOC_NO_FORK") != "1":
    pid = os.fork()
    if pid == 0:
        in_child()
        sys.exit(0)  # exit, not _exit: the shim writes the child's trace at exit
    _, status = os.waitpid(pid, 0)
    if status:
        raise SystemExit(f"the fork child exited with {status}")
    print(f"py_alloc: child {pid}")
print("py_alloc: ok")
