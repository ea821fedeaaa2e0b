#!/usr/bin/env bash
# attach_test.sh - `fsdpshim attach` and `fsdpshim detach` on the simulated
# device: trace_prog loop, started without the shim, is attached to for 2 s;
# the trace has its allocations made meanwhile at SITE_LOOP, the program runs
# on, and nothing is written after the detach; the command names the way it
# took (CUPTI, or the GOT slots and why). A process that does not exist,
# one without CUDA, a detach with nothing attached, and (as root) a process
# of another user each get one clear line and exit 1.
#
# A program whose CUPTI is held by another client is traced through its GOT
# slots instead, and detach puts them back.
#
#   attach_test.sh FSDPSHIM TRACE_PROG SIM_DIR CUPTI_FIRST
name=attach_test
cli=$1 prog=$2 sim=$3 first=$4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset LD_PRELOAD CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
src=$here/../trace/trace_prog.c
command -v gdb >/dev/null || { echo "$name: no gdb (scripts/deps.sh installs it)"; exit 77; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$dir"; }
trap cleanup EXIT

# the time trace_prog loop last wrote (it writes after every allocation)
stamp() { tr -d ' \n' <"$dir/loop"; }

"$prog" loop "$dir/loop" 2>"$dir/prog.err" &
pids+=($!)
prog_pid=$!
for _ in $(seq 50); do [ -s "$dir/loop" ] && break; sleep 0.1; done
[ -s "$dir/loop" ] || fail "trace_prog loop did not start: $(cat "$dir/prog.err")"

expect 0 "$cli" attach "$prog_pid" --duration 2 -o "$dir/att-%p.fst"
trace=$dir/att-$prog_pid.fst
grep -q "detached from process $prog_pid; trace: $trace" "$dir/out" || fail "attach: $(cat "$dir/out")"
# the way taken is named, with the CUPTI found beside the runtime
grep -qF "tracing process $prog_pid through CUPTI ($(readlink -f "$sim/libcupti.so.13")) to $trace" \
    "$dir/out" || fail "the way in is not named: $(cat "$dir/out")"
kill -0 "$prog_pid" 2>/dev/null || fail "the program died: $(cat "$dir/prog.err")"
size=$(stat -c %s "$trace")
before=$(stamp)
sleep 0.5
[ "$(stamp)" != "$before" ] || fail "the program stopped allocating after the detach"
[ "$(stat -c %s "$trace")" -eq "$size" ] || fail "the trace grew after the detach"
[ -s "$dir/prog.err" ] && fail "the program's stderr: $(cat "$dir/prog.err")"

expect 0 "$cli" dump "$trace"
allocs=$(grep -c ' alloc ' "$dir/out")
[ "$allocs" -ge 200 ] || fail "only $allocs allocations in 2 s"
grep ' alloc ' "$dir/out" | grep -qv ' size=4096 requested=4096 ' && fail "an allocation of another size"
# the program's own blocks, one at a time: the total is 4096 after each
# allocation and 0 after each free of a block seen allocated
grep ' alloc ' "$dir/out" | grep -qv 'allocated=4096 ' && fail "totals: $(grep ' alloc ' "$dir/out" | head)"
expect 0 "$cli" top --by frame "$trace"
line=$(grep -n "SITE_LOOP" "$src" | cut -d: -f1)
grep -qE "^    loop at .*/trace_prog.c:$line( \(inlined\))?\$" "$dir/out" ||
    fail "not at SITE_LOOP (line $line): $(cat "$dir/out")"
expect 0 "$cli" report "$trace"
# the block live at the attach, if the attach fell between its allocation
# and its free, is freed as a block from before the trace, not an error
grep -qE "^  device 0: [0-9]+ allocations?" "$dir/out" || fail "report: $(cat "$dir/out")"
if grep -q ' free_requested .*size=0 ' <("$cli" dump "$trace"); then
    grep -q "^  1 free of blocks allocated before the trace began" "$dir/out" ||
        fail "the free of the block from before the attach: $(cat "$dir/out")"
fi
expect 0 "$cli" leaks "$trace"

# a second attach, then detach by hand
expect 0 "$cli" attach "$prog_pid" -o "$dir/again.fst"
grep -q "fsdpshim detach $prog_pid" "$dir/out" || fail "attach without --duration: $(cat "$dir/out")"
sleep 0.3
expect 0 "$cli" detach "$prog_pid"
expect 1 "$cli" detach "$prog_pid"
grep -q "is not being traced" "$dir/err" || fail "a second detach: $(cat "$dir/err")"
kill -0 "$prog_pid" 2>/dev/null || fail "the program died after the second detach"

# CUPTI held by another client: through the GOT slots, then put back
"$first" loop "$dir/held" 2>"$dir/held.err" &
pids+=($!)
held_pid=$!
for _ in $(seq 50); do [ -s "$dir/held" ] && break; sleep 0.1; done
[ -s "$dir/held" ] || fail "cupti_first loop did not start: $(cat "$dir/held.err")"
expect 0 "$cli" attach "$held_pid" --duration 1 -o "$dir/held.fst"
grep -q "no CUPTI (another CUPTI client .*GOT slots instead" "$dir/held.err" ||
    fail "the GOT fallback is not named: $(cat "$dir/held.err")"
# and by the command itself, whose user may never see the process's stderr
grep -q "tracing process $held_pid through the GOT slots, without CUPTI (another CUPTI client" \
    "$dir/out" && grep -q "process $held_pid is traced through the GOT slots" "$dir/err" ||
    fail "the command does not name the GOT fallback: $(cat "$dir/out" "$dir/err")"
size=$(stat -c %s "$dir/held.fst")
before=$(tr -d ' \n' <"$dir/held")
sleep 0.5
[ "$(tr -d ' \n' <"$dir/held")" != "$before" ] || fail "cupti_first stopped after the detach"
[ "$(stat -c %s "$dir/held.fst")" -eq "$size" ] || fail "the GOT trace grew after the detach"
expect 0 "$cli" top --by frame "$dir/held.fst"
line=$(grep -n "SITE_HELD" "$here/cupti_first.c" | cut -d: -f1)
grep -qE "^    loop at .*/cupti_first.c:$line( \(inlined\))?\$" "$dir/out" ||
    fail "not at SITE_HELD (line $line): $(cat "$dir/out")"
grep -qE "^ +8.0 KiB +[0-9.]+ [KM]iB +[0-9]{3,} " "$dir/out" || fail "GOT allocations: $(cat "$dir/out")"

# a trace the process cannot create: said, and no fallback to the GOT slots
expect 1 "$cli" attach "$prog_pid" -o /nonexistent_dir/t.fst
grep -q "process $prog_pid could not create the trace file /nonexistent_dir/t.fst" "$dir/err" ||
    fail "an impossible trace file: $(cat "$dir/err")"
grep -q "GOT slots instead" "$dir/prog.err" && fail "a trace file that cannot be made led to the GOT slots"

# what cannot be attached to
expect 2 "$cli" attach "$prog_pid" -o "$dir/x-%x.fst"
grep -q "%x is not %h (host), %p (pid), %r (rank), %q{VAR}" "$dir/err" ||
    fail "a bad escape in -o: $(cat "$dir/err")"
expect 1 "$cli" attach 999999999
grep -q "no process 999999999" "$dir/err" || fail "a missing process: $(cat "$dir/err")"
sleep 30 &
pids+=($!)
expect 1 "$cli" attach $!
grep -q "has no CUDA runtime or driver loaded" "$dir/err" || fail "no CUDA: $(cat "$dir/err")"
expect 2 "$cli" attach "$prog_pid" --duration x

# ptrace refused: a user without CAP_SYS_PTRACE and a process of root's
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    expect 1 setpriv --reuid=65534 --regid=65534 --clear-groups -- "$cli" attach "$prog_pid"
    [ "$(wc -l <"$dir/err")" -eq 1 ] &&
        grep -q "process $prog_pid belongs to uid 0 and this is uid 65534 without CAP_SYS_PTRACE: run fsdpshim attach as that user, or as root" "$dir/err" ||
        fail "ptrace refused: $(cat "$dir/err")"
fi
echo "$name: ok"
