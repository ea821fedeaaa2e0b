#!/usr/bin/env python3
"""overhead.py - what NVIDIA's stack takes on the device outside PyTorch's
allocator, step by step, as NVML sees it: the figures a dry run must charge
to predict a GPU's device peak (issue 28), measured rather than fitted.

    python3 overhead.py            # on a GPU (gpu_bench.sh's `overhead` section)
    fsdpshim sim --native -- python3 overhead.py   # what the sim charges today

Each step is taken once, in this order, and what the device's used memory
(nvmlDeviceGetMemoryInfo, the device found by its PCI address) grew by is
split into what PyTorch's allocator reserved meanwhile and the rest, the
memory outside the allocator:

    context     CUDA's context (torch.cuda.init and a synchronisation)
    first_op    the first tensor and kernel (a fill): the allocator's first
                segment and the first kernels loaded
    matmul      fp32 and bf16 matrix products (cuBLAS/cuBLASLt handles,
                workspaces, their kernels)
    conv        a 2-d convolution (cuDNN's handle and kernels)
    nccl        a one-rank NCCL process group and an all_reduce (NCCL's
                communicator, its buffers and kernels)
    optimizer   an AdamW step over a small model (the foreach kernels)

One line per step:

    overhead: step=context device_MiB=X reserved_MiB=Y outside_MiB=X-Y

Other processes on the device would add to the figures: run it alone.
"""
import ctypes
import os
import sys

import torch

MiB = 1 << 20


class NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class DeviceUsed:
    """The device's used memory as NVML reports it."""

    def __init__(self, device):
        self.nvml = ctypes.CDLL("libnvidia-ml.so.1")
        self.check("nvmlInit_v2", self.nvml.nvmlInit_v2())
        p = torch.cuda.get_device_properties(device)  # no context needed
        bus = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
        self.handle = ctypes.c_void_p()
        self.check("nvmlDeviceGetHandleByPciBusId_v2",
                   self.nvml.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(), ctypes.byref(self.handle)))

    @staticmethod
    def check(what, res):
        if res != 0:
            raise RuntimeError(f"{what} failed: nvmlReturn_t {res}")

    def __call__(self):
        m = NvmlMemory()
        self.check("nvmlDeviceGetMemoryInfo", self.nvml.nvmlDeviceGetMemoryInfo(self.handle, ctypes.byref(m)))
        return m.used


def reserved():
    return torch.cuda.memory_reserved() if torch.cuda.is_initialized() else 0


def context():
    torch.cuda.init()
    torch.cuda.synchronize()


def first_op():
    global keep
    keep = [torch.zeros(1024, device="cuda")]
    torch.cuda.synchronize()


def matmul():
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(1024, 1024, device="cuda", dtype=dtype)
        keep.append(a @ a)
    torch.cuda.synchronize()


def conv():
    x = torch.randn(8, 16, 64, 64, device="cuda")
    w = torch.randn(32, 16, 3, 3, device="cuda")
    keep.append(torch.nn.functional.conv2d(x, w, padding=1))
    torch.cuda.synchronize()


def nccl():
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    t = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    keep.append(t)


def optimizer():
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.Linear(1024, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(16, 1024, device="cuda")).sum().backward()
    opt.step()
    torch.cuda.synchronize()
    keep.append(model)


STEPS = (("context", context), ("first_op", first_op), ("matmul", matmul), ("conv", conv),
         ("nccl", nccl), ("optimizer", optimizer))


def main():
    used = DeviceUsed(0)
    for name, step in STEPS:
        before, res_before = used(), reserved()
        try:
            step()
        except Exception as e:  # a step this machine cannot take: say so, go on
            print(f"overhead: step={name} failed: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        grew, res = used() - before, reserved() - res_before
        print(f"overhead: step={name} device_MiB={grew / MiB:.1f} reserved_MiB={res / MiB:.1f} "
              f"outside_MiB={(grew - res) / MiB:.1f}", flush=True)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


keep = []

if __name__ == "__main__":
    main()
