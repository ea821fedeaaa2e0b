#!/usr/bin/env bash
# gpu_bench.sh - the product measured on a real GPU, every figure of
# docs/gpu-results.md in one run, ending with a results table:
#
#   pair     cached alloc+free from C (pair_bench): the shim (cudaMallocAsync
#            and cudaMalloc routes), CUDA's default pool, cudaMalloc/cudaFree
#   torch    the same through PyTorch's allocator interface from Python
#            (torch_pair.py): PyTorch's caching allocator, CUDA's pool
#            (backend:cudaMallocAsync), the shim on that route (fsdpshim run
#            --conf torch_route:async) and the shim through fsdpshim's
#            PyTorch adapter (torch_route:adapter, the default); through
#            torch.cuda.caching_allocator_alloc (torch.*), through the
#            binding under it (torch_binding.*) and from C++ with no Python
#            (torch_cpp.*, the allocator's own pair)
#   train    examples/train_fsdp.py (FSDP2) under torchrun, one rank: native,
#            natively on CUDA's pool (backend:cudaMallocAsync), under
#            `fsdpshim run`, under it through the adapter (adapter), with
#            PYTORCH_NO_CUDA_MEMORY_CACHING=1 without
#            and with the shim, and traced (trace:python): median step
#            time, peak device memory from NVML, losses
#   fsdp1    the same job with FSDP1, native and under the shim
#   small    a small FSDP2 model (--size small), where allocation is a larger
#            share of a step: native, and PYTORCH_NO_CUDA_MEMORY_CACHING=1
#            without and with the shim
#   tiny     the example's default model (--size tiny), where a step is
#            nearly all host work and allocation is the largest share it can
#            be: native, under the shim, and PYTORCH_NO_CUDA_MEMORY_CACHING=1
#            without and with the shim
#   gap      the rate limiter's wait-to-launch gap on real NCCL (rl_gap)
#   threads  alloc_bench at 1, 8 and 16 threads (host-side allocator cost)
#   overhead what NVIDIA's stack takes outside PyTorch's allocator, step by
#            step (context, first kernel, cuBLAS, cuDNN, NCCL, optimizer;
#            overhead.py), natively: the dry run's missing figures
#
# Variants are interleaved within each round, so that drift falls on every
# one alike; each figure is the median of RUNS rounds with its range. A
# section is skipped, and says so, when the time left before --deadline
# does not cover it. Raw figures go to OUT/raw.txt, each run's output to
# OUT/logs/, the table to OUT/results.txt; the table ends with the medians
# set side by side as issue 13 judges them (each ratio, its target, met or
# MISSED).
#
#   gpu_bench.sh [--runs N] [--out DIR] [--raw FILE] [--deadline SECONDS] [--sim | --predict]
#                [--routes LIST] [SECTION...]
#
# --routes limits the training sections to the routes in LIST (commas:
# native,native_async,shim,adapter,nocache,nocache_shim,trace), for a run with little
# time. native_async is PyTorch with CUDA's own pool (backend:cudaMallocAsync,
# the route the shim serves): what the route costs without the shim.
#
# --raw appends the raw figures to FILE instead (each as soon as it is
# measured: a run cut short keeps them).
#
# --sim runs everything on the simulated device instead (fsdpshim sim,
# the programs built against the sim): a dry run of this script, whose
# figures mean nothing. Paths default to this build tree; PYTHON picks the
# interpreter with PyTorch (default python3).
#
# --predict runs the training sections on the simulated device with the
# GPU's own model sizes (only fewer steps, PREDICT_STEPS, default 4: the
# peaks are reached in the first two), before a GPU session: the dry run's
# prediction of each job's PyTorch max reserved and device peak, recorded
# under the same keys, for dryrun_table.sh to set beside the GPU's. The
# simulated device's size is FSDPSHIM_SIM_MEM (default 81559M, an H100's).
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/.." && pwd)
src=${FSDPSHIM_SRC:-@PROJECT_SOURCE_DIR@}
cli=$build/bin/fsdpshim
shim=$build/lib/libfsdpshim.so
python=${PYTHON:-python3}
runs=5 out=$PWD/gpu-bench raw= deadline=0 sim=0 predict=0 sections=() routes=native,native_async,shim,adapter,nocache,nocache_shim,trace
while [ $# -gt 0 ]; do
    case $1 in
        --runs) runs=$2; shift ;;
        --out) out=$2; shift ;;
        --raw) raw=$2; shift ;;
        --deadline) deadline=$2; shift ;;
        --sim) sim=1 ;;
        --predict) sim=1 predict=1 ;;
        --routes) routes=$2; shift ;;
        pair | torch | train | fsdp1 | small | tiny | gap | threads | overhead) sections+=("$1") ;;
        *) echo "usage: gpu_bench.sh [--runs N] [--out DIR] [--raw FILE] [--deadline S] [--sim | --predict] [--routes LIST] [pair|torch|train|fsdp1|small|tiny|gap|threads|overhead]..." >&2
           exit 2 ;;
    esac
    shift
