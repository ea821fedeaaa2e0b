"""attach_loop.py - a PyTorch program for the trace-only ways in
(attach_torch.sh): it allocates and frees device memory in a loop through
PyTorch's own caching allocator, emptying its cache each time so that every
iteration reaches cudaMalloc and cudaFree, checks every byte it copied to the
device and back, and writes "PID COUNT" to BEAT after each iteration. It
stops when BEAT.stop appears (or after 120 s) and prints "attach_loop: ok N"
only if every check passed.

    python attach_loop.py BEAT
"""
import os
import sys
import time

import torch

beat = sys.argv[1]
stop = beat + ".stop"
dev = torch.device("cuda", 0)
n = 0
start = time.time()
while not os.path.exists(stop) and time.time() - start < 120:
    size = (1 + n % 4) << 20
    host = torch.arange(size, dtype=torch.int32).remainder_(251).to(torch.uint8)
    back = host.to(dev).cpu()
    if not torch.equal(host, back):
        sys.exit("attach_loop: iteration %d: the bytes that came back differ" % n)
    del back
    torch.cuda.empty_cache()
    n += 1
    with open(beat + ".tmp", "w") as f:
        f.write("%d %d\n" % (os.getpid(), n))
    os.replace(beat + ".tmp", beat)
    time.sleep(0.002)
print("attach_loop: ok", n)
