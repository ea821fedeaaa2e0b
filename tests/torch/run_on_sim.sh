#!/usr/bin/env bash
# run_on_sim.sh - runs an unmodified program (PyTorch, a torchrun job) on the
# simulated device, with the meaning of `fsdpshim sim`, which replaces it
# once that command is built:
#
#   run_on_sim.sh [--devices N] [--mem SIZE] [--no-data] [--native] -- CMD...
#
# The sim's libraries (build/lib/sim: libcudart.so.13, libnccl.so.2,
# libcuda.so.1, libcublas.so.13, libcublasLt.so.13, whichever are built) are
# preloaded by path, so that they win over the copies the torch wheel finds
# through its RPATH; --devices, --mem and --no-data set FSDPSHIM_SIM_DEVICES,
# FSDPSHIM_SIM_MEM and FSDPSHIM_SIM_DATA=0; FSDPSHIM_SIM_STATS=1 makes every
# process print its devices' peak_used_bytes at exit. CMD runs under the shim
# through `fsdpshim run` (which routes PyTorch to it), or as it is with
# --native. The build tree is FSDPSHIM_BUILD_DIR (set by tests/torch).
set -euo pipefail

build=${FSDPSHIM_BUILD_DIR:?FSDPSHIM_BUILD_DIR names the build tree}
simdir=$build/lib/sim
native=0
while [ $# -gt 0 ]; do
    case $1 in
        --devices) export FSDPSHIM_SIM_DEVICES=$2; shift 2 ;;
        --mem) export FSDPSHIM_SIM_MEM=$2; shift 2 ;;
        --no-data) export FSDPSHIM_SIM_DATA=0; shift ;;
        --native) native=1; shift ;;
        --) shift; break ;;
        *) echo "run_on_sim.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ $# -gt 0 ] || { echo "usage: run_on_sim.sh [--devices N] [--mem SIZE] [--no-data] [--native] -- CMD..." >&2; exit 2; }
export FSDPSHIM_SIM_STATS=1

preload=""
for lib in libcudart.so.13 libnccl.so.2 libcuda.so.1 libcublas.so.13 libcublasLt.so.13; do
    [ -e "$simdir/$lib" ] && preload=${preload:+$preload:}$simdir/$lib
done

# EXPLORATION ONLY, TO BE REMOVED when the sim provides every entry point
# PyTorch needs: FSDPSHIM_TORCH_PLACEHOLDERS names a directory of do-nothing
# placeholder libraries (not product code, not in the repository) that fill
# what the sim still lacks; its libcuda.so.1 is used only while the sim has
# none. Unset (as in CI), nothing is added.
if [ -n "${FSDPSHIM_TORCH_PLACEHOLDERS:-}" ]; then
    ph=$FSDPSHIM_TORCH_PLACEHOLDERS
    preload=$preload:$ph/libph_cudart.so:$ph/libph_nccl.so
    [ -e "$simdir/libcuda.so.1" ] || export LD_LIBRARY_PATH=$ph/cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

# After what the caller preloads (a sanitizer's runtime must stay first): any
# position wins over the wheel's copies, which are loaded later.
export LD_PRELOAD=${LD_PRELOAD:+$LD_PRELOAD:}$preload
if [ "$native" = 1 ]; then
    exec "$@"
fi
exec "$build/bin/fsdpshim" run -- "$@"
