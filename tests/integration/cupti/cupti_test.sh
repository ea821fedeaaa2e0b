#!/usr/bin/env bash
# cupti_test.sh - the trace-only attach through CUPTI on the simulated device:
# trace_prog, unmodified and not preloaded, run with
# CUDA_INJECTION64_PATH=libfsdpshim.so. Its allocations are in the trace at
# their SITE_ lines with the right totals, the simulated device sees the same
# allocations as without the shim (nothing served), `fsdpshim top`, `leaks`
# and `report` read the trace; a CUPTI client that subscribed first keeps
# its slot, the shim says so in one line and the program exits 0.
#
#   cupti_test.sh FSDPSHIM TRACE_PROG LIBFSDPSHIM SIM_DIR CUPTI_FIRST
name=cupti_test
cli=$1 prog=$2 shim=$3 sim=$4 first=$5
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset LD_PRELOAD NVTX_INJECTION64_PATH FSDPSHIM_NVTX_CHAIN FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
src=$here/../trace/trace_prog.c

# ---- the call sites, with stacks -------------------------------------------
CUDA_INJECTION64_PATH=$shim FSDPSHIM_CONF=trace:stacks FSDPSHIM_TRACE=$dir/sites.fst \
    expect 0 "$prog" sites
[ -s "$dir/err" ] && fail "stderr: $(cat "$dir/err")"
expect 0 "$cli" top --by frame "$dir/sites.fst"
grep -q "device 0 peaked at 8.0 MiB allocated" "$dir/out" || fail "no 8 MiB peak: $(cat "$dir/out")"
grep -q "^2 allocations in 1 trace" "$dir/out" || fail "not 2 allocations: $(cat "$dir/out")"
for site in backward forward; do
    want=$(grep -n "SITE_$(echo $site | tr a-z A-Z)" "$src" | cut -d: -f1)
    grep -qE "^    alloc_in_$site at .*/trace_prog.c:$want\$" "$dir/out" ||
        fail "$site: not at trace_prog.c:$want: $(cat "$dir/out")"
done
expect 0 "$cli" dump "$dir/sites.fst"
[ "$(grep -c ' free_requested .*allocated=0 ' "$dir/out")" -eq 1 ] ||
    fail "the last free does not bring the total to 0: $(cat "$dir/out")"
grep -q ' alloc .*size=5242880 .*allocated=8388608 ' "$dir/out" || fail "totals: $(cat "$dir/out")"

# ---- out of memory: the program's own behaviour, unchanged ---------------------
export FSDPSHIM_SIM_MEM=64M FSDPSHIM_SIM_STATS=1
expect 0 "$prog" oom
cp "$dir/out" "$dir/native.out"
grep '^fsdpshim-sim:' "$dir/err" >"$dir/native.stats"
CUDA_INJECTION64_PATH=$shim FSDPSHIM_TRACE=$dir/oom.fst expect 0 "$prog" oom
cmp -s "$dir/out" "$dir/native.out" || fail "the program's output changed: $(cat "$dir/out")"
grep '^fsdpshim-sim:' "$dir/err" | cmp -s - "$dir/native.stats" ||
    fail "the device saw other allocations: $(cat "$dir/err") vs $(cat "$dir/native.stats")"
unset FSDPSHIM_SIM_MEM FSDPSHIM_SIM_STATS
n=$(sed -n 's/^oom: \([0-9]*\) allocations.*/\1/p' "$dir/native.out")
expect 0 "$cli" top --by frame "$dir/oom.fst"
line=$(grep -n "SITE_OOM" "$src" | cut -d: -f1)
grep -qE "^ +[0-9.]+ MiB +[0-9.]+ MiB +$n " "$dir/out" || fail "not $n allocations: $(cat "$dir/out")"
grep -qE "^    oom at .*/trace_prog.c:$line\$" "$dir/out" || fail "not at SITE_OOM: $(cat "$dir/out")"
expect 0 "$cli" dump "$dir/oom.fst"
# the addresses are the runtime's: each a separate device allocation, as
# the simulated device counted (the shim would have carved them from segments)
[ "$(grep ' alloc ' "$dir/out" | sed 's/.*addr=\([^ ]*\).*/\1/' | sort -u | wc -l)" -eq "$n" ] ||
    fail "not $n distinct addresses"
expect 0 "$cli" leaks "$dir/oom.fst"
grep -q ": 0 blocks, 0 B (0 bytes), still allocated at the end" "$dir/out" || fail "leaks: $(cat "$dir/out")"
expect 0 "$cli" report "$dir/oom.fst"
grep -q "device 0: $n allocations" "$dir/out" || fail "report: $(cat "$dir/out")"

# ---- a CUPTI client that subscribed first -----------------------------------------
CUDA_INJECTION64_PATH=$shim FSDPSHIM_TRACE=$dir/first.fst expect 0 "$first"
[ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q "another CUPTI client .* holds CUPTI's only subscriber slot" "$dir/err" ||
    fail "not one line about the other subscriber: $(cat "$dir/err")"
[ -e "$dir/first.fst" ] && fail "a trace was written without CUPTI"
echo "$name: ok"
