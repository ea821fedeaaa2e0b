#!/usr/bin/env bash
# fold_test.sh - the plumbing frames of a stack folded into one line by
# every command that prints allocation stacks (analysis/lib/fold.c), and printed
# whole with --full-stacks and by export --folded: fold_prog allocates under four frames named as
# CPython's eval loop names its own, between user_site (the call site) and
# main, which must stay.
#
#   fold_test.sh FSDPSHIM TRACE_PROG SIM_DIR FOLD_PROG
name=fold_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"
fold=$4
fsrc=$here/fold_prog.c
site=$(grep -n 'FOLD_SITE' "$fsrc" | tail -1 | cut -d: -f1)
calls=$(grep -n 'FOLD_CALL' "$fsrc" | tail -2 | cut -d: -f1 | paste -sd'|')
folded='... 4 frames folded: the Python interpreter (--full-stacks shows them)'
plumbing='cfunction_call|_PyObject_MakeTpCall|_PyEval_EvalFrameDefault|PyEval_EvalCode'

expect 0 "$cli" run --trace -o "$dir/keep.fst" -- "$fold" keep
expect 0 "$cli" run --trace -o "$dir/free.fst" -- "$fold"

# folded: the call site, one line for the four interpreter frames, then
# main at a line that called into them; none of the four names
folded_stack() { # what
    grep -m1 -A2 -E "^ +user_site at .*/fold_prog.c:$site$" "$dir/out" | sed 's/^ *//' >"$dir/stack"
    [ "$(sed -n 2p "$dir/stack")" = "$folded" ] || fail "$1: no fold line after the site: $(cat "$dir/out")"
    grep -qE "^main at .*/fold_prog.c:($calls)$" <(sed -n 3p "$dir/stack") ||
        fail "$1: main does not follow the fold line: $(cat "$dir/out")"
    ! grep -qE "^ +($plumbing) at " "$dir/out" || fail "$1: an interpreter frame printed: $(cat "$dir/out")"
}
# whole: the four frames in order between the site and main, no fold line
full_stack() { # what
    grep -m1 -A5 -E "^ +user_site at .*/fold_prog.c:$site$" "$dir/out" | sed 's/^ *//; s/ at .*//' |
        paste -sd' ' >"$dir/stack"
    [ "$(cat "$dir/stack")" = "user_site cfunction_call _PyObject_MakeTpCall _PyEval_EvalFrameDefault PyEval_EvalCode main" ] ||
        fail "$1 --full-stacks: $(cat "$dir/stack"): $(cat "$dir/out")"
    ! grep -q "frames folded" "$dir/out" || fail "$1 --full-stacks folded: $(cat "$dir/out")"
}

expect 0 "$cli" report "$dir/keep.fst"
folded_stack report
expect 0 "$cli" report --full-stacks "$dir/keep.fst"
full_stack report
expect 0 "$cli" top "$dir/keep.fst"
folded_stack top
expect 0 "$cli" top --full-stacks "$dir/keep.fst"
full_stack top
expect 0 "$cli" leaks "$dir/keep.fst"
grep -q "1 block" "$dir/out" || fail "leaks: not the one block kept: $(cat "$dir/out")"
folded_stack leaks
expect 0 "$cli" leaks --full-stacks "$dir/keep.fst"
full_stack leaks
expect 0 "$cli" diff "$dir/free.fst" "$dir/keep.fst"
folded_stack diff
expect 0 "$cli" diff --full-stacks "$dir/free.fst" "$dir/keep.fst"
full_stack diff

# --by frame and --by python are one frame and Python frames: nothing to fold
expect 0 "$cli" top --by frame "$dir/keep.fst"
! grep -q "frames folded" "$dir/out" || fail "top --by frame folded: $(cat "$dir/out")"

# flame graphs keep every frame (a viewer filters by itself)
expect 0 "$cli" export --folded "$dir/keep.fst"
sed 's/ at [^; ]*//g' "$dir/out" |
    grep -q ";main;PyEval_EvalCode;_PyEval_EvalFrameDefault;_PyObject_MakeTpCall;cfunction_call;user_site [0-9]*$" ||
    fail "export --folded: $(cat "$dir/out")"
! grep -q "frames folded" "$dir/out" || fail "export --folded folded: $(cat "$dir/out")"

# the page's site tables hold the same text (and its one leaked block is
# one block, item 14's singular)
expect 0 "$cli" report --html "$dir/page.html" "$dir/keep.fst"
grep -qF "$folded" "$dir/page.html" || fail "the page has no fold line"
grep -q '^<p>1 block, 1.0 MiB, still allocated when the trace ended; the site that held the most:</p>$' \
    "$dir/page.html" || fail "one leaked block: $(grep 'still allocated when' "$dir/page.html")"
! grep -qE ">($plumbing) at " "$dir/page.html" || fail "the page prints an interpreter frame"

# the help says what the option does
expect 0 "$cli" report --help
grep -q -- "--full-stacks" "$dir/out" || fail "report --help: no --full-stacks"
for command in top leaks diff; do
    expect 0 "$cli" "$command" --help
    grep -q -- "--full-stacks" "$dir/out" || fail "$command --help: no --full-stacks"
done
echo "$name: ok"
