#!/usr/bin/env bash
# static_gpu.sh - programs linked with the toolkit's static runtime, as nvcc
# links by default, under the shim on a GPU (label gpu). Such a program loads
# no libcudart.so: its runtime reaches the driver through
# dlopen("libcuda.so.1") and cuGetProcAddress, the only calls the shim can
# see. The simulated device cannot run NVIDIA's runtime (it needs the
# driver's private interfaces), so this runs on a GPU only; exits 77
# (skipped) without one.
#
# Checked: the programs load no libcudart.so; the shim runs its allocator
# over the driver (core/driver_device.c) and serves their allocations
# ("N allocations served by M device allocations" at FSDPSHIM_LOG=info);
# trace_prog's two allocations, made through the static runtime, come out in
# the trace; the data-integrity program's checks pass under the shim, served
# too.
#
#   static_gpu.sh FSDPSHIM TRACE_PROG_STATIC INTEGRITY_STATIC
name=static_gpu
cli=$1 prog=$2 integrity=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset LD_PRELOAD CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH FSDPSHIM_NVTX_CHAIN FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU || exit 77

for p in "$prog" "$integrity"; do
    ! ldd "$p" | grep -q 'libcudart\.so' || fail "$p loads libcudart.so: $(ldd "$p" | grep cudart)"
done
served() { grep -E 'allocations served by|active on' "$dir/err" | tr '\n' ' '; }
# served over the driver: the allocator's line at exit, with N > 0
expect_served() {
    grep -q 'active on .* over the driver' "$dir/err" ||
        fail "$1: the shim did not run over the driver: $(cat "$dir/err")"
    grep -qE 'device [0-9]+: [1-9][0-9]* allocations served by' "$dir/err" ||
        fail "$1: nothing served: $(cat "$dir/err")"
}

expect 0 "$prog" sites
FSDPSHIM_LOG=info expect 0 "$cli" run --trace -o "$dir/sites.fst" -- "$prog" sites
echo "$name: sites under the shim: $(served)"
expect_served sites
expect 0 "$cli" dump "$dir/sites.fst"
grep ' alloc ' "$dir/out" | head -4
n=$(grep -c ' alloc ' "$dir/out")
[ "$n" -eq 2 ] || fail "$n allocations in the trace of the static-runtime program, not 2: $(head -40 "$dir/out")"
grep -q " alloc .*requested=3145728 " "$dir/out" || fail "no 3 MiB allocation in the trace"
grep -q " alloc .*requested=5242880 " "$dir/out" || fail "no 5 MiB allocation in the trace"

# which driver entry points the static runtime looked up, and which of them
# the shim hooked (FSDPSHIM_LOG=debug): printed when the data was corrupted,
# to say which of its copy calls the shim did not see
lookups() {
    FSDPSHIM_LOG=debug "$cli" run -- "$integrity" "$1" >/dev/null 2>"$dir/debug"
    echo "$name: the static runtime's lookups of copies, launches and waits under the shim:"
    grep -E 'lookup cu(Memcpy|Memset|Launch|Stream|Event|Ctx|Graph)' "$dir/debug" | sed 's/^/    /'
}
# Without the shim: async is intact; memcpy is corrupted, CUDA's pool handing
# the block freed on the idle stream out again at once while the busy stream's
# copy still reads it (seen on the H100 and the H200, runs 5 and 7): the hazard
# that the shim's cross-stream frees remove, and the proof that the check sees it
expect 0 "$integrity" async
expect 0 "$integrity" memcpy --expect-corruption
for mode in async memcpy; do
    FSDPSHIM_LOG=info "$cli" run -- "$integrity" "$mode" >"$dir/out" 2>"$dir/err" || {
        cat "$dir/err" >&2
        lookups "$mode" >&2
        fail "integrity $mode under the shim exited non-zero"
    }
    echo "$name: integrity $mode under the shim: $(served)"
    expect_served "integrity $mode"
done
echo "$name: ok"
