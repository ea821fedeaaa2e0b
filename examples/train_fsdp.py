#!/usr/bin/env python3
"""train_fsdp.py - a small decoder-only transformer trained with PyTorch FSDP,
to measure the device memory a sharded training job needs.

    torchrun --standalone --nproc-per-node 4 examples/train_fsdp.py --fsdp 2 --size small
    python examples/train_fsdp.py --fsdp 1 --steps 3          # one process, no torchrun
    fsdpshim run -- torchrun --nproc-per-node 2 examples/train_fsdp.py --fsdp 2

The model: token and position embeddings, pre-LayerNorm blocks of causal
self-attention (torch.nn.functional.scaled_dot_product_attention) and a GELU
MLP, a final LayerNorm and an output head (its own weight, or the token
embedding's with --tie). --fsdp 1 wraps every block and then the root in
FullyShardedDataParallel; --fsdp 2 applies fully_shard the same way. --bf16
computes in bfloat16 with float32 gradient reduction. The model is built on
the meta device and materialised shard by shard (to_empty, then the weights
are initialised), so no rank ever holds the whole model: the large presets
(--size 7b and up) fit wherever their shards do, and a dry run of them on the
simulated device needs no host memory for the weights.

The run is reproducible: a fixed seed, deterministic algorithms
(torch.use_deterministic_algorithms, with CUBLAS_WORKSPACE_CONFIG set when
the user has not), so that the losses of two runs, natively and under an
allocator such as fsdpshim, can be compared digit for digit. Rank 0 prints
its per-step loss and time, then the median step time (the first step,
which pays for warm-up, left out when there are more), and every rank one
line:

    train_fsdp: rank R: max_memory_allocated=B max_memory_reserved=B peak_device_used=B

max_memory_* are PyTorch's allocator statistics; peak_device_used is the
peak of the device memory in use as NVML reports it (nvmlDeviceGetMemoryInfo,
asked of libnvidia-ml.so.1), sampled by a background thread every
--sample-ms: the device's own view, from outside the process's allocators,
which also counts the CUDA context, NCCL's buffers and the CUDA libraries'
workspaces. Not the CUDA runtime's cudaMemGetInfo, nor the driver's
cuMemGetInfo: an allocator that interposes on CUDA, as fsdpshim does,
answers both (even the driver's, when it is looked up with dlsym, as ctypes
does) and counts its own cached blocks as free, which is right for
PyTorch's sizing but not a measurement. Losses are meaningless on the simulated device, whose
kernels compute nothing; everything else (the allocation sequence, streams,
collectives, peak memory) is what the job does on a GPU. Inputs are made on
the host and copied to the device, so the data that enters the model is
real there too. On the sim keep batch * seq at most 3072 tokens: beyond,
the embedding's backward reads a count computed on the device.
"""
import argparse
import ctypes
import os
import socket
import statistics
import sys
import threading
import time

# cuBLAS is deterministic only with a fixed workspace configuration, read
# when its first handle is made: set before torch touches the device.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# name: (dim, layers, heads, vocab); MLP hidden size 4 * dim.
PRESETS = {
    "tiny": (64, 2, 4, 512),
    "small": (256, 4, 8, 4096),
    "medium": (1024, 12, 16, 32000),
    "1b": (2048, 18, 16, 32000),
    "7b": (4096, 32, 32, 32000),
    "13b": (5120, 40, 40, 32000),
    "30b": (6656, 60, 52, 32000),
    "70b": (8192, 80, 64, 32000),
}
INIT_STD = 0.02


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, dim, layers, heads, vocab, max_seq, tie):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        # Tied: the head is the token embedding's weight, used as it is, so
        # there is one parameter and nothing to re-tie after to_empty.
        self.head = None if tie else nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        x = self.ln(x)
        return F.linear(x, self.tok.weight) if self.head is None else self.head(x)


def say(line):
    """Prints one line in one write, so that the lines of ranks sharing a
    pipe never interleave (print writes the text and its newline apart when
    stdout is unbuffered)."""
    print(line + "\n", end="", flush=True)


