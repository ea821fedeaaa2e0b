#!/usr/bin/env bash
# trace_bench - what tracing costs (SPEC section 14: <= 1 us per event with
# 32-frame native stacks, <= 24 bytes per event with repeated stacks).
#
#  1. trace_alloc (C, no frame pointers) calls cudaMallocAsync/cudaFreeAsync
#     on a stream of its own (the cached pair, as PyTorch's route makes it) from a
#     stack DEPTH frames deep, under the shim, tracing off and on, runs
#     interleaved, medians: the extra time of one allocation and its free
#     (three events: alloc, free_requested, free_completed; the stack is
#     captured once, for the alloc) with trace:events (0 frames) and
#     trace:stacks with trace_frames 32 and 64;
#  2. the same from Python (trace_alloc.py through ctypes, 10 Python frames
#     deep): trace:stacks against trace:python, the cost of the Python
#     frames, read as the thread allocates holding the GIL (ctypes.PyDLL) and
#     as it lets the GIL go before allocating (ctypes.CDLL, as PyTorch's
#     operators do); and what letting the GIL go and taking it back costs (a
#     CDLL call of a C function that does nothing): without the shim, under
#     it with tracing off (the shim's PyEval_SaveThread/RestoreThread only
#     pass the call on), and with trace:python (the stack read at each
#     release);
#  3. the trace file's bytes per event for the 32-frame run.
#
#   trace_bench [--quick]
#
# The last line is exactly
#   summary: ns_per_event_32=<ns> bytes_per_event=<bytes>
# where ns_per_event_32 is the extra time per traced allocation (its alloc
# event with a 32-frame stack, and its two free events). Paths default to
# this build tree; FSDPSHIM_LIB, FSDPSHIM, TRACE_ALLOC override them.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
shim=${FSDPSHIM_LIB:-$here/../lib/libfsdpshim.so}
cli=${FSDPSHIM:-$here/../bin/fsdpshim}
prog=${TRACE_ALLOC:-$here/trace_alloc}
pyprog=@PROJECT_SOURCE_DIR@/bench/trace/trace_alloc.py
sim=$here/../lib/sim
iters=200000 reps=5
if [ "${1:-}" = --quick ]; then
    iters=20000 reps=3
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset FSDPSHIM_CONF FSDPSHIM_TRACE

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# one run: CONF DEPTH CMD... -> ns per pair; CONF "none": without the shim
one() {
    local conf=$1 preload=$shim
    shift
    [ "$conf" = none ] && preload=
    FSDPSHIM_CONF=$conf FSDPSHIM_TRACE=$tmp/t.fst LD_PRELOAD=$preload "$@" | sed -n 's/.*ns_per_pair=//p'
}
# CONF_OFF CONF_ON CMD... -> "off on" medians over interleaved runs
compare() {
    local off=$1 on=$2
    shift 2
    for _ in $(seq "$reps"); do
        echo "off $(one "$off" "$@")"
        echo "on $(one "$on" "$@")"
    done >"$tmp/runs"
    grep -qE '^(off|on) ?$' "$tmp/runs" && return # a run failed: no figures
    echo "$(grep '^off' "$tmp/runs" | cut -d' ' -f2 | median) $(grep '^on' "$tmp/runs" | cut -d' ' -f2 | median)"
}
# the figures compare printed, or stop: a failed run must not read as a 0
need() { [ -n "${1:-}" ] || { echo "trace_bench: FAILED: $2" >&2; exit 1; }; }

echo "trace_bench: $iters allocate+free pairs per run, $reps runs interleaved, medians"
printf '  %-34s %12s %12s %12s\n' "" "off ns/pair" "on ns/pair" "extra ns"
declare -A extra
for frames in 0 32 64; do
    if [ "$frames" = 0 ]; then
        conf=trace:events depth=8
    else
        conf=trace:stacks,trace_frames:$frames depth=$((frames + 16))
    fi
    off='' on=''
    read -r off on < <(compare "trace:off" "$conf" "$prog" "$depth" "$iters") || true
    need "$on" "$prog with $conf"
    extra[$frames]=$(awk -v a="$off" -v b="$on" 'BEGIN { printf "%.0f", b - a }')
    printf '  %-34s %12s %12s %12s\n' "C, $frames frames ($conf)" "$off" "$on" "${extra[$frames]}"
    if [ "$frames" = 32 ]; then
        size=$(stat -c %s "$tmp/t.fst")
        events=$("$cli" dump --no-stacks "$tmp/t.fst" | grep -c '^[0-9]')
        bytes=$(awk -v s="$size" -v e="$events" 'BEGIN { printf "%.2f", s / e }')
    fi
done
# PYTHON: the interpreter (one that links libpython statically has its
# slots pointed at the shim's instead: python/gil.c)
py=${PYTHON:-python3}
if "$py" -c 'import ctypes' 2>/dev/null; then
    # NAME CONF_OFF CONF_ON MODE ITERS
    py_row() {
        local off='' on=''
        read -r off on < <(compare "$2" "$3" "$py" "$pyprog" 10 "$5" "$4") || true
        need "$on" "$py $pyprog $4 with $3"
        printf '  %-34s %12s %12s %12s\n' "$1" "$off" "$on" \
            "$(awk -v a="$off" -v b="$on" 'BEGIN { printf "%.0f", b - a }')"
    }
    py_row "Python, GIL held: stacks->python" "trace:stacks,trace_frames:32" \
        "trace:python,trace_frames:32" held $((iters / 4))
    py_row "Python, GIL let go: stacks->python" "trace:stacks,trace_frames:32" \
        "trace:python,trace_frames:32" released $((iters / 4))
    printf '  %-34s %12s %12s %12s\n' "" "off ns/call" "on ns/call" "extra ns"
    py_row "GIL let go+taken: no shim->shim" none trace:off gil "$iters"
    py_row "GIL let go+taken: off->python" trace:off "trace:python,trace_frames:32" gil "$iters"
fi
echo "  file: $size bytes for $events events with 32-frame stacks: $bytes bytes per event"
echo "summary: ns_per_event_32=${extra[32]} bytes_per_event=$bytes"
