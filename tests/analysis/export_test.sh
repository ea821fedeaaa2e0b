#!/usr/bin/env bash
# export_test.sh - `fsdpshim export` on traces of a program with known call
# sites (tests/integration/trace/trace_prog.c) on the simulated device: the
# memviz pickle read with plain python3 (no torch) and checked as memory_viz
# reads it (memviz_check.py): its segments tiled by blocks of the right
# sizes, states and frames, at the peak, the end, a given second, with the
# newest N entries, for a snapshot file, one pickle per trace; folded stacks
# with the SITE frames and the right weights, ranks merged; the Chrome JSON
# parsed, with its counters and NVTX ranges; bad input.
#
#   export_test.sh FSDPSHIM TRACE_PROG SIM_DIR
name=export_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"
check=$here/memviz_check.py
fwd=$(grep -n SITE_FORWARD "$src" | cut -d: -f1)
bwd=$(grep -n SITE_BACKWARD "$src" | cut -d: -f1)
MiB=1048576

expect 0 "$cli" run --trace -o "$dir/sites.fst" -- "$prog" sites
expect 0 "$cli" run --trace -o "$dir/sites2.fst" -- "$prog" sites
expect 0 "$cli" run --trace -o "$dir/leak.fst" -- "$prog" leak
expect 0 "$cli" run --trace --conf trace:events -o "$dir/flood.fst" -- "$prog" flood 4 2000
expect 0 "$cli" dump --no-stacks "$dir/sites.fst"
cp "$dir/out" "$dir/sites.dump"

# py PICKLE CODE: runs CODE with s, the pickle loaded, and the helpers
py() {
    python3 - "$@" <<EOF || fail "$2: $(cat "$dir/err")"
import pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
segs, trace = s["segments"], s["device_traces"][0]
blocks = [b for g in segs for b in g["blocks"]]
def state(st): return sorted(b["size"] for b in blocks if b["state"] == st)
def want(cond, what):
    if not cond: sys.exit(f"{what}: {segs} {trace}")
$2
EOF
}
memviz_check() {
    python3 "$check" "$1" >"$dir/check" 2>&1 || fail "memviz_check $1: $(cat "$dir/check")"
}

# ---- memviz ----------------------------------------------------------------
# at the peak (the default): the forward (3 MiB, range step/forward) and
# backward (5 MiB, range step) blocks live, each with its SITE frame first,
# the rest of their segment inactive; the segments add up to what the
# allocator reserved then; the trace ends at the peak
expect 0 "$cli" export --memviz -o "$dir/sites.pickle" "$dir/sites.fst"
grep -q "device 0 at its peak (.* s in): 8.0 MiB allocated" "$dir/err" || fail "summary: $(cat "$dir/err")"
memviz_check "$dir/sites.pickle"
reserved=$(grep " alloc .*allocated=8388608 " "$dir/sites.dump" | sed 's/.*reserved=\([0-9]*\).*/\1/')
py "$dir/sites.pickle" "
want(state('active_allocated') == [3 * $MiB, 5 * $MiB], 'the live blocks')
want(state('active_pending_free') == [], 'no pending block')
want(sum(g['total_size'] for g in segs) == $reserved, 'the segments are what was reserved')
want(sum(g['allocated_size'] for g in segs) == 8 * $MiB, 'allocated_size')
by_size = {b['size']: b for b in blocks if b['state'] == 'active_allocated'}
for size, fn, line in ((3 * $MiB, 'alloc_in_forward', $fwd), (5 * $MiB, 'alloc_in_backward', $bwd)):
    f = by_size[size]['frames'][0]
    want((f['name'], f['filename'].endswith('trace_prog.c'), f['line']) == (fn, True, line), f'{fn} frame {f}')
want([e['action'] for e in trace] == ['segment_alloc', 'alloc', 'alloc'], 'the trace up to the peak')
want([e['user_metadata'] for e in trace[1:]] == ['step/forward', 'step'], 'the annotations')
want(trace[0]['frames'] == trace[1]['frames'], 'the segment has its allocation frames')
want(all(g['segment_type'] == 'large' and not g['is_expandable'] for g in segs), 'segment types')
"

