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
# ${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim/wheels-perfetto. How it is made and
# reused, and PYTHON: scripts/lib/pinned_venv.sh.
set -euo pipefail
. "$(dirname "$0")/lib/pinned_venv.sh"
# the test needs the compiled protos, not the rest of the package
pinned_venv perfetto perfetto "${PERFETTO_VERSION:-0.59.1}" \
    "${XDG_CACHE_HOME:-$HOME/.cache}/fsdpshim/wheels-perfetto" \
    'from perfetto.protos.perfetto.trace import perfetto_trace_pb2'
