"""adapter.py - PyTorch's memory features through fsdpshim's PyTorch adapter
(FSDPSHIM_CONF=torch_route:adapter), with the same checks natively.

Run by tests/torch twice on one simulated device: under the shim with the
adapter route (--route adapter), and with PyTorch's own allocator
(--route native). Every check that does not name the route passes both
ways: the adapter gives PyTorch's allocator semantics (counts, stream
reuse, recorded streams, OOM errors and observers, accumulated and peak
resets, empty_cache). The route checks say which allocator answered: under
the adapter the shim's own statistics count PyTorch's tensors, and what
the adapter does not serve yet (memory history) refuses, naming itself. Figures that depend
on the policy (reserved bytes, segment sizes) are not compared.
"""
import argparse
import ctypes
import sys
import unittest

import torch

MiB = 1 << 20
ROUTE = "native"
CAPACITY = 0


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

    def test_what_is_not_served_yet_says_so(self):
        if ROUTE != "adapter":
            self.skipTest("the adapter's refusals only")
        with self.assertRaises(RuntimeError) as caught:
            torch.cuda.MemPool()
        self.assertIn("fsdpshim does not yet support createOrIncrefPool", str(caught.exception))


def main():
    global ROUTE, CAPACITY
    parser = argparse.ArgumentParser()
    parser.add_argument("--route", choices=("adapter", "native"), required=True)
    parser.add_argument("--mem", type=int, required=True, help="capacity of the device in bytes")
    args, rest = parser.parse_known_args()
    ROUTE, CAPACITY = args.route, args.mem
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
