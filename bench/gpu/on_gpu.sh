#!/usr/bin/env bash
# on_gpu.sh - the whole GPU check in one command, run in the source tree on a
# GPU machine where bench/gpu/stage.sh's output has been copied (default
# .gpu): the staged build put where its CTest files expect it, the libraries
# the machine lacks registered, then `ctest -L gpu`, then gpu_bench.sh, each
# log written to OUT as it is made so that a run cut short still says what
# it did. OUT gets at most eight files: env.txt, ctest.log, fidelity.txt
# (gpu.fidelity's lines), then.log, bench.log, results.txt, raw.txt and
# logs.tar.gz (every run's output, the CTest logs, a summary of one trace).
#
#   OUT=DIR bench/gpu/on_gpu.sh [--stage DIR] [--budget SECONDS] [--no-tests] [--exclude REGEX]
#                               [--then SCRIPT] [--runs N] [SECTION...]
#
# --exclude leaves the gpu tests matching REGEX out; --then runs SCRIPT (with
# the build tree's path and a folder for its logs, packed with the others)
# between the tests and the benchmark.
#
# --budget bounds the whole command (default 420 s): the benchmark gets what
# the tests leave, less a margin for packing the logs. Runs as root (it
# writes /etc/ld.so.conf.d); meant for a machine lent for the session, not
# for one's own workstation.
set -u
tree=$(pwd -P)
stage=.gpu budget=420 tests=1 bench_args=() exclude=oom_probe then=
while [ $# -gt 0 ]; do
    case $1 in
        --stage) stage=$2; shift ;;
        --budget) budget=$2; shift ;;
        --no-tests) tests=0 ;;
        --exclude) exclude="oom_probe|$2"; shift ;;
        --then) then=$2; shift ;;
        --runs) bench_args+=(--runs "$2"); shift ;;
        *) bench_args+=("$1") ;;
    esac
    shift
done
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out"
work=$(mktemp -d)
say() { echo "on_gpu: $*"; }

# ---- the build where its CTest files say it is -------------------------------
[ -f "$stage/build/CTestTestfile.cmake" ] || { say "no staged build in $stage (bench/gpu/stage.sh)"; exit 1; }
src_path=$(sed -n 's/^# Source directory: //p' "$stage/build/CTestTestfile.cmake")
build_path=$(sed -n 's/^# Build directory: //p' "$stage/build/CTestTestfile.cmake")
[ "$build_path" = "$src_path/build" ] || { say "the staged build was made in $build_path, not $src_path/build"; exit 1; }
rm -rf "$tree/build"
mv "$stage/build" "$tree/build"
if [ "$(cd "$src_path" 2>/dev/null && pwd -P)" != "$tree" ]; then
    [ -e "$src_path" ] && { say "$src_path exists and is not this tree"; exit 1; }
    mkdir -p "$(dirname "$src_path")" && ln -s "$tree" "$src_path"
fi

# ---- libraries: the staged ones this machine lacks, CUDA's from PyTorch's wheels
deps=/usr/local/lib/fsdpshim-deps
mkdir -p "$deps"
have() { ldconfig -p | awk -v n="$1" '$1 == n { found = 1 } END { exit !found }'; }
for f in "$stage"/deps/*; do
    have "$(basename "$f")" || cp "$f" "$deps/"
done
echo "$deps" >/etc/ld.so.conf.d/fsdpshim.conf
site=$(python3 -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null)
for lib in libcudart.so.13 libnccl.so.2; do
    [ -e "/usr/local/cuda/lib64/$lib" ] && have "$lib" && continue
    found=$(find "/usr/local/cuda/lib64" ${site:+"$site/nvidia"} -name "$lib" 2>/dev/null | head -1)
    [ -n "$found" ] && dirname "$found" >>/etc/ld.so.conf.d/fsdpshim.conf
done
ldconfig

{
    date -u +%FT%TZ
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
    nvidia-smi | head -4 | tail -2
    nvcc --version 2>/dev/null | tail -2
    python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "device", torch.cuda.get_device_name(0))'
    echo "cpus $(nproc); $(uname -r)"
    echo "ld.so.conf.d/fsdpshim.conf:"; cat /etc/ld.so.conf.d/fsdpshim.conf
    echo "copied deps: $(ls "$deps" | tr '\n' ' ')"
    ldd "$tree/build/bin/gpu_memory" | grep -E 'cudart|cmocka|nccl'
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

# ---- the gpu suite -------------------------------------------------------------
if [ $tests = 1 ]; then
    t0=$SECONDS
    # oom_probe takes nearly all device memory: alone, after the others
    ctest --test-dir build -L gpu -E "$exclude" -j6 --timeout 180 --output-on-failure >"$out/ctest.log" 2>&1
    # each ctest run writes LastTest.log afresh: the suite's, before oom_probe's
    cp build/Testing/Temporary/LastTest.log "$work/ctest-LastTest.log" 2>/dev/null
    ctest --test-dir build -L gpu -R oom_probe --timeout 180 --output-on-failure >>"$out/ctest.log" 2>&1
    cp build/Testing/Temporary/LastTest.log "$work/ctest-LastTest-oom_probe.log" 2>/dev/null
    # gpu.fidelity's lines: what the GPU answers where docs/sim.md documents the sim's
    grep -h '^fidelity' "$work/ctest-LastTest.log" >"$out/fidelity.txt" 2>/dev/null
    say "ctest -L gpu: $((SECONDS - t0)) s: $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tr '\n' ' ')"
    grep -E '\*\*\*|Skipped|Not Run|Failed' "$out/ctest.log" | head -30
fi

if [ -n "$then" ]; then
    mkdir -p "$work/then"
    t0=$SECONDS
    bash "$then" "$tree/build" "$work/then" 2>&1 | tee "$out/then.log"
    say "$then: $((SECONDS - t0)) s"
fi

# ---- the benchmark -------------------------------------------------------------
left=$((budget - SECONDS - 25))
if [ $left -gt 30 ]; then
    build/bench/gpu_bench.sh --out "$work/bench" --raw "$out/raw.txt" --deadline "$left" \
        "${bench_args[@]}" 2>&1 | tee "$out/bench.log"
    cp "$work/bench/results.txt" "$out/" 2>/dev/null
    # one trace of the traced training run, read back
    trace=$(ls "$work"/bench/logs/trace2-1-*.fst 2>/dev/null | head -1)
    if [ -n "$trace" ]; then
        {
            echo "$trace ($(stat -c %s "$trace") bytes)"
            build/bin/fsdpshim dump --no-stacks "$trace" | awk '/^#/ { print; next } { n[$2]++ } END { for (k in n) print k, n[k] }'
            echo "frames: python $(build/bin/fsdpshim dump "$trace" | grep -c '\.py:') lines"
            build/bin/fsdpshim dump "$trace" | grep -m1 -A12 ' alloc '
        } >"$work/bench/logs/trace_summary.txt" 2>&1
        head -30 "$work/bench/logs/trace_summary.txt"
    fi
    find "$work/bench/logs" -name '*.fst' -size +2M -delete
else
    say "no time left for the benchmark"
fi
tar -C "$work" -czf "$out/logs.tar.gz" . 2>/dev/null
say "done in $SECONDS s"
