#!/usr/bin/env bash
# trace_run.sh - a torchrun FSDP job traced with Python frames: each rank
# writes its own trace, renamed by its rank once the first NCCL
# communicator names it, holding PyTorch's allocations with the Python
# frames of train_fsdp.py and the all-gathers of FSDP.
#
#   trace_run.sh FSDPSHIM PYTHON TRAIN_FSDP_PY
set -uo pipefail
cli=$1 py=$2 train=$3
fail() { echo "trace_run: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

FSDPSHIM_TRACE="$dir/trace-%r.fst" "$cli" sim --devices 2 --conf trace:python -- \
    "$py" -m torch.distributed.run --standalone --nproc-per-node 2 "$train" --fsdp 2 --steps 2 \
    >"$dir/run.out" 2>&1 || { cat "$dir/run.out" >&2; fail "the traced job failed"; }
for r in 0 1; do
    f=$dir/trace-$r.fst
    [ -f "$f" ] || fail "no trace named by rank $r: $(ls "$dir")"
    "$cli" dump "$f" >"$dir/dump" 2>"$dir/dump.err" || fail "dump $f: $(cat "$dir/dump.err")"
    [ ! -s "$dir/dump.err" ] || fail "dump $f warned: $(cat "$dir/dump.err")"
    grep -q "^# rank $r of 2$" "$dir/dump" || fail "rank $r: no rank record"
    allocs=$(grep -c ' alloc ' "$dir/dump")
    [ "$allocs" -ge 100 ] || fail "rank $r: only $allocs allocations traced"
    grep -q " collective .*op=all_gather" "$dir/dump" || fail "rank $r: no all-gather traced"
    grep -q "^    py#[0-9]* .*train_fsdp.py:[0-9]*:" "$dir/dump" ||
        fail "rank $r: no Python frame of train_fsdp.py"
    grep -q "^    #0 .*libc10_cuda.so+0x" "$dir/dump" ||
        fail "rank $r: no native frame in PyTorch's allocator"
    echo "rank $r: $allocs allocations, $(grep -c ' collective ' "$dir/dump") collectives traced"
done
echo "trace_run: ok"