def init_own_parameters(module):
    """Initialises the parameters a module holds itself (not its children's),
    after to_empty: GPT-2's scheme."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=INIT_STD)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class PeakSampler(threading.Thread):
    """Samples the memory in use on one device, as NVML sees it, every
    period: whoever allocated it, and out of reach of any allocator that
    interposes on CUDA. The device is found by its PCI address, which NVML
    and CUDA agree on whatever CUDA_VISIBLE_DEVICES says."""

    def __init__(self, device, period_s):
        super().__init__(daemon=True, name="peak-sampler")
        self.device = device
        self.period_s = period_s
        self.peak = 0
        self.done = threading.Event()
        self.nvml = ctypes.CDLL("libnvidia-ml.so.1")
        self.check("nvmlInit_v2", self.nvml.nvmlInit_v2())
        p = torch.cuda.get_device_properties(device)
        bus = f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
        self.handle = ctypes.c_void_p()
        self.check(f"nvmlDeviceGetHandleByPciBusId_v2({bus})",
                   self.nvml.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(),
                                                              ctypes.byref(self.handle)))

    @staticmethod
    def check(what, res):
        if res != 0:
            raise RuntimeError(f"{what} failed: nvmlReturn_t {res}")

    def sample(self):
        memory = NvmlMemory()
        self.check("nvmlDeviceGetMemoryInfo", self.nvml.nvmlDeviceGetMemoryInfo(self.handle, ctypes.byref(memory)))
        self.peak = max(self.peak, memory.used)

    def run(self):
        torch.cuda.set_device(self.device)
        while not self.done.wait(self.period_s):
            self.sample()

    def stop(self):
        self.done.set()
        self.join()
        self.sample()
        return self.peak


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fsdp", type=int, choices=(1, 2), default=2,
                   help="1: FullyShardedDataParallel; 2: fully_shard [2]")
    p.add_argument("--size", choices=PRESETS, default="tiny",
                   help="model preset [tiny]: " + ", ".join(
                       f"{k} (dim {v[0]}, {v[1]} layers)" for k, v in PRESETS.items()))
    p.add_argument("--steps", type=int, default=3, help="training steps [3]")
    p.add_argument("--batch", type=int, default=2, help="sequences per rank and step [2]")
    p.add_argument("--seq", type=int, default=64, help="tokens per sequence [64]")
    p.add_argument("--bf16", action="store_true",
                   help="mixed precision: bfloat16 compute, float32 reduction and master weights")
    p.add_argument("--tie", action="store_true", help="output head shares the token embedding")
    p.add_argument("--seed", type=int, default=0, help="random seed [0]")
    p.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate [1e-4]")
    p.add_argument("--sample-ms", type=float, default=2.0,
                   help="device memory sampling period in milliseconds [2]")
    return p.parse_args()


def init_distributed():
    """Joins the job torchrun started, or makes a job of one process."""
    if "RANK" not in os.environ:
        with socket.socket() as s:  # a free port for the one-process rendezvous
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    dist.init_process_group("nccl", device_id=device)
    return dist.get_rank(), dist.get_world_size(), device


def shard_fsdp1(model, device, bf16):
    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    def materialise(module):  # called once per module that has meta tensors
        module.to_empty(device=device, recurse=False)
        init_own_parameters(module)

    mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32,
                        buffer_dtype=torch.bfloat16) if bf16 else None
    return FullyShardedDataParallel(model, auto_wrap_policy=ModuleWrapPolicy({Block}),
                                    mixed_precision=mp, device_id=device,
                                    param_init_fn=materialise, use_orig_params=True)


def shard_fsdp2(model, device, bf16):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if bf16 else MixedPrecisionPolicy()
    for block in model.blocks:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    model.to_empty(device=device)
    for module in model.modules():
        init_own_parameters(module)
    return model


def main():
    args = parse_args()
    rank, world, device = init_distributed()
    dim, layers, heads, vocab = PRESETS[args.size]
    torch.manual_seed(args.seed)
    # Not warn_only: with it, the memory-efficient attention backward keeps
    # its non-deterministic algorithm, and two native runs on an H200 differed
    # in the sixth digit of the loss.
    torch.use_deterministic_algorithms(True)

    with torch.device("meta"):
        model = Transformer(dim, layers, heads, vocab, args.seq, args.tie)
    n_params = sum(p.numel() for p in model.parameters())
    if rank == 0:
        say(f"train_fsdp: FSDP{args.fsdp} size={args.size} params={n_params} world={world} "
            f"batch={args.batch} seq={args.seq} steps={args.steps} "
            f"{'bf16' if args.bf16 else 'fp32'}{' tied' if args.tie else ''}")

    sampler = PeakSampler(device, args.sample_ms / 1000.0)
    sampler.start()
    shard = shard_fsdp1 if args.fsdp == 1 else shard_fsdp2
    model = shard(model, device, args.bf16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    # Data from the host, different on every rank, the same on every run.
    data = torch.Generator().manual_seed(args.seed + 1 + rank)
    step_ms = []
    for step in range(1, args.steps + 1):
        tokens = torch.randint(0, vocab, (args.batch, args.seq + 1), generator=data)
        inputs, targets = tokens[:, :-1].to(device), tokens[:, 1:].to(device)
        started = time.perf_counter()
        logits = model(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        value = loss.item()  # also waits for the step
        step_ms.append((time.perf_counter() - started) * 1000)
        if rank == 0:
            say(f"train_fsdp: step {step} loss {value:.6f} ({step_ms[-1]:.2f} ms)")
    if rank == 0:
        timed = step_ms[1:] if len(step_ms) > 1 else step_ms
        say(f"train_fsdp: median step {statistics.median(timed):.3f} ms "
            f"over {len(timed)} steps")

    torch.cuda.synchronize()
    peak = sampler.stop()
    say(f"train_fsdp: rank {rank}: max_memory_allocated={torch.cuda.max_memory_allocated()} "
        f"max_memory_reserved={torch.cuda.max_memory_reserved()} peak_device_used={peak}")
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
