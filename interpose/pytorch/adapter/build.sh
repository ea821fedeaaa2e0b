#!/bin/sh
# build.sh - builds fsdpshim's PyTorch adapter for the PyTorch that PYTHON
# imports, into DIR/libfsdpshim_torch.so, the way a PyTorch C++ extension is
# built on first use: against that PyTorch's own headers and libraries, with
# the system's C++ compiler (c++, or CXX). Run by the route
# (route/torch_route.c) when no adapter was built for that PyTorch with
# fsdpshim itself; installed beside the adapter's sources
# (share/fsdpshim/torch-adapter/).
#
#   build.sh PYTHON DIR
#
# Several ranks may ask at once: one builds under a lock on DIR/.lock, the
# others wait for it and find the library there. The library appears
# whole or not at all (built under a temporary name, then renamed). CUDA's
# headers and runtime come from CUDA_HOME (default /usr/local/cuda) or, where
# that has none, from the CUDA wheels PyTorch depends on (nvidia/cu*).
# Exit status 0 when DIR holds the adapter, else 1 with the reason on stderr.
set -eu
python=$1
dir=$2
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
[ -f "$dir/libfsdpshim_torch.so" ] && exit 0

info=$("$python" -W ignore -c '
import os, sys, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
print(os.path.dirname(torch.__file__))
print(torch.__version__ + "@" + torch.version.git_version)
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(site)
') || { echo "build.sh: $python cannot import torch" >&2; exit 1; }
torch_dir=$(echo "$info" | sed -n 1p)
key=$(echo "$info" | sed -n 2p)
abi=$(echo "$info" | sed -n 3p)
site=$(echo "$info" | sed -n 4p)
minor=$(echo "$key" | sed -n 's/^2\.\([0-9]*\)\..*/\1/p')
[ -n "$minor" ] && [ "$minor" -ge 11 ] || { echo "build.sh: PyTorch $key: 2.11 or later is served" >&2; exit 1; }

cuda=${CUDA_HOME:-/usr/local/cuda}
if [ -f "$cuda/include/cuda_runtime_api.h" ]; then
    cuda_inc=$cuda/include
    cudart=$(ls "$cuda"/lib64/libcudart.so* 2>/dev/null | head -1)
else
    cuda_inc=$(dirname "$(ls "$site"/nvidia/cu*/include/cuda_runtime_api.h 2>/dev/null | head -1)")
    cudart=$(ls "$site"/nvidia/cu*/lib/libcudart.so* 2>/dev/null | head -1)
fi
[ -f "$cuda_inc/cuda_runtime_api.h" ] && [ -n "$cudart" ] ||
    { echo "build.sh: no CUDA headers and runtime (CUDA_HOME or PyTorch's CUDA wheels)" >&2; exit 1; }
cxx=${CXX:-c++}
command -v "$cxx" >/dev/null || { echo "build.sh: no C++ compiler ($cxx)" >&2; exit 1; }

tmp="$dir/.libfsdpshim_torch.so.$$"
trap 'rm -f "$tmp"' EXIT
"$cxx" -std=c++20 -O2 -fPIC -shared -fvisibility=hidden -fvisibility-inlines-hidden \
    -isystem "$torch_dir/include" -isystem "$cuda_inc" \
    -DFS_TORCH_MINOR="$minor" -DFS_TORCH_KEY="\"$key\"" -D_GLIBCXX_USE_CXX11_ABI="$abi" \
    "$src"/adapter/*.cpp -o "$tmp" \
    "$torch_dir/lib/libc10_cuda.so" "$torch_dir/lib/libc10.so" "$cudart" \
    -Wl,-rpath,"$torch_dir/lib" ||
    { echo "build.sh: compiling the adapter for PyTorch $key failed" >&2; exit 1; }
mv "$tmp" "$dir/libfsdpshim_torch.so"
