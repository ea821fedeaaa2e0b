#!/usr/bin/env bash
# cupti_gpu.sh - the trace-only attach through NVIDIA's driver and CUPTI on a
# GPU (label gpu): trace_prog built against the toolkit's libcudart, run
# with CUDA_INJECTION64_PATH=libfsdpshim.so and no LD_PRELOAD, has its two
# allocations in the trace at their SITE_ lines. Exits 77 (skipped) without
# a GPU.
#
#   cupti_gpu.sh FSDPSHIM TRACE_PROG_GPU LIBFSDPSHIM
name=cupti_gpu
cli=$1 prog=$2 shim=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset LD_PRELOAD NVTX_INJECTION64_PATH FSDPSHIM_NVTX_CHAIN FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU || exit 77
src=$here/../trace/trace_prog.c

CUDA_INJECTION64_PATH=$shim FSDPSHIM_CONF=trace:stacks FSDPSHIM_TRACE=$dir/sites.fst \
    expect 0 "$prog" sites
[ -s "$dir/sites.fst" ] || fail "no trace: $(cat "$dir/err")"
expect 0 "$cli" top --by frame "$dir/sites.fst"
grep -q "^2 allocations in 1 trace" "$dir/out" || fail "not 2 allocations: $(cat "$dir/out")"
for site in backward forward; do
    want=$(grep -n "SITE_$(echo $site | tr a-z A-Z)" "$src" | cut -d: -f1)
    grep -qE "^    alloc_in_$site at .*/trace_prog.c:$want\$" "$dir/out" ||
        fail "$site: not at trace_prog.c:$want: $(cat "$dir/out")"
done
echo "$name: ok"