# at the end: both freed; every free finds its block walking back
expect 0 "$cli" export --memviz --at end -o "$dir/end.pickle" "$dir/sites.fst"
memviz_check "$dir/end.pickle"
py "$dir/end.pickle" "
want(state('active_allocated') == [], 'nothing live at the end')
acts = [e['action'] for e in trace]
want(acts.count('free_requested') == 2 and acts[:3] == ['segment_alloc', 'alloc', 'alloc'], f'{acts}')
frees = [e for e in trace if e['action'] == 'free_requested']
want(sorted(e['size'] for e in frees) == [3 * $MiB, 5 * $MiB], 'the frees have the requested sizes')
"

# at a second between the two allocations: only the forward block
t1=$(grep " alloc " "$dir/sites.dump" | sed -n 1p | cut -d' ' -f1)
t2=$(grep " alloc " "$dir/sites.dump" | sed -n 2p | cut -d' ' -f1)
at=$(python3 -c "print(($t1 + $t2) / 2)")
expect 0 "$cli" export --memviz --at "$at" -o "$dir/mid.pickle" "$dir/sites.fst"
memviz_check "$dir/mid.pickle"
py "$dir/mid.pickle" "want(state('active_allocated') == [3 * $MiB] and len(trace) == 2, 'at $at s')"

# the newest entry only; and without symbols, frames as module+offset
expect 0 "$cli" export --memviz --max-entries 1 --no-symbols -o "$dir/one.pickle" "$dir/sites.fst"
memviz_check "$dir/one.pickle"
py "$dir/one.pickle" "
want([e['action'] for e in trace] == ['alloc'] and trace[0]['size'] == 5 * $MiB, 'the newest entry')
f = trace[0]['frames'][0]
want('trace_prog+0x' in f['name'] and f['line'] == 0, f'an unsymbolised frame {f}')
"

# a block freed but still pending at the end (its stream had not passed the
# free), in a small-pool segment
expect 0 "$cli" export --memviz --at end -o "$dir/leak.pickle" "$dir/leak.fst"
memviz_check "$dir/leak.pickle"
py "$dir/leak.pickle" "
want(state('active_allocated') == [$MiB, 2 * $MiB, 4 * $MiB], 'the leaked blocks')
small = [g for g in segs if g['segment_type'] == 'small']
want(len(small) == 1 and small[0]['total_size'] == 2 * $MiB, 'one small segment')
"

# requested and block bytes: trace_prog leak 1000 keeps a block of 2 MiB +
# 1000 bytes, 2 MiB + 1024 in the allocator's blocks. The summary gives the
# blocks' bytes, the requested ones (what memory_viz's stats print as
# total_allocated: the requested_size of the active_allocated blocks) and
# the difference; the pickle's blocks carry both
expect 0 "$cli" run --trace -o "$dir/odd.fst" -- "$prog" leak 1000
expect 0 "$cli" export --memviz --at end -o "$dir/odd.pickle" "$dir/odd.fst"
memviz_check "$dir/odd.pickle"
grep -q "device 0 at the end (.* s in): 7.0 MiB allocated in blocks (7.0 MiB requested, memory_viz's total_allocated, and 24 B of rounding), " \
    "$dir/err" || fail "the summary's requested and block bytes: $(cat "$dir/err")"
grep -q "; requested $((7 * MiB + 1000)) of active_allocated $((7 * MiB + 1024));" "$dir/check" ||
    fail "the pickle's requested and block bytes: $(cat "$dir/check")"
py "$dir/odd.pickle" "
odd = [b for b in blocks if b['state'] == 'active_allocated' and b['size'] == 2 * $MiB + 1024]
want(len(odd) == 1 and odd[0]['requested_size'] == 2 * $MiB + 1000, 'the odd block')
"

# threads allocating and freeing at once, every entry kept
expect 0 "$cli" export --memviz --at end --max-entries 0 -o "$dir/flood.pickle" "$dir/flood.fst"
memviz_check "$dir/flood.pickle"
grep -qE "; (1[6-9]|[2-9][0-9])[0-9]{3} trace entries" "$dir/check" || fail "flood: $(cat "$dir/check")"

