#!/usr/bin/env bash
# report_html_render_test.sh - pages of `fsdpshim report --html` rendered by
# headless Chromium (Debian's chromium, which scripts/deps.sh installs):
# minifsdp's two ranks and a trace whose range names are markup
# (report_html_prog) load from disk with no console message (a script
# error, an SVG attribute Chromium cannot parse), keep their charts in the
# rendered DOM and run no script; a screenshot of the first is a PNG of the
# window's size that is not blank. A canary page first proves that a
# console error would be seen. Skips (77) only when chromium is missing.
#
#   report_html_render_test.sh FSDPSHIM TRACE_PROG SIM_DIR MINIFSDP REPORT_HTML_PROG
name=report_html_render_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"
minifsdp=$4 ranges_prog=$5
if ! command -v chromium >/dev/null; then
    echo "$name: SKIP: chromium is not installed (scripts/deps.sh installs Debian's chromium;" \
        "it could not be installed here)"
    exit 77
fi

expect 0 "$cli" run --trace --conf ag_limit:1 -o "$dir/mf-%r.fst" -- \
    "$minifsdp" --ranks 2 --layers 4 --numel 100000 --steps 2
expect 0 "$cli" report --html "$dir/mf.html" "$dir/mf-0.fst" "$dir/mf-1.fst"
expect 0 "$cli" run --trace -o "$dir/hostile.fst" -- "$ranges_prog"
expect 0 "$cli" report --html "$dir/hostile.html" "$dir/hostile.fst"

# chrome ARG...: headless, no sandbox (tests may run as root), its profile
# in the scratch directory, the console on stderr
chrome() {
    chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$dir/profile" \
        --enable-logging=stderr --v=0 "$@"
}
render() {
    chrome --dump-dom "file://$1" >"$dir/dom" 2>"$dir/log" || fail "chromium on $1: $(cat "$dir/log")"
    if grep -E 'CONSOLE|Uncaught' "$dir/log" >"$dir/console"; then
        fail "console messages rendering $1: $(cat "$dir/console")"
    fi
}

printf '<!DOCTYPE html><html><body><script>console.error("canary")</script></body></html>\n' \
    >"$dir/canary.html"
chrome --dump-dom "file://$dir/canary.html" >"$dir/dom" 2>"$dir/log" || fail "chromium: $(cat "$dir/log")"
grep -q 'CONSOLE.*canary' "$dir/log" ||
    fail "chromium reports no console message on stderr: an error in a page would go unseen"

render "$dir/mf.html"
[ "$(grep -c '<svg' "$dir/dom")" -eq 3 ] || fail "the rendered page has not its 3 charts"
grep -q '<h2 id="peaks">' "$dir/dom" || fail "the rendered page has no tables"
render "$dir/hostile.html"
grep -q '<script' "$dir/dom" && fail "a range's name became a script: $(grep '<script' "$dir/dom")"
grep -qF '&lt;/title&gt;&lt;/svg&gt;&lt;script&gt;alert(1)&lt;/script&gt;' "$dir/dom" ||
    fail "the range's name is not shown as text"

chrome --screenshot="$dir/mf.png" --window-size=1400,2000 --hide-scrollbars "file://$dir/mf.html" \
    >"$dir/out" 2>"$dir/log" || fail "chromium --screenshot: $(cat "$dir/log")"
python3 - "$dir/mf.png" <<'PY' || fail "the screenshot"
import struct, sys
png = open(sys.argv[1], "rb").read()
if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
    sys.exit("not a PNG")
width, height = struct.unpack(">II", png[16:24])
if (width, height) != (1400, 2000):
    sys.exit(f"{width}x{height}, not the window's 1400x2000")
if len(png) < 40000:  # a blank or nearly blank page compresses to a few KiB
    sys.exit(f"{len(png)} bytes: blank?")
PY
echo "$name: ok"
