#!/usr/bin/env bash
# attach_held_test.sh - `fsdpshim attach` through the GOT slots reaches the
# driver and NCCL: held_driver, whose CUPTI another client holds, looks the
# driver's cuMemAlloc_v2 up with cuGetProcAddress_v2 (itself taken with
# dlsym) and cuMemFree_v2 with cudaGetDriverEntryPointByVersion for every
# allocation, and allocates with ncclMemAlloc. While attached, its lookups
# hand out the shim's trace-only functions and its allocations of both kinds
# are traced at their call sites, each once; after the detach the lookups
# answer with the driver's own functions again, the trace stops growing and
# the program runs on.
#
#   attach_held_test.sh FSDPSHIM SIM_DIR HELD_DRIVER
name=attach_held_test
cli=$1 sim=$2 prog=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset LD_PRELOAD CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
command -v gdb >/dev/null || { echo "$name: no gdb (scripts/deps.sh installs it)"; exit 77; }
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

count() { cut -d' ' -f1 <"$dir/loop"; }
hooked() { cut -d' ' -f2 <"$dir/loop" | tr -d '\n'; }

"$prog" loop "$dir/loop" 2>"$dir/prog.err" &
pid=$!
for _ in $(seq 50); do [ -s "$dir/loop" ] && break; sleep 0.1; done
[ -s "$dir/loop" ] || fail "held_driver did not start: $(cat "$dir/prog.err")"
[ "$(hooked)" = 0 ] || fail "hooked before the attach"

expect 0 "$cli" attach "$pid" -o "$dir/held.fst"
grep -q "no CUPTI (another CUPTI client .*GOT slots instead" "$dir/prog.err" ||
    fail "the GOT fallback is not named: $(cat "$dir/prog.err")"
sleep 1
[ "$(hooked)" = 1 ] || fail "the lookups did not hand out the shim's functions while attached"
expect 0 "$cli" detach "$pid"
sleep 0.3
[ "$(hooked)" = 0 ] || fail "the lookups still hand out the shim's functions after the detach"
size=$(stat -c %s "$dir/held.fst")
before=$(count)
sleep 0.5
[ "$(count)" != "$before" ] || fail "held_driver stopped after the detach: $(cat "$dir/prog.err")"
[ "$(stat -c %s "$dir/held.fst")" -eq "$size" ] || fail "the trace grew after the detach"
grep -v "fsdpshim" "$dir/prog.err" | grep -q . && fail "the program's stderr: $(cat "$dir/prog.err")"

expect 0 "$cli" dump "$dir/held.fst"
driver=$(grep -c ' alloc .* size=12288 ' "$dir/out")
nccl=$(grep -c ' alloc .* size=20480 ' "$dir/out")
[ "$driver" -ge 100 ] || fail "only $driver cuMemAlloc_v2 allocations traced in 1 s"
[ "$nccl" -ge 100 ] || fail "only $nccl ncclMemAlloc allocations traced in 1 s"
grep ' alloc ' "$dir/out" | grep -qv ' size=\(12288\|20480\) ' && fail "an allocation of another size"
# each once: at most the driver's block and NCCL's live together
grep ' alloc ' "$dir/out" | grep -qv ' allocated=\(12288\|20480\|32768\) ' &&
    fail "totals: $(grep ' alloc ' "$dir/out" | grep -v ' allocated=\(12288\|20480\|32768\) ' | head -3)"
expect 0 "$cli" top --by frame "$dir/held.fst"
for site in SITE_DRIVER SITE_NCCL; do
    line=$(grep -n "$site" "$here/held_driver.c" | cut -d: -f1)
    grep -qE "^    round_trip at .*/held_driver.c:$line( \(inlined\))?\$" "$dir/out" ||
        fail "not at $site (line $line): $(cat "$dir/out")"
done
echo "$name: ok"