done
[ ${#sections[@]} -gt 0 ] || sections=(pair train torch gap fsdp1 threads)
mkdir -p "$out/logs" || exit 1
[ -n "$raw" ] || { raw=$out/raw.txt; : >"$raw"; }
started=$SECONDS
train_args=(--fsdp 2 --size medium --batch 8 --seq 512 --steps 20)
small_args=(--fsdp 2 --size small --batch 4 --seq 256 --steps 20)
tiny_args=(--fsdp 2 --size tiny --batch 4 --seq 128 --steps 20)
if [ $sim = 1 ]; then
    pair_bench=$here/pair_bench_sim rl_gap=$here/rl_gap alloc_quick=(--quick)
    native=("$cli" sim --native --) shimmed=("$cli" sim --conf torch_route:async --) adapted=("$cli" sim --conf torch_route:adapter --)
    if [ $predict = 1 ]; then
        # the GPU's jobs, fewer steps; every argument but the last is theirs
        for a in train_args small_args tiny_args; do
            declare -n job=$a
            job[${#job[@]} - 1]=${PREDICT_STEPS:-4}
            unset -n job
        done
        export FSDPSHIM_SIM_MEM=${FSDPSHIM_SIM_MEM:-81559M}
    else
        train_args=(--fsdp 2 --size tiny --batch 2 --seq 64 --steps 3)
        small_args=("${train_args[@]}") tiny_args=("${train_args[@]}")
    fi
else
    pair_bench=$here/pair_bench_gpu rl_gap=$here/rl_gap_gpu alloc_quick=()
    native=() shimmed=("$cli" run --conf torch_route:async --) adapted=("$cli" run --conf torch_route:adapter --)
fi
torchrun=("$python" -m torch.distributed.run --standalone --nproc-per-node 1)

say() { echo "gpu_bench: $*"; }
record() { echo "$1 $2" >>"$raw"; }
# time_left NEEDED: whether NEEDED more seconds fit before the deadline
time_left() { [ "$deadline" -eq 0 ] || [ $((started + deadline - SECONDS)) -ge "$1" ]; }
# run LOG CMD...: CMD's output in LOG; its status, with a line on failure
run() {
    local log=$1
    shift
    "$@" >"$log" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || say "FAILED ($rc): $* (log: $log): $(tail -3 "$log" | tr '\n' ' ')"
    return $rc
}

# run_adapted LOG CMD...: CMD under the shim through fsdpshim's PyTorch
# adapter, as run; a run whose PyTorch did not take the adapter (none built
# for this PyTorch) fails, with the shim's reason, instead of giving the
# other route's figures under the adapter's name
run_adapted() {
    local log=$1
    shift
    FSDPSHIM_LOG=info run "$log" "${adapted[@]}" "$@" || return
    grep -q "PyTorch's allocator: fsdpshim's adapter, built for " "$log" && return
    say "FAILED: the adapter was not taken (log: $log): $(grep -m1 "PyTorch's allocator" "$log")"
    return 1
}

section_pair() {
    local r v mode pre
    for r in $(seq "$runs"); do
        for v in cuda_malloc cuda_pool shim_async shim_malloc; do
            case $v in
                cuda_malloc) mode=malloc pre= ;;
                cuda_pool) mode=async pre= ;;
                shim_async) mode=async pre=$shim ;;
                shim_malloc) mode=malloc pre=$shim ;;
            esac
            local log=$out/logs/pair.$v.$r
            LD_PRELOAD=$pre run "$log" "$pair_bench" "$mode" || continue
            sed -n 's/^pair_bench: mode=[a-z]* size=\([0-9]*\) pairs=[0-9]* ns_per_pair=\([0-9.]*\)$/\1 \2/p' "$log" |
                while read -r size ns; do record "pair.$v.$size" "$ns"; done
        done
    done
}

