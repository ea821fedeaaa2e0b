"""memviz_check.py - checks a pickle of `fsdpshim export --memviz` the way
PyTorch's memory_viz page reads it, with plain python3 (no torch).

    memviz_check.py PICKLE

memory_viz decodes the pickle with its own small unpickler (MemoryViz.js),
which knows a dozen opcodes, and its segment view walks each device's trace
backwards from the segments, expecting every block it meets to lie in a
segment and every free to find its block. This script checks exactly that:

- only opcodes MemoryViz.js decodes, LONG1 of 8 bytes at most (it turns them
  into JavaScript numbers), and at most 1000 items a batch (it spreads a
  batch into one call);
- PyTorch's keys on the snapshot, the segments, the blocks, the trace
  entries and the frames, with their types;
- the blocks of each segment tile it in address order, and the segment's
  allocated, active and requested sizes are its blocks' sums;
- the trace replayed backwards from the segments, as the segment view does:
  each free_requested finds its block, each segment_alloc its segment, and
  at every step every live block lies in a live segment.

It prints one line per device (the figures the analyzer's test compares: the
bytes of the blocks in each state, and the requested bytes of the allocated
ones, which memory_viz's stats call total_allocated) and exits 1 with the first
problem found.
"""
import pickle
import pickletools
import sys

# the opcodes MemoryViz.js's unpickle() decodes
JS_OPCODES = {
    "PROTO", "FRAME", "MEMOIZE", "BINGET", "LONG_BINGET", "BINPUT", "LONG_BINPUT",
    "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "MARK", "SETITEMS", "SETITEM", "APPENDS",
    "APPEND", "DICT", "LIST", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "BININT", "BININT1",
    "BININT2", "LONG1", "SHORT_BINUNICODE", "BINUNICODE", "NEWTRUE", "NEWFALSE", "NONE",
    "BINFLOAT", "STOP",
}
SNAPSHOT_KEYS = {"segments", "device_traces"}
SEGMENT_KEYS = {"device": int, "address": int, "total_size": int, "allocated_size": int,
                "active_size": int, "requested_size": int, "stream": int, "segment_type": str,
                "segment_pool_id": tuple, "is_expandable": bool, "frames": list, "blocks": list}
BLOCK_KEYS = {"address": int, "size": int, "requested_size": int, "state": str, "frames": list}
ENTRY_KEYS = {"action": str, "size": int, "stream": int, "time_us": int, "frames": list}
FRAME_KEYS = {"name": str, "filename": str, "line": int}
STATES = {"active_allocated", "active_pending_free", "inactive"}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot"}


def fail(what):
    sys.exit(f"memviz_check: {what}")


def check_opcodes(data):
    marks = []
    for op, arg, _ in pickletools.genops(data):
        if op.name not in JS_OPCODES:
            fail(f"opcode {op.name}: MemoryViz.js cannot decode it")
        if op.name == "LONG1" and not -(1 << 63) <= arg < (1 << 63):
            fail(f"LONG1 {arg}: more than 8 bytes")
        if op.name == "MARK":
            marks.append(0)
        elif op.name in ("APPENDS", "SETITEMS"):
            if marks.pop() > 2000:  # stack items since the mark: 1000 list items or pairs
                fail(f"{op.name} of more than 1000 items")
        elif marks:
            marks[-1] += 1


def check_keys(what, d, keys):
    if not isinstance(d, dict):
        fail(f"{what} is not a dict")
    for k, t in keys.items():
        if k not in d:
            fail(f"{what} has no '{k}'")
        if not isinstance(d[k], t) or (t is int and isinstance(d[k], bool)):
            fail(f"{what}['{k}'] is {type(d[k]).__name__}, not {t.__name__}")


def check_frames(what, frames):
    for f in frames:
        check_keys(f"a frame of {what}", f, FRAME_KEYS)


def check_segment(s):
    check_keys("a segment", s, SEGMENT_KEYS)
    check_frames("a segment", s["frames"])
    at, sums = s["address"], {"allocated": 0, "active": 0, "requested": 0}
    for b in s["blocks"]:
        check_keys("a block", b, BLOCK_KEYS)
        check_frames("a block", b["frames"])
        if b["state"] not in STATES:
            fail(f"block state {b['state']}")
        if b["address"] != at:
            fail(f"segment {s['address']:#x}: a block at {b['address']:#x}, not {at:#x}")
        at += b["size"]
        if b["state"] != "inactive":
            sums["active"] += b["size"]
            sums["requested"] += b["requested_size"]
        if b["state"] == "active_allocated":
            sums["allocated"] += b["size"]
    if at != s["address"] + s["total_size"]:
        fail(f"segment {s['address']:#x}: its blocks cover {at - s['address']} of "
             f"{s['total_size']} bytes")
    for k, v in sums.items():
        if s[f"{k}_size"] != v:
            fail(f"segment {s['address']:#x}: {k}_size {s[f'{k}_size']}, its blocks {v}")


