#!/usr/bin/env bash
# attach_torch.sh - the trace-only ways in on a PyTorch program (label
# torch, on the simulated device; docs/attach.md): attach_loop.py, whose
# every iteration reaches cudaMalloc and cudaFree through PyTorch's caching
# allocator,
#   1. run with CUDA_INJECTION64_PATH=libfsdpshim.so from its start: the
#      trace has an allocation for each iteration at least, in PyTorch's
#      allocator, and the program's checks pass;
#   2. run natively and attached to with `fsdpshim attach PID --duration 2`
#      while it runs: the trace has the allocations made meanwhile, stops
#      growing at the detach, and the program runs on and ends with its
#      checks passed.
#
# With "gpu" as a fourth argument, the program runs on the real device (and
# gdb is whatever `gdb` is first on PATH).
#
#   attach_torch.sh FSDPSHIM LIBFSDPSHIM PYTHON [gpu]
name=attach_torch
cli=$1 shim=$2 py=$3
on=("$cli" sim --native --devices 1 --)
[ "${4:-}" = gpu ] && on=()
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../integration/runtime/cli_common.sh"
unset LD_PRELOAD CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export FSDPSHIM_SIM_DATA=1
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

# count: the iterations attach_loop has made
count() { cut -d' ' -f2 "$dir/beat"; }
# allocations TRACE: how many the trace has
allocations() {
    "$cli" top --no-symbols "$1" | sed -n 's/^\([0-9]*\) allocations\? in 1 trace.*/\1/p'
}

# ---- 1. injected from the start ----
# stopped 3 s after its first iteration: importing torch on a loaded machine
# can take longer than that, and a loop stopped before it began traces nothing
(for _ in $(seq 600); do [ -s "$dir/beat" ] && break; sleep 0.1; done
 sleep 3 && touch "$dir/beat.stop") &
CUDA_INJECTION64_PATH=$shim FSDPSHIM_CONF=trace:stacks FSDPSHIM_TRACE=$dir/inj.fst \
    expect 0 "${on[@]}" "$py" "$here/attach_loop.py" "$dir/beat"
wait
grep -q "^attach_loop: ok " "$dir/out" || fail "injected: $(cat "$dir/out" "$dir/err")"
made=$(count)
traced=$(allocations "$dir/inj.fst")
[ -n "$traced" ] && [ "$traced" -ge "$made" ] ||
    fail "injected: $traced allocations traced for $made iterations"
expect 0 "$cli" top --by frame -n 1 "$dir/inj.fst"
grep -q "CUDACachingAllocator" "$dir/out" || fail "not at PyTorch's allocator: $(cat "$dir/out")"

# ---- 2. attached to while it runs ----
rm -f "$dir/beat" "$dir/beat.stop"
"${on[@]}" "$py" "$here/attach_loop.py" "$dir/beat" \
    >"$dir/loop.out" 2>"$dir/loop.err" &
sim_pid=$!
for _ in $(seq 300); do [ -s "$dir/beat" ] && break; sleep 0.1; done
[ -s "$dir/beat" ] || fail "attach_loop did not start: $(cat "$dir/loop.err")"
pid=$(cut -d' ' -f1 "$dir/beat")
before=$(count)
expect 0 "$cli" attach "$pid" --duration 2 -o "$dir/att.fst"
after=$(count)
size=$(stat -c %s "$dir/att.fst")
traced=$(allocations "$dir/att.fst")
[ -n "$traced" ] && [ "$traced" -ge 20 ] && [ "$traced" -le $((after - before + 1)) ] ||
    fail "attached: $traced allocations traced, $((after - before)) iterations meanwhile"
sleep 1
[ "$(count)" -gt "$after" ] || fail "attach_loop stopped after the detach"
[ "$(stat -c %s "$dir/att.fst")" -eq "$size" ] || fail "the trace grew after the detach"
touch "$dir/beat.stop"
wait "$sim_pid" || fail "attach_loop failed: $(cat "$dir/loop.out" "$dir/loop.err")"
pid=
grep -q "^attach_loop: ok " "$dir/loop.out" || fail "attached: $(cat "$dir/loop.out" "$dir/loop.err")"
expect 0 "$cli" report "$dir/att.fst"
echo "$name: ok"
