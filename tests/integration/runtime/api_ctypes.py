"""api_ctypes.py - the public API through Python's ctypes.

  api_ctypes.py LIBFSDPSHIM LIBCUDART

First, with no CUDA runtime in the process, every function answers
FSDPSHIM_ERR_INACTIVE (1) and does nothing. Then the (simulated) runtime is
loaded the way Python loads it, with RTLD_LOCAL, and the shim becomes active:
the same calls now succeed."""
import ctypes
import sys

OK, INACTIVE, NOT_FOUND, EMPTY = 0, 1, 4, 5

shim = ctypes.CDLL(sys.argv[1])
value = ctypes.c_int64(-1)
stream = ctypes.c_void_p(1)

checks = [
    (shim.fsdpshim_active(), INACTIVE),
    (shim.fsdpshim_stat(b"allocated_bytes.all.current", 0, ctypes.byref(value)), INACTIVE),
    (shim.fsdpshim_record_stream(None, None), INACTIVE),
    (shim.fsdpshim_set_stream(None), INACTIVE),
    (shim.fsdpshim_get_stream(ctypes.byref(stream)), INACTIVE),
    (shim.fsdpshim_empty_cache(-1), INACTIVE),
    (shim.fsdpshim_memory_summary(0, None, 0, None), INACTIVE),
    (shim.fsdpshim_annotation_push(b"x"), INACTIVE),
    (shim.fsdpshim_annotation_pop(), INACTIVE),
    (shim.fsdpshim_snapshot(b"s"), INACTIVE),
    (shim.fsdpshim_trace_flush(), INACTIVE),
]

cudart = ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_LOCAL)
count = ctypes.c_int(0)
assert cudart.cudaGetDeviceCount(ctypes.byref(count)) == 0 and count.value > 0

checks += [
    (shim.fsdpshim_active(), OK),
    (shim.fsdpshim_stat(b"allocated_bytes.all.current", 0, ctypes.byref(value)), OK),
    (value.value, 0),
    (shim.fsdpshim_stat(b"no_such_stat", 0, ctypes.byref(value)), NOT_FOUND),
    (shim.fsdpshim_annotation_push(b"step"), OK),
    (shim.fsdpshim_annotation_pop(), OK),
    (shim.fsdpshim_annotation_pop(), EMPTY),
    (shim.fsdpshim_snapshot(b"s"), OK),
    (shim.fsdpshim_trace_flush(), OK),
]
bad = [(i, got, want) for i, (got, want) in enumerate(checks) if got != want]
if bad:
    print("api_ctypes: mismatches (index, got, want):", bad)
    sys.exit(1)
print("api_ctypes: ok")
