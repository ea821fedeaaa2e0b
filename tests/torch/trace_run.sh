#!/usr/bin/env bash
# trace_run.sh - a torchrun FSDP job traced with Python frames: each rank
# writes its own trace, renamed by its rank once the first NCCL
# communicator names it, holding PyTorch's allocations with the Python
# frames of train_fsdp.py and the all-gathers of FSDP. PyTorch's operators
# let the GIL go before they allocate: at least 95% of the allocations made
# on each rank's main thread carry Python frames all the same, and those of
# autograd's backward threads (pt_autograd_N) that carry none (the backward
# pass's own, in C++) are grouped by `top --by python` as such. `fsdpshim
# sim` names both files at the end; `report` folds the dispatcher's and the
# interpreter's frames of their stacks, and prints them with --full-stacks.
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
    # the innermost frame is PyTorch's: its allocator's (the cudaMallocAsync
    # backend, libc10_cuda) or, through the adapter, the operator that
    # allocated; the shim's and the adapter's own frames are left out
    grep -qE "^    #0 .*lib(c10_cuda|torch_cpu|torch_cuda)\.so\+0x" "$dir/dump" ||
        fail "rank $r: no stack starting in PyTorch"
    ! grep -q "libfsdpshim" "$dir/dump" || fail "rank $r: a frame of the shim's or the adapter's"
    grep -q "^fsdpshim sim: trace: $f ([0-9]* bytes)$" "$dir/run.out" ||
        fail "sim did not name $f: $(grep 'fsdpshim sim' "$dir/run.out")"
    echo "rank $r: $allocs allocations, $(grep -c ' collective ' "$dir/dump") collectives traced"

    # per thread: allocations, and how many carry Python frames; the main
    # thread's id is the process's
    "$cli" dump --all "$f" >"$dir/all" || fail "dump --all $f"
    pid=$(sed -n 's/^# trace .*: format [0-9]*, pid \([0-9]*\),.*/\1/p' "$dir/all")
    awk -v pid="$pid" '
        function done_alloc() { if (tid != "") { n[tid]++; if (py) with[tid]++ } tid = "" }
        $1 == "#" && $2 == "thread" { name[$3] = $4; next }
        $2 == "alloc" { done_alloc(); split($3, kv, "="); tid = kv[2]; py = 0; next }
        /^    py#/ { py = 1; next }
        /^    #/ { next }
        { done_alloc() }
        END {
            done_alloc()
            for (t in n) {
                role = t == pid ? "main" : name[t] ~ /^pt_autograd_/ ? "autograd" : "other"
                total[role] += n[t]; framed[role] += with[t]
            }
            for (role in total) print role, total[role], framed[role] + 0
        }' "$dir/all" >"$dir/threads"
    read -r _ main main_framed < <(grep "^main " "$dir/threads")
    read -r _ autograd autograd_framed < <(grep "^autograd " "$dir/threads")
    [ "${main:-0}" -ge 100 ] || fail "rank $r: ${main:-no} allocations on the main thread: $(cat "$dir/threads")"
    [ "$((main_framed * 100))" -ge "$((main * 95))" ] ||
        fail "rank $r: $main_framed of $main allocations on the main thread carry Python frames (< 95%)"
    [ "${autograd:-0}" -gt 0 ] || fail "rank $r: no allocation on autograd's threads: $(cat "$dir/threads")"
    "$cli" top --by python --sort count -n 1000 --no-symbols "$f" >"$dir/top" 2>"$dir/top.err" ||
        fail "top --by python $f: $(cat "$dir/top.err")"
    grouped=$(grep -B1 -x "    (autograd backward thread: no Python frames)" "$dir/top" | awk 'NR == 1 { print $5 }')
    [ "${grouped:-0}" -eq "$((autograd - autograd_framed))" ] ||
        fail "rank $r: autograd's threads made $((autograd - autograd_framed)) allocations without Python frames, top groups ${grouped:-none} as such: $(head -8 "$dir/top")"
    echo "rank $r: main thread: $main_framed of $main allocations with Python frames;" \
        "autograd's threads: $autograd_framed of $autograd ($((autograd - autograd_framed)) grouped as autograd's)"
done

# the five sites by stack of rank 0: folded, the dispatcher's and the
# interpreter's runs are one line each, the allocation's first frame in
# PyTorch (its cudaMallocAsync backend, or through the adapter the
# operator's empty_strided) and the Python frames stay, in under half the
# lines of the whole stacks
"$cli" report "$dir/trace-0.fst" >"$dir/folded" 2>"$dir/report.err" || fail "report: $(cat "$dir/report.err")"
"$cli" report --full-stacks "$dir/trace-0.fst" >"$dir/full" 2>>"$dir/report.err" ||
    fail "report --full-stacks: $(cat "$dir/report.err")"
for want in "frames folded: PyTorch's dispatcher" "frames folded: the Python interpreter" \
    "CUDACachingAllocator\|empty_strided" "train_fsdp.py:[0-9]*:"; do
    grep -q "$want" "$dir/folded" || fail "folded: no '$want': $(cat "$dir/folded")"
done
for gone in "at::_ops::" "c10::impl::" "_PyEval_EvalFrameDefault"; do
    ! grep -q "^    $gone" "$dir/folded" || fail "folded: a frame of $gone: $(cat "$dir/folded")"
    grep -q "^    $gone" "$dir/full" || fail "--full-stacks: no frame of $gone"
done
! grep -q "frames folded" "$dir/full" || fail "--full-stacks folded"
lines() { sed -n '/sites (by stack) that held the most/,$p' "$1" | wc -l; }
[ $((2 * $(lines "$dir/folded"))) -lt "$(lines "$dir/full")" ] ||
    fail "folded: $(lines "$dir/folded") lines, whole: $(lines "$dir/full")"
echo "report: the sites by stack in $(lines "$dir/folded") lines, $(lines "$dir/full") whole"
echo "trace_run: ok"
