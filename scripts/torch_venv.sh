#!/usr/bin/env bash
# torch_venv.sh - prepares the virtual environment with the pinned PyTorch
# (and its NVIDIA wheels) that the `torch` test label runs, and prints the
# path of its python on stdout (everything else goes to stderr).
#
#   scripts/torch_venv.sh                     # PyTorch 2.15.0, the pinned one
#   TORCH_VERSION=2.11.0 scripts/torch_venv.sh
#
# The environment lives outside the source tree, in
# ${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim/venv-torch-<version> (about 5 GB);
# the wheels are downloaded once (about 3 GB) into
# ${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim/wheels, the cache that
# scripts/torch_imports.sh uses. How it is made and reused, and PYTHON:
# scripts/lib/pinned_venv.sh.
set -euo pipefail
. "$(dirname "$0")/lib/pinned_venv.sh"
pinned_venv torch torch "${TORCH_VERSION:-2.15.0}" "${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim/wheels"
