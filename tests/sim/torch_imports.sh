#!/bin/sh
# torch_imports.sh - the ratchet on the entry points PyTorch imports
# (sim/imports/, written by scripts/torch_imports.sh): every symbol a
# torch-<version>-<lib>.txt list names must be exported by the built sim
# library or be listed, with its reason, in missing-<lib>.txt; and no symbol
# in missing-<lib>.txt may in fact be exported, so the missing lists only
# shrink. libcudart's symbols count only under the libcudart.so.13 version
# node, libcublas's, libcublasLt's and libcudnn's under theirs; libnccl's
# are unversioned, as NCCL's own are. A library without a missing list
# (cuBLAS, cuBLASLt, cuDNN) must export every import. libcudnn.so.9 is
# built only where cuDNN's headers are (sim/cudnn/CMakeLists.txt): the
# build says so with the optional last argument.
#
# libcuda.so.1 is never linked, only looked up by name: a driver function
# PyTorch names counts as provided when the library exports it or its
# cuGetProcAddress finds it (driver_lookup). And every function the
# library exports must be found by its base name through cuGetProcAddress,
# so that cudaGetDriverEntryPoint reaches all of it.
#
# Usage: torch_imports.sh <sim/imports dir> <build/lib/sim dir> <driver_lookup> [cudnn]
set -eu

imports=$1
simdir=$2
lookup=$3
with_cudnn=${4:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

symbols_of() { grep -v '^#' "$1" | awk 'NF {print $1}' | sort -u; }

check() {
    lib=$1 soname=$2 version=$3
    nm -D --defined-only "$simdir/$soname" | awk '{print $NF}' |
        if [ -n "$version" ]; then sed -n "s/@@$version\$//p"; else grep -v @; fi |
        sort -u >"$work/$lib.exported"
    if [ -f "$imports/missing-$lib.txt" ]; then
        symbols_of "$imports/missing-$lib.txt" >"$work/$lib.missing"
    else
        : >"$work/$lib.missing"
    fi

    stale=$(comm -12 "$work/$lib.missing" "$work/$lib.exported")
    if [ -n "$stale" ]; then
        echo "FAIL $soname exports symbols missing-$lib.txt still lists (remove them):"
        echo "$stale" | sed 's/^/  /'
        failed=1
    fi

    for list in "$imports"/torch-*-"$lib".txt; do
        name=$(basename "$list" .txt)
        symbols_of "$list" >"$work/imports"
        total=$(wc -l <"$work/imports")
        provided=$(comm -12 "$work/imports" "$work/$lib.exported" | wc -l)
        absent=$(comm -23 "$work/imports" "$work/$lib.exported" |
            comm -23 - "$work/$lib.missing")
        echo "$name: $provided of $total imports provided by $soname"
        if [ -n "$absent" ]; then
            echo "FAIL $name: neither exported by $soname nor in missing-$lib.txt:"
            echo "$absent" | sed 's/^/  /'
            failed=1
        fi
    done
}

check libcudart libcudart.so.13 libcudart.so.13
check libnccl libnccl.so.2 ""
check libcublas libcublas.so.13 libcublas.so.13
check libcublasLt libcublasLt.so.13 libcublasLt.so.13
if [ "$with_cudnn" = cudnn ]; then
    check libcudnn libcudnn.so.9 libcudnn.so.9
else
    echo "libcudnn.so.9 not built (no cuDNN headers): its imports are not checked"
fi

for list in "$imports"/torch-*-libcuda.txt; do
    name=$(basename "$list" .txt)
    symbols_of "$list" >"$work/imports"
    total=$(wc -l <"$work/imports")
    # shellcheck disable=SC2046 # one argument per name
    if absent=$("$lookup" "$simdir/libcuda.so.1" $(cat "$work/imports")); then
        echo "$name: $total of $total lookups provided by libcuda.so.1"
    else
        echo "FAIL $name: neither exported by libcuda.so.1 nor found by its cuGetProcAddress:"
        echo "$absent"
        failed=1
    fi
done
nm -D --defined-only "$simdir/libcuda.so.1" | awk '$NF ~ /^cu/ {print $NF}' |
    sed -e 's/_pt[sd][sz]$//' -e 's/_v[0-9]*$//' | sort -u >"$work/driver.bases"
# shellcheck disable=SC2046
if ! absent=$("$lookup" --proc-address "$simdir/libcuda.so.1" $(cat "$work/driver.bases")); then
    echo "FAIL libcuda.so.1 exports functions its cuGetProcAddress does not find (entry.c):"
    echo "$absent"
    failed=1
fi
exit $failed
