#!/bin/bash
# cli_install.sh - `cmake --install` into a fresh prefix gives a working
# product (docs/cli.md, "cmake --install"; docs/api.md, "Building against an
# installed fsdpshim"):
# - every file of the table is there: the library, the CLI, both headers,
#   fsdpshim.pc, the CMake package, the simulated device with its CUPTI;
# - the installed CLI preloads the installed library, and `fsdpshim sim`
#   finds the installed simulated device;
# - a program is built against the install both ways a user builds one,
#   find_package(fsdpshim) in a CMake project and pkg-config, each by both
#   routes: the header-only loader (fsdpshim::loader, --cflags) and the
#   library linked (fsdpshim::fsdpshim, --libs). Each starts by itself (a
#   linked one that cannot find libfsdpshim.so exits 127), answers
#   "inactive" without the shim and "active" under `fsdpshim run`;
# - the installed `fsdpshim attach` traces a program on the installed
#   simulated device through the installed CUPTI, and says so (skipped
#   without gdb).
#   cli_install.sh BUILD_DIR CMAKE CC CUDA_INCLUDE [SANITIZE]
build=$1 cmake=$2 cc=$3 cuda_include=$4 sanitize=$5
name=cli_install
fail() { echo "$name: $*" >&2; exit 1; }
prefix=$(mktemp -d)
loop_pid=
trap '[ -n "$loop_pid" ] && kill "$loop_pid" 2>/dev/null; rm -rf "$prefix"' EXIT
unset FSDPSHIM_LIB FSDPSHIM_CONF PYTORCH_CUDA_ALLOC_CONF FSDPSHIM_SIM_DIR FSDPSHIM_TRACE \
    CUDA_INJECTION64_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH
# nothing of the build tree may be found by the search paths: only the install
unset LD_LIBRARY_PATH
san=${sanitize:+-fsanitize=$sanitize}

"$cmake" --install "$build" --prefix "$prefix" >"$prefix/install.log" 2>&1 ||
    { cat "$prefix/install.log" >&2; fail "cmake --install failed"; }
sim="$prefix/lib/fsdpshim/sim"
for f in bin/fsdpshim lib/libfsdpshim.so include/fsdpshim/fsdpshim.h \
    include/fsdpshim/fsdpshim_loader.h lib/pkgconfig/fsdpshim.pc \
    lib/cmake/fsdpshim/fsdpshimConfig.cmake lib/cmake/fsdpshim/fsdpshimConfigVersion.cmake \
    lib/fsdpshim/sim/libcudart.so.13 lib/fsdpshim/sim/libcudart.so \
    lib/fsdpshim/sim/libnccl.so.2 lib/fsdpshim/sim/libnccl.so \
    lib/fsdpshim/sim/libcuda.so.1 lib/fsdpshim/sim/libcuda.so \
    lib/fsdpshim/sim/libnvidia-ml.so.1 lib/fsdpshim/sim/libnvidia-ml.so \
    lib/fsdpshim/sim/libcupti.so.13 lib/fsdpshim/sim/libcupti.so; do
    [ -e "$prefix/$f" ] || fail "$f is not installed"
done
# the simulated cuDNN is built only where cuDNN's headers are (sim/cudnn)
if [ -e "$build/lib/sim/libcudnn.so.9" ]; then
    for f in lib/fsdpshim/sim/libcudnn.so.9 lib/fsdpshim/sim/libcudnn.so; do
        [ -e "$prefix/$f" ] || fail "$f is not installed"
    done
fi
# the installed sim's libraries find each other, not the build tree's
for f in "$sim"/lib*.so.[0-9]*; do
    if readelf -d "$f" | grep -E 'R(UN)?PATH' | grep -q "$build"; then
        fail "$f still names the build tree in its run path"
    fi
done

# the installed help names the installed documentation
doc=$("$prefix/bin/fsdpshim" help | sed -n 's/^Documentation: \(.*\/cli.md\) .*/\1/p')
[ "$doc" = "$(readlink -f "$prefix/share/doc/fsdpshim/cli.md")" ] && [ -f "$doc" ] ||
    fail "the installed help names '$doc', not the installed cli.md"
[ -f "$prefix/share/doc/fsdpshim/README.md" ] || fail "README.md is not installed"

