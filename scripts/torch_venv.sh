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
# scripts/torch_imports.sh uses, and installed from there without the index,
# so a venv removed by hand is rebuilt offline. A stamp file in the venv,
# written last, makes a second run return at once; an interrupted install
# has none and is completed by the next run. Runs of this script wait for
# each other (flock), so parallel test runs share one install.
#
# PYTHON picks the interpreter the venv is made from (default python3). On a
# Debian machine without the venv module it installs python3-venv as
# scripts/deps.sh installs packages (root, apt-get).
set -euo pipefail

version=${TORCH_VERSION:-2.15.0}
python=${PYTHON:-python3}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim
wheels=$cache/wheels
venv=$cache/venv-torch-$version
stamp=$venv/.fsdpshim-installed

say() { echo "torch_venv: $*" >&2; }

# What the stamp certifies: the torch version and the interpreter it was
# installed for (a venv made from another Python is not the same install).
want_stamp() {
    "$venv/bin/python" -c 'import sys; print("torch==" + sys.argv[1], "python", sys.version.split()[0])' \
        "$version"
}

installed() {
    [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(want_stamp 2>/dev/null)" ]
}

if installed; then
    echo "$venv/bin/python"
    exit 0
fi

mkdir -p "$wheels"
exec 9>"$cache/venv.lock"
flock 9
if installed; then # made by a run we waited for
    echo "$venv/bin/python"
    exit 0
fi

if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
        say "need root to install python3-venv (run: sudo apt-get install -y python3-venv)"
        exit 1
    fi
    say "installing python3-venv"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq python3-venv >&2
fi

# A venv whose interpreter no longer runs (its Python was removed or
# upgraded) cannot be repaired in place.
if [ -e "$venv" ] && ! "$venv/bin/python" -c '' 2>/dev/null; then
    say "removing $venv: its python does not run"
    rm -rf "$venv"
fi
if [ ! -e "$venv" ]; then
    say "creating $venv from $("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
    "$python" -m venv "$venv"
fi

pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
have=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true)
if [ "$have" = "$version" ] && "${pip[@]}" check >/dev/null 2>&1; then
    say "torch $version is already installed in $venv"
else
    if ! "${pip[@]}" install --quiet --no-index --find-links "$wheels" "torch==$version" >&2 2>/dev/null; then
        say "downloading torch $version and its dependencies into $wheels (about 3 GB, once)"
        "${pip[@]}" download --quiet --only-binary=:all: -d "$wheels" "torch==$version" >&2
        say "installing torch $version into $venv"
        "${pip[@]}" install --quiet --no-index --find-links "$wheels" "torch==$version" >&2
    fi
fi

want_stamp >"$stamp"
echo "$venv/bin/python"
