#!/usr/bin/env bash
# create_stall.sh PROG - runs create_stall.c under the shim with its trace
# list a FIFO, which is opened for reading (letting the allocator's
# creation finish) only once the program has written its release file.
# Checks the program's own verdict, the shim's one warning, and that the
# trace was listed once the creation went on.
name=create_stall
prog=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/cli_common.sh"
unset FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
mkfifo "$dir/list" || fail "mkfifo"
FSDPSHIM_CONF=trace:events FSDPSHIM_TRACE=$dir/t.fst FSDPSHIM_TRACE_LIST=$dir/list "$prog" "$dir/release" \
    >"$dir/out" 2>"$dir/err" &
pid=$!
for _ in $(seq 300); do [ -e "$dir/release" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
[ -e "$dir/release" ] || { kill $pid 2>/dev/null; fail "never released: $(cat "$dir/out" "$dir/err")"; }
cat "$dir/list" >"$dir/listed"
wait $pid || fail "exited $?: $(cat "$dir/out" "$dir/err")"
grep -q '^create_stall: ok$' "$dir/out" || fail "$(cat "$dir/out" "$dir/err")"
[ "$(grep -c 'another thread has been creating the allocator' "$dir/err")" -eq 1 ] ||
    fail "not one warning: $(cat "$dir/err")"
grep -q "t.fst" "$dir/listed" || fail "the trace was not listed: $(cat "$dir/listed")"
echo "$name: ok ($(head -1 "$dir/out"))"
