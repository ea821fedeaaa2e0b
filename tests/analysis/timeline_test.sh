#!/usr/bin/env bash
# timeline_test.sh - `fsdpshim timeline` on traces of known programs: the
# peak of trace_prog sites (3 MiB then 5 MiB live together), the number of
# intervals, the highest figure of the run in its rows, the clock report
# uses, the state at the end, two traces as two ranks with their sum, bad
# input.
#
#   timeline_test.sh FSDPSHIM TRACE_PROG SIM_DIR
name=timeline_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"

expect 0 "$cli" run --trace -o "$dir/sites.fst" -- "$prog" sites
expect 0 "$cli" run --trace -o "$dir/leak.fst" -- "$prog" leak

expect 0 "$cli" timeline --intervals 7 "$dir/sites.fst"
grep -q "^1 series over .*, 7 intervals of" "$dir/out" || fail "header: $(cat "$dir/out")"
grep -qE "device 0: peak allocated 8.0 MiB at [0-9.]+ s, peak reserved [0-9.]+ MiB$" "$dir/out" ||
    fail "the peak: $(cat "$dir/out")"
[ "$(grep -cE '^ +[0-9.]+ s +[0-9.]+ [KMG]?i?B +[0-9.]+ [KMG]?i?B \|[# -]*\|$' "$dir/out")" -eq 7 ] ||
    fail "not 7 rows: $(cat "$dir/out")"
grep -qE '^ +[0-9.]+ s +8.0 MiB ' "$dir/out" || fail "no interval reaches 8 MiB: $(cat "$dir/out")"
# the bars: the row at the reserved peak is all '#' and '-', as wide as asked
expect 0 "$cli" timeline --intervals 3 --width 20 "$dir/leak.fst"
grep -qE '^ +[0-9.]+ s +7.0 MiB +[0-9.]+ MiB \|[#]+-*\|$' "$dir/out" || fail "leak's 7 MiB row: $(cat "$dir/out")"
grep -qE '\|[#-]{20}\|$' "$dir/out" || fail "no full-width bar: $(cat "$dir/out")"

# one clock with report and top: seconds since the trace began, so the peak
# is at the time report gives (to its 3 decimals); the last row is the state
# when the trace ended (sites frees both blocks: 0 B allocated, the cache
# still reserved), after the rows of the intervals
expect 0 "$cli" timeline --intervals 5 "$dir/sites.fst"
at=$(sed -n 's/.*device 0: peak allocated 8.0 MiB at \([0-9.]*\) s,.*/\1/p' "$dir/out")
cp "$dir/out" "$dir/timeline"
expect 0 "$cli" report "$dir/sites.fst"
grep -q "device 0: peak allocated 8.0 MiB at $(printf %.3f "$at") s," "$dir/out" ||
    fail "timeline's peak at $at s, report's: $(grep 'peak allocated' "$dir/out")"
last=$(tail -1 "$dir/timeline")
grep -qE '^ +[0-9.]+ s +0 B +[0-9.]+ MiB \|-+\| end$' <<<"$last" || fail "the last row: $last"
[ "$(grep -cE '^ +[0-9.]+ s +[0-9.]+ [KMG]?i?B +[0-9.]+ [KMG]?i?B \|[# -]*\|' "$dir/timeline")" -eq 6 ] ||
    fail "not 5 rows and the end: $(cat "$dir/timeline")"

# two traces: two series and their sum
expect 0 "$cli" timeline "$dir/sites.fst" "$dir/leak.fst"
grep -q "^2 series over" "$dir/out" || fail "two traces: $(cat "$dir/out")"
grep -q "^all ranks and devices" "$dir/out" || fail "no sum table: $(cat "$dir/out")"

expect 2 "$cli" timeline
expect 2 "$cli" timeline --intervals 0 "$dir/sites.fst"
expect 1 "$cli" timeline "$dir/missing.fst"
echo "timeline_test: ok"
