#!/bin/sh
# cli_torch.sh - `fsdpshim run` routes PyTorch through the shim for every way
# of starting Python (detected by what the child sees in its environment) and
# whatever PYTORCH_CUDA_ALLOC_CONF the user had: the backend set, the keys the
# shim understands carried into FSDPSHIM_CONF below its own, PyTorch's other
# keys left to it, and what changed said in one line.
#   cli_torch.sh FSDPSHIM
cli=$(readlink -f "$1")
name=cli_torch
command -v python3 >/dev/null || { echo "skipped: no python3" >&2; exit 77; }
. "$(dirname "$0")/cli_common.sh"

py='import os, sys; print(os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), os.environ.get("FSDPSHIM_CONF")); sys.exit(int(os.environ.get("CODE", "0")))'
# routed CMD... : CMD must see the shim's PyTorch route
routed() {
    out=$("$cli" run -- "$@" 2>"$dir/err") || { cat "$dir/err" >&2; fail "'$*' failed"; }
    [ "$out" = "backend:cudaMallocAsync None" ] || fail "'$*' is not routed: '$out'"
}
# the interpreter itself first on PATH: a version manager's python3 is a
# script that costs half a second per start
pybin=$(python3 -c "import sys; print(sys.executable)")
PATH="$(dirname "$pybin"):$PATH"
routed python3 -c "$py"
ln -s "$pybin" python3.99
routed ./python3.99 -c "$py"
routed env python3 -c "$py"
routed env -u NOTHING X=1 python3 -c "$py"
routed env -S "python3 -c '$py'"
routed bash -c "python3 -c '$py'"
routed sh -c "cd . && X=1 exec python3 -c '$py'"
# a launcher or wrapper that starts Python by name (mpirun, srun, uv run, ...)
routed timeout 60 python3 -c "$py"
printf 'import os\nprint(os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), os.environ.get("FSDPSHIM_CONF"))\n' >envprint.py
routed python3 -m envprint
# a .py file without #! nor x bit, in the working directory, run as `run x.py`
printf '%s\n' "$py" >train.py
routed train.py
CODE=9 expect 9 "$cli" run train.py
# torchrun (by name), a #! python script, pip's /bin/sh trampoline
mkdir bin
printf '#!/bin/sh\nexec python3 -c '"'%s'"'\n' "$py" >bin/torchrun
printf '#!/usr/bin/env python3\n%s\n' "$py" >bin/trainer
printf "#!/bin/sh\n'''exec' python3 \"\$0\" \"\$@\"\n' '''\n%s\n" "$py" >bin/launcher
chmod +x bin/torchrun bin/trainer bin/launcher
PATH="$dir/bin:$PATH" routed torchrun --nproc-per-node 2 train.py
PATH="$dir/bin:$PATH" routed trainer
PATH="$dir/bin:$PATH" routed launcher
routed sh -c "$dir/bin/trainer"
# not Python: no route
out=$("$cli" run -- sh -c 'echo "${PYTORCH_CUDA_ALLOC_CONF-unset}"')
[ "$out" = "unset" ] || fail "sh -c echo was routed: '$out'"

# ---- the user's PYTORCH_CUDA_ALLOC_CONF ------------------------------
# an empty value counts as unset
PYTORCH_CUDA_ALLOC_CONF= routed python3 -c "$py"
[ ! -s "$dir/err" ] || fail "an empty PYTORCH_CUDA_ALLOC_CONF was reported"
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync routed python3 -c "$py"
[ ! -s "$dir/err" ] || fail "an unchanged PYTORCH_CUDA_ALLOC_CONF was reported"
# the setting most FSDP users have: carried into the shim, said once
out=$(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$cli" run -- python3 -c "$py" 2>"$dir/err")
[ "$out" = "backend:cudaMallocAsync expandable_segments:True" ] ||
    fail "expandable_segments:True not carried: '$out'"
[ "$(grep -c "^fsdpshim\[[0-9]*\]: run: PYTORCH_CUDA_ALLOC_CONF 'expandable_segments:True' is now 'backend:cudaMallocAsync'" "$dir/err")" -eq 1 ] ||
    { cat "$dir/err" >&2; fail "the change is not said once"; }
# every carried key, with spaces; FSDPSHIM_CONF's own key wins; PyTorch
# keeps what the shim ignores; an explicit backend:native is named
conf=' expandable_segments : True, pinned_use_cuda_host_register:True ,backend:native,max_split_size_mb:512,roundup_power2_divisions:[256:1, 512:2,>:4],garbage_collection_threshold:0.6'
out=$(PYTORCH_CUDA_ALLOC_CONF=$conf FSDPSHIM_CONF=max_split_size_mb:64 \
    "$cli" run -- python3 -c "$py" 2>"$dir/err")
[ "$out" = "backend:cudaMallocAsync,pinned_use_cuda_host_register:True expandable_segments:True,roundup_power2_divisions:[256:1,512:2,>:4],garbage_collection_threshold:0.6,max_split_size_mb:64" ] ||
    fail "carry with FSDPSHIM_CONF: '$out'"
[ "$(wc -l <"$dir/err")" -eq 1 ] || { cat "$dir/err" >&2; fail "more than one line said"; }
for what in "instead of backend:native" "kept for max_split_size_mb" \
    "ignored by the shim, left to PyTorch: pinned_use_cuda_host_register"; do
    grep -q "$what" "$dir/err" || { cat "$dir/err" >&2; fail "no '$what'"; }
done
# --conf is FSDPSHIM_CONF too; FSDPSHIM_LOG=error keeps the launcher quiet
out=$(PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.5 FSDPSHIM_LOG=error \
    "$cli" run --conf ag_limit:1 -- python3 -c "$py" 2>"$dir/err")
[ "$out" = "backend:cudaMallocAsync garbage_collection_threshold:0.5,ag_limit:1" ] ||
    fail "carry with --conf: '$out'"
[ ! -s "$dir/err" ] || fail "FSDPSHIM_LOG=error did not silence the launcher"
# the rank in the launcher's line, as in the library's
RANK=2 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True expect 0 "$cli" run -- python3 -c "$py"
grep -q "^fsdpshim\[[0-9]* rank 2\]: run:" "$dir/err" || fail "no rank in the line"
echo "cli_torch: ok"
