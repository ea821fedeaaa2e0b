#!/usr/bin/env bash
# oom_causes_test.sh - `fsdpshim report` explains out-of-memory failures of
# traces whose figures are fixed (oom_trace writes them, as a recording of
# an allocator that failed them would be), whatever the allocator linked
# into the analyzer does with them now:
#   segment       the cache grows by a 20 MiB segment where a 4 MiB one fits:
#                 the cause is the segment size, not the 12 MiB free in the
#                 legacy stream's cudaMalloc segment (which a cudaMallocAsync
#                 never takes, said beside it); large_segment_mb and
#                 expandable_segments are replayed, and a setting serves
#                 every request
#   other_memory  a 14 MiB cudaMallocAsync with 16 MiB free only in a
#                 cudaMalloc segment's tail: memory the request never takes
#   pending       a block freed on another stream, its free not complete:
#                 not a soft OOM under cross_stream_reuse:completed
# Each names the failed request's call site (its frames, symbolised), and
# the page of --html gives each failure its cause in the "why" column.
#
#   oom_causes_test.sh FSDPSHIM OOM_TRACE
name=oom_causes_test
here=$(cd "$(dirname "$0")" && pwd)
cli=$1 writer=$2
. "$here/../integration/runtime/cli_common.sh"
src=$here/oom_trace.c
line_of() { grep -n "SITE_$1" "$src" | cut -d: -f1; }
# report of scenario $1 into $dir/$1.txt (and its page into $dir/$1.html)
report() {
    expect 0 "$writer" "$1" "$dir/$1.fst"
    expect 0 "$cli" report --html "$dir/$1.html" "$dir/$1.fst"
    cp "$dir/out" "$dir/$1.txt"
}
has() { grep -qE "$2" "$dir/$1.txt" || fail "$1: no line matching '$2': $(cat "$dir/$1.txt")"; }
lacks() { grep -qE "$2" "$dir/$1.txt" && fail "$1: a line matching '$2': $(cat "$dir/$1.txt")"; }
# the lines of the first explanation's settings
settings() { sed -n '/^    settings/,/^  [^ ]/p' "$dir/$1.txt" | head -n 20; }

# --- the segment size, the issue's program ---
report segment
has segment "^  why the 4.0 MiB request at [0-9.]+ s on device 0, stream 0x5a000 failed:$"
# the call site: the failed request's own frames, the innermost first
grep -A1 -m1 "^    requested at:$" "$dir/segment.txt" |
    grep -qE "^      alloc_activation at .*oom_trace.c:$(line_of ACTIVATION)$" ||
    fail "segment: the call site: $(cat "$dir/segment.txt")"
has segment "^    why: the segment size: the device had 12.0 MiB free, room for the 4.0 MiB asked \(a segment of 4.0 MiB\), but a miss of this size grows the cache by a whole 20.0 MiB segment \(large_segment_mb\)"
has segment "^    and 12.0 MiB of the cache's free lay in segments this request never takes: 12.0 MiB in cudaMalloc segments"
has segment "^    where it lay, for this request \(taken for a cudaMallocAsync: not on the legacy stream\): 0 B in segments it could take of its stream .* and 0 B of other streams .*; 12.0 MiB in segments it never takes$"
lacks segment "soft OOM|tagged by stream"
# every setting that bears on the segment size is replayed, and one that
# does serves every request
settings segment | grep -qE "^      large_segment_mb:4 +(avoids it|fails it|serves it)" ||
    fail "segment: large_segment_mb not tried: $(cat "$dir/segment.txt")"
settings segment | grep -qE "^      expandable_segments:true +(avoids it|fails it|serves it)" ||
    fail "segment: expandable_segments not tried: $(cat "$dir/segment.txt")"
settings segment | grep -q "cross_stream_reuse" &&
    fail "segment: a setting that does not bear on the cause: $(cat "$dir/segment.txt")"
has segment "^      large_segment_mb:4 +avoids it: every request served"
has segment "^  of the settings checked, (large_segment_mb:4|expandable_segments:true) serves every request of the trace in the least memory"
# the page: every failure's cause, as the text gives the first four
why=$(grep -m1 "^    why: " "$dir/segment.txt" | sed 's/^    why: //')
[ "$(grep -cF "<td>$why</td></tr>" "$dir/segment.html")" -ge 1 ] ||
    fail "segment: the page's why column: $(grep -A8 'id="ooms"' "$dir/segment.html")"
[ "$(grep -c "<td>the segment size: " "$dir/segment.html")" -eq 6 ] ||
    fail "segment: six failures, six causes on the page: $(grep -A12 'id="ooms"' "$dir/segment.html")"
sed -n '/id="ooms"/,/<\/table>/p' "$dir/segment.html" | grep -q "<td></td></tr>" &&
    fail "segment: an empty why: $(grep -A12 'id="ooms"' "$dir/segment.html")"

# --- memory of another kind ---
report other_memory
has other_memory "^    why: memory this request never takes: the device's 12.0 MiB free held no segment of 14.0 MiB, and 16.0 MiB of the cache's free lay in segments it cannot use, kept there by the live blocks beside it: 16.0 MiB in cudaMalloc segments"
lacks other_memory "soft OOM|tagged by stream"
settings other_memory | grep -qE "^      large_segment_mb:2 " ||
    fail "other_memory: large_segment_mb not tried: $(cat "$dir/other_memory.txt")"
settings other_memory | grep -qE "^      expandable_segments:true " ||
    fail "other_memory: expandable_segments not tried: $(cat "$dir/other_memory.txt")"
has other_memory "^  of the settings checked, [a-z_]+:[a-z0-9]+ serves every request of the trace"
grep -A1 -m1 "^    requested at:$" "$dir/other_memory.txt" |
    grep -qE "^      alloc_activation at .*oom_trace.c:$(line_of ACTIVATION)$" ||
    fail "other_memory: the call site: $(cat "$dir/other_memory.txt")"

# --- another stream's free not yet complete ---
report pending
has pending "^    why: frees still pending in other streams' pools: they held a free piece of 3.0 MiB that this request could take once those frees completed, which they had not when it failed \(under cross_stream_reuse:completed\)$"
lacks pending "soft OOM|tagged by stream"
settings pending | grep -qE "^      cross_stream_reuse:wait " ||
    fail "pending: cross_stream_reuse:wait not tried: $(cat "$dir/pending.txt")"
echo "oom_causes_test: ok"
