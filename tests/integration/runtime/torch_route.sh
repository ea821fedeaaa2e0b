#!/bin/sh
# torch_route.sh - the route picked per PyTorch version, by `fsdpshim run`
# and by the preloaded library alone, the same way. The adapter's route by
# default where there is an adapter (or one is built), said; else, and for a
# PyTorch the route cannot name (these venvs' version.py has no git hash at
# first: silently), the cudaMallocAsync route: with PyTorch 2.15 or later
# found for the interpreter the command runs (torch/version.py in a venv, on
# PYTHONPATH, behind a #! line), TORCH_DIST_USE_NCCL2=0 is set and said once
# unless the user chose, a user's nccl2 keeps PyTorch's allocator (said),
# older versions get the allocator route alone; a torchrun-like parent's
# children inherit the route without a second line.
#   torch_route.sh FSDPSHIM PRELOAD   (PRELOAD: LD_PRELOAD value with the shim)
cli=$(readlink -f "$1")
preload=$2
name=torch_route
command -v python3 >/dev/null || { echo "skipped: no python3" >&2; exit 77; }
. "$(dirname "$0")/cli_common.sh"
unset TORCH_DIST_USE_NCCL2 FSDPSHIM_TORCH_ROUTED PYTHONPATH
export FSDPSHIM_TORCH_CACHE="$dir/cache" # adapters built on first use: not the user's cache
# under ASan, the interpreter's own exit-time allocations (subprocess) are not
# the shim's leaks
[ -n "${ASAN_OPTIONS+x}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"

pybin=$(python3 -c "import sys; print(sys.executable)")
py='import os; print(os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), os.environ.get("TORCH_DIST_USE_NCCL2"))'
# venv VERSION: a venv (pyvenv.cfg, bin/python a link) whose torch is VERSION
venv() {
    v=$dir/venv-$1
    mkdir -p "$v/bin" "$v/lib/python3.99/site-packages/torch"
    printf 'home = %s\n' "$(dirname "$pybin")" >"$v/pyvenv.cfg"
    ln -sf "$pybin" "$v/bin/python"
    ln -sf python "$v/bin/python3"
    printf "from typing import Optional\n__version__ = '%s'\ncuda: Optional[str] = '13.2'\n" "$1" \
        >"$v/lib/python3.99/site-packages/torch/version.py"
}
# sees WANT CMD... : CMD run by `fsdpshim run` prints WANT
sees() {
    want=$1
    shift
    out=$("$cli" run -- "$@" 2>"$dir/err") || { cat "$dir/err" >&2; fail "'$*' failed"; }
    [ "$out" = "$want" ] || { cat "$dir/err" >&2; fail "'$*' saw '$out', not '$want'"; }
}
said() { # said N TEXT: TEXT is in exactly N lines of stderr
    [ "$(grep -c -- "$2" "$dir/err")" -eq "$1" ] || { cat "$dir/err" >&2; fail "'$2' not said $1 time(s)"; }
}
venv 2.15.0+cu132
venv 2.14.1
venv 2.11.0
venv 3.0.0

# ---- fsdpshim run ----------------------------------------------------
sees "backend:cudaMallocAsync 0" "$dir/venv-2.15.0+cu132/bin/python" -c "$py"
said 1 "^fsdpshim\[[0-9]*\]: run: TORCH_DIST_USE_NCCL2=0 for PyTorch 2.15.0+cu132: its default NCCL process group (nccl2) aborts"
sees "backend:cudaMallocAsync 0" "$dir/venv-3.0.0/bin/python" -c "$py"
sees "backend:cudaMallocAsync None" "$dir/venv-2.11.0/bin/python" -c "$py"
[ ! -s "$dir/err" ] || fail "2.11: something said"
sees "backend:cudaMallocAsync None" "$dir/venv-2.14.1/bin/python" -c "$py"
[ ! -s "$dir/err" ] || fail "2.14: something said"
# the user's choice: 0 kept silently; nccl2 (2.15 by default, 2.14 by =1)
# keeps PyTorch's allocator, said
TORCH_DIST_USE_NCCL2=0 sees "backend:cudaMallocAsync 0" "$dir/venv-2.15.0+cu132/bin/python" -c "$py"
[ ! -s "$dir/err" ] || fail "an explicit TORCH_DIST_USE_NCCL2=0 was reported"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True TORCH_DIST_USE_NCCL2=1 \
    sees "expandable_segments:True 1" "$dir/venv-2.15.0+cu132/bin/python" -c "$py"
said 1 "TORCH_DIST_USE_NCCL2=1 (nccl2 process group.*PYTORCH_CUDA_ALLOC_CONF left as it is"
TORCH_DIST_USE_NCCL2=1 sees "None 1" "$dir/venv-2.14.1/bin/python" -c "$py"
said 1 "PyTorch 2.14.1 with TORCH_DIST_USE_NCCL2=1"
TORCH_DIST_USE_NCCL2=1 sees "backend:cudaMallocAsync 1" "$dir/venv-2.11.0/bin/python" -c "$py"
# both changes in one line
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
    sees "backend:cudaMallocAsync 0" "$dir/venv-2.15.0+cu132/bin/python" -c "$py"
[ "$(wc -l <"$dir/err")" -eq 1 ] || { cat "$dir/err" >&2; fail "not one line"; }
said 1 "TORCH_DIST_USE_NCCL2=0 for PyTorch 2.15.0+cu132.*; PYTORCH_CUDA_ALLOC_CONF 'expandable_segments:True' is now"
# PYTORCH_NO_CUDA_MEMORY_CACHING=1: PyTorch then calls cudaMalloc/cudaFree for
# every tensor, which the shim serves; its backend and process group are left
# alone, said once (only "1" is on for PyTorch)
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
    sees "expandable_segments:True None" "$dir/venv-2.15.0+cu132/bin/python" -c "$py"
said 1 "PYTORCH_NO_CUDA_MEMORY_CACHING=1: PyTorch's allocator backend left as it is"
PYTORCH_NO_CUDA_MEMORY_CACHING=true sees "backend:cudaMallocAsync 0" "$dir/venv-2.15.0+cu132/bin/python" -c "$py"
# PYTORCH_ALLOC_CONF (read by PyTorch only without PYTORCH_CUDA_ALLOC_CONF,
# which the route sets) is the user's setting then: its keys are carried
PYTORCH_ALLOC_CONF=expandable_segments:True,max_split_size_mb:64 \
    sees "backend:cudaMallocAsync 0" "$dir/venv-2.15.0+cu132/bin/python" -c "$py"
said 1 "PYTORCH_ALLOC_CONF 'expandable_segments:True,max_split_size_mb:64' is now PYTORCH_CUDA_ALLOC_CONF 'backend:cudaMallocAsync'.*the shim takes expandable_segments:True,max_split_size_mb:64"
out=$(PYTORCH_ALLOC_CONF=expandable_segments:True "$cli" run -- "$dir/venv-2.11.0/bin/python" -c \
    'import os; print(os.environ.get("FSDPSHIM_CONF"))' 2>/dev/null)
[ "$out" = "expandable_segments:True" ] || fail "PYTORCH_ALLOC_CONF's keys not carried: '$out'"
# the interpreter behind torchrun's #! line, `env python` on PATH, a .py
# file run by the python on PATH, and PYTHONPATH
mkdir bin
printf '#!%s\nimport os\nprint(os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), os.environ.get("TORCH_DIST_USE_NCCL2"))\n' \
    "$dir/venv-2.15.0+cu132/bin/python" >bin/torchrun
printf '#!/usr/bin/env python\n%s\n' "$py" >bin/trainer
chmod +x bin/torchrun bin/trainer
printf '%s\n' "$py" >train.py
PATH="$dir/bin:$PATH" sees "backend:cudaMallocAsync 0" torchrun --nproc-per-node 2 train.py
PATH="$dir/venv-2.15.0+cu132/bin:$dir/bin:$PATH" sees "backend:cudaMallocAsync 0" trainer
PATH="$dir/venv-2.11.0/bin:$dir/bin:$PATH" sees "backend:cudaMallocAsync None" trainer
PATH="$dir/venv-2.15.0+cu132/bin:$PATH" sees "backend:cudaMallocAsync 0" train.py
PYTHONPATH="$dir/nothing:$dir/venv-2.15.0+cu132/lib/python3.99/site-packages" \
    sees "backend:cudaMallocAsync 0" python3 -c "$py"

# ---- the adapter's route -----------------------------------------------
# (the default for a PyTorch the route can name: the venvs above have no git
# hash in their version.py, so they took the cudaMallocAsync route silently)
# with no adapter for that PyTorch: the cudaMallocAsync route, said with
# where the adapter was looked for; with one (FSDPSHIM_TORCH_ADAPTER, or
# build/lib/torch/<version@git>/ beside the library): PyTorch's backend and
# process group left alone, the user's shim keys still carried, said
printf "git_version = 'abc123'\n" >>"$dir/venv-2.15.0+cu132/lib/python3.99/site-packages/torch/version.py"
py_adapter='import os; print(os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), os.environ.get("TORCH_DIST_USE_NCCL2"), os.environ.get("FSDPSHIM_TORCH_ADAPTER"))'
out=$("$cli" run --conf torch_route:adapter -- "$dir/venv-2.15.0+cu132/bin/python" -c "$py_adapter" 2>"$dir/err")
[ "$out" = "backend:cudaMallocAsync 0 None" ] || { cat "$dir/err" >&2; fail "no adapter: '$out'"; }
# (an adapter is built on first use where none is beside the library: this
# venv's torch is a version.py, so the build fails, said with its log)
said 1 "fsdpshim's PyTorch adapter: no adapter built for PyTorch 2.15.0+cu132@abc123, and building one failed ($dir/cache/2.15.0+cu132@abc123/[0-9a-f]*/build.log); PyTorch goes by backend:cudaMallocAsync"
grep -q "cannot import torch" "$dir"/cache/2.15.0+cu132@abc123/*/build.log || fail "the build's log does not say why"
touch "$dir/own_adapter.so"
out=$(FSDPSHIM_TORCH_ADAPTER=$dir/own_adapter.so PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,pinned_num_register_threads:4 \
    "$cli" run --conf torch_route:adapter -- "$dir/venv-2.15.0+cu132/bin/python" -c "$py_adapter" 2>"$dir/err")
[ "$out" = "pinned_num_register_threads:4 None $dir/own_adapter.so" ] || { cat "$dir/err" >&2; fail "adapter: '$out'"; }
said 1 "PyTorch's allocator: fsdpshim's adapter ($dir/own_adapter.so); the shim takes expandable_segments:True"
said 0 "TORCH_DIST_USE_NCCL2"
# the default route is the adapter's where there is one; torch_route:async
# takes the other route without looking
out=$(FSDPSHIM_TORCH_ADAPTER=$dir/own_adapter.so "$cli" run -- "$dir/venv-2.15.0+cu132/bin/python" \
    -c "$py_adapter" 2>"$dir/err")
[ "$out" = "None None $dir/own_adapter.so" ] || { cat "$dir/err" >&2; fail "default: '$out'"; }
said 1 "PyTorch's allocator: fsdpshim's adapter ($dir/own_adapter.so)"
out=$(FSDPSHIM_TORCH_ADAPTER=$dir/own_adapter.so "$cli" run --conf torch_route:async -- \
    "$dir/venv-2.15.0+cu132/bin/python" -c "$py_adapter" 2>"$dir/err")
[ "$out" = "backend:cudaMallocAsync 0 None" ] || { cat "$dir/err" >&2; fail "async: '$out'"; }
said 0 "adapter"
out=$(FSDPSHIM_TORCH_ADAPTER=$dir/missing.so "$cli" run --conf torch_route:adapter -- \
    "$dir/venv-2.15.0+cu132/bin/python" -c "$py_adapter" 2>"$dir/err")
[ "$out" = "backend:cudaMallocAsync 0 None" ] || { cat "$dir/err" >&2; fail "missing adapter: '$out'"; }
said 1 "fsdpshim's PyTorch adapter: FSDPSHIM_TORCH_ADAPTER=$dir/missing.so: No such file or directory"

# ---- the preloaded library alone --------------------------------------
# what a worker sees, and the line said once by the parent, not the child
child="import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', '''$py''']).returncode)"
out=$(LD_PRELOAD=$preload PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
    "$dir/venv-2.15.0+cu132/bin/python" -c "$child" 2>"$dir/err") || { cat "$dir/err" >&2; fail "preloaded parent failed"; }
[ "$out" = "backend:cudaMallocAsync 0" ] || fail "preloaded: the child saw '$out'"
said 1 "TORCH_DIST_USE_NCCL2=0 for PyTorch 2.15.0+cu132.*the shim takes expandable_segments:True"
out=$(LD_PRELOAD=$preload "$dir/venv-2.15.0+cu132/bin/python" -c \
    'import os; print(os.environ.get("FSDPSHIM_CONF"))' 2>/dev/null)
[ "$out" = "None" ] || fail "preloaded: FSDPSHIM_CONF '$out' without carried keys"
out=$(LD_PRELOAD=$preload PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64 "$dir/venv-2.15.0+cu132/bin/python" -c \
    'import os; print(os.environ.get("FSDPSHIM_CONF"))' 2>/dev/null)
[ "$out" = "max_split_size_mb:64" ] || fail "preloaded: FSDPSHIM_CONF '$out'"
# found on PATH as `python` (argv[0] without a slash): the venv's PyTorch
out=$(PATH="$dir/venv-2.11.0/bin:$PATH" LD_PRELOAD=$preload python -c "$py" 2>"$dir/err")
[ "$out" = "backend:cudaMallocAsync None" ] || fail "preloaded, 2.11 on PATH: '$out'"
[ ! -s "$dir/err" ] || { cat "$dir/err" >&2; fail "preloaded 2.11: something said"; }
# not Python: nothing routed; routed already (fsdpshim run, a parent): untouched
out=$(LD_PRELOAD=$preload sh -c 'echo "${PYTORCH_CUDA_ALLOC_CONF-unset} ${FSDPSHIM_TORCH_ROUTED-unset}"')
[ "$out" = "unset unset" ] || fail "preloaded into sh: '$out'"
out=$(FSDPSHIM_TORCH_ROUTED=1 LD_PRELOAD=$preload "$dir/venv-2.15.0+cu132/bin/python" -c "$py" 2>"$dir/err")
[ "$out" = "None None" ] || fail "preloaded, already routed: '$out'"
# fsdpshim run and the library agree, and the library says nothing more
sees "backend:cudaMallocAsync 0" env LD_PRELOAD="$preload" "$dir/venv-2.15.0+cu132/bin/python" -c "$py"
said 1 "TORCH_DIST_USE_NCCL2=0"
echo "torch_route: ok"
