#!/usr/bin/env bash
# perfetto_test.sh - `fsdpshim export --perfetto` read back with Perfetto's
# own protos: the Trace message compiled in the `perfetto` package from PyPI
# (its trace_processor binary cannot be had here), in a cached venv that
# scripts/perfetto_venv.sh makes once. perfetto_check.py checks what
# trace_processor relies on, then each export is held against what the
# programs did, read from `fsdpshim dump`: trace_prog (sites: NVTX ranges,
# known call sites) for its counters, ranges and the heap profile at its
# peak with the SITE frames and trace_prog's build id; coll_rate_limit for
# its streams, collectives and rate-limiter wait; minifsdp's two ranks, one
# process each on one clock, and as threads of one process on two devices;
# a trace given twice (one pid: two processes); frames without symbols;
# threads allocating at once without stacks; 20000 Python call sites live
# at once, a heap profile over several packets with Python frames merged in
# (perfetto_stacks.py); bad input.
#
#   perfetto_test.sh FSDPSHIM TRACE_PROG SIM_DIR COLL_RATE_LIMIT MINIFSDP
#
# Without the perfetto package the test fails, saying so; with
# FSDPSHIM_TEST_PERFETTO=0 it is skipped (exit 77).
name=perfetto_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"
coll=$4 minifsdp=$5
# a program that runs a Python file: py_embed, built like the shim (under
# TSan, the system's python3 is not instrumented and crashes), else python3
py=${6:-python3}
# the interpreter's own allocations outlive it: not the shim's leaks
[ -n "${ASAN_OPTIONS+x}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
fwd=$(grep -n SITE_FORWARD "$src" | cut -d: -f1)
bwd=$(grep -n SITE_BACKWARD "$src" | cut -d: -f1)

if [ "${FSDPSHIM_TEST_PERFETTO:-1}" = 0 ]; then
    echo "$name: skipped (FSDPSHIM_TEST_PERFETTO=0)"
    exit 77
fi
pf_python=$("$here/../../scripts/perfetto_venv.sh" 2>"$dir/venv") ||
    fail "the perfetto package from PyPI, whose protos read the export, could not be installed" \
        "(scripts/perfetto_venv.sh: $(tail -n 3 "$dir/venv")); FSDPSHIM_TEST_PERFETTO=0 skips this test"

expect 0 "$cli" run --trace -o "$dir/sites.fst" -- "$prog" sites
expect 0 "$cli" run --trace --conf ag_limit:2 -o "$dir/rl.fst" -- "$coll" 2 1048576 async limited
expect 0 "$cli" run --trace --conf trace:events -o "$dir/flood.fst" -- "$prog" flood 4 2000
expect 0 "$cli" run --trace --conf ag_limit:1 -o "$dir/mf-%r.fst" -- \
    "$minifsdp" --ranks 2 --layers 4 --numel 100000 --steps 2
expect 0 "$cli" run --trace -o "$dir/mft.fst" -- \
    "$minifsdp" --ranks 2 --threads --layers 4 --numel 100000 --steps 2
expect 0 "$cli" run --trace --conf trace:python -o "$dir/stacks.fst" -- "$py" "$here/perfetto_stacks.py"
for t in sites rl flood mf-0 mf-1 mft stacks; do
    "$cli" dump --no-stacks "$dir/$t.fst" >"$dir/$t.dump" || fail "dump $t"
done
build_id=$(readelf -n "$prog" | sed -n 's/^ *Build ID: //p')
[ -n "$build_id" ] || fail "trace_prog has no build id"

# check EXPORT: perfetto_check.py's structural checks
check() {
    "$pf_python" "$here/perfetto_check.py" "$1" >"$dir/check" 2>&1 || fail "perfetto_check: $(cat "$dir/check")"
}
# pf WHAT EXPORT DUMP CODE: runs CODE with m (the export as perfetto_check
# loads it), d (the dump's events: dicts of its fields, 'ns' the wall-clock
# time), pid and the helpers
pf() {
    PYTHONPATH=$here "$pf_python" - "$2" "$3" >"$dir/py" 2>&1 <<EOF || fail "$1: $(cat "$dir/py")"
import re, sys
import perfetto_check as c
m = c.load(sys.argv[1])
head = [l for l in open(sys.argv[2]) if l.startswith("# trace")][0]
base = int(re.search(r"clock_realtime_ns (\d+)", head).group(1))
pid = int(re.search(r"pid (\d+)", head).group(1))
d = []
for line in open(sys.argv[2]):
    if line.startswith("#"):
        continue
    f = line.split()
    ev = dict(kv.split("=", 1) for kv in f[2:] if "=" in kv)
    ev.update(t=f[0], kind=f[1], ns=base + int(f[0].replace(".", "")))
    d.append(ev)
MEMORY = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
          "segment_map", "segment_unmap", "oom")
def want(cond, what):
    if not cond:
        sys.exit(what)
def changes(values):
    """values with each repeat of the one before it left out"""
    return [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]
def values(track):
    return [v for _, v in track.values]
def thread_tracks(pname):
    return [t for t in m.tracks_of(pname) if not t.counter]
def streams(d):
    """per stream handle, its allocated and reserved bytes after each
    change (its blocks from alloc to free_requested, its segments), each
    starting at 0 when the other is first used"""
    live, now, series = {}, {}, {}
    def add(s, fig, delta):
        if s not in now:
            now[s] = {'allocated': 0, 'reserved': 0}
            series[s] = {f: [] if f == fig else [0] for f in now[s]}
        now[s][fig] += delta
        series[s][fig].append(now[s][fig])
    for e in sorted(d, key=lambda e: e['ns']):
        s, size = e.get('stream'), int(e.get('size', 0))
        if e['kind'] == 'alloc':
            live[e['addr']] = (s, size)
            add(s, 'allocated', size)
        elif e['kind'] == 'free_requested' and e['addr'] in live:
            s, size = live.pop(e['addr'])
            add(s, 'allocated', -size)
        elif e['kind'] in ('segment_alloc', 'segment_free'):
            add(s, 'reserved', size if e['kind'] == 'segment_alloc' else -size)
    return series
def check_streams(pname, d, device):
    series = streams(d)
    for s, figs in series.items():
        for fig, rec in figs.items():
            got = values(m.track(pname, f'device {device} stream {s} {fig}'))
            want(got == rec, f'stream {s} {fig}: {got}, recorded {rec}')
    return series
$4
EOF
}

