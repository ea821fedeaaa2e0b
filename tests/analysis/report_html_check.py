#!/usr/bin/env python3
"""report_html_check.py - checks a page of `fsdpshim report --html` against
the text `fsdpshim report` printed for the same traces (report_html_test.sh).

    report_html_check.py PAGE TEXT [--charts N] [--stream-curves N]
                         [--ranges NAME,...] [--undrawn NAME,...] [--collectives] [--waits]
                         [--ooms N]
                         [--held-back]
                         [--title-has TEXT]... [--max-bytes N]

- the page parses as XML (strictly: every element closed, every entity
  known) and as HTML with html.parser, to the same elements;
- it is self-contained: no script, no stylesheet, image or frame loaded from
  anywhere, every link an anchor of the page itself;
- the timeline has N charts (one per rank and device), each with the
  device's reserved and allocated areas and at least the given number of
  stream curves, every path at most two points per pixel column, and the
  allocated area reaching the peak's mark: downsampling lost no peak;
- the Peaks table holds, row for row, the peaks the text printed (per trace
  and device, then the totals), and the allocations;
- the named NVTX ranges, collectives, rate-limiter waits (--waits) and
  out-of-memory marks are drawn, the --undrawn ranges (deeper than the
  lanes) are not;
- --held-back: every trace held frees back for their streams;
- --title-has: a tooltip holds TEXT as text (what a trace's hostile string
  must stay: escaped, never markup).
"""
import argparse
import re
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

SVG = "{http://www.w3.org/2000/svg}"
COLUMNS = 1072  # report_svg.c: one column per pixel
PLOT_X = 104  # report_svg.c: the plot's left edge


def fail(what):
    sys.exit(f"report_html_check: {what}")


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)


def local(tag):
    return tag.split("}")[-1]


def text_of(e):
    return "".join(e.itertext())