section_torch() {
    local r v log
    for r in $(seq "$runs"); do
        time_left 20 || { say "torch: stopped after $((r - 1)) rounds (deadline)"; break; }
        for v in torch_caching cuda_pool shim adapter; do
            log=$out/logs/torch.$v.$r
            case $v in
                torch_caching) run "$log" "${native[@]}" "$python" "$src/bench/gpu/torch_pair.py" ;;
                cuda_pool) PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync \
                    run "$log" "${native[@]}" "$python" "$src/bench/gpu/torch_pair.py" ;;
                shim) run "$log" "${shimmed[@]}" "$python" "$src/bench/gpu/torch_pair.py" ;;
                adapter) run_adapted "$log" "$python" "$src/bench/gpu/torch_pair.py" ;;
            esac || continue
            sed -n 's/^torch_pair: backend=[a-zA-Z_]* size=\([0-9]*\) pairs=[0-9]* ns_per_pair=\([0-9.]*\).*/\1 \2/p' "$log" |
                while read -r size ns; do record "torch.$v.$size" "$ns"; done
            sed -n 's/^torch_pair: backend=[a-zA-Z_]* size=\([0-9]*\) pairs=[0-9]* raw_ns_per_pair=\([0-9.]*\)$/\1 \2/p' "$log" |
                while read -r size ns; do record "torch_binding.$v.$size" "$ns"; done
            sed -n 's/^torch_pair: backend=[a-zA-Z_]* size=\([0-9]*\) pairs=[0-9]* cpp_ns_per_pair=\([0-9.]*\)$/\1 \2/p' "$log" |
                while read -r size ns; do record "torch_cpp.$v.$size" "$ns"; done
            sed -n 's/^torch_pair: backend=[a-zA-Z_]* size=\([0-9]*\) pairs=[0-9]* cpp_tracked_ns_per_pair=\([0-9.]*\) .*/\1 \2/p' "$log" |
                while read -r size ns; do record "torch_cpp_tracked.$v.$size" "$ns"; done
            sed -n 's/^torch_pair: .* python_call=\([0-9.]*\)$/\1/p' "$log" |
                while read -r ns; do record "torch.python_call" "$ns"; done
        done
    done
}

# wanted ROUTE: whether --routes lists ROUTE
wanted() { case ,$routes, in *,$1,*) return 0 ;; esac; return 1; }

