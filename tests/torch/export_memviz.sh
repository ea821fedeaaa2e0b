#!/usr/bin/env bash
# export_memviz.sh - `fsdpshim export --memviz` of a traced torchrun FSDP2
# job on the simulated device (2 ranks, one pickle each), read by PyTorch's
# own tools: `python -m torch.cuda._memory_viz` renders its trace_plot and
# segment_plot pages and accounts its segments (stats), and its structure,
# key by key and type by type, is that of torch.cuda.memory._snapshot()
# taken by PyTorch itself on the sim (snapshot.py). Also checked as the
# memory_viz page reads it (tests/analysis/memviz_check.py), and its live
# blocks at the peak are PyTorch's max_memory_allocated, as train_fsdp.py
# prints it.
#
#   export_memviz.sh FSDPSHIM PYTHON TRAIN_FSDP_PY
set -uo pipefail
cli=$1 py=$2 train=$3
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "export_memviz: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

FSDPSHIM_TRACE="$dir/trace-%r.fst" "$cli" sim --devices 2 --conf trace:python -- \
    "$py" -m torch.distributed.run --standalone --nproc-per-node 2 "$train" --fsdp 2 --steps 2 \
    >"$dir/run.out" 2>&1 || { cat "$dir/run.out" >&2; fail "the traced job failed"; }
"$cli" sim --devices 1 --mem 4G --native -- "$py" "$here/snapshot.py" "$dir/torch.pickle" \
    >"$dir/snap.out" 2>&1 || { cat "$dir/snap.out" >&2; fail "PyTorch's own snapshot failed"; }

"$cli" export --memviz -o "$dir/rank%r.pickle" "$dir/trace-0.fst" "$dir/trace-1.fst" 2>"$dir/err" ||
    fail "export: $(cat "$dir/err")"
for r in 0 1; do
    p=$dir/rank$r.pickle
    [ -s "$p" ] || fail "no pickle for rank $r: $(ls "$dir")"
    python3 "$here/../analysis/memviz_check.py" "$p" >"$dir/check" 2>&1 || fail "rank $r: $(cat "$dir/check")"
    cat "$dir/check"
    "$py" "$here/memviz_compare.py" "$dir/torch.pickle" "$p" >"$dir/compare" 2>&1 ||
        fail "rank $r: $(cat "$dir/compare")"
    # the blocks live at the peak are what PyTorch counted at its peak
    peak=$(sed -n "s/.*rank $r: max_memory_allocated=\([0-9]*\).*/\1/p" "$dir/run.out")
    grep -q "^device $r: .*active_allocated $peak," "$dir/check" ||
        fail "rank $r: max_memory_allocated=$peak, the pickle: $(cat "$dir/check")"
    for plot in trace_plot segment_plot; do
        "$py" -m torch.cuda._memory_viz $plot "$p" -o "$dir/$plot.html" >"$dir/viz.out" 2>&1 ||
            fail "rank $r: $plot: $(cat "$dir/viz.out")"
        grep -q '"snapshot.pickle", "base64"' "$dir/$plot.html" || fail "rank $r: $plot wrote no page"
    done
    "$py" -m torch.cuda._memory_viz stats "$p" >"$dir/stats" 2>"$dir/viz.out" ||
        fail "rank $r: stats: $(cat "$dir/viz.out")"
    segments=$(python3 -c "import pickle,sys; print(len(pickle.load(open(sys.argv[1],'rb'))['segments']))" "$p")
    grep -q "^segments: $segments$" "$dir/stats" || fail "rank $r: stats: $(cat "$dir/stats")"
    echo "rank $r: memory_viz rendered $segments segments; $(grep -c '^ok' "$dir/compare") structures as PyTorch's"
done
echo "export_memviz: ok"
