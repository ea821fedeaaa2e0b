"""collectives.py - torch.distributed's NCCL process group on the simulated
device, data checked.

    torchrun --standalone --nproc-per-node N collectives.py

Each rank takes device LOCAL_RANK and runs all_gather_into_tensor,
reduce_scatter_tensor, all_reduce and broadcast, in float32, bfloat16 and
int64, on the current stream and with async_op=True on its own work. Kernels
compute nothing on the sim, so every input reaches the device by a copy from
the host and every result is copied back and compared with what the host
computes.
"""
import os
import sys

import torch
import torch.distributed as dist

DTYPES = (torch.float32, torch.bfloat16, torch.int64)


def host_input(rank, n, dtype):
    # Small integers: exact in every dtype, also summed over 4 ranks.
    return ((torch.arange(n) * 7 + rank * 13) % 61 - 30).to(dtype)


def check(cond, what):
    if not cond:
        sys.exit(f"collectives.py rank {dist.get_rank()}: FAILED: {what}")


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    check(dist.get_world_size() == world and dist.get_backend() == "nccl", "the process group")
    n = 1000 * world + 24  # not a multiple of anything handy

    for dtype in DTYPES:
        inputs = [host_input(r, n, dtype) for r in range(world)]
        mine = inputs[rank].cuda()

        out = torch.empty(world * n, dtype=dtype, device="cuda")
        dist.all_gather_into_tensor(out, mine)
        check(torch.equal(out.cpu(), torch.cat(inputs)), f"all_gather_into_tensor {dtype}")

        chunk = n - n % world
        part = torch.empty(chunk // world, dtype=dtype, device="cuda")
        dist.reduce_scatter_tensor(part, mine[:chunk].contiguous(), op=dist.ReduceOp.SUM)
        total = torch.stack([i[:chunk] for i in inputs]).to(torch.float64).sum(0)
        want = total.view(world, -1)[rank].to(dtype)
        check(torch.equal(part.cpu(), want), f"reduce_scatter_tensor sum {dtype}")

        for op, reduce in ((dist.ReduceOp.SUM, lambda t: t.sum(0)),
                           (dist.ReduceOp.MAX, lambda t: t.max(0).values)):
            t = inputs[rank].cuda()
            work = dist.all_reduce(t, op=op, async_op=True)
            work.wait()
            want = reduce(torch.stack(inputs).to(torch.float64)).to(dtype)
            check(torch.equal(t.cpu(), want), f"all_reduce {op} {dtype}")

        src = world - 1
        t = inputs[rank].cuda()
        dist.broadcast(t, src=src)
        check(torch.equal(t.cpu(), inputs[src]), f"broadcast from {src} {dtype}")

    # A collective on a side stream, ordered after a copy on it.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = inputs[rank].cuda()
        dist.all_reduce(t)
    side.synchronize()
    want = torch.stack(inputs).to(torch.float64).sum(0).to(inputs[0].dtype)
    check(torch.equal(t.cpu(), want), "all_reduce on a side stream")

    dist.barrier()
    dist.destroy_process_group()
    print(f"collectives.py rank {rank} of {world}: ok\n", end="", flush=True)  # one write


if __name__ == "__main__":
    main()
