#!/usr/bin/env bash
# trace_test.sh - allocation traces end to end, as a user meets them:
# `fsdpshim run --trace` on an ordinary CUDA program (trace_prog.c) on the
# simulated device, then `fsdpshim dump` on what it wrote.
#
#   trace_test.sh FSDPSHIM TRACE_PROG NVTX_COUNTER_SO SIM_DIR
name=trace_test
cli=$1 prog=$2 counter=$3 sim=$4
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset NVTX_INJECTION64_PATH FSDPSHIM_NVTX_CHAIN FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
src=$here/trace_prog.c

# count PATTERN FILE: lines matching
count() { grep -c -- "$1" "$2" || true; }
# the one file a glob names
only() {
    set -- $1
    [ $# -eq 1 ] && [ -f "$1" ] || fail "expected one trace file, got: $*"
    echo "$1"
}
# the monotonic time of the trace's last event of a kind, in ns
last_event_ns() {
    awk -v kind="$2" '
        /^# trace/ { for (i = 1; i <= NF; i++) if ($i == "clock_monotonic_ns") { base = $(i + 1); sub(",", "", base) } }
        $2 == kind { split($1, t, "."); last = t[1] * 1000000000 + t[2] }
        END { printf "%.0f\n", base + last }' "$1"
}

# ---- call sites, annotations, the launcher's list, the file mode ----------
expect 0 "$cli" run --trace -o "$dir/sites-%p.fst" -- "$prog" sites
trace=$(only "$dir/sites-*.fst")
grep -q "trace: $trace" "$dir/err" || fail "the launcher did not name $trace: $(cat "$dir/err")"
[ "$(stat -c %a "$trace")" = 600 ] || fail "mode $(stat -c %a "$trace"), not 600"
expect 0 "$cli" dump "$trace"
cp "$dir/out" "$dir/sites.txt"
[ "$(count ' alloc ' "$dir/sites.txt")" -eq 2 ] || fail "not 2 allocs: $(cat "$dir/sites.txt")"
grep -q " alloc .*requested=3145728 .*annot=step/forward$" "$dir/sites.txt" ||
    fail "the forward allocation is not annotated step/forward"
grep -q " alloc .*requested=5242880 .*annot=step$" "$dir/sites.txt" ||
    fail "the backward allocation is not annotated step"
grep -q " annotation_mark .*name=after-forward" "$dir/sites.txt" || fail "no NVTX mark"
[ "$(count ' free_requested ' "$dir/sites.txt")" -eq 2 ] || fail "not 2 frees"
# The first frame of each allocation resolves to its marked line.
for site in forward:3145728 backward:5242880; do
    want=$(grep -n "SITE_$(echo "${site%%:*}" | tr a-z A-Z)" "$src" | cut -d: -f1)
    frame=$(awk -v size="requested=${site#*:}" '$2 == "alloc" && index($0, size) { getline; print $2; exit }' "$dir/sites.txt")
    case $frame in "$prog"+0x*) ;; *) fail "first frame of the ${site%%:*} allocation is '$frame'" ;; esac
    off=$((${frame##*+} - 1)) # a return address: the call is the byte before
    line=$(addr2line -e "$prog" "$(printf '0x%x' "$off")" | sed 's/.*://; s/ .*//')
    [ "$line" = "$want" ] || fail "${site%%:*}: frame $frame is line $line, not $want"
done

# ---- the public API: snapshot marks, annotations, flush --------------------
expect 0 "$cli" run --trace -o "$dir/api.fst" -- "$prog" snapshot
expect 0 "$cli" dump "$dir/api.fst"
grep -q " snapshot .*name=checkpoint" "$dir/out" || fail "no snapshot mark"
grep -q " free_requested .*annot=api-range" "$dir/out" || fail "the API's annotation is missing"

# ---- snapshots: at an out-of-memory, and on demand ----------------------------
mkdir "$dir/oom"
FSDPSHIM_SIM_MEM=64M FSDPSHIM_OOM_DIR=$dir/oom \
    expect 0 "$cli" run --trace -o "$dir/oom.fst" -- "$prog" oom
n=$(sed -n 's/^oom: \([0-9]*\) allocations.*/\1/p' "$dir/out")
snap=$(sed -n 's/.*out of memory on device 0: requested 3.0 MiB (3145728 bytes), allocated [0-9.]* MiB, reserved but free [0-9.]* MiB, largest free block [0-9.]* MiB (reserved [0-9.]* MiB); snapshot: \(.*\)$/\1/p' "$dir/err" | head -1)
[ -n "$snap" ] && [ -f "$snap" ] || fail "the OOM message names no snapshot file: $(cat "$dir/err")"
case $snap in "$dir/oom/fsdpshim-oom-"*) ;; *) fail "the snapshot $snap is not in FSDPSHIM_OOM_DIR" ;; esac
[ "$(stat -c %a "$snap")" = 600 ] || fail "snapshot mode $(stat -c %a "$snap")"
expect 0 "$cli" dump "$snap"
cp "$dir/out" "$dir/snap.txt"
grep -q "^# trace .*, snapshot," "$dir/snap.txt" || fail "the snapshot's header does not say snapshot"
# every block the shim served is live in it (after the shim's OOM the
# runtime's own cudaMalloc is tried too, and may still find room: that one
# is the runtime's, not the shim's)
live=$(grep -c " snapshot_block .*requested=3145728 .*state=live" "$dir/snap.txt" || true)
expect 0 "$cli" dump --no-stacks "$dir/oom.fst"
# what an explanation of the OOM needs: the configuration, the device's
# memory, and at the failure its free memory and the cache's parts
grep -q "^# config free_semantics:device,cross_stream_reuse:completed,.*expandable_segments:false" \
    "$dir/out" || fail "no configuration in the trace"
grep -q "^# device 0 total=67108864$" "$dir/out" || fail "no device size in the trace"
grep -qE " oom .* largest_free=[0-9]+ device_free=[0-9]+ other_streams_free=0 pending=0$" "$dir/out" ||
    fail "the oom event lacks the device's free memory: $(grep ' oom ' "$dir/out")"
served=$(grep -c " alloc .*requested=3145728" "$dir/out" || true)
[ "$live" -eq "$served" ] && [ "$served" -ge $((n - 1)) ] && [ "$served" -gt 10 ] ||
    fail "the snapshot has $live live 3 MiB blocks; the shim served $served, the program held $n"
grep -q " snapshot_segment " "$dir/snap.txt" || fail "the snapshot has no segments"
grep -q " oom .*size=3145728" "$dir/snap.txt" || fail "the snapshot has no oom event"
# with stacks traced, each live block names the line that allocated it
frame=$(awk '$2 == "snapshot_block" && /state=live/ { getline; print $2; exit }' "$dir/snap.txt")
off=$((${frame##*+} - 1))
line=$(addr2line -e "$prog" "$(printf '0x%x' "$off")" | sed 's/.*://; s/ .*//')
[ "$line" = "$(grep -n SITE_OOM "$src" | cut -d: -f1)" ] || fail "a live block's frame $frame is line $line"
# tracing off, the stacks only with oom_snapshot:stacks
site_line=$(grep -n SITE_OOM "$src" | cut -d: -f1)
for conf in oom_snapshot:stacks oom_snapshot:blocks; do
    rm -rf "$dir/oom-$conf" && mkdir "$dir/oom-$conf"
    FSDPSHIM_SIM_MEM=64M FSDPSHIM_OOM_DIR=$dir/oom-$conf \
        expect 0 "$cli" run --conf "$conf" -- "$prog" oom
    snap=$(sed -n 's/.*out of memory on device 0: .*; snapshot: \(.*\)$/\1/p' "$dir/err" | head -1)
    [ -n "$snap" ] && [ -f "$snap" ] || fail "$conf: no snapshot named: $(cat "$dir/err")"
    expect 0 "$cli" dump "$snap"
    live=$(grep -c " snapshot_block .*requested=3145728 .*state=live" "$dir/out" || true)
    [ "$live" -gt 10 ] || fail "$conf: $live live blocks in the snapshot"
    frame=$(awk '$2 == "snapshot_block" && /state=live/ { getline; print $1, $2; exit }' "$dir/out")
    if [ "$conf" = oom_snapshot:stacks ]; then
        case $frame in "#0 $prog"+0x*) ;; *) fail "$conf: a live block's first frame is '$frame'" ;; esac
        off=$((${frame##*+} - 1))
        line=$(addr2line -e "$prog" "$(printf '0x%x' "$off")" | sed 's/.*://; s/ .*//')
        [ "$line" = "$site_line" ] || fail "$conf: a live block's frame $frame is line $line"
    else
        case $frame in "#"*) fail "$conf: a live block has frames: $frame" ;; esac
    fi
done
expect 0 "$cli" run -- "$prog" snapshot # on demand, tracing off: the working directory
ls "$dir"/fsdpshim-snapshot-*.fst >/dev/null 2>&1 || fail "fsdpshim_snapshot wrote no file"

# SIGUSR2 with snapshot_signal:1 writes one; without it, SIGUSR2 keeps its
# default action (the program dies of it) and nothing is written
mkdir "$dir/usr2"
for conf in snapshot_signal:1 stream_pool:true; do
    FSDPSHIM_OOM_DIR=$dir/usr2 "$cli" run --conf "$conf" -- "$prog" loop "$dir/last-usr2" 2>"$dir/usr2.err" &
    launcher=$! # `run` without --trace becomes the program
    sleep 0.8
    kill -USR2 "$launcher" || fail "no program to signal"
    sleep 0.5
    kill -TERM "$launcher" 2>/dev/null
    wait "$launcher"
    rc=$?
    if [ "$conf" = snapshot_signal:1 ]; then
        [ "$rc" -eq 143 ] || fail "snapshot_signal: the program did not survive SIGUSR2 (status $rc)"
        snap=$(ls "$dir"/usr2/fsdpshim-snapshot-*.fst 2>/dev/null | head -1)
        [ -n "$snap" ] || fail "SIGUSR2 wrote no snapshot: $(cat "$dir/usr2.err")"
        grep -q "SIGUSR2: snapshot: $snap" "$dir/usr2.err" || fail "the snapshot is not named"
        expect 0 "$cli" dump "$snap"
        grep -q " snapshot_segment " "$dir/out" || fail "the SIGUSR2 snapshot has no segment"
        rm "$dir"/usr2/*
    else
        [ "$rc" -eq 140 ] || fail "without snapshot_signal SIGUSR2 did not kill the program ($rc)"
        [ -z "$(ls "$dir/usr2")" ] || fail "a snapshot was written without snapshot_signal"
    fi
done

# ---- a profiler's NVTX injection configured before: chained ----------------
echo "trace_test: NVTX chaining" # where a hang was, when one is
NVTX_INJECTION64_PATH=$counter NVTX_COUNTER_OUT=$dir/counts \
    expect 0 "$cli" run --trace -o "$dir/chain.fst" -- "$prog" sites
[ "$(cat "$dir/counts")" = "pushes=1 pops=1 marks=1 domain_pushes=1" ] ||
    fail "the chained injection saw: $(cat "$dir/counts" 2>/dev/null)"
expect 0 "$cli" dump "$dir/chain.fst"
grep -q "annot=step/forward$" "$dir/out" || fail "chained run lost the annotations"

# ---- fork: the child writes its own file; a plain name gets .PID -----------
# Skipped, and said, under the sanitizers; the default build checks it.
# ThreadSanitizer does not support a thread started after a multi-threaded
# fork, as the child's trace writer is. GCC 12's AddressSanitizer holds no
# allocator lock across fork, so a child forked while the parent's trace
# writer was in malloc can wait forever (trace.python_frames' CMake comment
# has the stacks; this test hung once in a fresh clone's ASan run, after the
# SIGUSR2 section, 2026-11-28, not reproduced in 12 runs).
echo "trace_test: fork"
if ldd "$prog" | grep -q -E 'libtsan|libasan'; then
    echo "fork: skipped under a sanitizer"
else
    # a fork child leaves the parent's allocator and device state behind on
    # purpose (SPEC section 11)
    expect 0 "$cli" run --trace -o "$dir/plain.fst" -- "$prog" fork
    child=$(sed -n 's/^fork: child //p' "$dir/out")
    [ -f "$dir/plain.fst" ] && [ -f "$dir/plain.fst.$child" ] || fail "fork files: $(ls "$dir")"
    expect 0 "$cli" dump "$dir/plain.fst.$child"
    grep -q " alloc .*requested=7340032" "$dir/out" || fail "the child's trace lacks its allocation"
    expect 0 "$cli" dump "$dir/plain.fst"
    grep -q "size=7340032" "$dir/out" && fail "the parent's trace has the child's allocation"
fi

# ---- abort: everything buffered is written ----------------------------------
echo "trace_test: abort"
"$cli" run --trace -o "$dir/abort.fst" -- "$prog" abort 500 >/dev/null 2>&1
expect 0 "$cli" dump --no-stacks "$dir/abort.fst"
[ "$(count ' alloc ' "$dir/out")" -eq 500 ] || fail "abort: $(count ' alloc ' "$dir/out") of 500 allocs"

# ---- SIGTERM and kill -9 mid-run ---------------------------------------------
for sig in TERM KILL; do
    "$cli" run --trace -o "$dir/loop-$sig.fst" -- "$prog" loop "$dir/last-$sig" 2>/dev/null &
    launcher=$!
    sleep 1.5
    pkill -"$sig" -P "$launcher" -f trace_prog || fail "no program to kill"
    wait "$launcher"
    "$cli" dump --no-stacks "$dir/loop-$sig.fst" >"$dir/loop.txt" 2>"$dir/loop.err"
    rc=$?
    # a kill -9 in the middle of a write leaves a torn tail: named, exit 1
    [ "$rc" -eq 0 ] || { [ "$sig" = KILL ] && [ "$rc" -eq 1 ] &&
        grep -q "offset [0-9]*: the trace ends inside a block" "$dir/loop.err"; } ||
        fail "dump after SIG$sig exited $rc: $(cat "$dir/loop.err")"
    n=$(count ' alloc ' "$dir/loop.txt")
    [ "$n" -gt 100 ] || fail "SIG$sig: only $n allocs recovered"
    gap=$(($(sed 's/^0*//' "$dir/last-$sig") - $(last_event_ns "$dir/loop.txt" alloc)))
    limit=100000000 # the flush interval's promise
    [ "$sig" = TERM ] && limit=20000000 # flushed by the handler: at most the call in flight
    [ "$gap" -le "$limit" ] || fail "SIG$sig: the last $gap ns of allocations are missing"
    echo "SIG$sig: $n allocations recovered, the last $((gap / 1000)) us before the kill missing"
done

# ---- a corrupted copy: the damaged block is skipped, named by offset -------
cp "$dir/loop-KILL.fst" "$dir/bad.fst"
size=$(stat -c %s "$dir/bad.fst")
printf '\377\377\377\377' | dd of="$dir/bad.fst" bs=1 seek=$((size / 2)) conv=notrunc status=none
"$cli" dump --no-stacks "$dir/bad.fst" >"$dir/bad.txt" 2>"$dir/bad.err"
[ $? -eq 1 ] || fail "dump of a corrupted copy did not exit 1: $(cat "$dir/bad.err")"
grep -q "offset [0-9]*: block checksum mismatch\|offset [0-9]*: bad block magic\|offset [0-9]*: impossible" "$dir/bad.err" ||
    fail "the corruption is not named: $(cat "$dir/bad.err")"
bad=$(count ' alloc ' "$dir/bad.txt")
good=$(count ' alloc ' "$dir/loop.txt")
[ "$bad" -gt 0 ] && [ "$bad" -lt "$good" ] || fail "corrupted copy: $bad allocs of $good"

# ---- the disk cannot keep up: events are dropped and counted ---------------
FSDPSHIM_TRACE_WRITE_DELAY_MS=2000 FSDPSHIM_TRACE_BUFFERS=1 expect 0 "$cli" run --trace --conf trace:events -o "$dir/flood.fst" -- "$prog" flood 8 40000
expect 0 "$cli" dump "$dir/flood.fst"
dropped=$(sed -n 's/^# dropped \([0-9]*\) events\?$/\1/p' "$dir/out" | awk '{ s += $1 } END { print s + 0 }')
events=$(grep -c '^[0-9]' "$dir/out")
[ "$dropped" -gt 0 ] || fail "a slow disk dropped nothing ($events events written)"
echo "flood: $events events written, $dropped dropped and counted"

# ---- bad input ------------------------------------------------------------------
expect 2 "$cli" dump
expect 1 "$cli" dump "$dir/missing.fst"
echo "not a trace" >"$dir/text"
expect 1 "$cli" dump "$dir/text"
grep -q "offset 0" "$dir/err" || fail "a non-trace is not named with its offset"
echo "trace_test: ok"
