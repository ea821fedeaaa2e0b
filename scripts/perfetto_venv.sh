#!/usr/bin/env bash
# perfetto_venv.sh - prepares the virtual environment with the `perfetto`
# package from PyPI, whose compiled protos (perfetto.protos.perfetto.trace.
# perfetto_trace_pb2) the analyzer's test decodes `fsdpshim export
# --perfetto` with (tests/analysis/perfetto_check.py), and prints the path of
# its python on stdout (everything else goes to stderr).
#
#   scripts/perfetto_venv.sh                        # perfetto 0.59.1, the pinned one
#   PERFETTO_VERSION=0.60.0 scripts/perfetto_venv.sh
#
# The environment lives outside the source tree, in
# ${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim/venv-perfetto-<version>; the wheels
# (perfetto and protobuf, a few MB) are downloaded once into
# ${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim/wheels-perfetto and installed from
# there without the index, so a venv removed by hand is rebuilt offline. A
# stamp file in the venv, written last, makes a second run return at once;
# an interrupted install has none and is completed by the next run. Runs of
# this script wait for each other (flock), so parallel test runs share one
# install. PYTHON picks the interpreter the venv is made from (default
# python3); it needs the venv module (Debian: python3-venv).
set -euo pipefail

version=${PERFETTO_VERSION:-0.59.1}
python=${PYTHON:-python3}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim
wheels=$cache/wheels-perfetto
venv=$cache/venv-perfetto-$version
stamp=$venv/.fsdpshim-installed

say() { echo "perfetto_venv: $*" >&2; }

# What the stamp certifies: the perfetto version and the interpreter it was
# installed for (a venv made from another Python is not the same install).
want_stamp() {
    "$venv/bin/python" -c 'import sys; print("perfetto==" + sys.argv[1], "python", sys.version.split()[0])' \
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
exec 9>"$cache/venv-perfetto.lock"
flock 9
if installed; then # made by a run we waited for
    echo "$venv/bin/python"
    exit 0
fi

if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
    say "$python has no venv module (Debian: apt-get install python3-venv)"
    exit 1
fi
# A venv whose interpreter no longer runs (its Python was removed or
# upgraded) cannot be repaired in place.
if [ -e "$venv" ] && ! "$venv/bin/python" -c '' 2>/dev/null; then
    say "removing $venv: its python does not run"
    rm -rf "$venv"
fi
if [ ! -e "$venv" ]; then
    say "creating $venv"
    "$python" -m venv "$venv"
fi

pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input)
if ! "${pip[@]}" install --quiet --no-index --find-links "$wheels" "perfetto==$version" >&2 2>/dev/null; then
    say "downloading perfetto $version and its dependencies into $wheels (once)"
    "${pip[@]}" download --quiet --only-binary=:all: -d "$wheels" "perfetto==$version" >&2
    "${pip[@]}" install --quiet --no-index --find-links "$wheels" "perfetto==$version" >&2
fi
# the test needs the compiled protos, not the rest of the package
"$venv/bin/python" -c 'from perfetto.protos.perfetto.trace import perfetto_trace_pb2' >&2

want_stamp >"$stamp"
echo "$venv/bin/python"