# an OOM's snapshot file: the state it holds
expect 0 env FSDPSHIM_SIM_MEM=62M "$cli" run --trace -o "$dir/oom.fst" -- "$prog" oom
snap=$(ls "$dir"/fsdpshim-oom-*.fst)
expect 0 "$cli" export --memviz -o "$dir/snap.pickle" "$snap"
memviz_check "$dir/snap.pickle"
py "$dir/snap.pickle" "
want(sum(state('active_allocated')) == 18 * 3 * $MiB, 'the OOM snapshot live blocks')
want([e['action'] for e in trace] == ['oom'] and trace[0]['size'] == 3 * $MiB, 'the OOM entry')
"

# several traces: one pickle each, in a directory or by a pattern
mkdir "$dir/outdir"
expect 0 "$cli" export --memviz -o "$dir/outdir" "$dir/sites.fst" "$dir/leak.fst"
[ -s "$dir/outdir/sites.pickle" ] && [ -s "$dir/outdir/leak.pickle" ] || fail "-o DIR: $(ls "$dir/outdir")"
expect 0 "$cli" export --memviz -o "$dir/p-%p-%n.pickle" "$dir/sites.fst" "$dir/sites2.fst"
[ "$(ls "$dir"/p-*-sites.pickle "$dir"/p-*-sites2.pickle | wc -l)" -eq 2 ] || fail "-o PATTERN: $(ls "$dir")"
mkdir "$dir/copy"
cp "$dir/sites2.fst" "$dir/copy/sites.fst"
expect 1 "$cli" export --memviz -o "$dir/outdir" "$dir/sites.fst" "$dir/copy/sites.fst"
grep -q "would overwrite .*outdir/sites.pickle" "$dir/err" || fail "a name twice: $(cat "$dir/err")"
"$cli" export --memviz "$dir/sites.fst" >"$dir/stdout.pickle" 2>/dev/null || fail "memviz to stdout"
cmp -s "$dir/stdout.pickle" "$dir/sites.pickle" || fail "stdout and -o differ"

# ---- folded ----------------------------------------------------------------
# by frame: each SITE frame weighs its bytes at the peak, its bytes, its count
expect 0 "$cli" export --folded --by frame "$dir/sites.fst"
grep -qE "^alloc_in_forward at .*/trace_prog.c:$fwd 3145728$" "$dir/out" || fail "folded: $(cat "$dir/out")"
grep -qE "^alloc_in_backward at .*/trace_prog.c:$bwd 5242880$" "$dir/out" || fail "folded: $(cat "$dir/out")"
expect 0 "$cli" export --folded --by frame --weight count -o "$dir/count.folded" "$dir/sites.fst" "$dir/sites2.fst"
[ "$(grep -cE "^alloc_in_(forward|backward) at .*trace_prog.c:[0-9]+ 2$" "$dir/count.folded")" -eq 2 ] ||
    fail "two ranks by count: $(cat "$dir/count.folded")"
# by stack: outermost first, main before the inlined sites() before the SITE
expect 0 "$cli" export --folded "$dir/sites.fst"
grep -qE "main at [^;]*;sites at [^;]*\(inlined\);alloc_in_forward at [^;]*:$fwd 3145728$" "$dir/out" ||
    fail "folded stack: $(cat "$dir/out")"
# by annotation, ranks merged, total bytes
expect 0 "$cli" export --folded --by annotation --weight total "$dir/sites.fst" "$dir/sites2.fst"
[ "$(cat "$dir/out")" = "$(printf 'step 10485760\nstep;forward 6291456')" ] || fail "by annotation: $(cat "$dir/out")"
# the leak at its peak: the freed block weighs nothing and is left out
expect 0 "$cli" export --folded --by frame --no-symbols "$dir/leak.fst"
[ "$(wc -l <"$dir/out")" -eq 2 ] && grep -q "trace_prog+0x[0-9a-f]* 3145728$" "$dir/out" ||
    fail "leak folded: $(cat "$dir/out")"