# ---- trace_prog sites -------------------------------------------------------
expect 0 "$cli" export --perfetto -o "$dir/sites.pftrace" "$dir/sites.fst"
grep -q "device 0 peaked at 8.0 MiB allocated" "$dir/err" || fail "summary: $(cat "$dir/err")"
check "$dir/sites.pftrace"
pf "trace_prog sites" "$dir/sites.pftrace" "$dir/sites.dump" "
_, pname = m.process(f'pid {pid} on ')
names = sorted(t.name for t in m.tracks_of(pname) if t.counter)
want(names == ['device 0 allocated', 'device 0 reserved', 'device 0 stream 0x0 allocated',
               'device 0 stream 0x0 reserved'], f'counter tracks {names}')
# the device's counters: the totals every memory event carries, each change
mem = [e for e in d if e['kind'] in MEMORY]
for fig in ('allocated', 'reserved'):
    got, rec = values(m.track(pname, 'device 0 ' + fig)), changes([int(e[fig]) for e in mem])
    want(got == rec, f'device 0 {fig}: {got}, recorded {rec}')
    want([ts for ts, _ in m.track(pname, 'device 0 ' + fig).values][0] == mem[0]['ns'], 'times')
want(max(values(m.track(pname, 'device 0 allocated'))) == 8 << 20, 'the peak')
# the stream's: 3 MiB, then 5 more, then freed in order; one 20 MiB segment
want(values(m.track(pname, 'device 0 stream 0x0 allocated')) == [0, 3 << 20, 8 << 20, 5 << 20, 0],
     'stream 0x0 allocated')
