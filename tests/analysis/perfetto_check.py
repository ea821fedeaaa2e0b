"""perfetto_check.py - reads a file of `fsdpshim export --perfetto` with the
Trace message that the `perfetto` package on PyPI compiles from Perfetto's
protos (scripts/perfetto_venv.sh installs it), and checks what
trace_processor relies on, whose binary cannot be had here:

    perfetto_check.py TRACE

- it parses as perfetto.protos.Trace, and no field is unknown to it;
- a clock snapshot comes first and relates boot time (the packets' clock)
  and the coarse monotonic clock (the heap dumps');
- every packet has a trusted_packet_sequence_id; each sequence's first
  packet clears its incremental state, and a packet that uses interned
  names says it needs it; each interned name is defined before its use;
- every track event names a track described before it; counters go on
  counter tracks, slices and instants on other tracks, each described once;
  slice ends match begins on each track;
- each heap profile's packets are numbered from 0 on their sequence and
  end with one that is not `continued`; its mappings name strings, its
  frames mappings and strings, its callstacks frames, its samples
  callstacks; its dumps name a process described on an event sequence.

load(TRACE) returns the model the analyzer's test asserts on (processes,
their tracks' values, slices and instants, the heap profiles with frame
names); the command prints a summary and exits 1 with the first problem.
"""
import sys

from google.protobuf.unknown_fields import UnknownFieldSet
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

P = pb.TracePacket
TE = pb.TrackEvent
BOOTTIME, MONOTONIC_COARSE = 6, 4


class Problem(Exception):
    pass


def need(cond, what):
    if not cond:
        raise Problem(what)


def no_unknown_fields(msg, where):
    """Fields the compiled protos do not know: a wrong field number."""
    unknown = [f.field_number for f in UnknownFieldSet(msg)]
    need(not unknown, f"{where}: unknown fields {unknown}")
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        for i, sub in enumerate(value if field.is_repeated else [value]):
            no_unknown_fields(sub, f"{where}.{field.name}[{i}]")


class Track:
    def __init__(self, uuid, name, parent, counter, pid, pname):
        self.uuid, self.name, self.parent, self.counter = uuid, name, parent, counter
        self.pid, self.pname = pid, pname
        self.values = []    # counters: (ts, value)
        self.slices = []    # [name, category, begin ts, end ts or None, args]
        self.instants = []  # (name, category, ts, args)
        self.open = []      # slices begun and not ended


class Profile:
    def __init__(self, pid):
        self.pid, self.ts, self.heap = pid, None, None
        self.packets = 0
        self.samples = []  # (frame names outermost first, mapping of the innermost, bytes, count)


class Model:
    def __init__(self):
        self.tracks = {}    # uuid -> Track
        self.processes = {}  # uuid -> (pid, name)
        self.profiles = []
        self.packets = 0

    def process(self, prefix):
        """The (pid, name) of the one process whose name starts with prefix."""
        found = [v for v in self.processes.values() if v[1].startswith(prefix)]
        need(len(found) == 1, f"processes named {prefix!r}: {found}")
        return found[0]

    def track(self, pname, name):
        found = [t for t in self.tracks.values() if t.pname == pname and t.name == name]
        need(len(found) == 1, f"tracks {name!r} of {pname!r}: {len(found)} "
             f"(there are {sorted(t.name for t in self.tracks.values() if t.pname == pname)})")
        return found[0]

    def tracks_of(self, pname):
        return [t for t in self.tracks.values() if t.pname == pname]

    def profile(self, pid):
        found = [p for p in self.profiles if p.pid == pid]
        need(len(found) == 1, f"heap profiles of pid {pid}: {len(found)}")
        return found[0]


def resolve(table, iid, what):
    need(iid in table, f"{what} {iid} not defined before its use")
    return table[iid]