# the installed CLI finds the installed library, wherever the build tree is
out=$("$prefix/bin/fsdpshim" run -- sh -c 'echo "$LD_PRELOAD"') || fail "installed run failed"
[ "$(readlink -f "$out")" = "$(readlink -f "$prefix/lib/libfsdpshim.so")" ] ||
    fail "the installed CLI preloads '$out'"

# ---- programs built against the install ----
src="$prefix/src"
mkdir -p "$src"
# linked: calls the API directly
cat >"$src/linked.c" <<'PROG'
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
# loader: reaches the API through fsdpshim_loader.h, links nothing of the shim
cat >"$src/loader.c" <<'PROG'
#include <cuda_runtime_api.h>
#include <fsdpshim/fsdpshim_loader.h>
#include <stdio.h>
int main(void)
{
    fsdpshim_api fs;
    void *p;
    int loaded = fsdpshim_load(&fs) == FSDPSHIM_OK;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 1;
    printf("%s %s\n", loaded ? "loaded" : "absent", fs.active() == FSDPSHIM_OK ? "active" : "inactive");
    return cudaFree(p) != cudaSuccess;
}
PROG
cat >"$src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(uses_fsdpshim LANGUAGES C)
find_package(fsdpshim 0.1 REQUIRED)
# as a program installed elsewhere: no build-tree run path from CMake, only
# what the targets carry
set(CMAKE_SKIP_BUILD_RPATH ON)
# the CUDA runtime: here the installed simulated one, which the package names
add_library(cudart SHARED IMPORTED)
set_target_properties(cudart PROPERTIES IMPORTED_LOCATION "${fsdpshim_SIM_DIR}/libcudart.so"
  INTERFACE_INCLUDE_DIRECTORIES "${CUDA_INCLUDE}"
  INTERFACE_LINK_OPTIONS "LINKER:-rpath,${fsdpshim_SIM_DIR}")
add_executable(loader loader.c)
target_link_libraries(loader PRIVATE cudart fsdpshim::loader)
# the runtime first: the library defines cudaMalloc too (docs/api.md)
add_executable(linked linked.c)
target_link_libraries(linked PRIVATE cudart fsdpshim::fsdpshim)
CMAKE
"$cmake" -S "$src" -B "$prefix/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCUDA_INCLUDE="$cuda_include" -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$san" \
    -DCMAKE_EXE_LINKER_FLAGS="$san" >"$prefix/cmake.log" 2>&1 &&
    "$cmake" --build "$prefix/cmake-build" >>"$prefix/cmake.log" 2>&1 ||
    { cat "$prefix/cmake.log" >&2; fail "a CMake project cannot build with find_package(fsdpshim)"; }
# a version of another minor is refused (0.x: SameMinorVersion)
sed -i 's/find_package(fsdpshim 0.1 REQUIRED)/find_package(fsdpshim 0.99 REQUIRED)/' \
    "$src/CMakeLists.txt"
if "$cmake" -S "$src" -B "$prefix/cmake-old" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCUDA_INCLUDE="$cuda_include" -DCMAKE_C_COMPILER="$cc" >"$prefix/cmake-old.log" 2>&1; then
    fail "find_package(fsdpshim 0.99) accepted version $("$prefix/bin/fsdpshim" --version)"
fi
grep -q "compatible with requested version \"0.99\"" "$prefix/cmake-old.log" ||
    { cat "$prefix/cmake-old.log" >&2; fail "find_package(fsdpshim 0.99) failed otherwise"; }

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion fsdpshim)" = "$("$prefix/bin/fsdpshim" --version | cut -d' ' -f2)" ] ||
    fail "fsdpshim.pc and --version disagree"
[ "$(pkg-config --variable=simdir fsdpshim)/" -ef "$sim/" ] ||
    fail "fsdpshim.pc's simdir is '$(pkg-config --variable=simdir fsdpshim)'"
mkdir -p "$prefix/pc-build"
# shellcheck disable=SC2046
"$cc" $san -I"$cuda_include" $(pkg-config --cflags fsdpshim) "$src/loader.c" \
    -o "$prefix/pc-build/loader" -L"$sim" -lcudart -ldl -Wl,-rpath,"$sim" ||
    fail "a program cannot be built from fsdpshim_loader.h and pkg-config --cflags"
