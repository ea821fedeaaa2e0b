#!/bin/sh
# cli_install.sh - `cmake --install` into a fresh prefix gives a working
# product: the library, the CLI, the header, fsdpshim.pc and the simulated
# device; the installed CLI preloads the installed library (not the build
# tree's), and a program built from the header and fsdpshim.pc links and
# runs under it.
#   cli_install.sh BUILD_DIR CMAKE CC CUDA_INCLUDE [SANITIZE]
build=$1 cmake=$2 cc=$3 cuda_include=$4 sanitize=$5
fail() { echo "cli_install: $*" >&2; exit 1; }
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
unset FSDPSHIM_LIB FSDPSHIM_CONF PYTORCH_CUDA_ALLOC_CONF

"$cmake" --install "$build" --prefix "$prefix" >"$prefix/install.log" 2>&1 ||
    { cat "$prefix/install.log" >&2; fail "cmake --install failed"; }
for f in bin/fsdpshim lib/libfsdpshim.so include/fsdpshim/fsdpshim.h lib/pkgconfig/fsdpshim.pc \
    lib/fsdpshim/sim/libcudart.so.13 lib/fsdpshim/sim/libcudart.so \
    lib/fsdpshim/sim/libnccl.so.2 lib/fsdpshim/sim/libnccl.so \
    lib/fsdpshim/sim/libcuda.so.1 lib/fsdpshim/sim/libcuda.so \
    lib/fsdpshim/sim/libnvidia-ml.so.1 lib/fsdpshim/sim/libnvidia-ml.so; do
    [ -e "$prefix/$f" ] || fail "$f is not installed"
done
# the simulated cuDNN is built only where cuDNN's headers are (sim/cudnn)
if [ -e "$build/lib/sim/libcudnn.so.9" ]; then
    for f in lib/fsdpshim/sim/libcudnn.so.9 lib/fsdpshim/sim/libcudnn.so; do
        [ -e "$prefix/$f" ] || fail "$f is not installed"
    done
fi

# the installed help names the installed documentation
doc=$("$prefix/bin/fsdpshim" help | sed -n 's/^Documentation: \(.*\/cli.md\) .*/\1/p')
[ "$doc" = "$(readlink -f "$prefix/share/doc/fsdpshim/cli.md")" ] && [ -f "$doc" ] ||
    fail "the installed help names '$doc', not the installed cli.md"
[ -f "$prefix/share/doc/fsdpshim/README.md" ] || fail "README.md is not installed"

# the installed CLI finds the installed library, wherever the build tree is
out=$("$prefix/bin/fsdpshim" run -- sh -c 'echo "$LD_PRELOAD"') || fail "installed run failed"
[ "$(readlink -f "$out")" = "$(readlink -f "$prefix/lib/libfsdpshim.so")" ] ||
    fail "the installed CLI preloads '$out'"

# a program that calls the API, built the way a user builds one
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion fsdpshim)" = "$("$prefix/bin/fsdpshim" --version | cut -d' ' -f2)" ] ||
    fail "fsdpshim.pc and --version disagree"
cat >"$prefix/prog.c" <<'PROG'
#include <cuda_runtime_api.h>
#include <fsdpshim/fsdpshim.h>
#include <stdio.h>
int main(void)
{
    void *p;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 1;
    printf("%s\n", fsdpshim_active() == FSDPSHIM_OK ? "active" : "inactive");
    return cudaFree(p) != cudaSuccess;
}
PROG
sim="$prefix/lib/fsdpshim/sim"
# the runtime before the shim: the shim exports cudaMalloc too, and a link
# that meets it first binds the program's CUDA calls to it (docs/cli.md)
# shellcheck disable=SC2046
"$cc" ${sanitize:+-fsanitize=$sanitize} -I"$cuda_include" "$prefix/prog.c" -o "$prefix/prog" \
    -L"$sim" -lcudart $(pkg-config --cflags --libs fsdpshim) \
    -Wl,-rpath,"$sim" -Wl,-rpath,"$(pkg-config --variable=libdir fsdpshim)" ||
    fail "a program cannot be built from the installed header and fsdpshim.pc"
out=$(FSDPSHIM_LOG=info "$prefix/bin/fsdpshim" run -- "$prefix/prog" 2>"$prefix/err")
[ "$out" = "active" ] || { cat "$prefix/err" >&2; fail "the installed shim is not active: '$out'"; }
grep -q "active on [0-9]* device" "$prefix/err" || fail "no 'active' line from the installed shim"
# `fsdpshim sim` finds the installed simulated device and reports the peak
out=$(RANK=0 "$prefix/bin/fsdpshim" sim -- "$prefix/prog" 2>"$prefix/err")
[ "$out" = "active" ] || { cat "$prefix/err" >&2; fail "the installed sim command: '$out'"; }
grep -q "^fsdpshim sim: 0 .* 0 " "$prefix/err" ||
    { cat "$prefix/err" >&2; fail "the installed sim command gives no report for rank 0"; }
echo "cli_install: ok"
