#!/usr/bin/env bash
# test.sh - installs what is missing, builds, and runs the whole ctest suite:
# the default build first, with the torch label (PyTorch from PyPI on the
# simulated device) and the fuzz label (the trace reader under libFuzzer for
# FSDPSHIM_FUZZ_SECONDS, 60; tests/fuzz/README.md), then the ASan+UBSan and
# TSan builds (everything but the gpu, bench and torch labels; the fuzz
# target is not built there, as it carries ASan and UBSan itself). The
# stress label is left out of all three unless FSDPSHIM_TEST_STRESS=1. GPU
# tests skip (ctest "skipped") without a GPU.
#
#   FSDPSHIM_TEST_SANITIZERS=0 scripts/test.sh   # default build only
#   FSDPSHIM_TEST_STRESS=1 scripts/test.sh       # also the stress label (minutes of
#                                                # repeated races, e.g. SIGTERM during
#                                                # attach), in the default build
#   FSDPSHIM_TEST_TORCH=0 scripts/test.sh        # without the torch tests
#   TORCH_VERSION=2.11.0 scripts/test.sh         # torch tests on another PyTorch
#   FSDPSHIM_TEST_PERFETTO=0 scripts/test.sh     # without the check of export --perfetto,
#                                                # whose protos come from PyPI once
#                                                # (scripts/perfetto_venv.sh)
#
# The torch tests need a virtual environment with PyTorch and its NVIDIA
# wheels, outside the source tree: scripts/torch_venv.sh makes it the first
# time (about 3 GB downloaded, a few minutes) and reuses it after.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
jobs=$(nproc)

torch_python=""
if [ "${FSDPSHIM_TEST_TORCH:-1}" = 0 ]; then
    echo "== torch tests skipped (FSDPSHIM_TEST_TORCH=0) =="
else
    torch_python=$(scripts/torch_venv.sh)
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFSDPSHIM_TORCH_PYTHON="$torch_python"
cmake --build build -j"$jobs"
stress=(-LE stress)
[ "${FSDPSHIM_TEST_STRESS:-0}" = 1 ] && stress=()
ctest --test-dir build --output-on-failure -j"$jobs" "${stress[@]}"

if [ "${FSDPSHIM_TEST_SANITIZERS:-1}" != 0 ]; then
    for preset in asan tsan; do
        echo "== $preset build =="
        cmake --preset "$preset"
        cmake --build --preset "$preset" -j"$jobs"
        ctest --test-dir "build-$preset" --output-on-failure -j"$jobs" -LE 'gpu|bench|torch|stress'
    done
fi
