#!/usr/bin/env bash
# leaks_test.sh - `fsdpshim leaks` on a program that ends with blocks it
# never freed (trace_prog leak: two of leak_site, 1 and 2 MiB, one of
# keep_forever, 4 MiB): the sites and sizes, in exact bytes as asked for
# (trace_prog leak 123: 3145851 bytes at leak_site, as LeakSanitizer would
# count them), suppressions with and without anchors, --fail, ranks merged,
# bad input.
#
#   leaks_test.sh FSDPSHIM TRACE_PROG SIM_DIR
name=leaks_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"
line_of() { grep -n "$1" "$src" | cut -d: -f1; }

expect 0 "$cli" run --trace -o "$dir/leak.fst" -- "$prog" leak
expect 0 "$cli" run --trace -o "$dir/leak2.fst" -- "$prog" leak
expect 0 "$cli" run --trace -o "$dir/sites.fst" -- "$prog" sites
expect 0 "$cli" run --trace -o "$dir/odd.fst" -- "$prog" leak 123

expect 0 "$cli" leaks --by frame "$dir/leak.fst"
grep -q ": 3 blocks, 7.0 MiB (7340032 bytes), still allocated at the end$" "$dir/out" ||
    fail "totals: $(cat "$dir/out")"
rows=$(grep -A1 -E '^ +[0-9.]+ [KMG]?i?B +[0-9]+ +[0-9]+ +[0-9]+$' "$dir/out" | grep -v '^--$' | paste -d' ' - - | tr -s ' ')
sed -n 1p <<<"$rows" | grep -qE "^ 4.0 MiB 4194304 1 1 keep_forever at .*trace_prog.c:$(line_of SITE_KEEP)$" ||
    fail "first site: $rows"
sed -n 2p <<<"$rows" | grep -qE "^ 3.0 MiB 3145728 2 1 leak_site at .*trace_prog.c:$(line_of SITE_LEAK)$" ||
    fail "second site: $rows"
# the bytes the program asked for, exactly (the blocks hold them rounded up)
expect 0 "$cli" leaks --by frame "$dir/odd.fst"
grep -q ": 3 blocks, 7.0 MiB (7340155 bytes), still allocated at the end$" "$dir/out" ||
    fail "odd totals: $(cat "$dir/out")"
grep -qE "^ +3.0 MiB +3145851 +2 +1$" "$dir/out" || fail "odd bytes: $(cat "$dir/out")"
expect 0 "$cli" leaks "$dir/sites.fst"
grep -q "^0 blocks, 0 B (0 bytes), in 0 sites" "$dir/out" || fail "a program that frees everything: $(cat "$dir/out")"

# suppressions: a substring, anchors, a glob; what each covered
printf '# the cache\nleak:keep_forever\n\n' >"$dir/s1"
expect 4 "$cli" leaks --by frame --suppressions "$dir/s1" --fail "$dir/leak.fst"
grep -q "^2 blocks, 3.0 MiB (3145728 bytes), in 1 site by" "$dir/out" || fail "leak:keep_forever: $(cat "$dir/out")"
grep -qE "^ +1 block +4.0 MiB +4194304  leak:keep_forever$" "$dir/out" || fail "suppressions used: $(cat "$dir/out")"
printf 'leak:^keep_forever at \nleak:trace_prog.c:%s$\n' "$(line_of SITE_LEAK)" >"$dir/s2"
expect 0 "$cli" leaks --by frame --suppressions "$dir/s2" --fail "$dir/leak.fst"
grep -q "^0 blocks, 0 B (0 bytes), in 0 sites" "$dir/out" || fail "anchored suppressions: $(cat "$dir/out")"
printf 'leak:^forever\nleak:leak_site$\n' >"$dir/s3" # anchored where they do not match
expect 4 "$cli" leaks --by frame --suppressions "$dir/s3" --fail "$dir/leak.fst"
grep -q "^3 blocks, 7.0 MiB (7340032 bytes), in 2 sites" "$dir/out" || fail "misplaced anchors matched: $(cat "$dir/out")"
printf 'leak:*_site at *trace_prog*\n' >"$dir/s4"
expect 0 "$cli" leaks --by frame --suppressions "$dir/s4" "$dir/leak.fst"
grep -q "^1 block, 4.0 MiB (4194304 bytes), in 1 site by" "$dir/out" || fail "a glob: $(cat "$dir/out")"

# two traces: two ranks
expect 0 "$cli" leaks --by frame "$dir/leak.fst" "$dir/leak2.fst"
grep -qE '^ +8.0 MiB +8388608 +2 +2$' "$dir/out" || fail "two ranks: $(cat "$dir/out")"

# bad input
printf 'keep_forever\n' >"$dir/bad"
expect 1 "$cli" leaks --suppressions "$dir/bad" "$dir/leak.fst"
grep -q "bad:1: not a leak:PATTERN line" "$dir/err" || fail "a bad suppressions line: $(cat "$dir/err")"
expect 1 "$cli" leaks --suppressions "$dir/missing" "$dir/leak.fst"
expect 2 "$cli" leaks
expect 2 "$cli" leaks --by nothing "$dir/leak.fst"
expect 1 "$cli" leaks "$dir/missing.fst"
echo "leaks_test: ok"