# train_once ROUTE FSDP R [TAG]: one train_fsdp run with train_args; its
# figures recorded as trainTAG.* (TAG defaults to FSDP), its losses kept in
# OUT/logs/lossesTAG.ROUTE.R
train_once() {
    local route=$1 fsdp=$2 r=$3 tag=${4:-$2} log rc
    local args=("${train_args[@]}")
    args[1]=$fsdp
    log=$out/logs/train$tag.$route.$r
    case $route in
        native) run "$log" "${native[@]}" "${torchrun[@]}" "$src/examples/train_fsdp.py" "${args[@]}" ;;
        # as `fsdpshim run` sets for PyTorch 2.15, whose default NCCL process
        # group aborts on this backend (docs/cli.md); others ignore it
        native_async) PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync TORCH_DIST_USE_NCCL2=0 \
            run "$log" "${native[@]}" "${torchrun[@]}" "$src/examples/train_fsdp.py" "${args[@]}" ;;
        shim) FSDPSHIM_LOG=info \
            run "$log" "${shimmed[@]}" "${torchrun[@]}" "$src/examples/train_fsdp.py" "${args[@]}" ;;
        adapter) run_adapted "$log" "${torchrun[@]}" "$src/examples/train_fsdp.py" "${args[@]}" ;;
        nocache) PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
            run "$log" "${native[@]}" "${torchrun[@]}" "$src/examples/train_fsdp.py" "${args[@]}" ;;
        nocache_shim) PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
            run "$log" "${shimmed[@]}" "${torchrun[@]}" "$src/examples/train_fsdp.py" "${args[@]}" ;;
        trace)
            if [ $sim = 1 ]; then
                run "$log" "$cli" sim --conf trace:python -- env FSDPSHIM_TRACE="$out/logs/trace$fsdp-$r-%p.fst" \
                    "${torchrun[@]}" "$src/examples/train_fsdp.py" "${args[@]}"
            else
                run "$log" "$cli" run --trace -o "$out/logs/trace$fsdp-$r-%p.fst" --conf trace:python -- \
                    "${torchrun[@]}" "$src/examples/train_fsdp.py" "${args[@]}"
            fi ;;
    esac
    rc=$?
    [ $rc -eq 0 ] || return $rc
    sed -n 's/^train_fsdp: step [0-9]* loss \([0-9.na-]*\) .*/\1/p' "$log" >"$out/logs/losses$tag.$route.$r"
    record "train$tag.$route.step_ms" "$(sed -n 's/^train_fsdp: median step \([0-9.]*\) ms.*/\1/p' "$log")"
    record "train$tag.$route.peak_device_MiB" \
        "$(sed -n 's/.*peak_device_used=\([0-9]*\).*/\1/p' "$log" | awk '{ printf "%.1f", $1 / 1048576 }')"
    record "train$tag.$route.max_reserved_MiB" \
        "$(sed -n 's/.*max_memory_reserved=\([0-9]*\).*/\1/p' "$log" | awk '{ printf "%.1f", $1 / 1048576 }')"
    if [ "$route" = trace ]; then
        local f bytes=0
        for f in "$out/logs/trace$fsdp-$r"-*.fst; do
            [ -f "$f" ] && bytes=$((bytes + $(stat -c %s "$f")))
        done
        record "train$tag.trace.trace_MiB" "$(awk -v b=$bytes 'BEGIN { printf "%.2f", b / 1048576 }')"
    fi
}

# same_losses FSDP ROUTE: every run of ROUTE printed the losses of the first
# native run, digit for digit
same_losses() {
    local fsdp=$1 route=$2 f ref=$out/logs/losses$1.native.1 verdict=same
    [ -s "$ref" ] || { echo "no native losses"; return; }
    for f in "$out/logs/losses$fsdp.$route".*; do
        [ -f "$f" ] || { verdict="no runs"; continue; }
        cmp -s "$ref" "$f" || verdict="DIFFER ($(paste -d' ' "$ref" "$f" |
            awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d } END { printf "max |diff| %.6f", m }'))"
    done
    echo "$verdict"
}

section_train() {
    local r route
    for r in $(seq "$runs"); do
        time_left 45 || { say "train: stopped after $((r - 1)) rounds (deadline)"; break; }
        for route in native native_async shim adapter nocache nocache_shim trace; do
            wanted $route && train_once $route 2 "$r"
        done
    done
}

# sized NAME ROUTE...: the training routes listed, on the model of
# NAME_args, recorded as train2NAME.*
sized() {
    local name=$1 r route
    shift
    local -n model=${name}_args
    local train_args=("${model[@]}")
    for r in $(seq "$runs"); do
        time_left 25 || { say "$name: stopped after $((r - 1)) rounds (deadline)"; break; }
        for route in "$@"; do
            wanted "$route" && train_once "$route" 2 "$r" "2$name"
        done
    done
}

section_small() { sized small native nocache nocache_shim; }
section_tiny() { sized tiny native shim adapter nocache nocache_shim; }

section_fsdp1() {
    local r route
    for r in 1 2; do
        for route in native shim adapter; do
            wanted $route && train_once $route 1 "$r"
        done
    done
}

