"""api_ctypes.py - the public API through Python's ctypes.

  api_ctypes.py preloaded LIBCUDART          (run with the shim in LD_PRELOAD)
  api_ctypes.py loaded LIBFSDPSHIM LIBCUDART (run without it)

preloaded: the API is reached as docs/api.md says, ctypes.CDLL(None). With
no CUDA runtime in the process yet every function answers
FSDPSHIM_ERR_INACTIVE (1) and does nothing; once the (simulated) runtime is
loaded the way Python loads it, with RTLD_LOCAL, the shim is active and the
same calls succeed.

loaded: the shim dlopen'ed by ctypes (RTLD_LOCAL) interposes on nothing, so
it stays inactive even once the runtime is loaded."""
import ctypes
import sys

OK, INACTIVE, NOT_FOUND, EMPTY = 0, 1, 4, 5


def inactive_checks(shim):
    value = ctypes.c_int64(-1)
    stream = ctypes.c_void_p(1)
    return [
        (shim.fsdpshim_active(), INACTIVE),
        (shim.fsdpshim_stat(b"allocated_bytes.all.current", 0, ctypes.byref(value)), INACTIVE),
        (value.value, -1),
        (shim.fsdpshim_record_stream(None, None), INACTIVE),
        (shim.fsdpshim_set_stream(None), INACTIVE),
        (shim.fsdpshim_get_stream(ctypes.byref(stream)), INACTIVE),
        (stream.value, 1),
        (shim.fsdpshim_empty_cache(-1), INACTIVE),
        (shim.fsdpshim_reset_peak_stats(-1), INACTIVE),
        (shim.fsdpshim_memory_summary(0, None, 0, None), INACTIVE),
        (shim.fsdpshim_annotation_push(b"x"), INACTIVE),
        (shim.fsdpshim_annotation_pop(), INACTIVE),
        (shim.fsdpshim_snapshot(b"s"), INACTIVE),
        (shim.fsdpshim_trace_flush(), INACTIVE),
    ]


def active_checks(shim):
    value = ctypes.c_int64(-1)
    return [
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


def load_runtime(path):
    cudart = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    count = ctypes.c_int(0)
    assert cudart.cudaGetDeviceCount(ctypes.byref(count)) == 0 and count.value > 0


mode = sys.argv[1]
if mode == "preloaded":
    shim = ctypes.CDLL(None)
    checks = inactive_checks(shim)
    load_runtime(sys.argv[2])
    checks += active_checks(shim)
else:
    shim = ctypes.CDLL(sys.argv[2])
    checks = inactive_checks(shim)
    load_runtime(sys.argv[3])
    checks += inactive_checks(shim)
bad = [(i, got, want) for i, (got, want) in enumerate(checks) if got != want]
if bad:
    print("api_ctypes %s: mismatches (index, got, want):" % mode, bad)
    sys.exit(1)
print("api_ctypes %s: ok" % mode)
