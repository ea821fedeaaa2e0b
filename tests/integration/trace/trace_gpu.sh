#!/usr/bin/env bash
# trace_gpu.sh - an allocation trace of a program on a real GPU (label gpu):
# `fsdpshim run --trace` on trace_prog built against the toolkit's own
# libcudart, read back with `fsdpshim dump`. The sim's trace_test.sh checks
# the details; this one checks that the same events, annotations and call
# sites come out when the runtime underneath is NVIDIA's, and that a flood of
# allocations from several threads is written whole. Exits 77 (skipped)
# without a GPU.
#
#   trace_gpu.sh FSDPSHIM TRACE_PROG_GPU
name=trace_gpu
cli=$1 prog=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset NVTX_INJECTION64_PATH FSDPSHIM_NVTX_CHAIN FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU || exit 77

expect 0 "$cli" run --trace -o "$dir/sites-%p.fst" -- "$prog" sites
set -- "$dir"/sites-*.fst
[ $# -eq 1 ] && [ -f "$1" ] || fail "expected one trace file, got: $*"
trace=$1
expect 0 "$cli" dump "$trace"
cp "$dir/out" "$dir/sites.txt"
[ "$(grep -c ' alloc ' "$dir/sites.txt")" -eq 2 ] || fail "not 2 allocs: $(cat "$dir/sites.txt")"
grep -q " alloc .*requested=3145728 .*annot=step/forward$" "$dir/sites.txt" ||
    fail "the forward allocation is not annotated step/forward"
grep -q " alloc .*requested=5242880 .*annot=step$" "$dir/sites.txt" ||
    fail "the backward allocation is not annotated step"
grep -q " annotation_mark .*name=after-forward" "$dir/sites.txt" || fail "no NVTX mark"
[ "$(grep -c ' free_requested ' "$dir/sites.txt")" -eq 2 ] || fail "not 2 frees"
frame=$(awk '$2 == "alloc" { getline; print $2; exit }' "$dir/sites.txt")
case $frame in "$prog"+0x*) ;; *) fail "the first frame of the first allocation is '$frame'" ;; esac

# 8 threads x 20000 pairs: every allocation written, or the drops counted
expect 0 "$cli" run --trace --conf trace:events -o "$dir/flood.fst" -- "$prog" flood 8 20000
expect 0 "$cli" dump --no-stacks "$dir/flood.fst"
n=$(grep -c ' alloc ' "$dir/out")
dropped=$(sed -n 's/^# dropped \([0-9]*\) events\?$/\1/p' "$dir/out" | awk '{ s += $1 } END { print s + 0 }')
if [ "$dropped" -eq 0 ]; then
    [ "$n" -eq 160000 ] || fail "$n of 160000 allocations in the flood trace, none counted as dropped"
else
    echo "trace_gpu: flood: $n allocations written, $dropped events dropped and counted"
fi
echo "trace_gpu: ok"
