#!/usr/bin/env bash
# attach_busy_test.sh - `fsdpshim attach` and `detach` on a program that
# allocates without pause (bench/attach/attach_loop: its thread is inside
# the C library's allocator much of the time), eight cycles through CUPTI
# and four through the GOT slots: each attach and detach succeeds, and the
# program goes on counting after each. gdb's call into a thread stopped
# inside malloc would wait for that thread's own lock for ever; the call is
# made at the entry of a CUDA runtime call instead (cli/attach_gdb.py).
#
#   attach_busy_test.sh FSDPSHIM ATTACH_LOOP SIM_DIR
name=attach_busy_test
cli=$1 prog=$2 sim=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset LD_PRELOAD CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
command -v gdb >/dev/null || { echo "$name: no gdb (scripts/deps.sh installs it)"; exit 77; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$dir"; }
trap cleanup EXIT

# cycles WAY COUNT [--hold-cupti]: attach_loop attached to and detached from
# COUNT times, counting on after each
cycles() {
    local way=$1 count=$2
    shift 2
    rm -f "$dir/count"
    "$prog" "$@" "$dir/count" 2>"$dir/prog.err" &
    pids+=($!)
    local pid=$!
    for _ in $(seq 50); do [ -s "$dir/count" ] && break; sleep 0.1; done
    [ -s "$dir/count" ] || fail "attach_loop did not start: $(cat "$dir/prog.err")"
    for i in $(seq "$count"); do
        expect 0 "$cli" attach "$pid" --duration 0.2 -o "$dir/$way-$i.fst"
        local before after
        before=$(cat "$dir/count")
        sleep 0.3
        after=$(cat "$dir/count")
        [ "$before" != "$after" ] || fail "$way, cycle $i: attach_loop stopped counting at $after"
    done
    grep -q "GOT slots instead" "$dir/prog.err" && [ "$way" = cupti ] &&
        fail "the GOT slots were used where CUPTI was free"
    kill "$pid"
}

cycles cupti 8
cycles got 4 --hold-cupti
grep -q "GOT slots instead" "$dir/prog.err" || fail "not through the GOT slots: $(cat "$dir/prog.err")"
echo "$name: ok"
