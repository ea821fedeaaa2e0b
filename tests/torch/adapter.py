"""adapter.py - PyTorch's memory features through fsdpshim's PyTorch adapter
(the default route), with the same checks natively.

Run by tests/torch twice on one simulated device: under the shim with the
adapter route (--route adapter), and with PyTorch's own allocator
(--route native). Every check that does not name the route passes both
ways: the adapter gives PyTorch's allocator semantics (counts, stream
reuse, recorded streams, OOM errors and observers, accumulated and peak
resets, empty_cache, memory history, private pools, graphs and their
checkpoints, settings changed while running, IPC, the entries a trace
tracker gets). The route check says
which allocator answered: under the adapter the shim's own statistics
count PyTorch's tensors. Figures that depend on the policy (reserved
bytes, segment sizes) are not compared.
"""
import argparse
import ctypes
import gc
import os
import sys
import unittest

import torch
import torch.multiprocessing as mp

MiB = 1 << 20
ROUTE = "native"
CAPACITY = 0
POOL_ALLOCATOR = ""
TRACKER_PROBE = ""


def shim_stat(name):
    lib = ctypes.CDLL(None)
    if not hasattr(lib, "fsdpshim_stat"):
        return None
    value = ctypes.c_int64()
    rc = lib.fsdpshim_stat(name.encode(), 0, ctypes.byref(value))
    return value.value if rc == 0 else None


def host_values(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-1000, 1000, (n,), generator=g).to(torch.float32)


class Counts(unittest.TestCase):
    def setUp(self):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    def test_allocation_and_segment_counts(self):
        base = torch.cuda.memory_stats()
        x = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
        y = torch.empty(1000, device="cuda")
        s = torch.cuda.memory_stats()
        self.assertEqual(s["allocation.all.current"] - base["allocation.all.current"], 2)
        self.assertEqual(s["allocation.small_pool.current"] - base["allocation.small_pool.current"], 1)
        self.assertEqual(s["allocation.large_pool.current"] - base["allocation.large_pool.current"], 1)
        self.assertGreaterEqual(s["segment.all.current"], 2)
        self.assertGreaterEqual(s["allocated_bytes.all.current"] - base["allocated_bytes.all.current"],
                                3 * MiB + 4096)
        self.assertEqual(s["requested_bytes.all.current"] - base["requested_bytes.all.current"],
                         3 * MiB + 4000)
        del x, y
        s = torch.cuda.memory_stats()
        self.assertEqual(s["allocation.all.current"], base["allocation.all.current"])
        self.assertEqual(s["allocated_bytes.all.current"], base["allocated_bytes.all.current"])

    def test_accumulated_and_peak_resets(self):
        x = torch.empty(2 * MiB, dtype=torch.uint8, device="cuda")
        del x
        torch.cuda.reset_accumulated_memory_stats()
        s = torch.cuda.memory_stats()
        self.assertEqual(s["allocation.all.allocated"], 0)
        self.assertEqual(s["allocation.all.freed"], 0)
        self.assertEqual(s["num_alloc_retries"], 0)
        live = s["allocation.all.current"]
        y = torch.empty(2 * MiB, dtype=torch.uint8, device="cuda")
        z = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        del z
        s = torch.cuda.memory_stats()
        self.assertEqual(s["allocation.all.allocated"], 2)
        self.assertEqual(s["allocation.all.freed"], 1)
        self.assertEqual(s["allocation.all.current"], live + 1)
        torch.cuda.reset_peak_memory_stats()
        self.assertEqual(torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated())
        del y


class Reuse(unittest.TestCase):
    def test_cached_block_is_reused_on_its_stream(self):
        x = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        ptr = x.data_ptr()
        del x
        y = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        self.assertEqual(y.data_ptr(), ptr)

    def test_recorded_stream_holds_the_block(self):
        torch.cuda.synchronize()
        side = torch.cuda.Stream()
        big = torch.empty(256 * MiB, dtype=torch.uint8).pin_memory()
        x = torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")
        ptr = x.data_ptr()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            scratch = big.to("cuda", non_blocking=True)  # keeps the side stream busy
            x.record_stream(side)
        del x
        y = torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")
        if not side.query():
            self.assertNotEqual(y.data_ptr(), ptr)
        side.synchronize()
        del scratch, y
        z = torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")
        self.assertEqual(z.data_ptr(), ptr)

    def test_data_survives(self):
        src = host_values(1 << 16)
        dev = src.cuda()
        other = torch.empty_like(dev).copy_(dev)
        self.assertTrue(torch.equal(other.cpu(), src))
        raw = torch.cuda.caching_allocator_alloc(MiB)
        self.assertNotEqual(raw, 0)
        torch.cuda.caching_allocator_delete(raw)


class Cache(unittest.TestCase):
    def test_empty_cache(self):
        x = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
        del x
        self.assertGreaterEqual(torch.cuda.memory_reserved(), 64 * MiB)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.assertLess(torch.cuda.memory_reserved(), 64 * MiB)  # the block's segment went back
        self.assertGreaterEqual(torch.cuda.memory_reserved(), torch.cuda.memory_allocated())


