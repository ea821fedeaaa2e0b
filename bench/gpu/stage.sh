#!/usr/bin/env bash
# stage.sh - a build tree made ready to travel to a GPU machine that has the
# CUDA driver, the toolkit or PyTorch's wheels, but not this project's build
# dependencies (cmocka, libunwind, jemalloc, mimalloc) and no package
# registry: a lent machine with nothing to install from.
#
#   bench/gpu/stage.sh [BUILD] [DEST]        (defaults: build, .gpu)
#
# DEST/build is BUILD without its object files (the CTest files, programs,
# libraries and configured scripts, about 20 MB), DEST/deps the shared
# libraries its programs load that are neither glibc's nor CUDA's, copied
# from this machine. On the GPU machine, bench/gpu/on_gpu.sh puts them in
# place. The build must have been made where the source tree is at the same
# path as it will be there (the CTest files hold absolute paths): on_gpu.sh
# links that path to the tree it runs in.
set -euo pipefail
build=${1:-build}
dest=${2:-.gpu}
[ -f "$build/CTestTestfile.cmake" ] || { echo "stage: $build is not a configured build tree" >&2; exit 1; }
rm -rf "$dest"
mkdir -p "$dest/deps"
# the build tree without CMake's object directories, static libraries (linked
# already) and the fuzzers (built for the sanitizer runs, not the GPU's)
(cd "$build" && find . \( -path '*/CMakeFiles' -o -path ./tests/fuzz \) -prune -o -type f ! -name '*.a' -print) |
    while read -r f; do
        mkdir -p "$dest/build/$(dirname "$f")"
        cp -p "$build/$f" "$dest/build/$f"
    done
# libraries from outside the build, glibc, CUDA and PyTorch's, for every
# program (the PyTorch adapter's libc10 is the machine's own PyTorch's, already
# loaded in the process that loads the adapter)
find "$dest/build" -type f -perm -u+x -exec sh -c 'ldd "$@" 2>/dev/null || true' ldd {} + |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    grep -Ev '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|libcudart|libnccl|libpython[0-9.]*|libc10|libc10_cuda|libtorch[a-z_]*)\.so|/build/|ld-linux' |
    while read -r lib; do cp -L "$lib" "$dest/deps/"; done
# loaded at run time with dlopen by alloc_bench
for lib in libmimalloc.so.2; do
    path=$(ldconfig -p | awk -v n="$lib" '$1 == n { print $NF; exit }')
    [ -n "$path" ] && cp -L "$path" "$dest/deps/"
done
echo "stage: $(du -sh "$dest" | cut -f1) in $dest: $(ls "$dest/deps" | tr '\n' ' ')"
