#!/usr/bin/env bash
# python_test.sh - Python frames in traces (trace:python): an embedded
# interpreter allocates through ctypes; the allocation made holding the GIL
# carries its Python frames (file:line:function), the one made with the GIL
# released carries native frames only, and the one whose cudaMalloc was
# looked up on the runtime's own handle (ctypes.PyDLL("libcudart.so.13"))
# is served and traced like the first.
#
#   python_test.sh FSDPSHIM PY_EMBED SIM_DIR
name=python_test
cli=$1 embed=$2 sim=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset NVTX_INJECTION64_PATH FSDPSHIM_NVTX_CHAIN FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# the interpreter's own allocations outlive it: not the shim's leaks
[ -n "${ASAN_OPTIONS+x}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
script=$here/py_alloc.py
line_of() { grep -n "$1" "$script" | cut -d: -f1; }

expect 0 "$cli" run --trace --conf trace:python -o "$dir/py.fst" -- "$embed" "$script"
expect 0 "$cli" dump "$dir/py.fst"
# the frames printed under the allocation of `size`
frames_of() { awk -v size="requested=$1" '$2 == "alloc" && index($0, size) { on = 1; next } on && /^    / { print; next } { on = 0 }' "$dir/out"; }
frames_of 11534336 >"$dir/held"
frames_of 13631488 >"$dir/released"
frames_of 15728640 >"$dir/handle"
grep -q "^    py#0 $script:$(line_of PY_SITE_CALL):alloc$" "$dir/held" ||
    fail "the innermost Python frame is not alloc at line $(line_of PY_SITE_CALL): $(cat "$dir/held")"
grep -q "^    py#1 $script:$(line_of PY_SITE_FORWARD):layer_forward$" "$dir/held" ||
    fail "the caller's frame is not layer_forward: $(cat "$dir/held")"
grep -q "^    py#2 $script:[0-9]*:<module>$" "$dir/held" || fail "no module frame: $(cat "$dir/held")"
grep -q "^    #0 " "$dir/held" || fail "the native frames are missing beside the Python ones"
grep -q "py#" "$dir/released" && fail "an allocation without the GIL has Python frames"
grep -q "^    #0 " "$dir/released" || fail "the allocation without the GIL has no native frames"
grep -q "^    py#1 $script:$(line_of PY_SITE_HANDLE):by_handle$" "$dir/handle" ||
    fail "the allocation through the runtime's handle is not traced with its frames: $(cat "$dir/handle")"
# trace:stacks records no Python frames
expect 0 "$cli" run --trace -o "$dir/native.fst" -- "$embed" "$script"
expect 0 "$cli" dump "$dir/native.fst"
grep -q "py#" "$dir/out" && fail "trace:stacks recorded Python frames"
echo "python_test: ok"
