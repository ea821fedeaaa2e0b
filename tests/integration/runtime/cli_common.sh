# cli_common.sh - sourced by the CLI tests: a scratch working directory, an
# environment without the user's fsdpshim and PyTorch settings, and the
# helpers. The sourcing script sets `name` (for messages) first.
fail() { echo "$name: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
unset FSDPSHIM_CONF PYTORCH_CUDA_ALLOC_CONF FSDPSHIM_LIB FSDPSHIM_LOG FSDPSHIM_TORCH_ROUTED TORCH_DIST_USE_NCCL2

# expect STATUS CMD... : the exit status of CMD, its stderr kept in $dir/err
expect() {
    want=$1
    shift
    "$@" >"$dir/out" 2>"$dir/err"
    got=$?
    [ "$got" -eq "$want" ] || { cat "$dir/err" >&2; fail "'$*' exited $got, not $want"; }
}