want(values(m.track(pname, 'device 0 stream 0x0 reserved')) == [20 << 20], 'stream 0x0 reserved')
# the NVTX ranges on the thread, nested, the mark inside
(th,) = thread_tracks(pname)
want(th.name.endswith(f' {pid}'), f'thread track {th.name}')
want([(s[0], s[1]) for s in th.slices] == [('step', 'nvtx'), ('forward', 'nvtx')], f'{th.slices}')
step, fwd = th.slices
want(step[2] <= fwd[2] <= fwd[3] <= step[3], f'forward inside step: {th.slices}')
pop = [e for e in d if e['kind'] == 'annotation_pop']
want((fwd[3], step[3]) == (pop[0]['ns'], pop[1]['ns']), 'the ranges end at their pops')
((mark, cat, ts, _),) = th.instants
want((mark, cat) == ('after-forward', 'nvtx') and fwd[2] <= ts <= fwd[3], f'{th.instants}')
# the heap profile at the peak: both blocks, each at its SITE frame
prof = m.profile(pid)
peak = [e for e in d if e['kind'] == 'alloc' and int(e['allocated']) == 8 << 20][0]
want(prof.ts == peak['ns'], f'the dump at {prof.ts}, the peak at {peak[\"ns\"]}')
want(sum(s[2] for s in prof.samples) == 8 << 20, f'samples {prof.samples}')
by_site = {s[0][-1]: s for s in prof.samples}
for fn, line, size in (('alloc_in_forward', $fwd, 3 << 20), ('alloc_in_backward', $bwd, 5 << 20)):
    (frames, mapping, got, count), = [s for k, s in by_site.items()
                                      if re.fullmatch(f'{fn} at .*/trace_prog.c:{line}', k)]
    want((got, count) == (size, 1), f'{fn}: {got} bytes in {count}')
    want(any(f.startswith('main at ') for f in frames), f'{fn}: {frames}')
    want(mapping[0].endswith('/trace_prog') and mapping[1].hex() == '$build_id', f'{fn}: {mapping}')
"

# stdout when it is not a terminal: the same bytes
"$cli" export --perfetto "$dir/sites.fst" >"$dir/stdout.pftrace" 2>/dev/null || fail "to stdout"
cmp -s "$dir/stdout.pftrace" "$dir/sites.pftrace" || fail "stdout and -o differ"

# without symbols: the SITE frames as module+offset, in the same mapping
expect 0 "$cli" export --perfetto --no-symbols -o "$dir/nosym.pftrace" "$dir/sites.fst"
check "$dir/nosym.pftrace"
pf "no symbols" "$dir/nosym.pftrace" "$dir/sites.dump" "
prof = m.profile(pid)
want(sorted(s[2] for s in prof.samples) == [3 << 20, 5 << 20], f'{prof.samples}')
for frames, mapping, _, _ in prof.samples:
    want(re.fullmatch(r'.*/trace_prog\+0x[0-9a-f]+', frames[-1]), f'{frames}')
    want(mapping[1].hex() == '$build_id', f'{mapping}')
"

# ---- coll_rate_limit: streams, collectives, the limiter's wait ---------------
expect 0 "$cli" export --perfetto -o "$dir/rl.pftrace" "$dir/rl.fst"
check "$dir/rl.pftrace"
pf "coll_rate_limit" "$dir/rl.pftrace" "$dir/rl.dump" "
_, pname = m.process(f'rank 0 (pid {pid} on ')
# each stream's bytes, as the blocks and segments on it add up
series = check_streams(pname, d, 0)
want(len(series) == 2, f'the program allocates on two streams: {series}')
(th,) = thread_tracks(pname)
colls = [e for e in d if e['kind'] == 'collective']
got = [(n, cat, ts, a['bytes'], a['stream']) for n, cat, ts, a in th.instants]
rec = [('all_gather', 'collective', e['ns'], 1 << 20, int(e['stream'], 16)) for e in colls]
want(len(rec) == 3 and got == rec, f'collectives {got}, recorded {rec}')
((wname, cat, begin, end, args),) = th.slices
start, = [e for e in d if e['kind'] == 'ratelimit_wait_start']
stop, = [e for e in d if e['kind'] == 'ratelimit_wait_end']
want((wname, cat, begin, end) == ('rate-limiter wait', 'fsdpshim', start['ns'], stop['ns']),
     f'the wait {th.slices}')
