#!/bin/sh
# expect_stderr.sh - runs a command that must succeed and checks how many
# lines of its stderr match a pattern.
#   expect_stderr.sh PATTERN COUNT CMD [ARGS...]
pattern=$1 count=$2
shift 2
err=$(mktemp)
trap 'rm -f "$err"' EXIT
"$@" 2>"$err"
rc=$?
cat "$err" >&2
if [ "$rc" -ne 0 ]; then
    echo "expect_stderr: '$*' exited with $rc" >&2
    exit 1
fi
got=$(grep -c -- "$pattern" "$err")
if [ "$got" -ne "$count" ]; then
    echo "expect_stderr: $got line(s) match '$pattern', expected $count" >&2
    exit 1
fi
