#!/bin/sh
# cli_run.sh - `fsdpshim run` sets the environment the shim reads and then
# becomes the program; usage errors exit 2 (more in cli_launch.sh).
#   cli_run.sh FSDPSHIM LIBFSDPSHIM
cli=$1 lib=$(readlink -f "$2")
fail() { echo "cli_run: $*" >&2; exit 1; }
show='echo "$LD_PRELOAD|${FSDPSHIM_CONF-unset}|${FSDPSHIM_TRACE-unset}|${PYTORCH_CUDA_ALLOC_CONF-unset}"'

"$cli" help | grep -q '^  run ' || fail "help does not list run"
"$cli" run --help | grep -q 'usage: fsdpshim run' || fail "run --help"
"$cli" help record | grep -q 'usage: fsdpshim record' || fail "help record"
for args in "" "bogus" "run" "run --bogus -- true" "run --conf" "help bogus"; do
    # shellcheck disable=SC2086
    "$cli" $args >/dev/null 2>&1
    [ $? -eq 2 ] || fail "'fsdpshim $args' should exit 2"
done

out=$(env -u LD_PRELOAD -u FSDPSHIM_CONF -u FSDPSHIM_TRACE -u PYTORCH_CUDA_ALLOC_CONF \
    "$cli" run --conf ag_limit:4 -- sh -c "$show")
preload=${out%%|*}
[ "$(readlink -f "$preload")" = "$lib" ] || fail "LD_PRELOAD is '$preload', not $lib"
[ "${out#*|}" = "ag_limit:4|unset|unset" ] || fail "run set '$out'"

out=$(LD_PRELOAD=libm.so.6 "$cli" run -- sh -c 'echo "$LD_PRELOAD"')
[ "${out#*:}" = "libm.so.6" ] && [ "$(readlink -f "${out%%:*}")" = "$lib" ] ||
    fail "LD_PRELOAD not prepended: '$out'"

# record is run --trace: trace:stacks added to the user's conf, an absolute
# FSDPSHIM_TRACE, NVTX injection; a program that never uses the GPU writes no
# trace, and the launcher says so (tests/integration/trace/ runs real ones)
out=$(env -u FSDPSHIM_TRACE "$cli" record --conf ag_limit:4 -o t-%p.fst -- sh -c \
    'echo "$FSDPSHIM_CONF|$FSDPSHIM_TRACE|$NVTX_INJECTION64_PATH"; exit 5' 2>"$dir/record.err")
[ $? -eq 5 ] || fail "record does not pass on the program's exit status"
[ "$out" = "ag_limit:4,trace:stacks|$PWD/t-%p.fst|$(readlink -f "$lib")" ] ||
    [ "$out" = "ag_limit:4,trace:stacks|$PWD/t-%p.fst|$lib" ] || fail "record set '$out'"
grep -q "no trace was written" "$dir/record.err" || fail "record did not say no trace was written"
out=$("$cli" run --trace --conf trace:python -- sh -c 'echo "$FSDPSHIM_CONF"' 2>/dev/null)
[ "$out" = "trace:python" ] || fail "--trace overrode the user's trace key: '$out'"

"$cli" run -- /nonexistent/program 2>/dev/null
[ $? -eq 127 ] || fail "a missing program should exit 127"
"$cli" run -- sh -c 'exit 7'
[ $? -eq 7 ] || fail "the program's exit status is not passed on"

if command -v python3 >/dev/null; then
    # the interpreter itself: a version manager's python3 is a slow script
    PATH="$(dirname "$(python3 -c 'import sys; print(sys.executable)')"):$PATH"
    py='import os; print(os.environ.get("PYTORCH_CUDA_ALLOC_CONF"))'
    out=$(env -u PYTORCH_CUDA_ALLOC_CONF "$cli" run -- python3 -c "$py")
    [ "$out" = "backend:cudaMallocAsync" ] || fail "python: PYTORCH_CUDA_ALLOC_CONF='$out'"
    out=$(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$cli" run -- python3 -c "$py" 2>/dev/null)
    [ "$out" = "backend:cudaMallocAsync" ] || fail "python: the user's setting turns the route off"
    # a script run by Python (as torchrun is), found through PATH
    dir=$(mktemp -d)
    printf '#!/usr/bin/env python3\n%s\n' "$py" >"$dir/trainer"
    chmod +x "$dir/trainer"
    out=$(env -u PYTORCH_CUDA_ALLOC_CONF PATH="$dir:$PATH" "$cli" run -- trainer)
    rm -rf "$dir"
    [ "$out" = "backend:cudaMallocAsync" ] || fail "python script: PYTORCH_CUDA_ALLOC_CONF='$out'"
fi
echo "cli_run: ok"
