#!/usr/bin/env bash
# minifsdp_compare.sh - minifsdp with 4 ranks without and with the shim, and
# with the shim tracing: identical results, far fewer device allocations,
# peak device memory shown.
#
#   minifsdp_compare.sh [--no-higher-peak] PRELOAD MINIFSDP [minifsdp options...]
#
# PRELOAD is the LD_PRELOAD value that loads the shim (libfsdpshim.so, after
# the sanitizer runtime in sanitizer builds).
#
# minifsdp verifies its own numbers every step; here the per-rank result
# lines (shard checksums) must also be the same with and without the shim.
# The device allocation counts come from the simulated device
# (FSDPSHIM_SIM_STATS=1, one line per device at exit): with the shim they
# must be at least 3 times fewer; with --no-higher-peak (the demo's sizes:
# a new user's first figure) the highest device's peak must also be no
# higher than without the shim. Both counts and both peaks are printed.
set -euo pipefail

peak_check=
if [ "${1:-}" = --no-higher-peak ]; then
    peak_check=1
    shift
fi
if [ $# -lt 2 ]; then
    echo "usage: $0 [--no-higher-peak] PRELOAD MINIFSDP [minifsdp options...]" >&2
    exit 2
fi
preload=$1
minifsdp=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The per-rank results without the run time, in rank order.
results() { grep '^minifsdp rank' "$tmp/$1.out" | sed 's/, [0-9.]* ms$//' | sort; }
# Sum of a sim statistic over the devices.
stat_sum() { { grep -o "$2=[0-9]*" "$tmp/$1.out" || true; } | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }'; }
stat_max() { { grep -o "$2=[0-9]*" "$tmp/$1.out" || true; } | cut -d= -f2 | awk '$1 > m { m = $1 } END { print m + 0 }'; }

opts=("$@")
FSDPSHIM_SIM_STATS=1 LD_PRELOAD= "$minifsdp" --ranks 4 "${opts[@]}" >"$tmp/plain.out" 2>&1 || {
    echo "FAILED: minifsdp ${opts[*]} without the shim:" >&2; cat "$tmp/plain.out" >&2; exit 1; }
FSDPSHIM_SIM_STATS=1 LD_PRELOAD=$preload "$minifsdp" --ranks 4 "${opts[@]}" >"$tmp/shim.out" 2>&1 || {
    echo "FAILED: minifsdp ${opts[*]} under the shim:" >&2; cat "$tmp/shim.out" >&2; exit 1; }

# Tracing (with stacks) must not change what the program computes.
FSDPSHIM_CONF=trace:stacks FSDPSHIM_TRACE="$tmp/trace-%p.fst" LD_PRELOAD=$preload \
    "$minifsdp" --ranks 4 "${opts[@]}" >"$tmp/traced.out" 2>&1 || {
    echo "FAILED: minifsdp ${opts[*]} under the shim with tracing:" >&2; cat "$tmp/traced.out" >&2; exit 1; }

status=0
if [ "$(results plain | wc -l)" -ne 4 ] || ! diff <(results plain) <(results shim) >"$tmp/diff"; then
    echo "FAILED: results differ with the shim (or a rank is missing):" >&2
    cat "$tmp/diff" >&2
    status=1
fi
if ! diff <(results plain) <(results traced) >"$tmp/diff"; then
    echo "FAILED: results differ with tracing on:" >&2
    cat "$tmp/diff" >&2
    status=1
fi
traces=$(find "$tmp" -name 'trace-*.fst' -size +256c | wc -l)
if [ "$traces" -lt 1 ]; then
    echo "FAILED: tracing on wrote no trace with events" >&2
    status=1
fi

plain_allocs=$(stat_sum plain device_allocs)
shim_allocs=$(stat_sum shim device_allocs)
printf 'minifsdp --ranks 4 %s\n' "${opts[*]}"
printf '  %-14s %14s %14s %18s\n' "" device_allocs device_frees peak_used_bytes
printf '  %-14s %14s %14s %18s\n' "without shim" "$plain_allocs" "$(stat_sum plain device_frees)" \
    "$(stat_max plain peak_used_bytes)"
printf '  %-14s %14s %14s %18s\n' "with shim" "$shim_allocs" "$(stat_sum shim device_frees)" \
    "$(stat_max shim peak_used_bytes)"
echo "  (peak_used_bytes under the shim is its peak reserved memory per device)"
if [ "$plain_allocs" -eq 0 ]; then
    echo "FAILED: no device statistics (FSDPSHIM_SIM_STATS) in minifsdp's output" >&2
    status=1
elif [ $((shim_allocs * 3)) -gt "$plain_allocs" ]; then
    echo "FAILED: the shim made $shim_allocs device allocations, not far fewer than $plain_allocs" >&2
    status=1
fi
if [ -n "$peak_check" ] && [ "$(stat_max shim peak_used_bytes)" -gt "$(stat_max plain peak_used_bytes)" ]; then
    echo "FAILED: the shim's peak device memory is above the program's own" >&2
    status=1
fi
[ $status -eq 0 ] && echo "  identical results on every rank, with and without tracing ($traces traces)"
exit $status
