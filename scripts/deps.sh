#!/usr/bin/env bash
# deps.sh - installs the Debian packages the build and tests need, if missing.
# Idempotent: when everything is present it changes nothing and needs no network.
set -euo pipefail

packages=(cmake make gcc pkg-config python3 libcmocka-dev libjemalloc-dev libmimalloc-dev
          libzstd-dev zlib1g-dev libunwind-dev libdw-dev python3-dev clang libclang-rt-dev)
# g++: the PyTorch adapter (interpose/pytorch/adapter), the product's one C++ part
packages+=(g++)
# headless Chromium renders the page of `fsdpshim report --html` in the tests
packages+=(chromium)
# tmux: a real terminal for the test of `fsdpshim top --live` (tests/integration/live)
packages+=(tmux)
# gdb: `fsdpshim attach` loads the shim into a running process with it (tests/integration/cupti)
packages+=(gdb)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        echo "deps: need root to install ${missing[*]} (run: sudo apt-get install -y ${missing[*]})" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}"
fi

if [ ! -f /usr/local/cuda/include/cuda_runtime_api.h ]; then
    echo "deps: the CUDA toolkit headers are expected in /usr/local/cuda/include" >&2
    exit 1
fi
