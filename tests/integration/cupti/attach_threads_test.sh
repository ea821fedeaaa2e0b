#!/usr/bin/env bash
# attach_threads_test.sh - `fsdpshim attach` and `fsdpshim detach` on a
# multi-threaded program (attach_threads.c): 8 threads, each on its own
# stream, allocate (cudaMalloc and cudaMallocAsync), write, read back and
# check device memory while the attach and the detach happen. The trace has
# the allocations of every thread, both kinds, made after the attach, at the
# program's two allocation sites; nothing is written after the detach; a
# second attach traces every thread again; and the program finishes with
# every byte as written. The same through the GOT slots when another client
# holds CUPTI. First, as a reference without gdb, the program traced from its
# start through CUDA_INJECTION64_PATH: exactly its allocations, every free
# matched with its block.
#
#   attach_threads_test.sh FSDPSHIM ATTACH_THREADS SIM_DIR LIBFSDPSHIM
name=attach_threads_test
cli=$1 prog=$2 sim=$3 shim=$4
threads=8
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset LD_PRELOAD CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
src=$here/attach_threads.c
command -v gdb >/dev/null || { echo "$name: no gdb (scripts/deps.sh installs it)"; exit 77; }
line_of() { grep -n "/\\* $1 \\*/" "$src" | cut -d: -f1; }
sync_line=$(line_of SITE_SYNC)
async_line=$(line_of SITE_ASYNC)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$dir"; }
trap cleanup EXIT

# start TAG [--hold-cupti]: attach_threads without the shim, running; its
# pid in $pid, its files $dir/TAG.{beat,stop,out,err}
start() {
    local tag=$1
    shift
    "$prog" "$@" "$threads" "$dir/$tag.beat" "$dir/$tag.stop" >"$dir/$tag.out" 2>"$dir/$tag.err" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 100); do [ "$(beat "$tag")" -gt 0 ] 2>/dev/null && return; sleep 0.1; done
    fail "attach_threads did not start: $(cat "$dir/$tag.err")"
}

# the iterations the program has done, all threads together
beat() { tr -d ' \n' 2>/dev/null <"$dir/$1.beat" | sed 's/^0*\([0-9]\)/\1/'; }

# finish TAG: the program stops when asked, exits 0 and says every byte was
# as written
finish() {
    touch "$dir/$1.stop"
    wait "$pid"
    local st=$?
    [ "$st" -eq 0 ] || fail "attach_threads exited $st: $(cat "$dir/$1.err")"
    grep -q "^attach_threads: ok: $threads threads, .* every byte read back as written" \
        "$dir/$1.out" || fail "attach_threads: $(cat "$dir/$1.out" "$dir/$1.err")"
}

# ---- traced from the start through CUPTI, no gdb ----
CUDA_INJECTION64_PATH=$shim FSDPSHIM_TRACE=$dir/inj.fst start inj
sleep 1
finish inj
[ -s "$dir/inj.err" ] && fail "the program's stderr: $(cat "$dir/inj.err")"
made=$(sed -n 's/.* \([0-9]*\) cudaMalloc, \([0-9]*\) cudaMallocAsync,.*/\1 + \2/p' "$dir/inj.out")
expect 0 "$cli" report "$dir/inj.fst"
grep -q "none dropped" "$dir/out" &&
    grep -q "^  device 0: $((made)) allocations .* 0 B allocated at the last event" "$dir/out" &&
    grep -q "^  streams: $threads created, .* $threads destroyed" "$dir/out" &&
    ! grep -q "before the trace began" "$dir/out" ||
    fail "not the $((made)) allocations made, each freed: $(cat "$dir/out")"


# after_detach TAG TRACE: the program runs on, the trace does not grow
after_detach() {
    local size before
    kill -0 "$pid" 2>/dev/null || fail "the program died: $(cat "$dir/$1.err")"
    size=$(stat -c %s "$2")
    before=$(beat "$1")
    sleep 0.5
    [ "$(beat "$1")" -gt "$before" ] || fail "the program stopped after the detach"
    [ "$(stat -c %s "$2")" -eq "$size" ] || fail "the trace $2 grew after the detach"
}

# threads_in TRACE: nothing dropped, and every thread allocated through both
# calls; the trace's allocations in $dir/allocs
threads_in() {
    expect 0 "$cli" dump --all --no-stacks "$1"
    cp "$dir/out" "$dir/dump"
    grep ' alloc ' "$dir/dump" >"$dir/allocs"
    grep -q '^# dropped' "$dir/dump" && fail "$1: $(grep '^# dropped' "$dir/dump")"
    local tids named t
    tids=$(sed 's/.* tid=\([0-9]*\) .*/\1/' "$dir/allocs" | sort -u)
    [ "$(echo "$tids" | wc -w)" -eq "$threads" ] ||
        fail "$1: allocations from $(echo "$tids" | wc -w) threads, not $threads"
    for t in $tids; do
        named=$(sed -n "s/^# thread $t \(.*\)/\1/p" "$dir/dump")
        [[ $named == worker* ]] || fail "$1: thread $t is '$named', not a worker"
        grep " tid=$t " "$dir/allocs" | grep -q ' async$' || fail "$1: no cudaMallocAsync of $named"
        grep " tid=$t " "$dir/allocs" | grep -qv ' async$' || fail "$1: no cudaMalloc of $named"
    done
}

