#!/usr/bin/env bash
# attach_bench - what each way in costs a running program, on the simulated
# device (docs/attach.md): attach_loop's rate of allocate+free pairs
# (cudaMallocAsync/cudaFreeAsync of 1 MiB on a stream), read from its count
# over a window of WINDOW seconds, as ns per pair, for
#   native                 no shim
#   preload, trace:off     LD_PRELOAD: served by the cache, no trace
#   preload, trace:stacks  ... and traced with native stacks
#   injection              CUDA_INJECTION64_PATH: CUPTI, trace-only, stacks
#   attach, CUPTI          `fsdpshim attach` to the native run
#   attach, GOT            the same to a run whose CUPTI another client holds
# (the native rate of that run is given too); and the wall time of the
# `fsdpshim attach` and `fsdpshim detach` commands, and how many of their
# calls into the process failed. Medians of REPS runs.
#
#   attach_bench [--quick]
#
# Paths default to this build tree; FSDPSHIM_LIB, FSDPSHIM, ATTACH_LOOP
# override them. Needs gdb for the attach rows (exits 77 without it).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
shim=${FSDPSHIM_LIB:-$here/../lib/libfsdpshim.so}
cli=${FSDPSHIM:-$here/../bin/fsdpshim}
prog=${ATTACH_LOOP:-$here/attach_loop}
sim=$here/../lib/sim
window=2 reps=3
if [ "${1:-}" = --quick ]; then
    window=0.5 reps=1
fi
command -v gdb >/dev/null || { echo "attach_bench: no gdb (scripts/deps.sh installs it)"; exit 77; }
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset FSDPSHIM_CONF FSDPSHIM_TRACE LD_PRELOAD CUDA_INJECTION64_PATH

fail() { echo "attach_bench: FAILED: $*" >&2; exit 1; }
declare -A runs
add() { runs[$1]="${runs[$1]:-} $2"; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
now() { date +%s.%N; }
count() { tr -d ' \n' <"$tmp/count" 2>/dev/null | sed 's/^0*//'; }

# start [ENV...] -- [ARGS...]: attach_loop in the background, once counting
start() {
    local env=()
    while [ "$1" != -- ]; do env+=("$1"); shift; done
    shift
    rm -f "$tmp/count"
    env "${env[@]}" "$prog" "$@" "$tmp/count" 2>>"$tmp/err" &
    pid=$!
    for _ in $(seq 100); do [ -s "$tmp/count" ] && return; sleep 0.05; done
    fail "attach_loop did not start: $(cat "$tmp/err")"
}
stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=; }
# ns per pair over the window, from the program's own count
rate() {
    local c0 c1 t0 t1
    c0=$(count) t0=$(now)
    sleep "$window"
    c1=$(count) t1=$(now)
    awk -v a="$c0" -v b="$c1" -v s="$t0" -v e="$t1" 'BEGIN { printf "%.0f", (e - s) * 1e9 / (b - a) }'
}
# gdb CMD...: counts the call; on success adds its wall time in ms to the
# runs of NAME (the first argument), else counts the failure (gdb's call
# cannot be made while the thread it stopped holds malloc's lock:
# docs/attach.md, "Limits") and returns 1
calls=0 failed=0
gdb_call() {
    local name=$1 t0 t1
    shift
    calls=$((calls + 1))
    t0=$(now)
    if ! "$@" >"$tmp/out" 2>&1; then
        failed=$((failed + 1))
        echo "attach_bench: $* failed: $(head -1 "$tmp/out")" >&2
        return 1
    fi
    t1=$(now)
    add "$name" "$(awk -v s="$t0" -v e="$t1" 'BEGIN { printf "%.0f", (e - s) * 1000 }')"
}

for _ in $(seq "$reps"); do
    start -- ; add native "$(rate)"; stop
    start LD_PRELOAD="$shim" FSDPSHIM_CONF=trace:off -- ; add preload_off "$(rate)"; stop
    start LD_PRELOAD="$shim" FSDPSHIM_CONF=trace:stacks FSDPSHIM_TRACE="$tmp/p.fst" --
    add preload_stacks "$(rate)"; stop
    start CUDA_INJECTION64_PATH="$shim" FSDPSHIM_TRACE="$tmp/i.fst" -- ; add injection "$(rate)"; stop
    for way in cupti got; do
        if [ $way = got ]; then start -- --hold-cupti; add held "$(rate)"; else start --; fi
        if gdb_call attach_ms_$way "$cli" attach "$pid" -o "$tmp/a.fst"; then
            sleep 0.2
            add attach_$way "$(rate)"
            gdb_call detach_ms_$way "$cli" detach "$pid"
        fi
        stop
    done
done
grep -q 'GOT slots instead' "$tmp/err" || fail "the GOT run did not fall back: $(cat "$tmp/err")"
med() { echo "${runs[$1]}" | tr ' ' '\n' | grep . | median; }

echo "attach_bench: attach_loop, ns per allocate+free pair over ${window} s, median of $reps"
row() { printf '  %-40s %10s\n' "$1" "$2"; }
row "native" "$(med native)"
row "preload, trace:off (served)" "$(med preload_off)"
row "preload, trace:stacks (served, traced)" "$(med preload_stacks)"
row "injection (CUPTI, trace-only, stacks)" "$(med injection)"
row "attach through CUPTI (stacks)" "$(med attach_cupti)"
row "native, CUPTI held by another client" "$(med held)"
row "attach through the GOT slots (stacks)" "$(med attach_got)"
echo "  wall time of the commands, ms:"
row "fsdpshim attach (CUPTI)" "$(med attach_ms_cupti)"
row "fsdpshim detach (CUPTI)" "$(med detach_ms_cupti)"
row "fsdpshim attach (GOT)" "$(med attach_ms_got)"
row "fsdpshim detach (GOT)" "$(med detach_ms_got)"
echo "  gdb calls that failed: $failed of $calls"