def replay(device, segments, trace):
    """The segment view's walk backwards from the segments (MemoryViz.js's
    simulate_memory), checked at every step."""
    segs = sorted([s["address"], s["total_size"], s["stream"]] for s in segments
                  if s["device"] == device)
    blocks = {b["address"]: b["size"] for s in segments if s["device"] == device
              for b in s["blocks"] if b["state"] != "inactive"}

    def holder(addr):
        for s in segs:
            if s[0] <= addr < s[0] + s[1]:
                return s
        return None

    def check_block(i, addr):
        if holder(addr) is None:
            fail(f"device {device}: before entry {i}, block {addr:#x} lies in no segment")

    def check_gone(i, start, size):
        for addr in blocks:
            if start <= addr < start + size and holder(addr) is None:
                fail(f"device {device}: before entry {i}, block {addr:#x} lies in no segment")

    for addr in blocks:
        check_block(len(trace), addr)
    for i in range(len(trace) - 1, -1, -1):
        e = trace[i]
        a, addr, size = e["action"], e.get("addr"), e["size"]
        if a == "free_completed":
            blocks[addr] = size
            check_block(i, addr)
        elif a == "free_requested":
            if addr not in blocks:
                fail(f"device {device}: entry {i}, free_requested of {addr:#x}: no such block")
        elif a == "alloc":
            blocks.pop(addr, None)
        elif a == "segment_free":
            segs.append([addr, size, e["stream"]])
            segs.sort()
        elif a == "segment_alloc":
            match = [s for s in segs if s[0] == addr]
            if not match:
                fail(f"device {device}: entry {i}, segment_alloc of {addr:#x}: no such segment")
            segs.remove(match[0])
            check_gone(i, addr, size)
        elif a == "segment_unmap":
            segs.append([addr, size, e["stream"]])
            segs.sort()
            merged = []
            for s in segs:
                if merged and merged[-1][0] + merged[-1][1] == s[0] and merged[-1][2] == s[2]:
                    merged[-1][1] += s[1]
                else:
                    merged.append(s)
            segs[:] = merged
        elif a == "segment_map":
            s = holder(addr)
            if s is None or addr + size > s[0] + s[1]:
                fail(f"device {device}: entry {i}, segment_map of {addr:#x}: not mapped")
            segs.remove(s)
            if addr > s[0]:
                segs.append([s[0], addr - s[0], s[2]])
            if addr + size < s[0] + s[1]:
                segs.append([addr + size, s[0] + s[1] - addr - size, s[2]])
            segs.sort()
            check_gone(i, addr, size)


def main():
    data = open(sys.argv[1], "rb").read()
    check_opcodes(data)
    snap = pickle.loads(data)
    if not isinstance(snap, dict) or not SNAPSHOT_KEYS <= snap.keys():
        fail("not a dict with segments and device_traces")
    for s in snap["segments"]:
        check_segment(s)
    for device, trace in enumerate(snap["device_traces"]):
        for e in trace:
            keys = dict(ENTRY_KEYS, **({"device_free": int} if e.get("action") == "oom"
                                       else {"addr": int}))
            check_keys("a trace entry", e, keys)
            if e["action"] not in ACTIONS:
                fail(f"trace action {e['action']}")
            check_frames("a trace entry", e["frames"])
        replay(device, snap["segments"], trace)
        segs = [s for s in snap["segments"] if s["device"] == device]
        states = {st: sum(b["size"] for s in segs for b in s["blocks"] if b["state"] == st)
                  for st in sorted(STATES)}
        # what torch.cuda._memory_viz stats prints as total_allocated (segsum)
        requested = sum(b["requested_size"] for s in segs for b in s["blocks"]
                        if b["state"] == "active_allocated")
        print(f"device {device}: {len(segs)} segments, {sum(s['total_size'] for s in segs)} bytes; "
              + ", ".join(f"{st} {n}" for st, n in states.items())
              + f"; requested {requested} of active_allocated {states['active_allocated']}"
              + f"; {len(trace)} trace entries")


if __name__ == "__main__":
    main()
