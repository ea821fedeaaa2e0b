#!/usr/bin/env bash
# report_test.sh - `fsdpshim report` on traces of known programs: trace_prog
# sites (peak 8 MiB, everything freed), trace_prog oom on a 62 MiB simulated
# device (3 MiB blocks until one fails: the OOM's figures and the
# fragmentation that caused it), two traces and their totals, bad input.
#
#   report_test.sh FSDPSHIM TRACE_PROG SIM_DIR
name=report_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"

expect 0 "$cli" run --trace -o "$dir/sites.fst" -- "$prog" sites
FSDPSHIM_SIM_MEM=62M FSDPSHIM_OOM_DIR=$dir expect 0 "$cli" run --trace -o "$dir/oom.fst" -- "$prog" oom

expect 0 "$cli" report --by frame -n 2 "$dir/sites.fst"
grep -q "^  device 0: peak allocated 8.0 MiB at " "$dir/out" || fail "sites' peak: $(cat "$dir/out")"
grep -q "^  device 0: 2 allocations (8.0 MiB); 1 segment reserved (20.0 MiB), 0 released; .* 0 out-of-memory events$" \
    "$dir/out" || fail "sites' counts: $(cat "$dir/out")"
grep -q "^  rate limiter: no all-gather waited$" "$dir/out" || fail "rate limiter: $(cat "$dir/out")"
[ "$(grep -c ' at the peak, 1 allocation (' "$dir/out")" -eq 2 ] || fail "two sites: $(cat "$dir/out")"
grep -q "^    alloc_in_backward at .*trace_prog.c" "$dir/out" || fail "sites not symbolised: $(cat "$dir/out")"
expect 0 "$cli" report --by frame -n 1 "$dir/sites.fst"
grep -q "^  the site (by frame) that held the most at the peak:$" "$dir/out" || fail "-n 1: $(cat "$dir/out")"
# a trace cut before its first allocation: no "the 0 sites ..." over nothing
head -c 300 "$dir/sites.fst" >"$dir/cut.fst"
expect 1 "$cli" report "$dir/cut.fst"
grep -q "^  rank ?, 0 events over" "$dir/out" || fail "the cut trace: $(cat "$dir/out")"
grep -q "sites" "$dir/out" && fail "sites over no allocation: $(cat "$dir/out")"
grep -q "^  no allocation, so no site held memory at the peak$" "$dir/out" || fail "$(cat "$dir/out")"

expect 0 "$cli" report -n 1 --by frame "$dir/oom.fst"
grep -qE "^  out of memory at [0-9.]+ s on device 0, stream 0x0: 3.0 MiB requested, [0-9.]+ MiB allocated, [0-9.]+ MiB reserved of which [0-9.]+ MiB free in the cache, the largest free block [0-9.]+ MiB$" \
    "$dir/out" || fail "the OOM line: $(cat "$dir/out")"
grep -q "^    why: fragmentation: .* free in segments this request could take and .* on the device, enough in total, but the largest free piece was 2.0 MiB: no single piece of 3.0 MiB$" \
    "$dir/out" || fail "the fragmentation: $(cat "$dir/out")"
grep -qE "[1-9][0-9]* out-of-memory events?$" "$dir/out" || fail "no OOM counted: $(cat "$dir/out")"
grep -q "^    oom at .*trace_prog.c:$(grep -n SITE_OOM "$src" | cut -d: -f1)$" "$dir/out" ||
    fail "the OOM's site: $(cat "$dir/out")"

expect 0 "$cli" report -n 0 "$dir/sites.fst" "$dir/oom.fst"
grep -q "^all 2 traces" "$dir/out" || fail "no totals: $(cat "$dir/out")"

expect 2 "$cli" report
expect 2 "$cli" report --by nothing "$dir/sites.fst"
expect 1 "$cli" report "$dir/missing.fst"
echo "report_test: ok"
