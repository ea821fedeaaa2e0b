#!/usr/bin/env bash
# replay_test.sh - `fsdpshim replay` on traces of known programs: replayed
# under the recorded configuration it reproduces the recorded peak reserved
# to the byte (trace_prog fragment, whose cudaFree'd blocks the recording
# held back until the next miss; trace_prog oom on a 62 MiB device, with
# its two failures); expandable segments lower the fragmenting program's
# peak; a replay device too small for it fails requests, each reported with
# its size and site, and the replay goes on; bad input.
#
#   replay_test.sh FSDPSHIM TRACE_PROG SIM_DIR
name=replay_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"

expect 0 "$cli" run --trace -o "$dir/frag.fst" -- "$prog" fragment
FSDPSHIM_SIM_MEM=62M FSDPSHIM_OOM_DIR=$dir expect 0 "$cli" run --trace -o "$dir/oom.fst" -- "$prog" oom
expect 0 "$cli" run --trace -o "$dir/sites.fst" -- "$prog" sites

# The recorded peak reserved, from the trace's own totals.
recorded_peak() {
    "$cli" dump --no-stacks "$1" | sed -n 's/.* reserved=\([0-9]*\).*/\1/p' | sort -n | tail -1
}
# A row's figure in MiB for column N (1 recorded, 2 as recorded, 3 the first --conf).
mib() {
    grep -E "^    $1 " "$dir/out" | sed "s/^    $1 *//" | tr -s ' ' | cut -d' ' -f$((2 * $2 - 1))-$((2 * $2)) |
        sed -n 's/ MiB$//p'
}

# the fragmenting program: 128 MiB reserved for 76 MiB allocated
expect 0 "$cli" replay --conf expandable_segments:true "$dir/frag.fst"
peak=$(recorded_peak "$dir/frag.fst")
[ "$peak" = 134217728 ] || fail "fragment's recorded peak is $peak, not 128 MiB"
grep -q "^  device 0: as recorded reproduces the recording's peak reserved, $peak bytes$" "$dir/out" ||
    fail "fragment not reproduced: $(cat "$dir/out")"
grep -qE ": 12 allocations, 12 frees \(4 held back until the recording saw them complete\)" "$dir/out" ||
    fail "the frees held back: $(cat "$dir/out")"
[ "$(mib 'peak allocated' 1)" = 76.0 ] && [ "$(mib 'peak allocated' 3)" = 76.0 ] ||
    fail "peak allocated: $(cat "$dir/out")"
expandable=$(mib 'peak reserved' 3)
[ -n "$expandable" ] && awk "BEGIN { exit !($expandable < 128) }" ||
    fail "expandable segments did not lower the peak: $(cat "$dir/out")"
grep -qE "^    segments reserved +8 +8 +0$" "$dir/out" || fail "segments: $(cat "$dir/out")"

# a replay device of 100 MiB: the recorded configuration fails the 12 MiB
# requests (each named with its size and site, the replay going on),
# expandable segments fit
line=$(grep -n SITE_FRAGMENT "$src" | cut -d: -f1)
expect 0 "$cli" replay --mem 100M --conf expandable_segments:true "$dir/frag.fst"
grep -qE "^    out-of-memory failures +0 +[1-9][0-9]* +0$" "$dir/out" || fail "OOM row: $(cat "$dir/out")"
grep -q "^  as recorded: [0-9]* requests failed (each skipped, with its free; the replay went on):$" "$dir/out" ||
    fail "no OOM list: $(cat "$dir/out")"
grep -qE "^    12.0 MiB at [0-9.]+ s on device 0, stream 0x0: .* allocated, .* reserved, the largest free block " "$dir/out" ||
    fail "the OOM's size: $(cat "$dir/out")"
grep -q "^        fragment_site at .*trace_prog.c:$line$" "$dir/out" || fail "the OOM's site: $(cat "$dir/out")"
grep -q "as recorded failed [0-9]* requests that the recording served" "$dir/out" ||
    fail "the smaller device is not named: $(cat "$dir/out")"

# the OOM trace at its recorded capacity: the same peak and the same
# failure; the trace's own capacity and configuration by default
expect 0 "$cli" replay --mem 62M --conf max_split_size_mb:40 "$dir/oom.fst"
peak=$(recorded_peak "$dir/oom.fst")
grep -q "^  device 0: as recorded reproduces the recording's peak reserved, $peak bytes$" "$dir/out" ||
    fail "oom not reproduced: $(cat "$dir/out")"
grep -qE "^    out-of-memory failures +1 +1 +1$" "$dir/out" || fail "oom's failures: $(cat "$dir/out")"
[ "$(grep -c '^    3.0 MiB at .* (failed in the recording too)$' "$dir/out")" -eq 2 ] ||
    fail "each failure in each replay: $(cat "$dir/out")"
grep -q "^        oom at .*trace_prog.c:$(grep -n SITE_OOM "$src" | cut -d: -f1)$" "$dir/out" ||
    fail "the OOM site: $(cat "$dir/out")"
expect 0 "$cli" replay --conf expandable_segments:true "$dir/oom.fst"
grep -q "replay devices: 62.0 MiB (recorded)$" "$dir/out" || fail "recorded capacity: $(cat "$dir/out")"
grep -q "as recorded: free_semantics:device,.*expandable_segments:false,.* (the trace's)$" "$dir/out" ||
    fail "recorded configuration: $(cat "$dir/out")"
# expandable segments leave no 2 MiB holes between 3 MiB blocks: no failure
grep -qE "^    out-of-memory failures +1 +1 +0$" "$dir/out" || fail "expandable: $(cat "$dir/out")"

# several traces, the recorded configuration given, several configurations
expect 0 "$cli" replay --recorded free_semantics:device,segment_growth:pytorch --conf free_semantics:stream \
    --conf "roundup_power2_divisions:[256:1,>:4]" "$dir/sites.fst" "$dir/frag.fst"
[ "$(grep -c "as recorded reproduces" "$dir/out")" -eq 2 ] || fail "two traces: $(cat "$dir/out")"
grep -qE "^  device 0 +recorded +as recorded +replay 1 +replay 2$" "$dir/out" || fail "columns: $(cat "$dir/out")"

# bad input
expect 2 "$cli" replay "$dir/frag.fst"
expect 2 "$cli" replay --conf bogus_key:1 "$dir/frag.fst"
grep -q "'bogus_key' is not an allocator key" "$dir/err" || fail "unknown key: $(cat "$dir/err")"
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "not one line: $(cat "$dir/err")"
expect 2 "$cli" replay --conf expandable_segments:maybe "$dir/frag.fst"
grep -q "'maybe' is not true or false" "$dir/err" || fail "bad value: $(cat "$dir/err")"
expect 0 "$cli" replay --conf garbage_collection_threshold:0.5 "$dir/frag.fst" # at its recorded size
grep -q "garbage_collection_threshold was off" "$dir/out" && fail "gc off: $(cat "$dir/out")"
expect 2 "$cli" replay --mem lots --conf expandable_segments:true "$dir/frag.fst"
expect 1 "$cli" replay --conf expandable_segments:true "$dir/missing.fst"
echo "not a trace" >"$dir/text"
expect 1 "$cli" replay --conf expandable_segments:true "$dir/text" "$dir/frag.fst"
grep -q "as recorded reproduces" "$dir/out" || fail "the readable trace after a bad one: $(cat "$dir/out")"
expect 0 "$cli" replay --help
echo "replay_test: ok"
