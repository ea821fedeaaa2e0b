#!/usr/bin/env bash
# compare.sh - runs a stress program natively on the simulated device and
# with the shim preloaded, and fails unless both runs pass their own data
# and leak checks and print the same transcript of return codes.
#   compare.sh PRELOAD CONF PROGRAM [ARGS...]
# PRELOAD: the LD_PRELOAD value for the shim run; CONF: its FSDPSHIM_CONF,
# or - for none. The native run has neither.
preload=$1 conf=$2
shift 2
[ "$conf" = - ] && conf=
name=$(basename "$1")${2:+ $2}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

env -u LD_PRELOAD -u FSDPSHIM_CONF "$@" >"$dir/native.out" 2>"$dir/native.err"
native=$?
[ "$native" -eq 77 ] && exit 77 # no device: skipped
LD_PRELOAD="$preload" FSDPSHIM_CONF="$conf" "$@" >"$dir/shim.out" 2>"$dir/shim.err"
shim=$?

status() { # what an exit status means
    case $1 in
    0) echo "passed" ;;
    1) echo "failed its checks (exit 1)" ;;
    3) echo "hung (watchdog, exit 3)" ;;
    66) echo "stopped by a ThreadSanitizer report (exit 66)" ;;
    *) if [ "$1" -gt 128 ]; then echo "killed by signal $(($1 - 128))"; else echo "exit $1"; fi ;;
    esac
}

# A line "...: N blocks, at least" holds the shim to at least the native
# run's N (an allocator that takes only what it hands out may fit more on a
# device whose own pools reserve in steps); the rest must be identical.
at_least() { sed -n 's/.*: \([0-9]*\) blocks, at least$/\1/p' "$1"; }
fewer=$(paste -d' ' <(at_least "$dir/native.out") <(at_least "$dir/shim.out") |
    awk '$2 == "" || $2 + 0 < $1 + 0 { n++ } END { print n + 0 }')
for f in native shim; do
    sed 's/: [0-9]* blocks, at least$/: N blocks, at least/' "$dir/$f.out" >"$dir/$f.cmp"
done

failed=0
if [ "$fewer" -ne 0 ]; then
    echo "stress $name: the shim filled the device with fewer blocks than the native run:" >&2
    paste -d' ' <(at_least "$dir/native.out") <(at_least "$dir/shim.out") | sed 's/^/  native, shim: /' >&2
    failed=1
fi
echo "stress $name: native run $(status $native), shim run (FSDPSHIM_CONF='$conf') $(status $shim)"
if [ "$native" -ne 0 ]; then
    echo "stress $name: the NATIVE run failed: the test or the simulated device is wrong" >&2
    sed 's/^/  native: /' "$dir/native.err" | head -40 >&2
    failed=1
fi
if [ "$shim" -ne 0 ]; then
    echo "stress $name: under the shim:" >&2
    sed 's/^/  shim: /' "$dir/shim.err" | head -40 >&2
    failed=1
fi
if [ ! -s "$dir/shim.out" ]; then
    echo "stress $name: the shim run printed no transcript (the program prints it at its end)" >&2
    failed=1
elif ! cmp -s "$dir/native.cmp" "$dir/shim.cmp"; then
    echo "stress $name: return codes differ from the native run" \
        "($(diff "$dir/native.cmp" "$dir/shim.cmp" | grep -c '^[<>]') lines;" \
        "< native, > shim; first differences):" >&2
    diff "$dir/native.cmp" "$dir/shim.cmp" | grep '^[<>]' | head -30 | sed 's/^/  /' >&2
    failed=1
fi
[ -s "$dir/native.out" ] || { echo "stress $name: no transcript" >&2; failed=1; }
[ "$failed" -eq 0 ] && echo "stress $name: identical transcripts ($(wc -l <"$dir/native.out") lines), data and memory intact"
exit $failed
