#!/usr/bin/env bash
# adapter_first_use.sh - an adapter built on first use (route/torch_route.c,
# share/fsdpshim/torch-adapter/build.sh) for a PyTorch that has none beside
# libfsdpshim.so: a copy of the library in a directory of its own, with the
# build tree's share/ beside it and an empty cache, so the route finds no
# adapter and builds one. Checked: the first run builds it, says so and runs
# on it; the second finds it in the cache and builds nothing; without a
# C++ compiler the job still runs, on the cudaMallocAsync route, the line
# saying why.
#
#   adapter_first_use.sh FSDPSHIM PYTHON SHIM_LIB
set -u
cli=$1 python=$2 lib=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "adapter_first_use: $*" >&2; exit 1; }
mkdir -p "$dir/lib"
cp "$lib" "$dir/lib/libfsdpshim.so"
ln -s "$(dirname "$lib")/../share" "$dir/share"
prog='import torch; torch.ones(4, device="cuda"); print("backend", torch.cuda.get_allocator_backend())'

run() { # run OUT [ENV...]: the program on the sim through the adapter route
    local out=$1
    shift
    env "$@" FSDPSHIM_TORCH_CACHE="$dir/cache" "$cli" sim --lib "$dir/lib/libfsdpshim.so" \
        --conf torch_route:adapter -- "$python" -c "$prog" >"$out" 2>&1 ||
        { cat "$out" >&2; fail "the job failed"; }
}

# without a compiler: the old route, said
run "$dir/none" CXX=/nonexistent/c++
grep -q "fsdpshim's PyTorch adapter: no adapter built for PyTorch .*, and building one failed" "$dir/none" ||
    { cat "$dir/none" >&2; fail "no line saying the build failed"; }
grep -q "^backend cudaMallocAsync" "$dir/none" || fail "without an adapter PyTorch is not on cudaMallocAsync"
grep -q "no C++ compiler" "$dir"/cache/*/*/build.log || fail "build.log does not say why"
[ ! -e "$dir"/cache/*/*/libfsdpshim_torch.so ] || fail "a failed build left a library"

run "$dir/first"
grep -q "PyTorch's allocator: fsdpshim's adapter ($dir/cache/.*/libfsdpshim_torch.so, built now" "$dir/first" ||
    { cat "$dir/first" >&2; fail "the first run did not build the adapter"; }
grep -q "^backend fsdpshim" "$dir/first" || { cat "$dir/first" >&2; fail "PyTorch is not on the adapter"; }

run "$dir/second"
grep -q "PyTorch's allocator: fsdpshim's adapter ($dir/cache/.*/libfsdpshim_torch.so)" "$dir/second" ||
    { cat "$dir/second" >&2; fail "the second run did not take the cached adapter"; }
grep -q "built now" "$dir/second" && fail "the second run built it again"
grep -q "^backend fsdpshim" "$dir/second" || fail "PyTorch is not on the adapter the second time"
echo "adapter_first_use: ok"
