#!/usr/bin/env bash
# usage_test.sh - a mistake on the analyzer's command line is one line on
# stderr naming the option or value at fault, with exit status 2 (not the
# whole usage text, and never a run with a nonsense value): bad choices and
# counts for top, leaks, report, diff, timeline, dump and replay, a missing
# or extra trace, -n -1; attach of a word that is no pid; `help --help`.
# Help: each command's lists its options and shows examples, and the
# list names FSDPSHIM_CONF, FSDPSHIM_LOG and the documentation.
#
#   usage_test.sh FSDPSHIM TRACE_PROG SIM_DIR
name=usage_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"

expect 0 "$cli" run --trace -o "$dir/sites.fst" -- "$prog" sites
t=$dir/sites.fst

# usage_error WANT CMD...: exit 2 and one line on stderr that holds WANT
usage_error() {
    says=$1
    shift
    expect 2 "$cli" "$@"
    [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "'$*': not one line: $(cat "$dir/err")"
    grep -qF -- "$says" "$dir/err" || fail "'$*' does not say '$says': $(cat "$dir/err")"
    grep -qF -- "(fsdpshim $1 --help)" "$dir/err" || fail "'$*' does not point to --help: $(cat "$dir/err")"
}
usage_error "--by 'nope': not stack, frame, annotation or python" top --by nope "$t"
usage_error "--sort 'nope': not peak, count, total or temporary" top --sort nope "$t"
usage_error "-n 'abc': not a count" top -n abc "$t"
usage_error "-n '-1': not a count" top -n -1 "$t"
usage_error "-n '': not a count" top -n '' "$t"
usage_error "unknown option '--bogus'" top --bogus "$t"
usage_error "--by needs a value" top --by
usage_error "--no-symbols takes no value" top --no-symbols=1 "$t"
usage_error "no trace named" top
usage_error "--intervals '0': not a number from 1 to 400" timeline --intervals 0 "$t"
usage_error "--width '0': not a number from 1 to 400" timeline --width 0 "$t"
usage_error "--width '401': not a number from 1 to 400" timeline --width 401 "$t"
usage_error "two traces to compare, A and B; 1 given" diff "$t"
usage_error "two traces to compare, A and B; 3 given" diff "$t" "$t" "$t"
usage_error "--sort 'nope': not peak, total or count" diff --sort nope "$t" "$t"
usage_error "--by 'nope'" leaks --by nope "$t"
usage_error "-n 'x': not a count" leaks -n x "$t"
usage_error "--by 'nope'" report --by nope "$t"
usage_error "unknown option '-x'" dump -x "$t"
usage_error "no trace named" dump
usage_error "unknown option '--bogus'" replay --bogus "$t"
usage_error "--conf CONF is required" replay "$t"
usage_error "'abc' is not a process id" attach abc
usage_error "'abc' is not a process id" detach abc
usage_error "no process id" attach
# the values that are right still work
expect 0 "$cli" top -n 0 "$t"
expect 0 "$cli" timeline --intervals 1 --width 400 "$t"

# help: `help --help` is help's own usage; an unknown command is one line
expect 0 "$cli" help --help
grep -q "^usage: fsdpshim help \[COMMAND\]" "$dir/out" || fail "help --help: $(cat "$dir/out")"
expect 2 "$cli" help nope
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "help nope: $(cat "$dir/err")"
expect 2 "$cli" nope
grep -q "unknown command 'nope'" "$dir/err" || fail "nope: $(cat "$dir/err")"
# every command's help lists its options and ends with examples of itself
for c in run record sim dump report top leaks timeline diff export replay attach detach help; do
    expect 0 "$cli" $c --help
    cp "$dir/out" "$dir/help"
    expect 0 "$cli" help $c
    cmp -s "$dir/out" "$dir/help" || fail "help $c and $c --help differ"
    grep -qE "^examples?:$" "$dir/out" || fail "$c --help has no example: $(cat "$dir/out")"
    grep -A3 -E "^examples?:$" "$dir/out" | grep -qE "^  fsdpshim $c( |$)" ||
        fail "$c --help: no example of $c: $(cat "$dir/out")"
done
expect 0 "$cli" top --live --help
grep -qE "^  fsdpshim top --live" "$dir/out" || fail "top --live --help: $(cat "$dir/out")"
for o in --by --sort -n --no-symbols; do
    "$cli" diff --help | grep -qE "^  $o " || fail "diff --help does not list $o"
done
for o in "-o, --output PATTERN" --conf --lib; do
    "$cli" record --help | grep -qE "^  $o " || fail "record --help does not list $o"
done
# the list names the settings' variables and where the documentation is
expect 0 "$cli" help
for v in FSDPSHIM_CONF FSDPSHIM_LOG FSDPSHIM_TRACE FSDPSHIM_LIB; do
    grep -q "^  $v " "$dir/out" || fail "help does not name $v: $(cat "$dir/out")"
done
doc=$(sed -n 's/^Documentation: \(.*\/cli.md\) .*/\1/p' "$dir/out")
[ -f "$doc" ] || fail "help names no documentation that exists: $(cat "$dir/out")"
echo "usage_test: ok"
