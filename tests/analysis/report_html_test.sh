#!/usr/bin/env bash
# report_html_test.sh - `fsdpshim report --html`: pages of traces of known
# programs, parsed strictly and checked against the text report of the same
# traces (report_html_check.py): minifsdp's two ranks (three streams each,
# all-gathers and reduce-scatters, frees held back for their streams,
# rate-limiter waits under ag_limit:1), trace_prog sites (NVTX ranges) with
# trace_prog oom (an out-of-memory
# event on a 62 MiB simulated device, where no segment of any size fits
# after the third, with its cause as the text explains it), trace_prog leak (the blocks live at
# exit by site), report_html_prog (NVTX range names and a trace file name
# that are markup and bytes that are not UTF-8; ranges nested deeper than
# the lanes; with `late`, a chart that starts at its first allocation, not
# at the stream it created 300 ms before), and 400000 events whose page
# stays small. The text is the same
# with and without --html.
#
#   report_html_test.sh FSDPSHIM TRACE_PROG SIM_DIR MINIFSDP REPORT_HTML_PROG
name=report_html_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"
minifsdp=$4 ranges_prog=$5
check=$here/report_html_check.py

expect 0 "$cli" run --trace --conf ag_limit:1 -o "$dir/mf-%r.fst" -- \
    "$minifsdp" --ranks 2 --layers 4 --numel 100000 --steps 2
expect 0 "$cli" run --trace -o "$dir/sites.fst" -- "$prog" sites
FSDPSHIM_SIM_MEM=62M FSDPSHIM_OOM_DIR=$dir expect 0 "$cli" run --trace -o "$dir/oom.fst" -- "$prog" oom
expect 0 "$cli" run --trace -o "$dir/leak.fst" -- "$prog" leak
hostile_trace="$dir/<b>x&y'.fst"
expect 0 "$cli" run --trace -o "$hostile_trace" -- "$ranges_prog"
expect 0 "$cli" run --trace --conf trace:events -o "$dir/flood.fst" -- "$prog" flood 2 100000

# page PAGE [OPTION...] TRACE...: writes the page; the text, in $dir/text,
# is the same as without --html
page() {
    local out=$1
    shift
    expect 0 "$cli" report "$@"
    cp "$dir/out" "$dir/text"
    expect 0 "$cli" report --html "$out" "$@"
    cmp -s "$dir/out" "$dir/text" || fail "--html changed the text: $(diff "$dir/text" "$dir/out")"
    grep -qxF "fsdpshim report: the page is $out" "$dir/err" ||
        fail "the page's path is not named: $(cat "$dir/err")"
}
page_check() { python3 "$check" "$@" >"$dir/check" 2>&1 || fail "$(cat "$dir/check")"; }

page "$dir/mf.html" "$dir/mf-0.fst" "$dir/mf-1.fst"
# minifsdp frees each gathered parameter with uses on the compute stream:
# the allocator holds those frees back
page_check "$dir/mf.html" "$dir/text" --charts 2 --stream-curves 3 --collectives --waits --ooms 0 \
    --held-back
grep -q '<h3 id="chart-all">' "$dir/mf.html" || fail "two ranks but no chart of them all"

page "$dir/so.html" --by frame "$dir/sites.fst" "$dir/oom.fst"
page_check "$dir/so.html" "$dir/text" --charts 2 --stream-curves 1 --ranges step,forward --ooms 1
# the why column: the cause the text's explanation gives, as HTML text
why=$(grep -m1 '^    why: ' "$dir/text" | sed "s/^    why: //; s/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g; s/'/\&#39;/g; s/\"/\&quot;/g")
[ -n "$why" ] || fail "the text explains no OOM: $(cat "$dir/text")"
grep -qF "<td>$why</td></tr>" "$dir/so.html" ||
    fail "the OOMs' why is not the text's ($why): $(grep -A6 'id="ooms"' "$dir/so.html")"

page "$dir/leak.html" --by frame "$dir/leak.fst"
page_check "$dir/leak.html" "$dir/text" --charts 1
grep -q '^<p>3 blocks, 7.0 MiB, still allocated when the trace ended; ' "$dir/leak.html" ||
    fail "the blocks live at exit: $(grep -A2 'id="leaks"' "$dir/leak.html")"