def text_peaks(text):
    """[(who, device, peak allocated, at, reserved then, peak reserved, allocations)] in the
    order the text printed them: per trace, then the totals"""
    rows, who, pid, cur = [], None, None, {}
    for line in text.splitlines():
        m = re.match(r"^(\S.*): pid (\d+) on ", line)
        if m:
            pid = m.group(2)
            continue
        m = re.match(r"^  rank (\S+), ", line)
        if m:
            who = f"rank {m.group(1)}" if m.group(1) != "?" else f"pid {pid}"
            continue
        if line.startswith("all ") and " traces" in line:
            who = line.split(" (")[0]
            continue
        m = re.match(r"^  device (\d+): peak allocated (.+) at ([0-9.]+) s, with (.+) reserved then",
                     line)
        if m:
            cur = {"device": m.group(1), "alloc": m.group(2), "at": m.group(3),
                   "then": m.group(4), "who": who}
            continue
        m = re.match(r"^  device (\d+): peak reserved (.+) at ([0-9.]+) s$", line)
        if m:
            cur["reserved"] = m.group(2)
            continue
        m = re.match(r"^  device (\d+): (\d+) allocations ", line)
        if m:
            cur["allocs"] = m.group(2)
            rows.append(cur)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("text")
    ap.add_argument("--charts", type=int)
    ap.add_argument("--stream-curves", type=int, default=0)
    ap.add_argument("--ranges", default="")
    ap.add_argument("--undrawn", default="")
    ap.add_argument("--collectives", action="store_true")
    ap.add_argument("--ooms", type=int)
    ap.add_argument("--held-back", action="store_true")
    ap.add_argument("--waits", action="store_true")
    ap.add_argument("--title-has", action="append", default=[])
    ap.add_argument("--max-bytes", type=int)
    ap.add_argument("--starts-at", help="seconds (3 decimals): where every chart must start")
    a = ap.parse_args()

    raw = open(a.page, "rb").read()
    if a.max_bytes and len(raw) > a.max_bytes:
        fail(f"{len(raw)} bytes, more than {a.max_bytes}")
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as e:
        fail(f"not well-formed: {e}")
    html = raw.decode("utf-8")  # strict: a trace's stray bytes must not reach the page
    parsed = Tags()
    parsed.feed(html)
    parsed.close()
    elements = [local(e.tag) for e in root.iter()]
    if parsed.tags != elements:
        fail("html.parser and the XML parser disagree on the elements")

    # self-contained
    for e in root.iter():
        tag = local(e.tag)
        if tag in ("script", "link", "img", "iframe", "object", "embed", "image", "use",
                   "foreignObject", "base", "form"):
            fail(f"a <{tag}> element")
        for k, v in e.attrib.items():
            k = local(k)
            if k in ("src", "srcset", "action", "data") or k.startswith("on"):
                fail(f"<{tag} {k}=...>")
            if k == "href" and not v.startswith("#"):
                fail(f"a link out of the page: {v}")
            if k == "style" and ("url(" in v or "@import" in v):
                fail(f"a style that loads something: {v}")
    for style in root.iter("style"):
        if "url(" in style.text or "@import" in style.text:
            fail("the style sheet loads something")

    # the charts
    body = root.find("body")
    charts, heading = [], None
    for e in body.iter():
        if local(e.tag) == "h3" and e.get("id", "").startswith("chart-"):
            heading = e.get("id")
        elif e.tag == SVG + "svg" and heading:
            charts.append((heading, e))
            heading = None
    per_rank = [c for c in charts if c[0] != "chart-all"]
    if a.charts is not None and len(per_rank) != a.charts:
        fail(f"{len(per_rank)} charts, not {a.charts}: {[c[0] for c in charts]}")
    for name, svg in charts:
        paths = list(svg.iter(SVG + "path"))
        for p in paths:
            points = len(re.findall(r"[ML]", p.get("d")))
            if points > 2 * COLUMNS + 4:
                fail(f"{name}: a path of {points} points")
        if len(list(svg.iter())) > 8 * COLUMNS:
            fail(f"{name}: {len(list(svg.iter()))} elements")
        if name == "chart-all":
            continue
        classes = [p.get("class") for p in paths]
        if "reserved" not in classes or "allocated" not in classes:
            fail(f"{name}: no reserved or allocated area: {classes}")
        curves = [p for p in paths if p.get("style")]
        if len(curves) < 2 * a.stream_curves:
            fail(f"{name}: {len(curves)} stream curves, fewer than 2 x {a.stream_curves}")
        for p in paths:
            if p.find(SVG + "title") is None:
                fail(f"{name}: a curve without a tooltip")
        if a.starts_at:
            # the chart starts at the first allocation: the device's reserved
            # area begins at the plot's left edge, and the axis says where
            # time 0 is and where the chart starts
            reserved = [p for p in paths if p.get("class") == "reserved"][0]
            first_x = int(re.match(r"M(-?\d+) ", reserved.get("d")).group(1))
            if first_x > PLOT_X + 1:
                fail(f"{name}: the reserved area begins at x {first_x}, not at the plot's left "
                     f"edge {PLOT_X}")
            captions = [text_of(t) for t in svg.iter(SVG + "text") if t.get("class") == "caption"]
            if not captions or "0 s: the first CUDA call traced" not in captions[0] or \
                    not captions[0].endswith(f"the chart starts at the first allocation or free, "
                                             f"{a.starts_at} s"):
                fail(f"{name}: the axis' caption: {captions}")
        peak = [c for c in svg.iter(SVG + "circle") if c.get("class") == "peak"]
        area = [p for p in paths if p.get("class") == "allocated"][0]
        top = min(int(y) for y in re.findall(r"[ML]-?\d+ (-?\d+)", area.get("d")))
        if peak and top != int(peak[0].get("cy")):
            fail(f"{name}: the allocated area's top is at y {top}, the peak's mark at "
                 f"{peak[0].get('cy')}")

    titles = [text_of(t) for t in root.iter(SVG + "title")]
    drawn = {t.split("\n")[0].split("/")[-1] for t in titles}
    for want in filter(None, a.ranges.split(",")):
        if want not in drawn:
            fail(f"no NVTX range {want!r} drawn: {titles}")
    for deep in filter(None, a.undrawn.split(",")):
        if deep in drawn:
            fail(f"NVTX range {deep!r} drawn, deeper than the lanes")
    if a.collectives and not any(re.match(r"\d+ collectives?, ", t) for t in titles):
        fail("no collective drawn")
    if a.waits and not any(t.startswith("rate-limiter wait\n") for t in titles):
        fail("no rate-limiter wait drawn")
    if a.ooms is not None:
        marks = [e for e in root.iter(SVG + "line") if e.get("class") == "oom"]
        if len(marks) != a.ooms:
            fail(f"{len(marks)} out-of-memory marks, not {a.ooms}")
    for want in a.title_has:
        if not any(want in t for t in titles) and not any(want in text_of(e) for e in
                                                           root.iter("td")):
            fail(f"{want!r} is not in the page as text")

    # the Peaks table against the text
    tables = {}
    h2 = None
    for e in body:
        if local(e.tag) == "h2":
            h2 = e.get("id")
        elif local(e.tag) == "table" and h2 not in tables:
            tables[h2] = e
    def rows_of(table):
        rows = [[text_of(td) for td in tr.findall("td")] for tr in tables[table].findall("tr")]
        return [r for r in rows if r]

    if a.held_back:
        for r in rows_of("deferred"):
            if int(r[1]) == 0:
                fail(f"{r[0]} held no free back: {r}")
    rows = rows_of("peaks")
    want = text_peaks(open(a.text).read())
    if len(rows) != len(want):
        fail(f"{len(rows)} rows of peaks, the text has {len(want)}: {rows} {want}")
    for got, w in zip(rows, want):
        # trace, device, peak allocated, at, reserved then, free, overhead, peak reserved, at,
        # allocations, ...
        if got[0] != w["who"]:
            fail(f"row {got}: not {w['who']}")
        if (got[1], got[2], got[3], got[4], got[7], got[9]) != (
                w["device"], w["alloc"], w["at"], w["then"], w["reserved"], w["allocs"]):
            fail(f"peaks row {got} differs from the text's {w}")
    print(f"report_html_check: {a.page}: ok ({len(charts)} charts, {len(rows)} rows of peaks, "
          f"{len(raw)} bytes)")


main()
