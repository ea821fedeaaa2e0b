#!/usr/bin/env bash
# vmm_trace_test.sh FSDPSHIM DRIVER_ONLY LIBCUDA - the program's own VMM
# calls through the driver (driver_only's round trip: reserve, create, map,
# unmap, release, free the range), passed through by the shim, are traced one
# event each; cuMemCreate with its device, size, handle and the caller's
# stack. Run with libfsdpshim.so in LD_PRELOAD.
set -u
cli=$1 prog=$2 libcuda=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "vmm_trace_test: $*" >&2; exit 1; }

FSDPSHIM_CONF=trace:stacks FSDPSHIM_TRACE=$dir/t.fst "$prog" "$libcuda" --expect-shim \
    >"$dir/out" 2>&1 || fail "the program failed: $(cat "$dir/out")"
LD_PRELOAD= "$cli" dump "$dir/t.fst" >"$dir/dump" 2>&1 || fail "dump: $(cat "$dir/dump")"
for op in cuMemAddressReserve cuMemCreate cuMemMap cuMemUnmap cuMemRelease cuMemAddressFree; do
    [ "$(grep -c " vmm .* op=$op\( \|$\)" "$dir/dump")" -eq 1 ] ||
        fail "not one $op event: $(grep ' vmm ' "$dir/dump")"
done
create=$(grep " vmm .* op=cuMemCreate" "$dir/dump")
echo "$create" | grep -qE " dev=[0-9]+ .* size=[1-9][0-9]* op=cuMemCreate handle=0x[0-9a-f]+$" || fail "cuMemCreate: $create"
# its stack follows it: the first frame in driver_only
awk '/ vmm .* op=cuMemCreate/ { getline; print; exit }' "$dir/dump" | grep -q "drv_driver_only+0x" ||
    fail "cuMemCreate has no stack: $(grep -A2 ' op=cuMemCreate' "$dir/dump")"
echo "vmm_trace_test: ok"
