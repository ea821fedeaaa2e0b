#!/usr/bin/env bash
# pair_sim.sh - pair_bench on the simulated device, without and with the
# shim: every mode prints its three sizes, and under the shim the cached
# pairs never reach the device (at most one device allocation per size).
#
#   pair_sim.sh PAIR_BENCH_SIM PRELOAD
set -u
prog=$1 preload=$2
fail() { echo "pair_sim: $*" >&2; exit 1; }
for mode in async malloc; do
    for with in without with; do
        pre=
        [ $with = with ] && pre=$preload
        out=$(FSDPSHIM_SIM_STATS=1 LD_PRELOAD=$pre "$prog" "$mode" 3000 2>&1) ||
            fail "$mode $with the shim: exit $?: $out"
        [ "$(grep -c "^pair_bench: mode=$mode size=[0-9]* pairs=3000 ns_per_pair=[0-9.]*$" <<<"$out")" -eq 3 ] ||
            fail "$mode $with the shim: not three sizes: $out"
        allocs=$(grep -o 'device_allocs=[0-9]*' <<<"$out" | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }')
        if [ $with = with ] && [ "$allocs" -gt 3 ]; then
            fail "$mode under the shim: $allocs device allocations for 3 cached sizes: $out"
        fi
        echo "pair_sim: $mode $with the shim: $allocs device allocations"
    done
done
echo "pair_sim: ok"