class Snapshot(unittest.TestCase):
    def test_segments_and_blocks(self):
        torch.cuda.synchronize()
        x = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda")
        y = torch.empty(1000, device="cuda")
        gone = torch.empty(2 * MiB, dtype=torch.uint8, device="cuda")
        del gone
        torch.cuda.synchronize()
        segments = torch.cuda.memory_snapshot()
        self.assertEqual(sum(s["total_size"] for s in segments), torch.cuda.memory_reserved())
        self.assertEqual(sum(s["allocated_size"] for s in segments), torch.cuda.memory_allocated())
        found = {}
        for seg in segments:
            self.assertEqual(sum(b["size"] for b in seg["blocks"]), seg["total_size"])
            self.assertEqual(seg["allocated_size"],
                             sum(b["size"] for b in seg["blocks"] if b["state"] == "active_allocated"))
            addr = seg["address"]
            for b in seg["blocks"]:
                for name, t in (("x", x), ("y", y)):
                    if addr == t.data_ptr():
                        found[name] = (seg, b)
                addr += b["size"]
        self.assertEqual(set(found), {"x", "y"})
        seg, block = found["x"]
        self.assertEqual(seg["segment_type"], "large")
        self.assertEqual(block["state"], "active_allocated")
        self.assertEqual(block["requested_size"], 5 * MiB)
        seg, block = found["y"]
        self.assertEqual(seg["segment_type"], "small")
        self.assertEqual(block["requested_size"], 4000)
        self.assertEqual(torch.cuda.memory._snapshot()["segments"], segments)
        del x, y


class OutOfMemory(unittest.TestCase):
    def test_error_and_observer(self):
        seen = []
        torch._C._cuda_attach_out_of_memory_observer(
            lambda device, alloc, total, free: seen.append((device, alloc, total, free)))
        before = torch.cuda.memory_stats()["num_ooms"]
        with self.assertRaises(torch.cuda.OutOfMemoryError) as caught:
            torch.empty(CAPACITY + MiB, dtype=torch.uint8, device="cuda")
        self.assertIn("CUDA out of memory", str(caught.exception))
        self.assertEqual(torch.cuda.memory_stats()["num_ooms"], before + 1)
        self.assertEqual(len(seen), 1)
        self.assertEqual(seen[0][0], 0)
        self.assertEqual(seen[0][2], CAPACITY)
        x = torch.ones(16, device="cuda")  # still usable
        self.assertEqual(x.numel(), 16)

    def test_more_than_an_exabyte(self):
        with self.assertRaisesRegex(torch.cuda.OutOfMemoryError, "more than 1EB"):
            torch.empty(1 << 61, dtype=torch.uint8, device="cuda")


