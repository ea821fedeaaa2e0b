#!/bin/sh
# pool_allocs.sh - device allocations stay flat when a program creates and
# destroys its streams every step: the count after 40 steps must equal the
# count after 4. The simulated device prints the count at exit.
#   pool_allocs.sh PROGRAM [--expect-growth]
prog=$1
allocs() {
    FSDPSHIM_SIM_STATS=1 "$prog" "$1" 2>&1 >/dev/null |
        sed -n 's/.*device 0: device_allocs=\([0-9]*\).*/\1/p'
}
few=$(allocs 4) many=$(allocs 40)
echo "pool_allocs: device allocations after 4 steps: $few, after 40 steps: $many"
[ -n "$few" ] && [ -n "$many" ] || { echo "pool_allocs: no FSDPSHIM_SIM_STATS line" >&2; exit 1; }
if [ "$2" = --expect-growth ]; then
    [ "$many" -gt "$few" ]
else
    [ "$many" -eq "$few" ]
fi
