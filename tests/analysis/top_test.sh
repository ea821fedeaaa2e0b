#!/usr/bin/env bash
# top_test.sh - `fsdpshim top` on traces of a program with known call sites
# (tests/integration/trace/trace_prog.c) on the simulated device: groups by
# annotation, Python stack (a thread without Python frames named by what it
# is), frame and stack with the right peak, count and total; the
# temporaries of a many-thread flood; two traces merged as two ranks; bad
# input.
#
#   top_test.sh FSDPSHIM TRACE_PROG SIM_DIR
name=top_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"

expect 0 "$cli" run --trace -o "$dir/sites.fst" -- "$prog" sites
expect 0 "$cli" run --trace -o "$dir/sites2.fst" -- "$prog" sites
expect 0 "$cli" run --trace --conf trace:events -o "$dir/flood.fst" -- "$prog" flood 8 20000

# by annotation: the backward block (5 MiB, range "step") then the forward
# one (3 MiB, "step/forward"), both live at the peak of 8 MiB
expect 0 "$cli" top --by annotation "$dir/sites.fst"
grep -q "device 0 peaked at 8.0 MiB allocated" "$dir/out" || fail "no 8 MiB peak: $(cat "$dir/out")"
grep -q "^2 allocations in 1 trace, 2 groups by annotation, sorted by peak" "$dir/out" ||
    fail "the summary line: $(cat "$dir/out")"
table=$(grep -A1 -E '^ +[0-9.]+ [KMG]?i?B' "$dir/out" | grep -v '^--$' | paste -d' ' - - | tr -s ' ')
[ "$(sed -n 1p <<<"$table")" = " 5.0 MiB 5.0 MiB 1 0 (0%) 1 step" ] || fail "first row: $table"
[ "$(sed -n 2p <<<"$table")" = " 3.0 MiB 3.0 MiB 1 0 (0%) 1 step/forward" ] || fail "second row: $table"

# by python: allocations without Python frames are grouped by the thread
# that made them, autograd's backward threads (pt_autograd_N) apart
expect 0 "$cli" run --trace --conf trace:python -o "$dir/backward.fst" -- "$prog" backward_thread
expect 0 "$cli" top --by python --sort count "$dir/backward.fst"
table=$(grep -A1 -E '^ +[0-9.]+ [KMG]?i?B' "$dir/out" | grep -v '^--$' | paste -d' ' - - | tr -s ' ')
[ "$(sed -n 1p <<<"$table")" = " 4.0 MiB 4.0 MiB 2 0 (0%) 1 (autograd backward thread: no Python frames)" ] ||
    fail "by python, autograd's thread: $table"
[ "$(sed -n 2p <<<"$table")" = " 1.0 MiB 1.0 MiB 1 0 (0%) 1 (no Python frames)" ] ||
    fail "by python, the main thread: $table"

# by frame: each group's frame is its call site, symbolised (libdw), and
# unsymbolised the same line through addr2line
expect 0 "$cli" top --by frame "$dir/sites.fst"
for site in backward forward; do
    want=$(grep -n "SITE_$(echo $site | tr a-z A-Z)" "$src" | cut -d: -f1)
    grep -qE "^    alloc_in_$site at .*/trace_prog.c:$want\$" "$dir/out" ||
        fail "$site: not symbolised to trace_prog.c:$want: $(cat "$dir/out")"
done
expect 0 "$cli" top --by frame --no-symbols "$dir/sites.fst"
for site in BACKWARD FORWARD; do
    frame=$(grep -A1 -E '^ +[0-9.]+ [KMG]?i?B' "$dir/out" | grep "$prog+0x" |
        sed -n "$([ $site = BACKWARD ] && echo 1 || echo 2)p" | tr -d ' ')
    off=$((${frame##*+} - 1))
    line=$(addr2line -e "$prog" "$(printf '0x%x' "$off")" | sed 's/.*://; s/ .*//')
    [ "$line" = "$(grep -n "SITE_$site" "$src" | cut -d: -f1)" ] || fail "$site: $frame is line $line"
done
# by stack: sites() is inlined into main (-O2): its frame says so, and main
# follows it at the line that calls it
expect 0 "$cli" top --by stack "$dir/sites.fst"
grep -qE "^    sites at .*/trace_prog.c:[0-9]+ \(inlined\)$" "$dir/out" || fail "no inlined frame: $(cat "$dir/out")"
call=$(grep -n 'return sites();' "$src" | cut -d: -f1)
grep -qE "^    main at .*/trace_prog.c:$call$" "$dir/out" || fail "main is not at line $call: $(cat "$dir/out")"

# a module that changed since the trace, or is gone: one warning, its frames
# as module+offset, never a failure
cp "$prog" "$dir/prog"
expect 0 "$cli" run --trace -o "$dir/copy.fst" -- "$dir/prog" sites
expect 0 "$cli" top --by frame "$dir/copy.fst"
grep -q "^    alloc_in_forward at " "$dir/out" || fail "the copy is not symbolised: $(cat "$dir/out")"
cp "$(type -P true)" "$dir/prog"
expect 0 "$cli" top --by stack "$dir/copy.fst"
[ "$(grep -c "$dir/prog: not the file the trace was made with" "$dir/err")" -eq 1 ] ||
    fail "a changed module: $(cat "$dir/err")"
grep -q "^    $dir/prog+0x" "$dir/out" || fail "a changed module's frames: $(cat "$dir/out")"
rm "$dir/prog"
expect 0 "$cli" top --by stack "$dir/copy.fst"
[ "$(grep -c "$dir/prog: .*shown as module+offset" "$dir/err")" -eq 1 ] || fail "a missing module: $(cat "$dir/err")"

# two traces are two ranks: counts add up, each group has both
expect 0 "$cli" top --by annotation "$dir/sites.fst" "$dir/sites2.fst"
grep -q "^4 allocations in 2 traces" "$dir/out" || fail "not merged: $(cat "$dir/out")"
[ "$(grep -cE '^ +10.0 MiB +10.0 MiB +2 +0 \(0%\) +2$' "$dir/out")" -eq 1 ] ||
    fail "the step group of both ranks: $(cat "$dir/out")"

# the flood: 8 threads each allocate and free at once, every one temporary
# (in time order: threads' buffers reach the file out of order)
expect 0 "$cli" top --by frame --sort temporary "$dir/flood.fst"
grep -qE '^ +[0-9.]+ [KMG]?i?B +78.1 MiB +160000 +160000 \(100%\) +1$' "$dir/out" ||
    fail "flood: $(cat "$dir/out")"
expect 0 "$cli" top --sort count -n 1 "$dir/flood.fst" "$dir/sites.fst"
grep -q "(first ones)" "$dir/out" || fail "-n 1 printed all groups"
[ "$(grep -cE '^ +[0-9.]+ [KMG]?i?B' "$dir/out")" -eq 1 ] || fail "-n 1: $(cat "$dir/out")"

# bad input
expect 2 "$cli" top
expect 2 "$cli" top --by nothing "$dir/sites.fst"
expect 2 "$cli" top -n x "$dir/sites.fst"
expect 1 "$cli" top "$dir/missing.fst"
echo "not a trace" >"$dir/text"
expect 1 "$cli" top "$dir/text"
echo "top_test: ok"