class History(unittest.TestCase):
    def tearDown(self):
        torch.cuda.memory._record_memory_history(enabled=None)

    def entries(self, snap, action, addr):
        return [e for e in snap["device_traces"][0] if e["action"] == action and e["addr"] == addr]

    def test_trace_and_stacks(self):
        torch.cuda.memory._record_memory_history(max_entries=100000)
        self.assertTrue(torch._C._cuda_isHistoryEnabled())
        x = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda")
        y = torch.empty(1000, device="cuda")
        y_addr = y.data_ptr()
        del y
        big = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")  # a segment of its own
        snap = torch.cuda.memory._snapshot()
        alloc = self.entries(snap, "alloc", x.data_ptr())
        self.assertEqual(len(alloc), 1)
        self.assertEqual(alloc[0]["size"], 5 * MiB)
        self.assertTrue(any(f["filename"].endswith("adapter.py") for f in alloc[0]["frames"]),
                        alloc[0]["frames"][:3])
        self.assertEqual(len(self.entries(snap, "free_requested", y_addr)), 1)
        self.assertEqual(len(self.entries(snap, "free_completed", y_addr)), 1)
        self.assertEqual(self.entries(snap, "free_requested", y_addr)[0]["size"], 4000)
        segs = [e for e in snap["device_traces"][0] if e["action"] == "segment_alloc"
                and e["addr"] <= big.data_ptr() < e["addr"] + e["size"]]
        self.assertEqual(len(segs), 1)
        # the live block's stack in the segments
        found = None
        for seg in snap["segments"]:
            addr = seg["address"]
            for b in seg["blocks"]:
                if addr == x.data_ptr():
                    found = b
                addr += b["size"]
        self.assertIsNotNone(found)
        self.assertTrue(any(f["filename"].endswith("adapter.py") for f in found["frames"]))
        del x, big

    def test_free_after_recorded_stream(self):
        torch.cuda.memory._record_memory_history(max_entries=100000)
        s = torch.cuda.Stream()
        z = torch.ones(4 * MiB, dtype=torch.uint8, device="cuda")
        with torch.cuda.stream(s):
            z.add_(1)
        z.record_stream(s)
        addr = z.data_ptr()
        del z
        torch.cuda.synchronize()
        again = [torch.empty(4 * MiB, dtype=torch.uint8, device="cuda") for _ in range(4)]
        snap = torch.cuda.memory._snapshot()
        trace = snap["device_traces"][0]
        at = [(i, e["action"]) for i, e in enumerate(trace) if e["addr"] == addr
              and e["action"] in ("alloc", "free_requested", "free_completed")]
        actions = [a for _, a in at]
        self.assertEqual(actions.count("free_requested"), 1)
        self.assertEqual(actions.count("free_completed"), 1)  # completed once
        requested = actions.index("free_requested")
        # after its request, and before the address is handed out again
        self.assertEqual(actions[requested + 1], "free_completed", actions)
        del again

    def test_ring_and_off(self):
        torch.cuda.memory._record_memory_history(max_entries=8)
        for _ in range(20):
            torch.empty(1000, device="cuda")
        snap = torch.cuda.memory._snapshot()
        actions = [e["action"] for e in snap["device_traces"][0]]
        self.assertEqual(len(actions), 8)  # the newest 8 of 60
        self.assertEqual(actions[-3:], ["alloc", "free_requested", "free_completed"])
        torch.cuda.memory._record_memory_history(enabled=None)
        self.assertFalse(torch._C._cuda_isHistoryEnabled())
        torch.empty(1000, device="cuda")
        snap = torch.cuda.memory._snapshot()
        self.assertEqual(snap["device_traces"][0], [])

    def test_metadata_and_annotations(self):
        if not hasattr(torch.cuda.memory, "_set_memory_metadata"):
            self.skipTest("PyTorch without memory metadata")
        if hasattr(torch._C, "_cuda_memoryMetadataSupported"):  # 2.15
            self.assertTrue(torch._C._cuda_memoryMetadataSupported())
        torch.cuda.memory._record_memory_history(max_entries=1000)
        torch.cuda.memory._set_memory_metadata("phase=fwd")
        self.assertEqual(torch.cuda.memory._get_memory_metadata(), "phase=fwd")
        x = torch.empty(2 * MiB, dtype=torch.uint8, device="cuda")
        torch.cuda.memory._set_memory_metadata("")
        annotated = hasattr(torch.cuda.memory, "_annotate_tensor")  # 2.15
        if annotated:
            torch.cuda.memory._annotate_tensor(x, "the activations")
        snap = torch.cuda.memory._snapshot()
        alloc = self.entries(snap, "alloc", x.data_ptr())
        self.assertEqual(alloc[0]["user_metadata"], "phase=fwd")
        if annotated:
            notes = self.entries(snap, "annotate", x.data_ptr())
            self.assertEqual([n["user_metadata"] for n in notes], ["the activations"])
        del x

    def test_program_annotations(self):
        torch.cuda.memory._record_memory_history(max_entries=1000, global_record_annotations=True)
        with torch.profiler.record_function("fsdpshim_region"):
            x = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(None)
        ours = [a for a in snap.get("external_annotations", []) if "fsdpshim_region" in str(a)]
        self.assertEqual(len(ours), 2, snap.get("external_annotations"))  # its start and end
        self.assertEqual({a["device"] for a in ours}, {torch.cuda.current_device()})
        del x

    def test_dump_snapshot(self):
        import pickle
        import tempfile
        torch.cuda.memory._record_memory_history(max_entries=1000)
        x = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
        with tempfile.NamedTemporaryFile(suffix=".pickle") as f:
            torch.cuda.memory._dump_snapshot(f.name)
            with open(f.name, "rb") as g:
                snap = pickle.load(g)
        self.assertTrue(any(e["action"] == "alloc" and e["addr"] == x.data_ptr()
                            for e in snap["device_traces"][0]))
        del x


    def test_what_each_context_level_keeps(self):
        import json
        x = None

        def allocate_here():
            nonlocal x
            x = torch.empty(1000, device="cuda")

        def free_here():
            nonlocal x
            x = None

        for context in ("state", "alloc", "all"):
            torch.cuda.empty_cache()
            torch.cuda.memory._record_memory_history(context=context, stacks="python")
            allocate_here()
            live = json.dumps(torch.cuda.memory._snapshot()["segments"])
            self.assertIn("allocate_here", live)  # a live block's stack, at every level
            free_here()
            text = json.dumps(torch.cuda.memory._snapshot())
            # a freed block keeps no stack in the state; the trace has its
            # allocation's from ALLOC up and its free's only under ALL
            self.assertEqual("allocate_here" in text, context != "state", context)
            self.assertEqual("free_here" in text, context == "all", context)
            torch.cuda.memory._record_memory_history(enabled=None)

    def test_empty_cache_stack_under_all(self):
        import json

        def give_back_here():
            torch.cuda.empty_cache()

        for context in ("alloc", "all"):
            torch.cuda.empty_cache()
            torch.cuda.memory._record_memory_history(context=context, stacks="python")
            x = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
            del x
            give_back_here()
            frees = [e for e in torch.cuda.memory._snapshot()["device_traces"][0]
                     if e["action"] == "segment_free"]
            self.assertTrue(frees, context)
            self.assertEqual("give_back_here" in json.dumps(frees), context == "all", context)
            torch.cuda.memory._record_memory_history(enabled=None)

    def test_entries_outside_compiled_code(self):
        torch.cuda.memory._record_memory_history(max_entries=100)
        x = torch.empty(1000, device="cuda")
        trace = torch.cuda.memory._snapshot()["device_traces"][0]
        self.assertTrue(trace)
        self.assertEqual({e["compile_context"] for e in trace}, {"N/A"})
        del x

    def test_inactive_block_keeps_its_last_request(self):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        x = torch.empty(3 * MiB + 100, dtype=torch.uint8, device="cuda")  # a new segment's start
        addr = x.data_ptr()
        del x
        found = None
        for seg in torch.cuda.memory_snapshot():
            at = seg["address"]
            for b in seg["blocks"]:
                if at == addr:
                    found = b
                at += b["size"]
        self.assertIsNotNone(found)
        self.assertEqual(found["state"], "inactive")
        self.assertEqual(found["requested_size"], 3 * MiB + 100)