section_gap() {
    local r log
    for r in $(seq "$runs"); do
        log=$out/logs/gap.$r
        FSDPSHIM_CONF=ag_limit:1 FSDPSHIM_LOG=info LD_PRELOAD=$shim run "$log" "$rl_gap" 300 || continue
        record gap.shim_us "$(sed -n 's/^fsdpshim\[[^]]*\]: rate limiter:.*median \([0-9.]*\) us.*/\1/p' "$log")"
        record gap.program_us "$(sed -n 's/^rl_gap: .*: median \([0-9.]*\) us.*/\1/p' "$log")"
    done
}

section_threads() {
    local n log
    for n in 8 16; do
        log=$out/logs/alloc_bench.$n
        run "$log" "$here/alloc_bench" "${alloc_quick[@]}" --threads "$n" || continue
        # mix allocator NS_1 ns NS_N ns MPAIRS_1 MPAIRS_N SCALINGx
        awk -v n="$n" '$1 == "fsdp/pair" || $1 == "fsdp/churn" {
                printf "threads.%s.%s.ns_1 %s\nthreads.%s.%s.ns_%s %s\nthreads.%s.%s.scaling_%s %s\n",
                    $1, $2, $3, $1, $2, n, $5, $1, $2, n, $9 }' "$log" | tr -d x | sed 's|/|_|' >>"$raw"
    done
}

section_overhead() {
    local r log
    for r in $(seq "$runs"); do
        log=$out/logs/overhead.$r
        run "$log" "${native[@]}" "$python" "$src/bench/gpu/overhead.py" || continue
        sed -n 's/^overhead: step=\([a-z_]*\) device_MiB=\([0-9.-]*\) reserved_MiB=[0-9.-]* outside_MiB=\([0-9.-]*\)$/\1 \2 \3/p' "$log" |
            while read -r step dev outside; do
                record "overhead.$step.device_MiB" "$dev"
                record "overhead.$step.outside_MiB" "$outside"
            done
    done
}

# wanted_count ROUTE...: how many of the ROUTEs --routes lists
wanted_count() {
    local n=0 route
    for route in "$@"; do wanted "$route" && n=$((n + 1)); done
    echo $n
}

# rough seconds a section needs, for the deadline (a training section: for
# the routes --routes lists)
need() {
    case $1 in
        pair) echo $((runs * 8)) ;;
        torch) echo $((runs * 27)) ;;
        train) echo $((runs * 8 * $(wanted_count native native_async shim adapter nocache nocache_shim trace))) ;;
        fsdp1) echo 40 ;;
        small) echo $((runs * 7 * $(wanted_count native nocache nocache_shim))) ;;
        tiny) echo $((runs * 7 * $(wanted_count native shim adapter nocache nocache_shim))) ;;
        gap) echo $((runs * 4)) ;;
        threads) echo 90 ;;
        overhead) echo $((runs * 15)) ;;
    esac
}

say "$(date -u +%FT%TZ) out=$out runs=$runs sections=${sections[*]}$([ $sim = 1 ] && echo ' (simulated device)')$([ $predict = 1 ] && echo ', the GPU jobs predicted')"
for s in "${sections[@]}"; do
    if ! time_left "$(need "$s")"; then
        say "section $s skipped: about $(need "$s") s needed, $((started + deadline - SECONDS)) s left"
        continue
    fi
    t0=$SECONDS
    "section_$s"
    say "section $s: $((SECONDS - t0)) s"
done

# ---- the table --------------------------------------------------------------
# medians KEY MEDIAN MIN MAX N, one line per figure of the raw file
medians() {
    sort -s -k1,1 "$raw" | awk -f "$src/bench/gpu/medians.awk"
}

