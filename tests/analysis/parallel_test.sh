#!/usr/bin/env bash
# parallel_test.sh - the ranks of a job read side by side (analysis/lib/parallel.h)
# give what reading them one after another gives: every command that reads
# several traces (report and its page, top by each grouping, leaks, timeline,
# diff, export --folded) prints the same bytes on stdout and exits the same
# with FSDPSHIM_ANALYSIS_THREADS=1 and =4, on minifsdp's four ranks and
# trace_prog's traces with OOMs, leaks and threads among them, and an
# unreadable file in the middle. Then the progress line (progress.h): shown
# on a terminal for a reading that takes long, erased at the end, and never
# written when stderr is not a terminal.
#
#   parallel_test.sh FSDPSHIM TRACE_PROG SIM_DIR MINIFSDP
name=parallel_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"
minifsdp=$4

expect 0 "$cli" run --trace -o "$dir/mf-%r.fst" -- "$minifsdp"
for mode in sites leak fragment; do
    expect 0 "$cli" run --trace -o "$dir/$mode.fst" -- "$prog" "$mode"
done
FSDPSHIM_SIM_MEM=62M FSDPSHIM_OOM_DIR=$dir expect 0 "$cli" run --trace -o "$dir/oom.fst" -- "$prog" oom
FSDPSHIM_SIM_MEM=62M expect 0 "$cli" run --trace -o "$dir/oom_streams.fst" \
    --conf cross_stream_reuse:none -- "$prog" oom_streams
expect 0 "$cli" run --trace -o "$dir/flood.fst" -- "$prog" flood 3 20000
traces=("$dir"/mf-0.fst "$dir"/sites.fst "$dir"/mf-1.fst "$dir"/oom.fst "$dir"/mf-2.fst
    "$dir"/leak.fst "$dir"/mf-3.fst "$dir"/oom_streams.fst "$dir"/fragment.fst "$dir"/flood.fst)

# same COMMAND...: stdout and the exit status alike on 1 and 4 threads
# (stderr too, as a set of lines: warnings come as each file finds them)
same() {
    for threads in 1 4; do
        FSDPSHIM_ANALYSIS_THREADS=$threads "$@" >"$dir/out-$threads" 2>"$dir/err-$threads"
        echo "exit $?" >>"$dir/out-$threads"
        sort "$dir/err-$threads" -o "$dir/err-$threads"
    done
    cmp -s "$dir/out-1" "$dir/out-4" ||
        fail "'$*': stdout differs: $(diff "$dir/out-1" "$dir/out-4" | head -20)"
    cmp -s "$dir/err-1" "$dir/err-4" ||
        fail "'$*': stderr differs: $(diff "$dir/err-1" "$dir/err-4" | head -20)"
}

same "$cli" report "${traces[@]}"
grep -q "^all ${#traces[@]} traces" "$dir/out-4" || fail "report's totals: $(cat "$dir/out-4")"
grep -q "the cache is tagged by stream" "$dir/out-4" ||
    fail "oom_streams' OOM not explained: $(cat "$dir/out-4")"
same "$cli" report "${traces[@]:0:3}" "$dir/missing.fst" "${traces[@]:3}"
grep -q "^exit 1$" "$dir/out-4" || fail "an unreadable trace: $(tail -1 "$dir/out-4")"
grep -q "missing.fst: cannot open" "$dir/err-4" || fail "the unreadable trace not named: $(cat "$dir/err-4")"
for threads in 1 4; do
    FSDPSHIM_ANALYSIS_THREADS=$threads expect 0 "$cli" report --html "$dir/page-$threads.html" \
        "${traces[@]}"
done
cmp -s "$dir/page-1.html" "$dir/page-4.html" || fail "the pages differ"
for by in stack frame annotation python; do
    same "$cli" top --by "$by" -n 0 "${traces[@]}"
    same "$cli" leaks --by "$by" -n 0 "${traces[@]}"
done
same "$cli" top --sort temporary "${traces[@]}"
grep -q "allocations in ${#traces[@]} traces" "$dir/out-4" || fail "top's traces: $(head -1 "$dir/out-4")"
same "$cli" timeline "${traces[@]}"
same "$cli" diff "$dir/mf-0.fst" "$dir/mf-3.fst"
same "$cli" export --folded -o - "${traces[@]}"

# the progress line: only on a terminal (script(1) gives the command one),
# only for a reading that takes long (six traces of 6 million events each:
# well over half a second on one thread; one under a sanitizer, which is
# several times slower), erased before the command ends
if command -v script >/dev/null; then
    expect 0 "$cli" run --trace -o "$dir/big.fst" -- "$prog" flood 4 500000
    copies=6
    ldd "$real_cli" | grep -Eq 'lib(a|t)san' && copies=1 # the CLI itself, not the wrapper
    big=()
    for _ in $(seq "$copies"); do big+=("$dir/big.fst"); done
    FSDPSHIM_ANALYSIS_THREADS=1 script -qfec "'$cli' top ${big[*]} >'$dir/top.txt'" \
        "$dir/typescript" >"$dir/tty" || fail "top under script: $(cat "$dir/tty")"
    grep -qaE $'\rfsdpshim top: [0-9.]+ [KMG]?i?B of [0-9.]+ MiB read \\([0-9]+%\\), [0-9]+ s' \
        "$dir/tty" || fail "no progress line: $(od -c "$dir/tty" | head)"
    [ "$(tail -c 4 "$dir/tty" | od -An -c | tr -d ' ')" = '\r033[K' ] ||
        fail "the line is not erased at the end: $(tail -c 40 "$dir/tty" | od -c)"
    grep -q "allocations in $copies trace" "$dir/top.txt" || fail "top's output: $(cat "$dir/top.txt")"
    FSDPSHIM_ANALYSIS_THREADS=1 expect 0 "$cli" top "${big[@]}"
    [ -s "$dir/err" ] && fail "stderr not a terminal, yet: $(od -c "$dir/err" | head)"
fi
echo "$name: ok"
