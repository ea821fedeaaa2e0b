"""basics.py - PyTorch's CUDA basics on the simulated device, one process.

Run by tests/torch with PyTorch's own caching allocator (native), on two
simulated devices of SIM_MEM bytes (FSDPSHIM_SIM_MEM, given to this program
as --mem). Kernels compute nothing on the sim, so every value checked here
reaches the device by a copy from the host and comes back by a copy.
"""
import argparse
import sys
import unittest

import torch

MiB = 1 << 20
CAPACITY = 0  # bytes per device, from --mem


def host_values(n, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-1000, 1000, (n,), generator=g).to(dtype)


class Devices(unittest.TestCase):
    def test_count_and_properties(self):
        self.assertTrue(torch.cuda.is_available())
        self.assertEqual(torch.cuda.device_count(), 2)
        props = torch.cuda.get_device_properties(1)
        self.assertEqual(props.total_memory, CAPACITY)
        self.assertEqual(torch.cuda.get_device_capability(0), (props.major, props.minor))
        free, total = torch.cuda.mem_get_info(0)
        self.assertEqual(total, CAPACITY)
        self.assertLessEqual(free, total)


class Copies(unittest.TestCase):
    def test_host_device_host(self):
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.uint8):
            with self.subTest(dtype=dtype):
                src = host_values(4099, dtype)
                dev = src.cuda()
                self.assertEqual(dev.device.type, "cuda")
                self.assertTrue(torch.equal(dev.cpu(), src))

    def test_pinned_non_blocking(self):
        src = host_values(1 << 16).pin_memory()
        dev = src.to("cuda", non_blocking=True)
        back = torch.empty_like(src).pin_memory()
        back.copy_(dev, non_blocking=True)
        torch.cuda.current_stream().synchronize()
        self.assertTrue(torch.equal(back, src))

    def test_device_to_device(self):
        src = host_values(1 << 12).cuda()
        same = torch.empty_like(src).copy_(src)  # contiguous, same dtype: a memcpy
        self.assertTrue(torch.equal(same.cpu(), src.cpu()))
        other = src.to("cuda:1")
        self.assertEqual(other.device.index, 1)
        self.assertTrue(torch.equal(other.cpu(), src.cpu()))

    def test_slices_of_a_contiguous_tensor(self):
        src = host_values(1000)
        dev = src.cuda()
        self.assertTrue(torch.equal(dev[100:300].cpu(), src[100:300]))


class Allocation(unittest.TestCase):
    def setUp(self):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    def test_allocated_and_reserved(self):
        base = torch.cuda.memory_allocated()
        x = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
        self.assertEqual(torch.cuda.memory_allocated() - base, 3 * MiB)
        self.assertGreaterEqual(torch.cuda.memory_reserved(), torch.cuda.memory_allocated())
        small = torch.empty(1, device="cuda")  # rounded up to 512 bytes
        self.assertEqual(torch.cuda.memory_allocated() - base, 3 * MiB + 512)
        del x, small
        self.assertEqual(torch.cuda.memory_allocated(), base)

    def test_cached_block_is_reused(self):
        x = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        ptr = x.data_ptr()
        del x
        y = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        self.assertEqual(y.data_ptr(), ptr)

    def test_empty_cache_gives_memory_back_to_the_device(self):
        free0, _ = torch.cuda.mem_get_info()
        x = torch.empty(64 * MiB, dtype=torch.uint8, device="cuda")
        free1, _ = torch.cuda.mem_get_info()
        self.assertGreaterEqual(free0 - free1, 64 * MiB)
        del x
        self.assertGreaterEqual(torch.cuda.memory_reserved(), 64 * MiB)
        free2, _ = torch.cuda.mem_get_info()
        self.assertEqual(free2, free1)  # cached, still the allocator's
        torch.cuda.empty_cache()
        self.assertEqual(torch.cuda.memory_reserved(), 0)
        free3, _ = torch.cuda.mem_get_info()
        self.assertEqual(free3, free0)

    def test_out_of_memory(self):
        with self.assertRaises(torch.cuda.OutOfMemoryError) as caught:
            torch.empty(CAPACITY + MiB, dtype=torch.uint8, device="cuda")
        self.assertIn("CUDA out of memory", str(caught.exception))
        self.assertGreaterEqual(torch.cuda.memory_stats()["num_ooms"], 1)
        x = torch.ones(16, device="cuda")  # still usable
        self.assertEqual(x.numel(), 16)

    def test_memory_stats(self):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        x = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda")
        del x
        stats = torch.cuda.memory_stats()
        for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak",
                    "reserved_bytes.all.current", "active_bytes.all.peak",
                    "segment.all.current", "num_alloc_retries", "num_ooms",
                    "num_device_alloc", "num_device_free", "requested_bytes.all.peak"):
            self.assertIn(key, stats)
        self.assertEqual(stats["allocated_bytes.all.current"], base)
        self.assertEqual(stats["allocated_bytes.all.peak"], base + 5 * MiB)
        self.assertEqual(torch.cuda.max_memory_allocated(), base + 5 * MiB)
        self.assertGreaterEqual(stats["num_device_alloc"], 1)
        torch.cuda.reset_peak_memory_stats()
        self.assertEqual(torch.cuda.max_memory_allocated(), base)

    def test_memory_summary(self):
        x = torch.empty(MiB, dtype=torch.uint8, device="cuda")
        text = torch.cuda.memory_summary()
        self.assertIn("PyTorch CUDA memory summary, device ID 0", text)
        self.assertIn("Allocated memory", text)
        self.assertIn("GPU reserved memory", text)
        del x


