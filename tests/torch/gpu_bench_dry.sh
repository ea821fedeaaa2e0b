#!/usr/bin/env bash
# gpu_bench_dry.sh - bench/gpu/gpu_bench.sh run on the simulated device
# (--sim, one round, alloc_bench --quick), so that a session lent a GPU for
# a few minutes does not find the script broken: every section asked for
# must record its figures (numbers, not empty fields), no run may fail, each
# training route's losses must match the native run's, alloc_bench's
# scaling must be the column it printed, and the table must end with the
# verdicts against issue 13's targets.
#
#   gpu_bench_dry.sh GPU_BENCH PYTHON
set -uo pipefail
bench=$1 python=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "gpu_bench_dry: $*" >&2; exit 1; }

PYTHON=$python FSDPSHIM_SIM_DATA=0 "$bench" --sim --runs 1 --out "$out" pair torch tiny gap threads \
    >"$out/console.log" 2>&1 || fail "exit $?: $(tail -20 "$out/console.log")"
cat "$out/console.log"
grep -q 'FAILED' "$out/console.log" && fail "a run failed (above)"

results=$out/results.txt
[ -s "$results" ] || fail "no results table"
want=()
for size in 4096 1048576 67108864; do
    for v in cuda_malloc cuda_pool shim_async shim_malloc; do want+=("pair.$v.$size"); done
    for v in torch_caching cuda_pool shim; do
        want+=("torch.$v.$size" "torch_binding.$v.$size" "torch_cpp.$v.$size")
    done
done
for route in native shim nocache nocache_shim; do
    want+=("train2tiny.$route.step_ms" "train2tiny.$route.peak_device_MiB")
done
want+=(torch.python_call gap.shim_us gap.program_us)
for n in 8 16; do
    want+=("threads.fsdp_pair.fsdpshim.ns_$n" "threads.fsdp_pair.fsdpshim.scaling_$n")
done
for key in "${want[@]}"; do
    # the key, then a positive median
    awk -v k="$key" '$1 == k && $2 + 0 > 0 { found = 1 } END { exit !found }' "$results" ||
        fail "no figure for $key in the table"
done
for route in shim nocache nocache_shim; do
    grep -q "^  train2tiny losses, $route against native: same$" "$results" ||
        fail "train2tiny $route: losses not the native run's: $(grep "train2tiny losses, $route" "$results")"
done
# the scaling recorded is alloc_bench's own column (the last), not another
logged=$(awk '$1 == "fsdp/pair" && $2 == "fsdpshim" { sub(/x$/, "", $9); print $9 }' "$out/logs/alloc_bench.8")
recorded=$(awk '$1 == "threads.fsdp_pair.fsdpshim.scaling_8" { print $2 + 0 }' "$results")
awk -v a="$logged" -v b="$recorded" 'BEGIN { exit !(a != "" && a + 0 == b + 0) }' ||
    fail "threads: scaling_8 recorded as $recorded, alloc_bench printed $logged"
# the medians set against issue 13's targets, one verdict each
for verdict in "pair 1048576: cudaMalloc+cudaFree / the shim" "torch_cpp 1048576: shim route / PyTorch cache" \
    "train2tiny: step time, shim against native" "train2tiny: peak device memory, shim - native" \
    "train2tiny: no caching, native / shim step time" "alloc_bench fsdp_pair: 8 threads / 1 thread throughput"; do
    grep -F "  $verdict " "$results" | grep -Eq ' (met|MISSED)$' || fail "no verdict line: $verdict"
done
echo "gpu_bench_dry: ok (${#want[@]} figures)"
