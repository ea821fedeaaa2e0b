#!/usr/bin/env bash
# demo.sh - installs what is missing, builds, and runs the bundled FSDP-style
# example (examples/minifsdp.c, 4 ranks as processes) without and then under
# the shim: on the GPU when one is present, otherwise on the simulated
# device. Prints what the shim did: device allocations with and without it,
# peak device memory (and what the shim's peak is made of), and the
# all-gather rate limiter's figures. The run under the shim is traced (one
# trace per rank in build/demo/) and summed up by `fsdpshim report`: its text,
# and the path of its HTML page with the memory timeline (build/demo/report.html).
#
#   scripts/demo.sh [minifsdp options]     e.g. --layers 8 --numel 400000 --steps 5
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
echo "demo: built build/lib/libfsdpshim.so, build/bin/fsdpshim and the simulated device"

ranks=4
program=build/bin/minifsdp
where="the simulated device (build/lib/sim, $ranks of its 8 devices)"
if command -v nvidia-smi >/dev/null 2>&1 && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') &&
    [ "$gpus" -gt 0 ]; then
    # One rank per device, as NCCL requires.
    ranks=$((gpus < 4 ? gpus : 4))
    program=build/bin/minifsdp_gpu
    where="$ranks GPU(s)"
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
args=(--ranks "$ranks" --layers 8 --numel 400000 --steps 5 "$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
demo=build/demo
mkdir -p "$demo"
rm -f "$demo"/minifsdp-*.fst "$demo/report.html"

echo "demo: running minifsdp ${args[*]} on $where"
echo
echo "== without the shim =="
FSDPSHIM_SIM_STATS=1 "$program" "${args[@]}" 2>&1 | tee "$tmp/without" | sort
echo
echo "== under the shim, traced: build/bin/fsdpshim run --trace -o $demo/minifsdp-%r.fst --" \
    "$program ${args[*]} =="
FSDPSHIM_SIM_STATS=1 FSDPSHIM_LOG=info build/bin/fsdpshim run --trace -o "$demo/minifsdp-%r.fst" -- \
    "$program" "${args[@]}" 2>&1 | tee "$tmp/with" | grep -v 'active on' | sort

results() { grep '^minifsdp rank' "$1" | sed 's/, [0-9.]* ms$//' | sort; }
sum() { { grep -o "$1=[0-9]*" "$2" || true; } | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }'; }
# The highest device's peak, in MB.
peak() { { grep -o "peak_used_bytes=[0-9]*" "$1" || true; } | cut -d= -f2 |
    awk '$1 > m { m = $1 } END { printf "%.1f MB", m / 1e6 }'; }
echo
if [ "$(results "$tmp/without")" = "$(results "$tmp/with")" ]; then
    echo "demo: every rank's results are identical with and without the shim"
else
    echo "demo: RESULTS DIFFER with the shim" >&2
    exit 1
fi
# The shim's own lines: "device D: N allocations served by M device
# allocations; ..." and "rate limiter: N waits, T ms waiting in total; ...".
served() { sed -n 's/.*device [0-9]*: \([0-9]*\) allocations served by.*/\1/p' "$1" |
    awk '{ s += $1 } END { print s + 0 }'; }
waits() { sed -n 's/.*rate limiter: \([0-9]*\) waits, \([0-9.]*\) ms.*/\1 \2/p' "$1" |
    awk '{ n += $1; t += $2 } END { printf "%d (%.0f ms in all)", n, t }'; }
if grep -q fsdpshim-sim "$tmp/with"; then
    echo
    echo "demo: side by side, all $ranks ranks"
    printf '  %-52s %16s   %s\n' "" "without the shim" "with it" \
        "device allocations (cudaMalloc reaching the GPU)" "$(sum device_allocs "$tmp/without")" \
        "$(sum device_allocs "$tmp/with")" \
        "device frees (a GPU's cudaFree waits for all work)" "$(sum device_frees "$tmp/without")" \
        "$(sum device_frees "$tmp/with")" \
        "peak device memory (highest device)" "$(peak "$tmp/without")" "$(peak "$tmp/with")" \
        "allocations served from the shim's cache" "-" "$(served "$tmp/with")" \
        "all-gathers the rate limiter held back" "-" "$(waits "$tmp/with")"
    echo "demo: frees on other streams are reused without a host synchronisation: the shim orders"
    echo "      them with events on the GPU (docs/allocator.md, \"Streams and deferred frees\")."
fi
echo "demo: the shim's peak is what it reserves, cached free blocks included; while a device's cache"
echo "      is small, each block from 1 to 10 MiB gets a segment of its own size, and blocks share"
echo "      PyTorch's 20 MiB segments only once the cache holds that much (docs/allocator.md)"
echo
echo "== build/bin/fsdpshim report -n 3 --html $demo/report.html $demo/minifsdp-*.fst =="
build/bin/fsdpshim report -n 3 --html "$demo/report.html" "$demo"/minifsdp-*.fst
echo "demo: the report's page, with the memory timeline of every rank, device and stream:" \
    "$(pwd)/$demo/report.html (open it in a browser; it needs no network)"