# at_sites TRACE: the allocations are at SITE_SYNC and SITE_ASYNC
at_sites() {
    expect 0 "$cli" top --by frame "$1"
    grep -qE "^    iteration at .*/attach_threads.c:$sync_line( \(inlined\))?\$" "$dir/out" ||
        fail "$1: not at SITE_SYNC (line $sync_line): $(cat "$dir/out")"
    grep -qE "^    iteration at .*/attach_threads.c:$async_line( \(inlined\))?\$" "$dir/out" ||
        fail "$1: not at SITE_ASYNC (line $async_line): $(cat "$dir/out")"
}

# blocks_match TRACE: each free found the block it frees. A thread holds at
# most 2 blocks at a time, so at most 2 per thread were allocated before the
# attach and at most 2 per thread are live at the detach; more means frees
# and allocations of one address by two threads were matched up wrongly.
blocks_match() {
    local n
    expect 0 "$cli" report "$1"
    grep -qE "^  device 0: [0-9]+ allocations" "$dir/out" || fail "$1: report: $(cat "$dir/out")"
    n=$(sed -n 's/^  \([0-9]*\) frees of blocks allocated before the trace began.*/\1/p' "$dir/out")
    [ "${n:-0}" -le $((2 * threads)) ] || fail "$1: $n frees of blocks from before the attach"
    expect 0 "$cli" leaks "$1"
    n=$(sed -n 's/.*: \([0-9]*\) blocks\?, .* still allocated at the end$/\1/p' "$dir/out" | head -1)
    [ "${n:-0}" -le $((2 * threads)) ] || fail "$1: $n blocks live at the detach"
}

# ---- attached through CUPTI ----
start cupti
trace=$dir/att-$pid.fst
before=$(beat cupti)
expect 0 "$cli" attach "$pid" --duration 2 -o "$dir/att-%p.fst"
grep -q "detached from process $pid; trace: $trace" "$dir/out" || fail "attach: $(cat "$dir/out")"
sleep 0.1 # the heartbeat is 10 ms old at most: now it counts every iteration traced
after=$(beat cupti)
after_detach cupti "$trace"
[ -s "$dir/cupti.err" ] && fail "the program's stderr: $(cat "$dir/cupti.err")"
threads_in "$trace"
# Made after the attach: an iteration allocates twice; those traced ended
# after the attach, or were under way at the end
allocs=$(wc -l <"$dir/allocs")
[ "$allocs" -ge 200 ] || fail "only $allocs allocations in 2 s"
[ "$allocs" -le $((2 * (after - before) + 2 * threads)) ] ||
    fail "$allocs allocations traced, $((after - before)) iterations while attached"
grep -q ' free_requested ' "$dir/dump" || fail "no frees"
at_sites "$trace"
blocks_match "$trace"

# a second attach, stopped by hand: written as it runs, and every thread
# traced again, even those the first detach found inside a traced call
expect 0 "$cli" attach "$pid" -o "$dir/again.fst"
sleep 0.5
early=$(stat -c %s "$dir/again.fst")
sleep 0.5
if [ "$early" -le 256 ] || [ "$(stat -c %s "$dir/again.fst")" -le "$early" ]; then
    fail "the second trace is not written while attached ($early bytes after 0.5 s)"
fi
expect 0 "$cli" detach "$pid"
after_detach cupti "$dir/again.fst"
threads_in "$dir/again.fst"
at_sites "$dir/again.fst"
blocks_match "$dir/again.fst"
finish cupti
[ -s "$dir/cupti.err" ] && fail "the program's stderr: $(cat "$dir/cupti.err")"

# ---- CUPTI held by the program: through the GOT slots, then put back ----
start held --hold-cupti
expect 0 "$cli" attach "$pid" --duration 1 -o "$dir/held.fst"
grep -q "no CUPTI (another CUPTI client .*GOT slots instead" "$dir/held.err" ||
    fail "the GOT fallback is not named: $(cat "$dir/held.err")"
after_detach held "$dir/held.fst"
threads_in "$dir/held.fst"
at_sites "$dir/held.fst"
blocks_match "$dir/held.fst"
finish held
echo "$name: ok"