want(end - begin > 5 * 10**8 and args['gathers_in_flight'] == 2, f'waited for the release: {args}')
peak = max(int(e['allocated']) for e in d if e['kind'] == 'alloc')
want(sum(s[2] for s in m.profile(pid).samples) == peak, 'the heap profile at the peak')
"

# ---- minifsdp's ranks: a process each, on one clock -------------------------
expect 0 "$cli" export --perfetto -o "$dir/mf.pftrace" "$dir/mf-0.fst" "$dir/mf-1.fst"
check "$dir/mf.pftrace"
for r in 0 1; do
    expect 0 "$cli" export --folded "$dir/mf-$r.fst"
    folded=$(awk '{ s += $NF } END { print s }' "$dir/out")
    pf "minifsdp rank $r" "$dir/mf.pftrace" "$dir/mf-$r.dump" "
_, pname = m.process(f'rank $r (pid {pid} on ')
dev = int([e for e in d if e['kind'] == 'alloc'][0]['dev'])
mem = sorted((e for e in d if e['kind'] in MEMORY), key=lambda e: e['ns'])
for fig in ('allocated', 'reserved'):
    track = m.track(pname, f'device {dev} {fig}')
    want(values(track) == changes([int(e[fig]) for e in mem]), f'device {dev} {fig}')
    want(track.values[0][0] == mem[0]['ns'], 'the rank on the wall clock')
series = check_streams(pname, d, dev)
want(len(series) == 3, f'three streams: {series}')
(th,) = thread_tracks(pname)
colls = [(e['op'], e['ns'], int(e['size'])) for e in d if e['kind'] == 'collective']
got = [(n, ts, a['bytes']) for n, cat, ts, a in th.instants if cat == 'collective']
want(got == colls and {c[0] for c in colls} == {'all_gather', 'reduce_scatter'}, f'{got}')
waits = [e['ns'] for e in d if e['kind'] in ('ratelimit_wait_start', 'ratelimit_wait_end')]
got = [ts for s in th.slices for ts in s[2:4]]
want(waits and got == waits and all(s[0] == 'rate-limiter wait' for s in th.slices), f'{th.slices}')
want(sum(s[2] for s in m.profile(pid).samples) == $folded, 'the heap profile is --folded\'s')
"
done

# two devices in one process: the rank's sums over them
expect 0 "$cli" export --perfetto -o "$dir/mft.pftrace" "$dir/mft.fst"
check "$dir/mft.pftrace"
expect 0 "$cli" export --folded "$dir/mft.fst"
folded=$(awk '{ s += $NF } END { print s }' "$dir/out")
pf "minifsdp threads" "$dir/mft.pftrace" "$dir/mft.dump" "
(pname,) = [name for _, name in m.processes.values()]
mem = sorted((e for e in d if e['kind'] in MEMORY), key=lambda e: e['ns'])
want({e['dev'] for e in mem} == {'0', '1'}, 'two devices')
for fig in ('allocated', 'reserved'):
    now, sums = {}, []
    for e in mem:
        if now.get(e['dev']) != int(e[fig]):
            now[e['dev']] = int(e[fig])
            sums.append(sum(now.values()))
    got = values(m.track(pname, f'all devices {fig}'))
    want(got == sums, f'all devices {fig}: {got}, recorded {sums}')
want(sum(s[2] for s in m.profile(pid).samples) == $folded, 'each device at its peak, as --folded')
"

# ---- several traces: one process each; a pid seen twice gets a stand-in ------
expect 0 "$cli" export --perfetto -o "$dir/two.pftrace" "$dir/sites.fst" "$dir/rl.fst" "$dir/sites.fst"
grep -q "3 traces, .* events read" "$dir/err" || fail "summary: $(cat "$dir/err")"
check "$dir/two.pftrace"
pf "three traces" "$dir/two.pftrace" "$dir/sites.dump" "
procs = list(m.processes.values())
sites = [p for p, name in procs if name.startswith(f'pid {pid} on ')]
want(len(procs) == 3 and sites == [pid, (1 << 22) + 2], f'{procs}')
(rl,) = [p for p, name in procs if name.startswith('rank 0 ')]
want([sum(s[2] for s in m.profile(p).samples) for p in sites + [rl]] == [8 << 20, 8 << 20, 3 << 20],
     'each process its heap profile')
