#!/usr/bin/env bash
# attach_torch_gpu.sh - attach_torch.sh on a GPU (label gpu): the trace-only
# ways in (CUDA_INJECTION64_PATH from the start, `fsdpshim attach PID` while
# it runs) on a PyTorch program on the real device, with the machine's own
# python3 and PyTorch. The lent GPU machines have no gdb but NVIDIA's
# cuda-gdb, which `fsdpshim attach` runs then. Exits 77 (skipped) without a
# GPU, without PyTorch in python3, or without either gdb.
#
#   attach_torch_gpu.sh FSDPSHIM LIBFSDPSHIM
cli=$1 shim=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU || exit 77
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || {
    echo "attach_torch_gpu: python3 has no PyTorch with CUDA: skipped"
    exit 77
}
command -v gdb >/dev/null || command -v cuda-gdb >/dev/null || {
    echo "attach_torch_gpu: neither gdb nor cuda-gdb: skipped"
    exit 77
}
bash "$here/attach_torch.sh" "$cli" "$shim" python3 gpu
