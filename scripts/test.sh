#!/usr/bin/env bash
# test.sh - installs what is missing, builds, and runs the whole ctest suite:
# the default build first, then the ASan+UBSan and TSan builds (everything but
# the gpu and bench labels). GPU tests skip (ctest "skipped") without a GPU.
#
#   FSDPSHIM_TEST_SANITIZERS=0 scripts/test.sh   # default build only
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

if [ "${FSDPSHIM_TEST_SANITIZERS:-1}" != 0 ]; then
    for preset in asan tsan; do
        echo "== $preset build =="
        cmake --preset "$preset"
        cmake --build --preset "$preset" -j"$jobs"
        ctest --test-dir "build-$preset" --output-on-failure -j"$jobs" -LE 'gpu|bench'
    done
fi