class Profiler(unittest.TestCase):
    """torch.profiler's memory events (profile_memory=True) and the memory
    timeline made from them."""

    def test_memory_events_with_stacks(self):
        from torch.cuda._memory_viz import _profile_to_snapshot
        from torch.profiler import ProfilerActivity, profile

        def allocate_in_profile():
            x = torch.ones(256, 256, device="cuda")
            return x * x + x

        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, with_stack=True,
                     record_shapes=True) as prof:
            y = allocate_in_profile()
            del y
        trace = _profile_to_snapshot(prof)["device_traces"][0]
        allocs = [e for e in trace if e["action"] == "alloc"]
        frees = [e for e in trace if e["action"] == "free_requested"]
        self.assertEqual([e["size"] for e in allocs], [256 * 256 * 4] * 2)
        self.assertEqual(len(frees), 2)
        self.assertTrue(all(any("allocate_in_profile" in f["name"] for f in e["frames"])
                            for e in allocs))


class Settings(unittest.TestCase):
    """Allocator settings: changed while the program runs
    (_set_allocator_settings), and PYTORCH_CUDA_ALLOC_CONF's
    per_process_memory_fraction."""

    def setUp(self):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # no cached block serves what the tests ask

    def tearDown(self):
        torch.cuda.memory._set_allocator_settings("expandable_segments:False")
        torch.cuda.memory._set_allocator_settings("")
        torch.cuda.empty_cache()

    def grows_by(self, nbytes):
        before = torch.cuda.memory_stats()["active_bytes.all.allocated"]
        x = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        grown = torch.cuda.memory_stats()["active_bytes.all.allocated"] - before
        del x
        return grown

    def test_roundup_while_running(self):
        n = 84 * MiB + 1000  # between 64 and 128 MiB: quarters of 16 MiB
        self.assertEqual(self.grows_by(n), 84 * MiB + 1024)
        torch.cuda.memory._set_allocator_settings("roundup_power2_divisions:4")
        before = torch.cuda.memory_stats()["requested_bytes.all.allocated"]
        self.assertEqual(self.grows_by(n), 96 * MiB)
        self.assertEqual(torch.cuda.memory_stats()["requested_bytes.all.allocated"] - before, n)
        # a string that does not name the key puts it back
        torch.cuda.memory._set_allocator_settings("garbage_collection_threshold:0.5")
        self.assertEqual(self.grows_by(n), 84 * MiB + 1024)

    def test_oversize_counts(self):
        def oversize():
            st = torch.cuda.memory_stats()
            return st["oversize_allocations.current"], st["oversize_segments.current"]

        torch.cuda.memory._set_allocator_settings("max_split_size_mb:32")
        base = oversize()
        x = torch.empty(40 * MiB, dtype=torch.uint8, device="cuda")
        small = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")
        self.assertEqual(oversize(), (base[0] + 1, base[1] + 1))
        del x
        self.assertEqual(oversize(), (base[0], base[1] + 1))  # its segment stays cached
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.assertEqual(oversize(), base)
        self.assertGreaterEqual(torch.cuda.memory_stats()["oversize_allocations.allocated"], 1)
        del small

    def test_expandable_segments_while_running(self):
        def segment_of(t):
            return [s for s in torch.cuda.memory_snapshot()
                    if s["address"] <= t.data_ptr() < s["address"] + s["total_size"]][0]

        torch.cuda.memory._set_allocator_settings("expandable_segments:True")
        x = torch.empty(30 * MiB, dtype=torch.uint8, device="cuda")
        self.assertTrue(segment_of(x)["is_expandable"])
        torch.cuda.memory._set_allocator_settings("max_split_size_mb:200")  # does not name it
        y = torch.empty(30 * MiB, dtype=torch.uint8, device="cuda")
        self.assertTrue(segment_of(y)["is_expandable"])
        torch.cuda.memory._set_allocator_settings("expandable_segments:False")
        z = torch.empty(30 * MiB, dtype=torch.uint8, device="cuda")
        self.assertFalse(segment_of(z)["is_expandable"])
        del x, y, z

    def test_fraction_from_the_environment(self):
        import subprocess
        script = ("import torch\n"
                  "print(torch.cuda.get_per_process_memory_fraction(0))\n"
                  "try:\n"
                  f"    torch.empty({CAPACITY // 2 + 64 * MiB}, dtype=torch.uint8, device='cuda')\n"
                  "    print('fits')\n"
                  "except torch.cuda.OutOfMemoryError:\n"
                  "    print('refused')\n")
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="per_process_memory_fraction:0.5")
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr[-2000:])
        self.assertEqual(out.stdout.split(), ["0.5", "refused"])

    def test_changed_before_the_first_cuda_call(self):
        import subprocess
        script = ("import torch, warnings\n"
                  "warnings.simplefilter('ignore')\n"
                  "torch.cuda.memory._set_allocator_settings('expandable_segments:True')\n"
                  "x = torch.empty(30 << 20, dtype=torch.uint8, device='cuda')\n"
                  "print([s['is_expandable'] for s in torch.cuda.memory_snapshot()])\n")
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr[-2000:])
        self.assertEqual(out.stdout.split(), ["[True]"])