class Streams(unittest.TestCase):
    def test_copies_on_a_side_stream(self):
        src = host_values(1 << 16).pin_memory()
        s = torch.cuda.Stream()
        self.assertNotEqual(s, torch.cuda.current_stream())
        with torch.cuda.stream(s):
            self.assertEqual(torch.cuda.current_stream(), s)
            dev = src.to("cuda", non_blocking=True)
        torch.cuda.current_stream().wait_stream(s)
        back = torch.empty_like(src).pin_memory()
        back.copy_(dev, non_blocking=True)
        torch.cuda.synchronize()
        self.assertTrue(s.query())
        self.assertTrue(torch.equal(back, src))

    def test_priorities(self):
        self.assertEqual(torch.cuda.Stream(priority=-1).priority, -1)
        self.assertEqual(torch.cuda.Stream().priority, 0)

    def test_stream_on_second_device(self):
        with torch.cuda.device(1):
            s = torch.cuda.Stream()
            src = host_values(256)
            with torch.cuda.stream(s):
                dev = src.cuda()
            s.synchronize()
        self.assertEqual(s.device.index, 1)
        self.assertTrue(torch.equal(dev.cpu(), src))


class Events(unittest.TestCase):
    def test_query_synchronize_elapsed(self):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        data = host_values(1 << 20).pin_memory()
        start.record()
        dev = data.to("cuda", non_blocking=True)
        end.record()
        end.synchronize()
        self.assertTrue(end.query())
        self.assertGreaterEqual(start.elapsed_time(end), 0.0)
        self.assertTrue(torch.equal(dev.cpu(), data))

    def test_wait_orders_streams(self):
        src = host_values(1 << 20).pin_memory()
        a, b = torch.cuda.Stream(), torch.cuda.Stream()
        done = torch.cuda.Event()
        with torch.cuda.stream(a):
            dev = src.to("cuda", non_blocking=True)
            done.record(a)
        back = torch.empty_like(src).pin_memory()
        with torch.cuda.stream(b):
            b.wait_event(done)
            back.copy_(dev, non_blocking=True)
        b.synchronize()
        self.assertTrue(torch.equal(back, src))

    def test_elapsed_time_needs_timing(self):
        plain = torch.cuda.Event()
        other = torch.cuda.Event()
        plain.record()
        other.record()
        torch.cuda.synchronize()
        with self.assertRaises((RuntimeError, ValueError)):  # ValueError from 2.15 on
            plain.elapsed_time(other)


class RecordStream(unittest.TestCase):
    def test_block_waits_for_its_recorded_stream(self):
        torch.cuda.synchronize()
        side = torch.cuda.Stream()
        n = 256 * MiB
        big = torch.empty(n, dtype=torch.uint8).pin_memory()
        x = torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")
        ptr = x.data_ptr()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            scratch = big.to("cuda", non_blocking=True)  # keeps the side stream busy
            x.record_stream(side)
        del x
        y = torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")
        if not side.query():  # the side stream had not passed the free: no reuse
            self.assertNotEqual(y.data_ptr(), ptr)
        side.synchronize()
        del scratch, y
        z = torch.empty(4 * MiB, dtype=torch.uint8, device="cuda")
        self.assertEqual(z.data_ptr(), ptr)  # once the side stream is done


def main():
    global CAPACITY
    parser = argparse.ArgumentParser()
    parser.add_argument("--mem", type=int, required=True, help="capacity of a device in bytes")
    args, rest = parser.parse_known_args()
    CAPACITY = args.mem
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
