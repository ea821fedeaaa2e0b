#!/bin/sh
# same_output.sh - a program's stdout and exit status must not change when
# libfsdpshim.so is preloaded.
#   same_output.sh SHIM CMD [ARGS...]
shim=$1
shift
plain=$(mktemp) shimmed=$(mktemp)
trap 'rm -f "$plain" "$shimmed"' EXIT
env -u LD_PRELOAD "$@" >"$plain"
rc1=$?
[ "$rc1" -eq 77 ] && exit 77 # no device: skipped
LD_PRELOAD="$shim" "$@" >"$shimmed"
rc2=$?
if [ "$rc1" -ne "$rc2" ] || ! cmp -s "$plain" "$shimmed"; then
    echo "same_output: results differ (exit $rc1 without the shim, $rc2 with it)" >&2
    diff "$plain" "$shimmed" >&2
    exit 1
fi
[ -s "$plain" ] || { echo "same_output: no output" >&2; exit 1; }
echo "same_output: identical ($(wc -l <"$plain") lines, exit $rc1)"
