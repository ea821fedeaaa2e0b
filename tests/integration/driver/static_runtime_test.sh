#!/usr/bin/env bash
# static_runtime_test.sh FSDPSHIM STATIC_RUNTIME LIBDIR - a process whose
# program carries the runtime statically (static_runtime.c on the simulated
# driver with the runtime inside it, in LIBDIR) under `fsdpshim run --trace`:
# no libcudart is loaded, the shim runs its allocator over the driver, the
# allocations are served by fewer device allocations than there were
# allocations (the shim's own line at FSDPSHIM_LOG=info and the sim's
# count), the trace holds every one of them with its stack, and the process
# exits cleanly (status 0, nothing after the program's last line but the
# exit reports); at FSDPSHIM_LOG=debug each driver lookup is logged.
name=static_runtime_test
cli=$1 prog=$2 libdir=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset LD_PRELOAD FSDPSHIM_TRACE

LD_LIBRARY_PATH=$libdir FSDPSHIM_LOG=info FSDPSHIM_SIM_STATS=1 \
    expect 0 "$cli" run --trace --conf trace:stacks -o "$dir/t.fst" -- "$prog" --expect-shim
grep -q '^static_runtime: ok$' "$dir/out" || fail "the program did not finish: $(cat "$dir/out")"
allocs=$(sed -n 's/^allocations: //p' "$dir/out")
grep -q 'active on .* over the driver' "$dir/err" || fail "not over the driver: $(cat "$dir/err")"
line=$(grep 'device 0: .* allocations served by' "$dir/err") || fail "no served line: $(cat "$dir/err")"
served=$(echo "$line" | sed 's/.*device 0: \([0-9]*\) allocations served by \([0-9]*\) device.*/\1/')
by=$(echo "$line" | sed 's/.*device 0: \([0-9]*\) allocations served by \([0-9]*\) device.*/\2/')
[ "$served" -eq "$allocs" ] || fail "$served allocations served, the program made $allocs: $line"
[ "$by" -lt "$served" ] || fail "no allocation came from the cache: $line"
# the device saw the shim's segments and the other context's block, not
# every allocation
sim=$(sed -n 's/.*fsdpshim-sim: device 0: device_allocs=\([0-9]*\) .*/\1/p' "$dir/err")
[ -n "$sim" ] && [ "$sim" -eq $((by + 1)) ] ||
    fail "the device counted ${sim:-no} allocations, expected $by segments + 1: $(cat "$dir/err")"
! grep -qi 'error\|sanitizer\|fatal' "$dir/err" || fail "errors at run or exit: $(cat "$dir/err")"

# at FSDPSHIM_LOG=debug each lookup is logged with what went out: the
# diagnostic static_gpu.sh prints when a GPU's static runtime corrupts data
LD_LIBRARY_PATH=$libdir FSDPSHIM_LOG=debug expect 0 "$cli" run -- "$prog" --expect-shim
grep -q 'lookup cuMemcpyDtoHAsync (version 13000, flags 0): the shim.s hook (cuMemcpyDtoHAsync_v2)' "$dir/err" ||
    fail "no debug line for the hooked cuMemcpyDtoHAsync: $(grep lookup "$dir/err" | head)"
grep -q 'lookup cuInit (version 13000, flags 0): the driver.s (cuInit)' "$dir/err" ||
    fail "no debug line for cuInit, passed through: $(grep lookup "$dir/err" | head)"

LD_PRELOAD= expect 0 "$cli" dump "$dir/t.fst"
n=$(grep -c ' alloc ' "$dir/out")
[ "$n" -eq "$allocs" ] || fail "$n allocations in the trace, the program made $allocs"
awk '/ alloc / { getline; print; exit }' "$dir/out" | grep -q 'drv_static_runtime+0x' ||
    fail "the allocations have no stack: $(grep -A2 -m1 ' alloc ' "$dir/out")"
echo "$name: ok ($allocs allocations served by $by device allocations)"
