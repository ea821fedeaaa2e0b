"""memviz_compare.py - the structure of an `fsdpshim export --memviz` pickle
against PyTorch's own torch.cuda.memory._snapshot() (tests/torch/snapshot.py
writes one): every key PyTorch's snapshot has, at every level (the snapshot,
a segment, a block, a trace entry of each action both have, a frame), is in
the export with a value of the same type.

    memviz_compare.py TORCH.pickle EXPORT.pickle
"""
import pickle
import sys


def fail(what):
    sys.exit(f"memviz_compare: {what}")


def same_keys(what, ours, theirs):
    for k, v in theirs.items():
        if k not in ours:
            fail(f"{what}: no '{k}' (PyTorch's has {sorted(theirs)}, ours {sorted(ours)})")
        if type(ours[k]) is not type(v):
            fail(f"{what}['{k}']: {type(ours[k]).__name__}, PyTorch's {type(v).__name__}")
    print(f"ok {what}: {len(theirs)} keys of PyTorch's, same types")


def first_frame(items):
    return next((f for i in items for f in i["frames"]), None)


def main():
    theirs = pickle.load(open(sys.argv[1], "rb"))
    ours = pickle.load(open(sys.argv[2], "rb"))
    same_keys("the snapshot", ours, theirs)
    segments = ours["segments"]
    if not segments:
        fail("no segment in the export")
    same_keys("a segment", segments[0], theirs["segments"][0])
    same_keys("a block", segments[0]["blocks"][0], theirs["segments"][0]["blocks"][0])
    if len(ours["device_traces"]) < 1 or not any(ours["device_traces"]):
        fail("no trace entry in the export")
    our_entries = {e["action"]: e for t in ours["device_traces"] for e in t}
    their_entries = {e["action"]: e for t in theirs["device_traces"] for e in t}
    for action in sorted(set(our_entries) & set(their_entries)):
        same_keys(f"an entry '{action}'", our_entries[action], their_entries[action])
    for action in ("alloc", "free_requested", "free_completed", "segment_alloc"):
        if action not in our_entries:
            fail(f"no {action} entry in the export")
    ours_f = first_frame(e for t in ours["device_traces"] for e in t)
    theirs_f = first_frame(e for t in theirs["device_traces"] for e in t)
    if ours_f is None or theirs_f is None:
        fail("no frames")
    same_keys("a frame", ours_f, theirs_f)


if __name__ == "__main__":
    main()