class Trackers(unittest.TestCase):
    """A trace tracker on the allocator (C++ only: NCCL's buffer
    registration attaches one; tracker_probe.cpp here) gets every action,
    with memory history off: blocks allocated, frees requested and
    completed, segments allocated and freed, OOMs. Attached once, it stays
    for the tests that follow."""

    @classmethod
    def setUpClass(cls):
        cls.lib = ctypes.CDLL(TRACKER_PROBE)
        cls.lib.fs_probe_action_name.restype = ctypes.c_char_p
        torch.cuda.memory._record_memory_history(None)
        torch.empty(1, device="cuda")  # PyTorch's allocator set up
        cls.lib.fs_probe_attach()

    def take(self):
        n = 1 << 16
        action = (ctypes.c_int * n)()
        addr, size = (ctypes.c_uint64 * n)(), (ctypes.c_uint64 * n)()
        stream = (ctypes.c_size_t * n)()
        k = self.lib.fs_probe_take(action, addr, size, stream, n)
        return [(self.lib.fs_probe_action_name(action[i]).decode(), addr[i], size[i], stream[i])
                for i in range(k)]

    def settle(self):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.take()

    def test_block_and_segment(self):
        self.settle()
        x = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
        p = x.data_ptr()
        del x
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        got = self.take()
        block = [(a, s) for a, addr, s, _ in got if addr == p and "segment" not in a]
        self.assertEqual(block, [("alloc", 64 * MiB), ("free_requested", 64 * MiB),
                                 ("free_completed", 64 * MiB)])
        segs = [(a, addr, s) for a, addr, s, _ in got if a.startswith("segment")]
        # the block's own segment, made for it and given back by empty_cache
        mine = [e for e in segs if e[1] <= p < e[1] + e[2]]
        self.assertEqual([a for a, _, _ in mine], ["segment_alloc", "segment_free"])
        self.assertGreaterEqual(mine[0][2], 64 * MiB)
        order = [a for a, addr, _, _ in got if addr in (p, mine[0][1])]
        self.assertLess(order.index("segment_alloc"), order.index("alloc"))
        self.assertLess(order.index("free_completed"), order.index("segment_free"))

    def test_free_completes_after_its_streams(self):
        self.settle()
        side = torch.cuda.Stream()
        x = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        p = x.data_ptr()
        x.record_stream(side)
        del x
        blocks = lambda got: [a for a, addr, _, _ in got if addr == p and "segment" not in a]
        self.assertEqual(blocks(self.take()), ["alloc", "free_requested"])  # waiting for `side`
        torch.cuda.synchronize()
        y = torch.empty(MiB, dtype=torch.uint8, device="cuda")  # the allocator looks again
        got = blocks(self.take())
        self.assertEqual(got[0], "free_completed")
        del y

    def test_history_on_then_off(self):
        def blocks(got, p):
            return [a for a, addr, _, _ in got if addr == p and "segment" not in a]

        self.settle()
        torch.cuda.memory._record_memory_history(max_entries=1000)
        try:
            side = torch.cuda.Stream()
            x = torch.empty(MiB, dtype=torch.uint8, device="cuda")
            p = x.data_ptr()
            x.record_stream(side)
            y = torch.empty(MiB, dtype=torch.uint8, device="cuda")
            q = y.data_ptr()
            del y
            # the tracker and the history get the same entries
            self.assertEqual(blocks(self.take(), q), ["alloc", "free_requested", "free_completed"])
            traces = torch.cuda.memory._snapshot()["device_traces"][0]
            self.assertEqual([e["action"] for e in traces if e["addr"] == q],
                             ["alloc", "free_requested", "free_completed"])
        finally:
            torch.cuda.memory._record_memory_history(None)
        # used on `side` while history was on, freed with it off: the free waits
        del x
        self.assertEqual(blocks(self.take(), p), ["free_requested"])
        torch.cuda.synchronize()
        z = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        self.assertEqual(blocks(self.take(), p)[:1], ["free_completed"])
        del z

    def test_out_of_memory(self):
        self.settle()
        with self.assertRaises(torch.OutOfMemoryError):
            torch.empty(2 * CAPACITY, dtype=torch.uint8, device="cuda")
        self.assertIn("oom", [a for a, _, _, _ in self.take()])

    def test_history_off_keeps_no_stacks(self):
        self.assertFalse(torch.cuda.memory._snapshot()["device_traces"][0])


class Uncached(unittest.TestCase):
    """torch.cuda.caching_allocator_enable(False): every allocation the
    device's own, outside the cache and its statistics."""

    def tearDown(self):
        torch.cuda.caching_allocator_enable(True)

    def test_caching_off_and_on(self):
        values = host_values(4096)
        key = "requested_bytes.all.allocated"
        torch.cuda.caching_allocator_enable(False)
        before = torch.cuda.memory_stats()[key]
        x = values.to("cuda")
        stream = torch.cuda.current_stream().cuda_stream
        raw = torch._C._cuda_cudaCachingAllocator_raw_alloc(MiB, stream)
        self.assertEqual(torch.cuda.memory_stats()[key], before)  # not the cache's
        self.assertTrue(torch.equal(x.cpu(), values))
        torch._C._cuda_cudaCachingAllocator_raw_delete(raw)
        del x
        torch.cuda.caching_allocator_enable(True)
        y = values.to("cuda")
        self.assertEqual(torch.cuda.memory_stats()[key], before + 4096 * 4)
        self.assertTrue(torch.equal(y.cpu(), values))
        del y


