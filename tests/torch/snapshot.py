"""snapshot.py - PyTorch's own memory history and snapshot on the simulated
device (native allocator), written where other tests can read it.

    snapshot.py OUT.pickle

Records the allocator's history while a known sequence runs (a small and a
large allocation on the default stream, one on a side stream, a free, an
OOM, empty_cache), takes torch.cuda.memory._snapshot(), writes it with
pickle to OUT.pickle (the format torch.cuda.memory._dump_snapshot writes and
memory_viz loads) and checks its structure against that sequence: segments
with their blocks, and the per-device trace. The analyzer's memviz export
compares its own structure with this file.
"""
import pickle
import sys

import torch

MiB = 1 << 20

SEGMENT_KEYS = {"device", "address", "total_size", "allocated_size", "active_size",
                "requested_size", "stream", "segment_type", "segment_pool_id", "is_expandable",
                "frames", "blocks"}
BLOCK_KEYS = {"address", "size", "requested_size", "state"}
TRACE_KEYS = {"action", "addr", "size", "stream", "frames", "time_us"}


def check(cond, what):
    if not cond:
        sys.exit(f"snapshot.py: FAILED: {what}")
    print(f"ok {what}")


def main():
    out = sys.argv[1]
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(max_entries=10000, stacks="python")

    small = torch.empty(1000, dtype=torch.uint8, device="cuda")  # 1024 B, small pool
    large = torch.empty(12 * MiB, dtype=torch.uint8, device="cuda")  # own large segment
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        on_side = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
    total = torch.cuda.get_device_properties(0).total_memory
    try:
        torch.empty(total + MiB, dtype=torch.uint8, device="cuda")
        check(False, "an allocation over capacity raises OutOfMemoryError")
    except torch.cuda.OutOfMemoryError:
        pass
    freed = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda")
    freed_addr = freed.data_ptr()
    del freed

    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    with open(out, "wb") as f:
        pickle.dump(snap, f)
    print(f"snapshot written to {out}")

    with open(out, "rb") as f:
        snap = pickle.load(f)
    check(isinstance(snap, dict) and {"segments", "device_traces"} <= snap.keys(),
          "the snapshot has segments and device_traces")

    segments = snap["segments"]
    check(all(SEGMENT_KEYS <= s.keys() for s in segments), "every segment has PyTorch's keys")
    check(all(BLOCK_KEYS <= b.keys() for s in segments for b in s["blocks"]),
          "every block has PyTorch's keys")
    check(all(sum(b["size"] for b in s["blocks"]) == s["total_size"] for s in segments),
          "each segment's blocks cover it exactly")
    check(sum(s["total_size"] for s in segments) == torch.cuda.memory_reserved(),
          "the segments add up to memory_reserved")
    active = {b["address"]: (b["size"], b["requested_size"], s)
              for s in segments for b in s["blocks"] if b["state"] == "active_allocated"}
    check(active.get(small.data_ptr(), (0, 0, None))[:2] == (1024, 1000),
          "the 1000-byte tensor is an active 1024-byte block (requested 1000)")
    seg = active.get(small.data_ptr(), (0, 0, {}))[2]
    check(seg.get("segment_type") == "small" and seg.get("total_size") == 2 * MiB,
          "it lies in a 2 MiB small segment")
    check(active.get(large.data_ptr(), (0,))[0] == 12 * MiB, "the 12 MiB tensor is an active block")
    seg = active.get(on_side.data_ptr(), (0, 0, {}))[2]
    check(seg.get("stream") == side.cuda_stream, "the side stream's block lies in its own segment")
    check(any(b["address"] == freed_addr and b["state"] == "inactive" and b["size"] == 20 * MiB
              for s in segments for b in s["blocks"]),
          "the freed 5 MiB block is inactive, merged with the rest of its 20 MiB segment")

    traces = snap["device_traces"]
    check(isinstance(traces, list) and len(traces) == torch.cuda.device_count(),
          "device_traces has one list per device")
    trace = traces[0]
    check(all(TRACE_KEYS <= e.keys() for e in trace if e["action"] != "oom"),
          "every trace entry has PyTorch's keys")
    actions = [(e["action"], e.get("addr"), e["size"]) for e in trace]
    check(("alloc", small.data_ptr(), 1000) in actions, "the trace holds the small alloc (its requested size)")
    check(("alloc", freed_addr, 5 * MiB) in actions and ("free_requested", freed_addr, 5 * MiB) in actions
          and ("free_completed", freed_addr, 5 * MiB) in actions,
          "the trace holds the alloc, free_requested and free_completed of the freed tensor")
    check(sum(1 for a in actions if a[0] == "segment_alloc") >= 3,
          "the trace holds the segment_allocs (small, large, side stream)")
    check(any(a[0] == "oom" and a[2] >= total for a in actions), "the trace holds the OOM")
    check(any(e["frames"] and any(f["filename"].endswith("snapshot.py") for f in e["frames"])
              for e in trace if e["action"] == "alloc"),
          "alloc entries carry this program's Python frames")
    del small, large, on_side


if __name__ == "__main__":
    main()