"

# ---- threads allocating at once, no stacks: every change; the peak's live
# bytes as --folded (and `top`) weigh them: blocks whose free one thread
# requested while another allocated may still count in the allocator's total
expect 0 "$cli" export --perfetto -o "$dir/flood.pftrace" "$dir/flood.fst"
check "$dir/flood.pftrace"
expect 0 "$cli" export --folded "$dir/flood.fst"
folded=$(sed -n 's/^(no stack) //p' "$dir/out")
pf "flood" "$dir/flood.pftrace" "$dir/flood.dump" "
_, pname = m.process(f'pid {pid} on ')
mem = sorted(((e['ns'], int(e['allocated'])) for e in d if e['kind'] in MEMORY), key=lambda x: x[0])
got = values(m.track(pname, 'device 0 allocated'))
want(got == changes([a for _, a in mem]), 'device 0 allocated follows every event')
want(len([e for e in d if e['kind'] == 'alloc']) == 8000, 'the allocations')
(frames, _, size, count), = m.profile(pid).samples
want(frames == ['(no stack)'] and size == int('$folded'), f'{frames} {size} {count}, folded $folded')
want(0 < size <= max(a for _, a in mem), f'{size} live at the peak')
"

# ---- 20000 Python sites at the peak: a profile in several packets ------------
expect 0 "$cli" export --perfetto -o "$dir/stacks.pftrace" "$dir/stacks.fst"
check "$dir/stacks.pftrace"
pf "20000 Python sites" "$dir/stacks.pftrace" "$dir/stacks.dump" "
prof = m.profile(pid)
want(prof.packets > 1 and len(prof.samples) == 20000, f'{prof.packets} packets, {len(prof.samples)}')
want(sum(s[2] for s in prof.samples) == max(int(e['allocated']) for e in d if e['kind'] == 'alloc'),
     'all live at the peak')
seen = set()
for frames, mapping, size, count in prof.samples:
    (i,) = [int(f.rsplit('_', 1)[1]) for f in frames if f.startswith('perfetto_sites.py:')]
    want(f'perfetto_sites.py:{2 * i + 2}:site_{i}' in frames and (size, count) == (512 * (i % 7 + 1), 1),
         f'site_{i}: {size} {count} {frames}')
    seen.add(i)
    # outermost first: the interpreter's native frames, the Python frames
    # from the script's module down to alloc, then ctypes' native ones
    py = [k for k, f in enumerate(frames) if '.py:' in f]
    want(py == list(range(py[0], py[-1] + 1)) and 0 < py[0] and py[-1] < len(frames) - 1, f'{frames}')
    want(frames[py[0]].endswith(':<module>') and frames[py[-1]].endswith(':alloc'), f'{frames}')
    want(mapping[0] != '[python]', f'the innermost frame is native: {mapping}')
want(seen == set(range(20000)), 'every site')
"

# ---- bad input ---------------------------------------------------------------
expect 2 "$cli" export --perfetto --limit 5 "$dir/sites.fst"
grep -q "^fsdpshim export: --limit is an option of --chrome, not of --perfetto" "$dir/err" || fail "$(cat "$dir/err")"
expect 2 "$cli" export --perfetto --chrome "$dir/sites.fst"
expect 2 "$cli" export --perfetto
# a trace that cannot be read is named; the others are written
echo "not a trace" >"$dir/text"
expect 1 "$cli" export --perfetto -o "$dir/part.pftrace" "$dir/text" "$dir/sites.fst"
grep -q "text" "$dir/err" || fail "the bad trace is named: $(cat "$dir/err")"
check "$dir/part.pftrace"
grep -q "^pid .*: pid .*, 4 counter tracks, 2 slices, 1 instants$" "$dir/check" || fail "$(cat "$dir/check")"
expect 1 "$cli" export --perfetto -o "$dir/no/such/dir/x.pftrace" "$dir/sites.fst"
expect 0 "$cli" export --help
grep -q -- "--perfetto" "$dir/out" || fail "help: $(cat "$dir/out")"
echo "perfetto_test: ok"
