#!/usr/bin/env bash
# diff_test.sh - `fsdpshim diff A B` on traces of known programs: trace_prog
# sites (a 3 MiB and a 5 MiB block, both live at the peak) against trace_prog
# leak (blocks at other sites): which sites appear, grow and shrink, by peak
# and by count; a trace against itself; two builds of one program; bad
# input.
#
#   diff_test.sh FSDPSHIM TRACE_PROG SIM_DIR
name=diff_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"

expect 0 "$cli" run --trace -o "$dir/sites.fst" -- "$prog" sites
expect 0 "$cli" run --trace -o "$dir/sites2.fst" -- "$prog" sites
expect 0 "$cli" run --trace -o "$dir/leak.fst" -- "$prog" leak

expect 0 "$cli" diff --by frame "$dir/sites.fst" "$dir/leak.fst"
grep -q "^A: .*sites.fst (pid [0-9]*): 2 allocations, device 0 peaked at 8.0 MiB$" "$dir/out" ||
    fail "A: $(cat "$dir/out")"
grep -q "^4 sites by frame: 2 grew, 2 shrank in peak, 2 only in A, 2 only in B$" "$dir/out" ||
    fail "summary: $(cat "$dir/out")"
rows=$(grep -A1 -E '^ +[+-]' "$dir/out" | grep -v '^--$' | paste -d' ' - - | tr -s ' ')
sed -n 1p <<<"$rows" | grep -qE '^ \+4.0 MiB - 4.0 MiB 0 1 \(only in B\) keep_forever at ' ||
    fail "first row: $rows"
sed -n 2p <<<"$rows" | grep -qE '^ \+3.0 MiB - 3.0 MiB 0 3 \(only in B\) leak_site at ' ||
    fail "second row: $rows"
sed -n 4p <<<"$rows" | grep -qE '^ -5.0 MiB 5.0 MiB - 1 0 \(only in A\) alloc_in_backward at ' ||
    fail "last row: $rows"

expect 0 "$cli" diff --by frame --sort count -n 1 "$dir/sites.fst" "$dir/leak.fst"
grep -qE '^ +\+3 +- +3 +0 +3  \(only in B\)$' "$dir/out" || fail "by count: $(cat "$dir/out")"
[ "$(grep -cE '^ +[+-][0-9]' "$dir/out")" -eq 1 ] || fail "-n 1: $(cat "$dir/out")"

# the same program twice: the same sites, nothing grew
expect 0 "$cli" diff "$dir/sites.fst" "$dir/sites2.fst"
grep -q "^2 sites by stack: 0 grew, 0 shrank in peak, 0 only in A, 0 only in B$" "$dir/out" ||
    fail "a trace against a twin: $(cat "$dir/out")"

# two builds of the program (here a copy under another name, whose _start
# frame has no line information: "_start (MODULE+0xOFFSET)", printed with
# --full-stacks, folded with the program's start otherwise): stacks match
# by their symbolised frames, not by the module's path; without symbols by
# module and offset, which differ
cp "$prog" "$dir/app2"
expect 0 "$cli" run --trace -o "$dir/app2.fst" -- "$dir/app2" sites
for full in "" --full-stacks; do
    expect 0 "$cli" diff $full "$dir/sites.fst" "$dir/app2.fst"
    grep -q "^2 sites by stack: 0 grew, 0 shrank in peak, 0 only in A, 0 only in B$" "$dir/out" ||
        fail "two builds by stack $full: $(cat "$dir/out")"
done
expect 0 "$cli" top --full-stacks "$dir/app2.fst"
grep -qE "^    _start \($dir/app2\+0x[0-9a-f]+\)$" "$dir/out" ||
    fail "no _start frame without line information: $(cat "$dir/out")"
expect 0 "$cli" diff --no-symbols "$dir/sites.fst" "$dir/app2.fst"
grep -q "^4 sites by stack: 2 grew, 2 shrank in peak, 2 only in A, 2 only in B$" "$dir/out" ||
    fail "two builds without symbols: $(cat "$dir/out")"

expect 2 "$cli" diff "$dir/sites.fst"
expect 2 "$cli" diff --sort nothing "$dir/sites.fst" "$dir/leak.fst"
expect 1 "$cli" diff "$dir/sites.fst" "$dir/missing.fst"
echo "diff_test: ok"