def load(path):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    no_unknown_fields(trace, "Trace")
    m = Model()
    seqs = {}      # sequence -> interned tables, or "profile" state
    profiles = {}  # sequence -> profile being read
    need(trace.packet and trace.packet[0].HasField("clock_snapshot"), "no clock snapshot first")
    clocks = {c.clock_id: c.timestamp for c in trace.packet[0].clock_snapshot.clocks}
    need(BOOTTIME in clocks and MONOTONIC_COARSE in clocks, f"clock snapshot {clocks}")
    span = [None, None]  # the packets' first and last time
    for n, p in enumerate(trace.packet):
        where = f"packet {n}"
        m.packets += 1
        need(p.HasField("trusted_packet_sequence_id"), f"{where}: no sequence id")
        seq = p.trusted_packet_sequence_id
        if seq not in seqs:
            need(n == 0 or p.sequence_flags & P.SEQ_INCREMENTAL_STATE_CLEARED,
                 f"{where}: sequence {seq} starts without clearing its state")
            seqs[seq] = {"names": {}, "cats": {}, "args": {}}
        interned = seqs[seq]
        if p.HasField("interned_data"):
            d = p.interned_data
            for table, entries in (("names", d.event_names), ("cats", d.event_categories),
                                   ("args", d.debug_annotation_names)):
                for e in entries:
                    need(e.iid and e.iid not in interned[table], f"{where}: {table} iid {e.iid} again")
                    interned[table][e.iid] = e.name
        if p.HasField("timestamp"):
            span = [min(span[0] or p.timestamp, p.timestamp), max(span[1] or 0, p.timestamp)]
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            need(d.uuid not in m.tracks and d.uuid not in m.processes, f"{where}: track {d.uuid} again")
            if d.HasField("process"):
                m.processes[d.uuid] = (d.process.pid, d.process.process_name)
                continue
            parent = resolve(m.processes, d.parent_uuid, f"{where}: parent track")
            m.tracks[d.uuid] = Track(d.uuid, d.name, d.parent_uuid, d.HasField("counter"), *parent)
        elif p.HasField("track_event"):
            e = p.track_event
            need(p.HasField("timestamp"), f"{where}: an event without a time")
            t = resolve(m.tracks, e.track_uuid, f"{where}: track")
            if e.HasField("name_iid") or e.category_iids or any(a.HasField("name_iid") for a in e.debug_annotations):
                need(p.sequence_flags & P.SEQ_NEEDS_INCREMENTAL_STATE,
                     f"{where}: interned names used without SEQ_NEEDS_INCREMENTAL_STATE")
            name = resolve(interned["names"], e.name_iid, f"{where}: event name") if e.name_iid else None
            cats = [resolve(interned["cats"], c, f"{where}: category") for c in e.category_iids]
            args = {}
            for a in e.debug_annotations:
                key = resolve(interned["args"], a.name_iid, f"{where}: argument name")
                args[key] = getattr(a, a.WhichOneof("value"))
            cat = cats[0] if cats else None
            if e.type == TE.TYPE_COUNTER:
                need(t.counter, f"{where}: a counter on {t.name!r}, not a counter track")
                t.values.append((p.timestamp, e.counter_value))
                continue
            need(not t.counter, f"{where}: a slice or an instant on counter track {t.name!r}")
            if e.type == TE.TYPE_SLICE_BEGIN:
                need(name, f"{where}: a slice without a name")
                s = [name, cat, p.timestamp, None, args]
                t.slices.append(s)
                t.open.append(s)
            elif e.type == TE.TYPE_SLICE_END:
                need(t.open, f"{where}: a slice ends on {t.name!r} where none is open")
                s = t.open.pop()
                need(p.timestamp >= s[2], f"{where}: {s[0]} ends before it begins")
                s[3] = p.timestamp
            else:
                need(e.type == TE.TYPE_INSTANT and name, f"{where}: event type {e.type}")
                t.instants.append((name, cat, p.timestamp, args))
        elif p.HasField("profile_packet"):
            read_profile(m, profiles, seq, p.profile_packet, where)
    for seq, state in profiles.items():
        need(state["done"], f"sequence {seq}: its heap profile's last packet is `continued`")
    pids = {pid for pid, _ in m.processes.values()}
    for prof in m.profiles:
        need(prof.pid in pids, f"heap profile of pid {prof.pid}: no such process")
        # a dump's time is on the coarse monotonic clock, the packets' on boot time
        ts = prof.ts + clocks[BOOTTIME] - clocks[MONOTONIC_COARSE]
        need(span[0] <= ts <= span[1], f"heap profile of pid {prof.pid}: at {ts}, outside {span}")
        prof.ts = ts
    return m


def read_profile(m, profiles, seq, pp, where):
    state = profiles.setdefault(seq, {"index": 0, "done": False, "strings": {0: b""}, "mappings": {},
                                      "frames": {}, "callstacks": {}, "profile": None})
    need(not state["done"], f"{where}: a heap profile after its last packet")
    need(pp.index == state["index"], f"{where}: profile packet {pp.index}, not {state['index']}")
    state["index"] += 1
    for s in pp.strings:
        need(s.iid and s.iid not in state["strings"], f"{where}: string {s.iid}")
        state["strings"][s.iid] = s.str
    for mp in pp.mappings:
        resolve(state["strings"], mp.build_id, f"{where}: mapping's build id string")
        path = "/".join(resolve(state["strings"], i, f"{where}: mapping path").decode() for i in mp.path_string_ids)
        state["mappings"][mp.iid] = (path, state["strings"][mp.build_id])
    for fr in pp.frames:
        mapping = resolve(state["mappings"], fr.mapping_id, f"{where}: frame's mapping")
        name = resolve(state["strings"], fr.function_name_id, f"{where}: frame's function").decode()
        state["frames"][fr.iid] = (name, mapping)
    for cs in pp.callstacks:
        need(cs.frame_ids, f"{where}: an empty callstack")
        state["callstacks"][cs.iid] = [resolve(state["frames"], f, f"{where}: callstack's frame")
                                       for f in cs.frame_ids]
    need(len(pp.process_dumps) == 1, f"{where}: {len(pp.process_dumps)} dumps")
    for dump in pp.process_dumps:
        prof = state["profile"]
        if prof is None:
            prof = state["profile"] = Profile(dump.pid)
            prof.ts, prof.heap = dump.timestamp, dump.heap_name
            m.profiles.append(prof)
        need((dump.pid, dump.timestamp, dump.heap_name) == (prof.pid, prof.ts, prof.heap),
             f"{where}: the dump's header differs between packets")
        prof.packets += 1
        for s in dump.samples:
            frames = resolve(state["callstacks"], s.callstack_id, f"{where}: sample's callstack")
            prof.samples.append(([f[0] for f in frames], frames[-1][1], s.self_max, s.self_max_count))
    state["done"] = not pp.continued


def main():
    try:
        m = load(sys.argv[1])
    except Problem as e:
        sys.exit(f"perfetto_check: {sys.argv[1]}: {e}")
    for uuid, (pid, name) in sorted(m.processes.items()):
        tracks = m.tracks_of(name)
        counters = [t for t in tracks if t.counter]
        print(f"{name}: pid {pid}, {len(counters)} counter tracks, "
              f"{sum(len(t.slices) for t in tracks)} slices, {sum(len(t.instants) for t in tracks)} instants")
    for prof in m.profiles:
        print(f"heap profile of pid {prof.pid} ({prof.heap}): {len(prof.samples)} stacks, "
              f"{sum(s[2] for s in prof.samples)} bytes, {prof.packets} packets")
    print(f"{m.packets} packets")


if __name__ == "__main__":
    main()
