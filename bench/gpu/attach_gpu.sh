#!/usr/bin/env bash
# attach_gpu.sh - the trace-only ways in on a PyTorch program on a GPU, for
# on_gpu.sh --then: tests/torch/attach_torch.sh with the program on the real
# device (CUDA_INJECTION64_PATH=libfsdpshim.so from its start, then
# `fsdpshim attach PID` while it runs). The lent GPU machines have no gdb but
# NVIDIA's cuda-gdb, a gdb with Python: it stands in for gdb here.
#
#   attach_gpu.sh BUILD LOGDIR
build=$1 logs=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$logs"
say() { echo "attach_gpu: $*"; }
wrap=$(mktemp -d)
if ! command -v gdb >/dev/null && command -v cuda-gdb >/dev/null; then
    printf '#!/bin/sh\nexec cuda-gdb "$@"\n' >"$wrap/gdb"
    chmod +x "$wrap/gdb"
    say "gdb is cuda-gdb: $(cuda-gdb --version 2>&1 | head -1)"
fi
export PATH=$wrap:$PATH
say "gdb's Python: $(timeout 30 gdb -nx -batch -ex 'python print("works")' 2>&1 | tail -1)"
t0=$SECONDS
timeout 170 bash "$src/tests/torch/attach_torch.sh" "$build/bin/fsdpshim" "$build/lib/libfsdpshim.so" \
    python3 gpu >"$logs/attach_torch.log" 2>&1
rc=$?
say "attach_torch.sh on the GPU: exit $rc in $((SECONDS - t0)) s"
tail -15 "$logs/attach_torch.log"