class MemoryFraction(unittest.TestCase):
    def tearDown(self):
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()

    def test_fraction_caps_the_cache(self):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        quarter = CAPACITY // 4
        torch.cuda.set_per_process_memory_fraction(0.5)
        x = torch.empty(quarter, dtype=torch.uint8, device="cuda")  # fits under half
        with self.assertRaises(torch.cuda.OutOfMemoryError):
            torch.empty(quarter + quarter // 2, dtype=torch.uint8, device="cuda")
        del x
        # the cached quarter is given back for a request under the cap
        y = torch.empty(quarter + quarter // 2, dtype=torch.uint8, device="cuda")
        with self.assertRaises(torch.cuda.OutOfMemoryError):
            torch.empty(quarter, dtype=torch.uint8, device="cuda")
        del y
        torch.cuda.set_per_process_memory_fraction(1.0)
        z = torch.empty(3 * quarter, dtype=torch.uint8, device="cuda")  # the whole device again
        del z
        with self.assertRaises(ValueError):
            torch.cuda.set_per_process_memory_fraction(1.5)


def pool_segments(pool_id):
    return [s for s in torch.cuda.memory_snapshot() if tuple(s["segment_pool_id"]) == tuple(pool_id)]


class Pools(unittest.TestCase):
    """torch.cuda.MemPool and use_mem_pool: memory only the pool's own
    allocations use, kept while the pool lives, given back after."""

    def setUp(self):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    def test_blocks_stay_in_their_pool(self):
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            x = torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")
        ptr = x.data_ptr()
        segs = pool.snapshot()
        self.assertTrue(any(s["address"] <= ptr < s["address"] + s["total_size"] for s in segs))
        self.assertTrue(all(tuple(s["segment_pool_id"]) == tuple(pool.id) for s in segs))
        del x
        y = torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")  # outside the pool
        self.assertNotEqual(y.data_ptr(), ptr)
        with torch.cuda.use_mem_pool(pool):
            z = torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")
        self.assertEqual(z.data_ptr(), ptr)
        del y, z

    def test_use_count_and_live_allocations(self):
        pool = torch.cuda.MemPool()
        self.assertEqual(pool.use_count(), 1)
        with torch.cuda.use_mem_pool(pool):
            self.assertEqual(pool.use_count(), 2)
            a = torch.empty(MiB, dtype=torch.uint8, device="cuda")
            b = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
        self.assertEqual(pool.use_count(), 1)
        check = torch._C._cuda_checkPoolLiveAllocations
        self.assertTrue(check(0, pool.id, {a.data_ptr(), b.data_ptr()}))
        self.assertFalse(check(0, pool.id, {a.data_ptr()}))
        del b
        self.assertTrue(check(0, pool.id, {a.data_ptr()}))
        del a

    def test_kept_while_the_pool_lives(self):
        before = torch.cuda.memory_reserved()
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            x = torch.empty(30 * MiB, dtype=torch.uint8, device="cuda")
        del x
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.assertGreaterEqual(sum(s["total_size"] for s in pool_segments(pool.id)), 30 * MiB)
        self.assertGreaterEqual(torch.cuda.memory_reserved(), before + 30 * MiB)
        pool_id = pool.id
        del pool  # releases the pool and empties it
        gc.collect()
        torch.cuda.empty_cache()
        self.assertEqual(pool_segments(pool_id), [])
        self.assertEqual(torch.cuda.memory_reserved(), before)

    def test_live_block_outlives_its_pool(self):
        before = torch.cuda.memory_reserved()
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            x = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")
        src = host_values(MiB)
        x.view(torch.float32)[: src.numel()].copy_(src)
        del pool
        gc.collect()
        torch.cuda.empty_cache()
        self.assertTrue(torch.equal(x.view(torch.float32)[: src.numel()].cpu(), src))
        self.assertGreaterEqual(torch.cuda.memory_reserved(), before + 8 * MiB)
        del x
        torch.cuda.empty_cache()
        self.assertEqual(torch.cuda.memory_reserved(), before)

    def test_no_split(self):
        pool = torch.cuda.MemPool(no_split=True)
        with torch.cuda.use_mem_pool(pool):
            x = torch.empty(1000, dtype=torch.uint8, device="cuda")
        blocks = [b for s in pool.snapshot() for b in s["blocks"] if b["state"] == "active_allocated"]
        self.assertEqual([b["size"] for b in blocks], [2 * MiB])  # the whole small segment
        del x

    def test_no_split_takes_more_segments(self):
        counts = {}
        for no_split in (False, True):
            pool = torch.cuda.MemPool(no_split=no_split)
            with torch.cuda.use_mem_pool(pool):
                xs = [torch.empty(4 * MiB, dtype=torch.uint8, device="cuda") for _ in range(2)]
            counts[no_split] = len(pool.snapshot())
            del xs
        # a pool shares a large segment between 4 MiB blocks unless it may not split it
        self.assertEqual(counts, {False: 1, True: 2})

    def test_own_allocator(self):
        lib = ctypes.CDLL(POOL_ALLOCATOR)
        lib.fs_test_pool_last_size.restype = ctypes.c_size_t
        own = torch.cuda.memory.CUDAPluggableAllocator(
            POOL_ALLOCATOR, "fs_test_pool_alloc", "fs_test_pool_free")
        pool = torch.cuda.MemPool(own.allocator())
        allocs, frees = lib.fs_test_pool_allocs(), lib.fs_test_pool_frees()
        with torch.cuda.use_mem_pool(pool):
            x = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
            y = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        # whole segments from the pool's allocator: one large, one small
        self.assertEqual(lib.fs_test_pool_allocs() - allocs, 2)
        self.assertGreaterEqual(lib.fs_test_pool_last_size(), MiB)
        src = host_values(MiB // 4)
        x.view(torch.float32)[: src.numel()].copy_(src)
        self.assertTrue(torch.equal(x.view(torch.float32)[: src.numel()].cpu(), src))
        self.assertEqual(lib.fs_test_pool_frees() - frees, 0)
        del x, y, pool
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.assertEqual(lib.fs_test_pool_frees() - frees, 2)  # given back to it

    def test_use_on_oom(self):
        torch.cuda.empty_cache()
        pool = torch.cuda.MemPool(use_on_oom=True)
        with torch.cuda.use_mem_pool(pool):
            x = torch.empty(CAPACITY // 2, dtype=torch.uint8, device="cuda")
        ptr = x.data_ptr()
        del x
        filler = torch.empty(3 * CAPACITY // 8, dtype=torch.uint8, device="cuda")
        # the device cannot hold another half: the pool's free block serves
        y = torch.empty(CAPACITY // 2, dtype=torch.uint8, device="cuda")
        self.assertEqual(y.data_ptr(), ptr)
        del y, filler


class Graphs(unittest.TestCase):
    """CUDA graph capture: the capture's allocations come from the graph's
    private pool and stay valid across replays."""

    def freed_with_a_recorded_stream(self, reuse):
        """Inside one capture: a block used on a second stream, recorded and
        freed; where the next allocations on the first stream land, before
        and after that stream waits for the second."""
        torch.cuda.memory._set_allocator_settings(f"graph_capture_record_stream_reuse:{reuse}")
        try:
            g = torch.cuda.CUDAGraph()
            s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
            with torch.cuda.stream(s1):
                g.capture_begin()
                keep = torch.empty(8, device="cuda")
                a = torch.empty(8, device="cuda")
                s2.wait_stream(s1)
                with torch.cuda.stream(s2):
                    b = a + 1
                a.record_stream(s2)
                freed = a.data_ptr()
                del a
                before_join = torch.empty(8, device="cuda")
                s1.wait_stream(s2)
                keep.fill_(1)
                after_join = torch.empty(8, device="cuda")
                g.capture_end()
            return freed, before_join.data_ptr(), after_join.data_ptr()
        finally:
            torch.cuda.memory._set_allocator_settings("graph_capture_record_stream_reuse:False")
            del b

    def test_recorded_stream_free_reused_once_joined(self):
        freed, before, after = self.freed_with_a_recorded_stream(True)
        self.assertNotEqual(before, freed)  # s2 may still read it
        self.assertEqual(after, freed)  # s1 now runs after s2's use

    def test_recorded_stream_free_held_to_the_end(self):
        freed, before, after = self.freed_with_a_recorded_stream(False)
        self.assertNotIn(freed, (before, after))

    def test_capture_and_replay(self):
        n = 1 << 16
        x = torch.zeros(n, dtype=torch.float32, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            warm = x.clone()  # PyTorch's advice: warm up on a side stream
        torch.cuda.current_stream().wait_stream(side)
        del warm
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            tmp = x.clone()
            out = tmp.clone()
            del tmp  # freed in the capture: reusable by it, on its stream
            out2 = out.clone()
        for seed in (1, 2):
            src = host_values(n, seed)
            x.copy_(src)
            g.replay()
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(out.cpu(), src))
            self.assertTrue(torch.equal(out2.cpu(), src))
        ptrs = {out.data_ptr(), out2.data_ptr()}
        mine = pool_segments(g.pool())
        self.assertTrue(all(any(s["address"] <= p < s["address"] + s["total_size"] for s in mine)
                            for p in ptrs))
        # a second graph sharing the pool
        g2 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g2, pool=g.pool()):
            out3 = out.clone()
        g.replay()
        g2.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(out3.cpu(), host_values(n, 2)))
        pool_id = g.pool()
        del out, out2, out3
        g.reset()
        g2.reset()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.assertEqual(pool_segments(pool_id), [])


def ipc_child(queue, results):
    t = queue.get()
    results.put(t.cpu())
    t.copy_(torch.full(t.shape, 7.0))
    torch.cuda.synchronize()
    results.put("done")
    queue.get()  # the parent has read what we wrote


class Checkpoints(unittest.TestCase):
    """A graph pool's checkpoint state (what CUDA graph trees use): taken,
    and put back after the pool changed."""

    def layout(self, pool):
        return [(s["address"], s["total_size"], [(b["size"], b["state"]) for b in s["blocks"]])
                for s in sorted(pool_segments(pool), key=lambda s: s["address"])]

    def capture(self, pool=None):
        g = torch.cuda.CUDAGraph()
        x = torch.zeros(1000, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s, pool=pool):
                temps = [x + i for i in range(6)]
                outs = [temps[1], temps[4]]  # live in the middle of the segment
                del temps
        torch.cuda.current_stream().wait_stream(s)
        return g, outs

    def test_put_back_at_once_changes_nothing(self):
        g, outs = self.capture()
        before = self.layout(g.pool())
        state = torch._C._cuda_getCheckpointState(0, g.pool())
        torch._C._cuda_setCheckpointPoolState(0, state, [], [])
        self.assertEqual(self.layout(g.pool()), before)
        del outs  # their blocks freed once, not twice
        torch.cuda.synchronize()
        self.assertEqual([b for s in self.layout(g.pool()) for b in s[2]
                          if b[1] == "active_allocated"], [])

    def test_back_to_the_checkpoint(self):
        g, outs = self.capture()
        before = self.layout(g.pool())
        state = torch._C._cuda_getCheckpointState(0, g.pool())
        ptrs = [t.data_ptr() for t in outs]
        g2, outs2 = self.capture(pool=g.pool())  # the pool changes
        self.assertNotEqual(self.layout(g.pool()), before)
        # outs2 are stale: their storages must give up their blocks
        torch._C._cuda_setCheckpointPoolState(
            0, state, [t.untyped_storage()._cdata for t in outs2], [])
        del outs2
        got = self.layout(g.pool())
        self.assertEqual([s for s in got if s[0] in {b[0] for b in before}], before)
        live = [t for t in outs]
        self.assertEqual([t.data_ptr() for t in live], ptrs)
        del outs, live, g2
        torch.cuda.synchronize()

    def test_dead_outputs_come_back_without_owner(self):
        g, outs = self.capture()
        state = torch._C._cuda_getCheckpointState(0, g.pool())
        ptrs = [t.data_ptr() for t in outs]
        del outs
        torch._C._cuda_setCheckpointPoolState(0, state, [], [])

        def live():
            return sum(1 for s in self.layout(g.pool()) for b in s[2] if b[1] == "active_allocated")

        self.assertEqual(live(), 2)  # live again, nobody owns them
        for i, p in enumerate(ptrs):
            torch._C._cuda_cudaCachingAllocator_raw_delete(p)
            self.assertEqual(live(), 1 - i)

    def test_compiled_graph_trees(self):
        calls = {"get": 0, "set": 0}
        get, put = torch._C._cuda_getCheckpointState, torch._C._cuda_setCheckpointPoolState

        def counted(name, fn):
            def call(*args):
                calls[name] += 1
                return fn(*args)
            return call

        torch._C._cuda_getCheckpointState = counted("get", get)
        torch._C._cuda_setCheckpointPoolState = counted("set", put)
        try:
            torch.manual_seed(0)
            m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                    torch.nn.Linear(128, 64)).cuda()
            opt = torch.optim.SGD(m.parameters(), lr=0.01)
            f = torch.compile(m, mode="reduce-overhead", dynamic=False)
            for i in range(12):
                torch.compiler.cudagraph_mark_step_begin()
                batch = (32, 16)[i % 2] if i > 4 else 32  # a second graph, recorded later
                f(torch.randn(batch, 64, device="cuda")).sum().backward()
                opt.step()
                opt.zero_grad()
            torch.cuda.synchronize()
        finally:
            torch._C._cuda_getCheckpointState, torch._C._cuda_setCheckpointPoolState = get, put
            torch._dynamo.reset()
        self.assertGreater(calls["get"], 0)
        self.assertGreater(calls["set"], 0)


class Ipc(unittest.TestCase):
    """torch.multiprocessing: a CUDA tensor sent to another process, which
    reads and writes the same memory; with the child under the same route,
    and (under the shim) with a child without it; from a cudaMalloc'd
    segment and from an expandable one (shared page by page)."""

    def tearDown(self):
        torch.cuda.memory._set_allocator_settings("expandable_segments:False")

    def share(self, child_env, expandable=False):
        ctx = mp.get_context("spawn")
        queue, results = ctx.Queue(), ctx.Queue()
        torch.cuda.memory._set_allocator_settings(f"expandable_segments:{expandable}")
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # no cached segment of the other kind serves them
        # past the first page (a handle names the pages under its block alone)
        pad = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
        n = 600_000  # from the large pool
        base = host_values(n).cuda()
        seg = [s for s in torch.cuda.memory_snapshot()
               if s["address"] <= base.data_ptr() < s["address"] + s["total_size"]]
        self.assertEqual(seg[0]["is_expandable"], expandable)
        x = base[10:]
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(child_env)
        try:
            child = ctx.Process(target=ipc_child, args=(queue, results))
            child.start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        queue.put(x)
        seen = results.get(timeout=120)
        self.assertTrue(torch.equal(seen, host_values(n)[10:]))
        self.assertEqual(results.get(timeout=120), "done")
        self.assertTrue(torch.equal(base.cpu()[10:], torch.full((n - 10,), 7.0)))
        self.assertTrue(torch.equal(base.cpu()[:10], host_values(n)[:10]))
        queue.put("bye")
        child.join(timeout=120)
        self.assertEqual(child.exitcode, 0)
        del pad

    def without_the_shim(self):
        env = dict(os.environ)
        env["LD_PRELOAD"] = " ".join(p for p in env.get("LD_PRELOAD", "").replace(":", " ").split()
                                     if "libfsdpshim" not in p)
        env.pop("FSDPSHIM_CONF", None)
        return env

    def test_same_route(self):
        self.share(dict(os.environ))

    def test_same_route_expandable(self):
        self.share(dict(os.environ), expandable=True)

    def test_child_without_the_shim(self):
        if ROUTE != "adapter":
            self.skipTest("the shim's handles opened by PyTorch's own allocator")
        self.share(self.without_the_shim())

    def test_child_without_the_shim_expandable(self):
        if ROUTE != "adapter":
            self.skipTest("the shim's handles opened by PyTorch's own allocator")
        self.share(self.without_the_shim(), expandable=True)


class Route(unittest.TestCase):
    def test_who_serves(self):
        x = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda")
        served = shim_stat("allocation.all.current")
        if ROUTE == "adapter":
            # the shim counts every live tensor, as PyTorch's stats do
            self.assertEqual(served, torch.cuda.memory_stats()["allocation.all.current"])
        else:
            self.assertIsNone(served)
        del x


def main():
    global ROUTE, CAPACITY, POOL_ALLOCATOR, TRACKER_PROBE
    parser = argparse.ArgumentParser()
    parser.add_argument("--route", choices=("adapter", "native"), required=True)
    parser.add_argument("--mem", type=int, required=True, help="capacity of the device in bytes")
    parser.add_argument("--pool-allocator", required=True,
                        help="tests/torch/pool_allocator.c's library, for a MemPool's own allocator")
    parser.add_argument("--tracker-probe", required=True,
                        help="tests/torch/tracker_probe.cpp's library, a trace tracker")
    args, rest = parser.parse_known_args()
    ROUTE, CAPACITY, POOL_ALLOCATOR = args.route, args.mem, args.pool_allocator
    TRACKER_PROBE = args.tracker_probe
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