grep -q '<td class="n" data-bytes="4194304">4.0 MiB</td><td class="n">1</td><td><pre>keep_forever at .*trace_prog.c' \
    "$dir/leak.html" || fail "keep_forever's leak: $(grep -A8 'id="leaks"' "$dir/leak.html")"
grep -q '<td class="n" data-bytes="3145728">3.0 MiB</td><td class="n">2</td><td><pre>leak_site at ' \
    "$dir/leak.html" || fail "leak_site's leaks: $(grep -A8 'id="leaks"' "$dir/leak.html")"

page "$dir/hostile.html" "$hostile_trace"
page_check "$dir/hostile.html" "$dir/text" --charts 1 --ranges step,layer,block,attention \
    --undrawn softmax \
    --title-has '</title></svg><script>alert(1)</script>&amp;"'"'" \
    --title-has $'bad \xef\xbf\xbd\xef\xbf\xbd utf-8 \xef\xbf\xbd\xef\xbf\xbd[31m' \
    --title-has "<b>x&y'.fst"

page "$dir/flood.html" -n 2 "$dir/flood.fst"
page_check "$dir/flood.html" "$dir/text" --charts 1 --stream-curves 1 --max-bytes 100000

# a job that creates a stream 300 ms before its first allocation: the
# chart starts at the first allocation, at the time dump gives it, not at
# the trace's start (the first CUDA call), and its axis says both
expect 0 "$cli" run --trace -o "$dir/late.fst" -- "$ranges_prog" late
expect 0 "$cli" dump --no-stacks "$dir/late.fst"
first=$(awk '$2 == "segment_alloc" || $2 == "alloc" {printf "%.3f", $1; exit}' "$dir/out")
awk -v f="$first" 'BEGIN {exit !(f >= 0.3)}' || fail "the first allocation at $first s, not 0.3 s in"
page "$dir/late.html" "$dir/late.fst"
page_check "$dir/late.html" "$dir/text" --charts 1 --starts-at "$first"
# its stream never allocated: counted under the table of streams, not a row
grep -q '^<p class="note">1 more stream (created, or seen, but never allocated on and never reserved for) not listed.</p>$' \
    "$dir/late.html" || fail "the idle stream: $(grep -A3 'never allocated' "$dir/late.html")"

# the words (issue 31, item 14): one site and one leaking site in the
# singular, as the text has them; figures with their units in the headers;
# no allocator jargon left unexplained
page "$dir/one.html" -n 1 --by frame "$dir/leak.fst"
grep -q '^<h3>pid [0-9]*: the site (by frame) that held the most at the peak</h3>$' "$dir/one.html" ||
    fail "one site: $(grep '<h3>' "$dir/one.html")"
grep -q '^<p>3 blocks, 7.0 MiB, still allocated when the trace ended; the site that held the most:</p>$' \
    "$dir/one.html" || fail "one leaking site: $(grep 'still allocated when' "$dir/one.html")"
for header in "the cache's overhead (% of allocated)" "time span (s)" "total wait (ms)" \
    "longest wait (ms)" "allocated when the trace ended" "segments released"; do
    grep -qF "<th>$header</th>" "$dir/one.html" || fail "no header '$header'"
done
for jargon in "legacy stream" "its pool's reserved" "handed out again" "had passed them" \
    "seen created" "dropped by the writer" "the 1 sites"; do
    ! grep -qF "$jargon" "$dir/one.html" "$dir/mf.html" || fail "the page says '$jargon'"
done

# without sites (-n 0) the tables of sites say so
page "$dir/nosites.html" -n 0 "$dir/sites.fst"
page_check "$dir/nosites.html" "$dir/text" --charts 1
grep -q 'Not read (-n 0)' "$dir/nosites.html" || fail "-n 0 and tables of sites"

# a page that cannot be written: said before anything is read
expect 1 "$cli" report --html "$dir/missing/page.html" "$dir/sites.fst"
[ -s "$dir/out" ] && fail "a report printed though its page cannot be written"
grep -q "cannot write $dir/missing/page.html" "$dir/err" || fail "no message: $(cat "$dir/err")"
expect 2 "$cli" report "$dir/sites.fst" --html
expect 0 "$cli" report --help
grep -q -- "--html FILE" "$dir/out" || fail "--help does not say --html"
echo "report_html_test: ok"
