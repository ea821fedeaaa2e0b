#!/usr/bin/env bash
# torch_imports.sh - writes the entry points PyTorch's libraries import from
# libcudart.so.13, libnccl.so.2, libcublas.so.13, libcublasLt.so.13 and
# libcudnn.so.9, for each torch version given (default: 2.15.0, the pinned
# one, and 2.11.0), into sim/imports/torch-<v>-<lib>.txt (lib: libcudart,
# libnccl, libcublas, libcublasLt, libcudnn), and the driver functions they
# look up by name (dlsym on libcuda.so.1, cudaGetDriverEntryPoint) into
# sim/imports/torch-<v>-libcuda.txt.
# The ratchet test sim_torch_imports checks those committed lists against
# what the built sim exports.
#
# Usage: scripts/torch_imports.sh [VERSION...]
#
# Each wheel (the Linux x86_64 CUDA wheel for the running Python, 0.5-3 GB)
# is downloaded once into ${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim/wheels,
# outside the source tree; only torch/lib/*.so* is unpacked, into a
# temporary directory.
#
# Attribution: the runtime's symbols are versioned, so an undefined symbol
# bound to @libcudart.so.13 is the runtime's. NCCL exports its entry points
# without a version, so an unversioned undefined symbol named nccl* or
# pnccl* is attributed to libnccl.so.2 by its name. cuBLAS, cuBLASLt and
# cuDNN version their exports like the runtime (@libcublas.so.13,
# @libcublasLt.so.13, @libcudnn.so.9).
#
# The driver is never linked, only looked up by name, so its functions are
# the strings cu<Upper>... in the libraries' data that cuda.h names: the
# filter drops look-alikes such as "cuAZ".
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
out_dir="$here/sim/imports"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim/wheels
python=${PYTHON:-python3}
cuda_h=${CUDA_HOME:-/usr/local/cuda}/include/cuda.h

if [ $# -eq 0 ]; then
    set -- 2.15.0 2.11.0
fi

mkdir -p "$cache" "$out_dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for version in "$@"; do
    wheel=$(ls "$cache"/torch-"$version"-*.whl 2>/dev/null | head -n 1 || true)
    if [ -z "$wheel" ]; then
        "$python" -m pip download --quiet --no-deps --only-binary=:all: \
            --platform manylinux_2_28_x86_64 "torch==$version" -d "$cache"
        wheel=$(ls "$cache"/torch-"$version"-*.whl | head -n 1)
    fi
    unpacked="$work/$version"
    mkdir -p "$unpacked"
    unzip -q -o "$wheel" 'torch/lib/*.so*' -d "$unpacked"
    # One line per (library, symbol): nm prints "U name@version" for an
    # undefined versioned symbol, "U name" for an unversioned one.
    undefined="$work/$version.undefined"
    for lib in "$unpacked"/torch/lib/*.so*; do
        nm -D --undefined-only "$lib" | awk '{print $NF}'
    done | sort -u >"$undefined"

    header() {
        echo "# Entry points torch $version ($(basename "$wheel")) imports from $1,"
        echo "# from $2."
        echo "# Regenerate with scripts/torch_imports.sh $version; checked by sim_torch_imports."
    }
    {
        header libcudart.so.13 "nm -D --undefined-only torch/lib/*.so*: symbols bound to the version node @libcudart.so.13"
        sed -n 's/@libcudart\.so\.13$//p' "$undefined" | sort -u
    } >"$out_dir/torch-$version-libcudart.txt"
    {
        header libnccl.so.2 "nm -D --undefined-only torch/lib/*.so*: unversioned symbols named nccl*/pnccl* (NCCL exports no version node)"
        grep -E '^p?nccl[A-Za-z0-9_]*$' "$undefined" | sort -u
    } >"$out_dir/torch-$version-libnccl.txt"
    for soname in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9; do
        lib=${soname%%.so.*}
        {
            header "$soname" "nm -D --undefined-only torch/lib/*.so*: symbols bound to the version node @$soname"
            sed -n "s/@${soname//./\\.}\$//p" "$undefined" | sort -u
        } >"$out_dir/torch-$version-$lib.txt"
    done
    {
        header libcuda.so.1 "strings -a torch/lib/*.so*: the strings naming a driver function of cuda.h, looked up by name"
        grep -oE '\bcu[A-Z][A-Za-z0-9_]*\b' "$cuda_h" | sort -u >"$work/cuda_h.names"
        for lib in "$unpacked"/torch/lib/*.so*; do
            strings -a "$lib" | grep -E '^cu[A-Z][A-Za-z0-9_]*$' || true
        done | sort -u | comm -12 - "$work/cuda_h.names"
    } >"$out_dir/torch-$version-libcuda.txt"
    echo "torch $version: $(grep -vc '^#' "$out_dir/torch-$version-libcudart.txt") libcudart," \
        "$(grep -vc '^#' "$out_dir/torch-$version-libnccl.txt") libnccl," \
        "$(grep -vc '^#' "$out_dir/torch-$version-libcublas.txt") libcublas," \
        "$(grep -vc '^#' "$out_dir/torch-$version-libcublasLt.txt") libcublasLt," \
        "$(grep -vc '^#' "$out_dir/torch-$version-libcudnn.txt") libcudnn," \
        "$(grep -vc '^#' "$out_dir/torch-$version-libcuda.txt") libcuda imports"
done
