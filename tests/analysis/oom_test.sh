#!/usr/bin/env bash
# oom_test.sh - `fsdpshim report` explains out-of-memory failures on a 62 MiB
# simulated device (three 20 MiB segments fit, a fourth segment of any size
# does not): a soft OOM (trace_prog oom_streams under
# cross_stream_reuse:none: stream B's request fails while stream A's pools
# hold holes big enough), from the trace and from the OOM's snapshot, and
# fragmentation (trace_prog oom); each with the request's call site, its
# cause, the holders at that moment and the settings that bear on the cause,
# checked by replaying the trace. (oom_causes_test.sh explains failures that
# today's allocator would not make, from traces written for them.)
#
#   oom_test.sh FSDPSHIM TRACE_PROG SIM_DIR
name=oom_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"
line_of() { grep -n "SITE_$1" "$src" | cut -d: -f1; }

mkdir "$dir/snap"
FSDPSHIM_SIM_MEM=62M FSDPSHIM_OOM_DIR=$dir/snap expect 0 "$cli" run --trace \
    --conf cross_stream_reuse:none -o "$dir/streams.fst" -- "$prog" oom_streams
expect 0 "$cli" report "$dir/streams.fst"
cp "$dir/out" "$dir/streams.txt"
grep -qE "^  why the 3.0 MiB request at [0-9.]+ s on device 0, stream 0x[0-9a-f]+ failed:$" \
    "$dir/streams.txt" || fail "no explanation: $(cat "$dir/streams.txt")"
# A's nine 3 MiB holes and three 2 MiB tails; B's own pools are empty
grep -q "^    of the free: 0 B in this stream's pools, 33.0 MiB in other streams' pools; 0 B in frees still pending$" \
    "$dir/streams.txt" || fail "the cache by stream: $(cat "$dir/streams.txt")"
grep -q "^    the device: 2.0 MiB free of 62.0 MiB$" "$dir/streams.txt" || fail "the device: $(cat "$dir/streams.txt")"
# ... in segments B's request could take: stream-ordered ones of the large pool
grep -q "^    where it lay, for this request (taken for a cudaMallocAsync: not on the legacy stream): 0 B in segments it could take of its stream (the largest piece 0 B) and 33.0 MiB of other streams (the largest 3.0 MiB); 0 B in segments it never takes$" \
    "$dir/streams.txt" || fail "where the free lay: $(cat "$dir/streams.txt")"
grep -q "^    why: the cache is tagged by stream (a soft OOM): 33.0 MiB lay free in other streams' pools, in segments this request could take" \
    "$dir/streams.txt" || fail "the cause: $(cat "$dir/streams.txt")"
grep -A1 "^    requested at:$" "$dir/streams.txt" | grep -q "^      oom_streams at .*trace_prog.c:$(line_of SECOND)$" ||
    fail "the call site: $(cat "$dir/streams.txt")"
grep -q "^      27.0 MiB  fill$" "$dir/streams.txt" || fail "holders by annotation: $(cat "$dir/streams.txt")"
grep -q "^      27.0 MiB  oom_streams at .*trace_prog.c:$(line_of FILL)$" "$dir/streams.txt" ||
    fail "holders by stack: $(cat "$dir/streams.txt")"
grep -qE "^      cross_stream_reuse:wait +avoids it: every request served, peak reserved 60.0 MiB$" \
    "$dir/streams.txt" || fail "the replayed fix: $(cat "$dir/streams.txt")"
grep -qE "^      expandable_segments:true +avoids it: every request served" "$dir/streams.txt" ||
    fail "expandable segments: $(cat "$dir/streams.txt")"
# max_split_size_mb bears on fragmentation, not on streams' pools
grep -q "max_split_size_mb" "$dir/streams.txt" && fail "a setting that does not bear on it: $(cat "$dir/streams.txt")"

# the snapshot the failure wrote says the same, without a history to replay
snap=$(ls "$dir"/snap/fsdpshim-oom-*.fst)
expect 0 "$cli" report "$snap"
grep -q "^    why: the cache is tagged by stream (a soft OOM): 33.0 MiB" "$dir/out" ||
    fail "the snapshot's cause: $(cat "$dir/out")"
grep -q "^      27.0 MiB  oom_streams at .*trace_prog.c:$(line_of FILL)$" "$dir/out" ||
    fail "the snapshot's holders: $(cat "$dir/out")"
grep -A1 "^    requested at:$" "$dir/out" | grep -q "^      oom_streams at .*trace_prog.c:$(line_of SECOND)$" ||
    fail "the snapshot's call site: $(cat "$dir/out")"
grep -q "^    settings: not checked: a snapshot holds no history to replay" "$dir/out" ||
    fail "the snapshot's settings: $(cat "$dir/out")"

# fragmentation: 2 MiB tails in every segment, 2 MiB on the device
FSDPSHIM_SIM_MEM=62M FSDPSHIM_OOM_DIR=$dir expect 0 "$cli" run --trace -o "$dir/oom.fst" -- "$prog" oom
expect 0 "$cli" report "$dir/oom.fst"
grep -q "^    why: fragmentation: 6.0 MiB free in segments this request could take and 2.0 MiB on the device, enough in total, but the largest free piece was 2.0 MiB: no single piece of 3.0 MiB$" \
    "$dir/out" || fail "fragmentation: $(cat "$dir/out")"
grep -A1 "^    requested at:$" "$dir/out" | grep -q "^      oom at .*trace_prog.c:$(line_of OOM)$" ||
    fail "oom's call site: $(cat "$dir/out")"
# every setting that bears on fragmentation is tried
for setting in expandable_segments:true max_split_size_mb:21 garbage_collection_threshold:0.6 \
    roundup_power2_divisions:4; do
    grep -qE "^      $setting +(avoids it|fails it too|serves it)" "$dir/out" ||
        fail "$setting not tried: $(cat "$dir/out")"
done
grep -qE "^      expandable_segments:true +avoids it: every request served" "$dir/out" ||
    fail "expandable segments: $(cat "$dir/out")"
grep -q "^  of the settings checked, expandable_segments:true serves every request of the trace in the least memory" \
    "$dir/out" || fail "the best setting: $(cat "$dir/out")"
grep -q "^      54.0 MiB  oom at .*trace_prog.c:$(line_of OOM)$" "$dir/out" || fail "oom's holders: $(cat "$dir/out")"

# no failure, no explanation
expect 0 "$cli" run --trace -o "$dir/sites.fst" -- "$prog" sites
expect 0 "$cli" report "$dir/sites.fst"
grep -q "why the" "$dir/out" && fail "an explanation without a failure: $(cat "$dir/out")"
echo "oom_test: ok"