# The medians set side by side as issue 13 judges them (SPEC section 14):
# each line the ratio or difference, and the target it is held to.
verdicts() {
    awk '
        { m[$1] = $2 }
        function has(k) { return (k in m) && m[k] > 0 }
        function line(what, value, target, ok) {
            printf "  %-58s %-18s %s %s\n", what, value, target, ok ? "met" : "MISSED"
        }
        END {
            split("4096 1048576 67108864", sizes, " ")
            for (i = 1; i <= 3; i++) {
                z = sizes[i]; s = "pair.shim_async." z
                if (has(s) && has("pair.cuda_malloc." z))
                    line("pair " z ": cudaMalloc+cudaFree / the shim", sprintf("%.0fx", m["pair.cuda_malloc." z] / m[s]), "(>= 10x)",
                         m["pair.cuda_malloc." z] / m[s] >= 10)
                if (has(s) && has("torch_cpp.torch_caching." z))
                    line("pair " z ": the shim from C / PyTorch cache from C++", sprintf("%.2f", m[s] / m["torch_cpp.torch_caching." z]), "(<= 1)",
                         m[s] <= m["torch_cpp.torch_caching." z])
                for (v = 1; v <= 3; v++) for (w = 1; w <= 2; w++) {
                    via = v == 1 ? "torch_cpp" : v == 2 ? "torch_binding" : "torch"
                    rt = w == 1 ? "shim" : "adapter"
                    a = via "." rt "." z; b = via ".torch_caching." z
                    if (has(a) && has(b))
                        line(via " " z ": " rt " route / PyTorch cache", sprintf("%.2f", m[a] / m[b]), "(<= 1)", m[a] <= m[b])
                }
            }
            split("fsdp_pair fsdp_churn", mixes, " ")
            for (i = 1; i <= 2; i++) {
                k = "threads." mixes[i] ".fsdpshim.scaling_8"
                if (has(k)) line("alloc_bench " mixes[i] ": 8 threads / 1 thread throughput", sprintf("%.2fx", m[k]), "(>= 6x)", m[k] >= 6)
                k = "threads." mixes[i] ".fsdpshim.scaling_16"
                if (has(k)) printf "  %-58s %.2fx\n", "alloc_bench " mixes[i] ": 16 threads / 1 thread throughput", m[k]
            }
            split("2 2small 2tiny 1", jobs, " ")
            for (i = 1; i <= 4; i++) {
                t = "train" jobs[i]
                for (w = 1; w <= 2; w++) {
                    rt = w == 1 ? "shim" : "adapter"
                    if (has(t ".native.step_ms") && has(t "." rt ".step_ms"))
                        line(t ": step time, " rt " against native", sprintf("%+.1f%%", 100 * (m[t "." rt ".step_ms"] / m[t ".native.step_ms"] - 1)), "(<= +3%)",
                             m[t "." rt ".step_ms"] <= 1.03 * m[t ".native.step_ms"])
                    if (has(t ".native.peak_device_MiB") && has(t "." rt ".peak_device_MiB"))
                        line(t ": peak device memory, " rt " - native", sprintf("%+.1f MiB", m[t "." rt ".peak_device_MiB"] - m[t ".native.peak_device_MiB"]), "(<= 0)",
                             m[t "." rt ".peak_device_MiB"] <= m[t ".native.peak_device_MiB"])
                }
                if (has(t ".native.peak_device_MiB") && has(t ".native_async.peak_device_MiB"))
                    printf "  %-58s %+.1f MiB (the route without the shim)\n", t ": peak device memory, native_async - native",
                        m[t ".native_async.peak_device_MiB"] - m[t ".native.peak_device_MiB"]
                if (has(t ".nocache.step_ms") && has(t ".nocache_shim.step_ms"))
                    line(t ": no caching, native / shim step time", sprintf("%.2fx", m[t ".nocache.step_ms"] / m[t ".nocache_shim.step_ms"]), "(>= 5x)",
                         m[t ".nocache.step_ms"] >= 5 * m[t ".nocache_shim.step_ms"])
            }
        }'
}

{
    echo "gpu_bench results: median [min - max] of n runs ($(date -u +%FT%TZ))"
    medians | awk '{ printf "  %-44s %12.2f  [%.2f - %.2f]  n=%d\n", $1, $2, $3, $4, $5 }'
    for f in 2 2small 2tiny 1; do
        [ -s "$out/logs/losses$f.native.1" ] || continue
        for route in native_async shim adapter nocache nocache_shim trace; do
            ls "$out/logs/losses$f.$route".* >/dev/null 2>&1 || continue
            echo "  train$f losses, $route against native: $(same_losses $f $route)"
        done
    done
    echo "against issue 13's targets (medians):"
    medians | verdicts
} | tee "$out/results.txt"
