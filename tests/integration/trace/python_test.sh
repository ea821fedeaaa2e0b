#!/usr/bin/env bash
# python_test.sh - Python frames in traces (trace:python): py_alloc.py
# allocates through ctypes under each interpreter given, an embedding
# program (libpython shared: the shim's own PyEval_SaveThread binds) and a
# python executable (Debian's links libpython statically: its slots are
# pointed at the shim's). Every allocation carries its Python frames
# (file:line:function) beside its native ones: the one made holding the GIL
# (PyDLL), the one made after the GIL was let go (CDLL), the one whose
# cudaMalloc was looked up on the runtime's own handle, one made in a
# Python callback run from C with the GIL let go around it and the one that
# C function makes after the callback (the outer call's frames), and a fork
# child's; trace:stacks records no Python frames. The first interpreter
# again under the trace-only attach through CUPTI (CUDA_INJECTION64_PATH:
# the shim is loaded after libpython, whose definitions then bind first).
#
#   python_test.sh FSDPSHIM LIBFSDPSHIM SIM_DIR PY_NEST_LIB INTERPRETER...
name=python_test
cli=$1 shim=$2 sim=$3 nest=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset NVTX_INJECTION64_PATH FSDPSHIM_NVTX_CHAIN FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PY_NEST_LIB=$nest
# the interpreter's own allocations outlive it, and a fork child leaves the
# parent's allocator behind on purpose: not the shim's leaks
[ -n "${ASAN_OPTIONS+x}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
script=$here/py_alloc.py
line_of() { grep -n "$1" "$script" | cut -d: -f1; }
site() { echo "$script:$(line_of "PY_SITE_$1"):$2"; }

# the frames printed under the allocation of `size` in $dir/out
frames_of() { awk -v size="requested=$1" '$2 == "alloc" && index($0, size) { on = 1; next } on && /^    / { print; next } { on = 0 }' "$dir/out"; }
# has_frames WHAT SIZE FRAME...: FRAME is "N SITE" for py#N
has_frames() {
    local what=$1 size=$2 got
    shift 2
    got=$(frames_of "$size")
    grep -q "^    #0 " <<<"$got" || fail "$runner: $what: no native frames: $got"
    for f in "$@"; do
        grep -qxF "    py#${f%% *} ${f#* }" <<<"$got" || fail "$runner: $what: no py#${f%% *} ${f#* }: $got"
    done
}

for runner in "$@"; do
    expect 0 env FSDPSHIM_LOG=info "$cli" run --trace --conf trace:python -o "$dir/py.fst" -- \
        "$runner" "$script"
    # an interpreter that defines the GIL functions itself binds them ahead
    # of the shim's: then its objects' slots must have been redirected
    if ! ldd "$runner" | grep -q libpython; then
        grep -q "trace:python: the interpreter's GIL functions bind ahead of the shim's" "$dir/err" ||
            fail "$runner: libpython linked statically, and no slot redirected: $(cat "$dir/err")"
    fi
    child=$(sed -n 's/^py_alloc: child //p' "$dir/out")
    expect 0 "$cli" dump "$dir/py.fst"
    has_frames "the GIL held" 11534336 "0 $(site CALL alloc)" "1 $(site FORWARD layer_forward)" \
        "2 $script:$(line_of '^a = layer_forward'):<module>"
    has_frames "the GIL let go (CDLL)" 13631488 "0 $(site CALL alloc)" "1 $(site RELEASED released)"
    has_frames "through the runtime's handle" 15728640 "1 $(site HANDLE by_handle)"
    has_frames "in a callback from C" 17825792 "0 $(site CALL alloc)" "1 $(site INNER inner)" \
        "2 $(site NESTED nested)"
    has_frames "in C after the callback" 19922944 "0 $(site NESTED nested)" \
        "1 $script:$(line_of '^nested()'):<module>"
    if [ "${PY_ALLOC_NO_FORK:-}" != 1 ]; then # (the sanitizer builds leave the fork out)
        [ -n "$child" ] && [ -f "$dir/py.fst.$child" ] || fail "$runner: no fork child's trace: $(ls "$dir")"
        expect 0 "$cli" dump "$dir/py.fst.$child"
        has_frames "in a fork child" 22020096 "0 $(site CALL alloc)" "1 $(site CHILD in_child)"
    fi
    rm -f "$dir"/py.fst*

    # trace:stacks records no Python frames
    expect 0 "$cli" run --trace -o "$dir/native.fst" -- "$runner" "$script"
    expect 0 "$cli" dump "$dir/native.fst"
    grep -q "py#" "$dir/out" && fail "$runner: trace:stacks recorded Python frames"
    rm -f "$dir"/native.fst*
done

# the trace-only attach through CUPTI, from the driver's cuInit
runner=$1
CUDA_INJECTION64_PATH=$shim FSDPSHIM_CONF=trace:python FSDPSHIM_TRACE=$dir/cupti.fst \
    expect 0 "$runner" "$script"
expect 0 "$cli" dump "$dir/cupti.fst"
has_frames "CUPTI, the GIL let go (CDLL)" 13631488 "0 $(site CALL alloc)" "1 $(site RELEASED released)"
has_frames "CUPTI, in a callback from C" 17825792 "1 $(site INNER inner)" "2 $(site NESTED nested)"
has_frames "CUPTI, in C after the callback" 19922944 "0 $(site NESTED nested)"
echo "python_test: ok"
