#!/usr/bin/env bash
# record.sh - records the golden traces (tests/analysis/golden/traces/): a
# fixed set of real traces on which golden_test.sh runs every analyzer
# command and compares the output byte for byte with expected/. Run by hand,
# only when the set itself should change (a new event kind, a new format
# version): the traces are committed, so the analyzer's output on them must
# stay the same across refactors (issue 29's "byte-identical" check).
#
#   tests/analysis/golden/record.sh BUILD_DIR [PYTHON]
#
# BUILD_DIR: a configured, built tree (bin/fsdpshim, bin/trace_prog,
# bin/minifsdp, lib/sim). PYTHON: a Python with PyTorch, for the traced FSDP
# job with Python frames (left out without it). Afterwards, run
# golden_test.sh with --update and read the diff of expected/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
py=${2:-}
cli=$build/bin/fsdpshim prog=$build/bin/trace_prog
out=$here/traces
mkdir -p "$out"
rm -f "$out"/*.fst
export LD_LIBRARY_PATH=$build/lib/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
unset FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST NVTX_INJECTION64_PATH
conf=segment_growth:pytorch
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

for mode in sites leak fragment backward_thread; do
    "$cli" run --conf "$conf" --trace -o "$out/$mode.fst" -- "$prog" "$mode" >/dev/null
done
FSDPSHIM_SIM_MEM=62M FSDPSHIM_OOM_DIR=$scratch \
    "$cli" run --conf "$conf" --trace -o "$out/oom.fst" -- "$prog" oom >/dev/null
FSDPSHIM_SIM_MEM=62M FSDPSHIM_OOM_DIR=$scratch "$cli" run --conf "$conf,cross_stream_reuse:none" --trace \
    -o "$out/oom_streams.fst" -- "$prog" oom_streams >/dev/null
"$cli" run --conf "$conf" --trace -o "$out/mf-%r.fst" -- "$build/bin/minifsdp" >/dev/null
if [ -n "$py" ]; then
    FSDPSHIM_TRACE="$out/torch-%r.fst" "$cli" sim --devices 2 --conf trace:python -- \
        "$py" -m torch.distributed.run --standalone --nproc-per-node 2 \
        "$here/../../../examples/train_fsdp.py" --fsdp 2 --steps 2 >"$scratch/torch.out" 2>&1 ||
        { cat "$scratch/torch.out" >&2; exit 1; }
fi
ls -l "$out"