# ---- chrome ----------------------------------------------------------------
expect 0 "$cli" export --chrome -o "$dir/sites.json" "$dir/sites.fst" "$dir/leak.fst"
python3 - "$dir/sites.json" <<'EOF' || fail "chrome JSON"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
procs = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
assert len(procs) == 2, procs
counters = [e for e in events if e["ph"] == "C" and e["name"] == "device 0 memory"]
assert {e["pid"] for e in counters} == procs, counters
assert max(e["args"]["allocated"] for e in counters) == 8 << 20, counters
assert max(e["args"]["reserved"] for e in counters) >= 22 << 20, counters
ranges = [(e["ph"], e["name"]) for e in events if e["ph"] in "BE"]
assert ranges == [("B", "step"), ("B", "forward"), ("E", ""), ("E", "")], ranges
assert any(e["ph"] == "i" and e["name"] == "after-forward" for e in events)
EOF
# every command counts a trace's events alike: dump's lines, report's
# figure, and what --chrome and --perfetto say they read (the threads' names
# that --chrome also writes are no events of the trace)
expect 0 "$cli" dump --no-stacks "$dir/flood.fst"
n=$(grep -vc '^#' "$dir/out")
expect 0 "$cli" report -n 0 "$dir/flood.fst"
grep -q "^  rank ?, $n events over" "$dir/out" || fail "report's count, not dump's $n: $(cat "$dir/out")"
for format in chrome perfetto; do
    expect 0 "$cli" export --$format -o "$dir/flood.$format" "$dir/flood.fst"
    grep -q "^fsdpshim export: 1 trace, $n events read, written to" "$dir/err" ||
        fail "--$format's count, not dump's $n: $(cat "$dir/err")"
done
expect 1 "$cli" export --chrome --limit 3 "$dir/sites.fst"
grep -q "perfetto" "$dir/err" || fail "--limit: $(cat "$dir/err")"

# ---- bad input -------------------------------------------------------------
expect 2 "$cli" export "$dir/sites.fst"
expect 2 "$cli" export --memviz --folded "$dir/sites.fst"
expect 2 "$cli" export --folded --at end "$dir/sites.fst"
grep -q "^fsdpshim export: --at is an option of --memviz, not of --folded" "$dir/err" || fail "$(cat "$dir/err")"
expect 2 "$cli" export --memviz --at soon "$dir/sites.fst"
expect 2 "$cli" export --memviz --max-entries -1 "$dir/sites.fst"
expect 2 "$cli" export --folded --weight heavy "$dir/sites.fst"
expect 2 "$cli" export --chrome --bogus "$dir/sites.fst"
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "not one line: $(cat "$dir/err")"
expect 2 "$cli" export --memviz -o "$dir/one.pickle" "$dir/sites.fst" "$dir/leak.fst"
expect 2 "$cli" export --memviz
expect 1 "$cli" export --folded "$dir/missing.fst"
echo "not a trace" >"$dir/text"
expect 1 "$cli" export --memviz -o "$dir/x.pickle" "$dir/text"
expect 1 "$cli" export --memviz -o "$dir/no/such/dir/x.pickle" "$dir/sites.fst"
# no readable trace (a directory, a text file): nothing written, not an empty
# file that looks like a result; a readable one beside them is still written
mkdir "$dir/adir"
for format in chrome perfetto memviz folded; do
    expect 1 "$cli" export --$format -o "$dir/none.out" "$dir/adir"
    [ ! -e "$dir/none.out" ] || fail "--$format of no readable trace wrote $(wc -c <"$dir/none.out") bytes"
    grep -q "adir: not a regular file" "$dir/err" || fail "--$format: the directory: $(cat "$dir/err")"
    grep -q "no readable trace; nothing written" "$dir/err" || fail "--$format: $(cat "$dir/err")"
done
expect 1 "$cli" export --perfetto -o "$dir/none.out" "$dir/adir" "$dir/text"
[ ! -e "$dir/none.out" ] || fail "--perfetto of two unreadable files wrote something"
[ "$(grep -c "text" "$dir/err")" -eq 1 ] || fail "the text file, named once: $(cat "$dir/err")"
expect 1 "$cli" export --chrome -o "$dir/some.json" "$dir/adir" "$dir/sites.fst"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$dir/some.json" || fail "the readable trace's JSON"
expect 0 "$cli" help export
grep -q "^usage: fsdpshim export --memviz|--folded|--chrome" "$dir/out" || fail "help: $(cat "$dir/out")"
echo "export_test: ok"
