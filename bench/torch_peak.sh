#!/usr/bin/env bash
# torch_peak - peak device memory of a PyTorch FSDP training script under the
# shim against PyTorch's own caching allocator, on the simulated device
# (SPEC section 14), measured from outside both: `fsdpshim sim`'s report of
# the devices' peaks (everything charged to a device, cached or not), the
# highest over the ranks.
#
#   torch_peak [--runs N] [--ranks N] [SCRIPT [SCRIPT ARGS...]]
#
# SCRIPT defaults to examples/train_fsdp.py; it is run with torchrun and
# `--fsdp 1|2` added. Routes, each run N times (default 3), interleaved so
# that a busy spell of the host hits all of them alike:
#   native      PyTorch's caching allocator, no shim (`fsdpshim sim --native`):
#               the reference, as a user runs the job (PyTorch 2.15: its
#               default NCCL process group)
#   shim        the shim's backend:cudaMallocAsync route (`fsdpshim sim
#               --conf torch_route:async`; on 2.15 TORCH_DIST_USE_NCCL2=0)
#   nocache     FSDP2 with PYTORCH_NO_CUDA_MEMORY_CACHING=1 under the shim:
#               PyTorch hands every tensor to cudaMalloc/cudaFree
#   adapter     the shim behind fsdpshim's PyTorch adapter, the default
#               route (--conf torch_route:adapter, docs/pytorch.md); left out,
#               said, when this build has no adapter for that PyTorch
# Prints the medians with their ranges and, last, exactly
#   summary: peak_ratio_fsdp2=<r> peak_ratio_fsdp1=<r> peak_ratio_nocache=<r>
#            [peak_ratio_adapter_fsdp2=<r> peak_ratio_adapter_fsdp1=<r>]
# (median under the shim / median native, FSDP2's native for nocache).
#
# Environment: PYTHON (the interpreter with torch; default python3 on PATH,
# torchrun next to it), FSDPSHIM_LIB (default: this build's library).
# Exit status 1 when a run fails.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd) # the build tree (this is build/bench/torch_peak)
src=@PROJECT_SOURCE_DIR@ # the source tree
shim=${FSDPSHIM_LIB:-$top/lib/libfsdpshim.so}
runs=3 ranks=2
while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    -h | --help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
    esac
done
script=${1:-$src/examples/train_fsdp.py}
[ $# -gt 0 ] && shift
py=${PYTHON:-$(command -v python3)}
torchrun=$(dirname "$py")/torchrun
for f in "$script" "$shim" "$torchrun"; do
    [ -e "$f" ] || { echo "torch_peak: $f: not found" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run ROUTE FSDP [SCRIPT ARGS]: prints the highest device peak over the ranks
run() {
    local route=$1 fsdp=$2 out=$tmp/out
    shift 2
    local sim=("$top/bin/fsdpshim" sim --devices "$ranks" --lib "$shim")
    (
        unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF PYTORCH_NO_CUDA_MEMORY_CACHING
        unset TORCH_DIST_USE_NCCL2 FSDPSHIM_TORCH_ROUTED
        case $route in
        native) sim+=(--native) ;;
        nocache) export PYTORCH_NO_CUDA_MEMORY_CACHING=1 ;;
        shim) sim+=(--conf torch_route:async) ;;
        adapter) sim+=(--conf torch_route:adapter) ;;
        esac
        "${sim[@]}" -- "$torchrun" --standalone --nproc-per-node "$ranks" "$script" \
            --fsdp "$fsdp" "$@"
    ) >"$out" 2>&1 || { echo "torch_peak: $route fsdp$fsdp failed:" >&2; tail -20 "$out" >&2; exit 1; }
    if [ "$route" = adapter ] && ! grep -q "PyTorch's allocator: fsdpshim's adapter" "$out"; then
        echo "torch_peak: no adapter for this PyTorch in this build: $(grep -m1 'torch_route:adapter' "$out")" >&2
        echo none
        return
    fi
    local p
    p=$(sed -nE 's/^fsdpshim sim: peak .* \(([0-9]+) bytes\) on device.*/\1/p' "$out")
    [ -n "$p" ] || { echo "torch_peak: $route fsdp$fsdp: no peak in fsdpshim sim's report" >&2; exit 1; }
    echo "$p"
}

# median and range of the numbers in file $1: "median min max"
stats() { sort -n "$1" | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'; }

echo "torch_peak: $(basename "$script") on $ranks simulated devices, $runs runs each, interleaved"
configs="native:2 shim:2 native:1 shim:1 nocache:2 adapter:2 adapter:1"
for i in $(seq "$runs"); do
    for c in $configs; do
        p=$(run "${c%:*}" "${c#*:}" "$@")
        if [ "$p" = none ]; then
            configs=${configs/ adapter:2 adapter:1/}
            continue
        fi
        echo "$p" >>"$tmp/${c%:*}${c#*:}"
    done
done
printf '  %-22s %12s %25s\n' "" "median MB" "range MB"
for c in $configs; do
    read -r m lo hi < <(stats "$tmp/${c%:*}${c#*:}")
    printf '  %-22s %12.1f %12.1f - %-12.1f\n' "${c%:*} fsdp${c#*:}" "$(echo "$m / 1000000" | bc -l)" \
        "$(echo "$lo / 1000000" | bc -l)" "$(echo "$hi / 1000000" | bc -l)"
done
ratio() { echo "$(stats "$tmp/$1" | cut -d' ' -f1) $(stats "$tmp/$2" | cut -d' ' -f1)" | awk '{ printf "%.3f", $1 / $2 }'; }
adapter=
if [ -s "$tmp/adapter2" ]; then
    adapter=" peak_ratio_adapter_fsdp2=$(ratio adapter2 native2) peak_ratio_adapter_fsdp1=$(ratio adapter1 native1)"
fi
echo "summary: peak_ratio_fsdp2=$(ratio shim2 native2) peak_ratio_fsdp1=$(ratio shim1 native1)" \
    "peak_ratio_nocache=$(ratio nocache2 native2)$adapter"