# the runtime before the shim (docs/api.md); the library's run path is the
# .pc's, the sim's is this program's own
# shellcheck disable=SC2046
"$cc" $san -I"$cuda_include" "$src/linked.c" -o "$prefix/pc-build/linked" \
    -L"$sim" -lcudart $(pkg-config --cflags --libs fsdpshim) -Wl,-rpath,"$sim" ||
    fail "a program cannot be built from the installed header and pkg-config --libs"

# run ROUTE PROG EXPECTED [fsdpshim run]: PROG prints EXPECTED and exits 0
run() {
    local route=$1 prog=$2 want=$3 out st
    shift 3
    out=$("$@" "$prog" 2>"$prefix/err")
    st=$?
    [ "$st" -ne 127 ] || { cat "$prefix/err" >&2; fail "$route: $prog cannot start (exit 127)"; }
    [ "$st" -eq 0 ] && [ "$out" = "$want" ] ||
        { cat "$prefix/err" >&2; fail "$route: ${*:+$* }$prog: exit $st, '$out', not '$want'"; }
}
for route in cmake-build pc-build; do
    run "$route" "$prefix/$route/loader" "absent inactive"
    run "$route" "$prefix/$route/loader" "loaded active" "$prefix/bin/fsdpshim" run --
    # linked after the runtime the shim is inactive unless preloaded too
    run "$route" "$prefix/$route/linked" "inactive"
    run "$route" "$prefix/$route/linked" "active" "$prefix/bin/fsdpshim" run --
done
out=$(FSDPSHIM_LOG=info "$prefix/bin/fsdpshim" run -- "$prefix/pc-build/linked" 2>"$prefix/err")
grep -q "active on [0-9]* device" "$prefix/err" || fail "no 'active' line from the installed shim"
# `fsdpshim sim` finds the installed simulated device and reports the peak
out=$(RANK=0 "$prefix/bin/fsdpshim" sim -- "$prefix/pc-build/linked" 2>"$prefix/err")
[ "$out" = "active" ] || { cat "$prefix/err" >&2; fail "the installed sim command: '$out'"; }
grep -q "^fsdpshim sim: 0 .* 0 " "$prefix/err" ||
    { cat "$prefix/err" >&2; fail "the installed sim command gives no report for rank 0"; }

# ---- the installed attach, on a program on the installed simulated device ----
if ! command -v gdb >/dev/null; then
    echo "$name: ok (attach not checked: no gdb)"
    exit 0
fi
cat >"$src/loop.c" <<'PROG'
#include <cuda_runtime_api.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    (void)argc;
    for (;;) {
        void *p;
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess) return 1;
        if (access(argv[1], F_OK) == 0) return 0;
        usleep(1000);
    }
}
PROG
"$cc" $san -I"$cuda_include" "$src/loop.c" -o "$prefix/loop" -L"$sim" -lcudart \
    -Wl,-rpath,"$sim" || fail "cannot build the attach loop"
"$prefix/loop" "$prefix/stop" 2>"$prefix/loop.err" &
loop_pid=$!
sleep 0.3
out=$("$prefix/bin/fsdpshim" attach "$loop_pid" --duration 0.5 -o "$prefix/att-%p.fst" 2>&1) ||
    fail "the installed attach failed: $out"
echo "$out" | grep -qF "tracing process $loop_pid through CUPTI ($(readlink -f "$sim/libcupti.so.13"))" ||
    fail "the installed attach did not use the installed CUPTI: $out $(cat "$prefix/loop.err")"
touch "$prefix/stop"
wait "$loop_pid" || fail "the attached program exited $?: $(cat "$prefix/loop.err")"
loop_pid=
[ -s "$prefix/loop.err" ] && fail "the attached program's stderr: $(cat "$prefix/loop.err")"
"$prefix/bin/fsdpshim" report "$prefix"/att-*.fst >"$prefix/report" 2>&1 &&
    grep -qE "^  device 0: [1-9][0-9]* allocations" "$prefix/report" ||
    fail "the attach's trace: $(cat "$prefix/report")"
echo "$name: ok"
