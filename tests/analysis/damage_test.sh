#!/usr/bin/env bash
# damage_test.sh - every analyzer command (dump, report and report --html,
# top, leaks, timeline, diff, the four exports, replay) on a damaged trace
# (SPEC section 9, docs/cli.md): a copy cut inside a block (a killed
# writer's torn tail) and a copy with bytes overwritten mid-file (a corrupt
# block). Each command prints or writes what it recovers, names the damage
# in one line with the file and its offset, exits 1, and neither crashes
# nor hangs (60 s each at most). tests/fuzz/ tries hostile traces.
#
#   damage_test.sh FSDPSHIM TRACE_PROG SIM_DIR
name=damage_test
here=$(cd "$(dirname "$0")" && pwd)
. "$here/analysis_common.sh"

# several threads' blocks, so that there is something before and after
expect 0 "$cli" run --trace -o "$dir/good.fst" -- "$prog" flood 4 3000
size=$(stat -c %s "$dir/good.fst")
head -c $((size * 2 / 3)) "$dir/good.fst" >"$dir/cut.fst"
cp "$dir/good.fst" "$dir/corrupt.fst"
printf '\125\252\125\252\125\252\125\252' |
    dd of="$dir/corrupt.fst" bs=1 seek=$((size / 2)) conv=notrunc status=none

expect 0 "$cli" dump --no-stacks "$dir/good.fst"
good=$(grep -c ' alloc ' "$dir/out")
for damaged in cut corrupt; do
    trace=$dir/$damaged.fst
    for command in dump report html top leaks timeline diff memviz folded chrome perfetto replay; do
        case $command in
        html) args=(report --html "$dir/$damaged.$command" "$trace") ;;
        diff) args=(diff "$dir/good.fst" "$trace") ;;
        memviz | folded | chrome | perfetto)
            args=(export "--$command" -o "$dir/$damaged.$command" "$trace")
            ;;
        replay) args=(replay --conf expandable_segments:true "$trace") ;;
        *) args=("$command" "$trace") ;;
        esac
        rm -f "$dir/$damaged.$command"
        timeout 60 "$cli" "${args[@]}" >"$dir/out" 2>"$dir/err"
        rc=$?
        what="$damaged: ${args[*]}"
        [ "$rc" -eq 1 ] || fail "$what exited $rc, not 1: $(cat "$dir/err")"
        # the damage named once, with the file and the offset
        lines=$(grep -c "^fsdpshim [a-z]*: $trace: offset [0-9][0-9]*: " "$dir/err")
        [ "$lines" -eq 1 ] || fail "$what: $lines lines name the damage: $(cat "$dir/err")"
        case $command in
        html | memviz | folded | chrome | perfetto)
            [ -s "$dir/$damaged.$command" ] || fail "$what: nothing written: $(cat "$dir/err")"
            ;;
        *) [ -s "$dir/out" ] || fail "$what: nothing printed: $(cat "$dir/err")" ;;
        esac
    done
    # what is recovered is the events before the damage (and, past a corrupt
    # block, after it)
    "$cli" dump --no-stacks "$trace" >"$dir/out" 2>/dev/null
    n=$(grep -c ' alloc ' "$dir/out")
    [ "$n" -gt 0 ] && [ "$n" -lt "$good" ] || fail "$damaged: $n of $good allocations recovered"
    grep -q "^# damaged: " "$dir/out" || fail "$damaged: no '# damaged' line"
done
# leaks says in its own output (not only on stderr) that blocks whose free
# was cut off are listed: every block of the flood was freed
expect 0 "$cli" leaks "$dir/good.fst"
grep -q "^0 blocks" "$dir/out" || fail "the whole trace leaks: $(cat "$dir/out")"
grep -q "damaged" "$dir/out" && fail "an intact trace called damaged: $(cat "$dir/out")"
expect 1 "$cli" leaks "$dir/cut.fst"
grep -q "^$dir/cut.fst: the trace is damaged ([0-9]* bytes could not be read): a block whose free was in them is listed as still allocated$" \
    "$dir/out" || fail "leaks of a cut trace does not say it is damaged: $(cat "$dir/out")"
# and the damage is named for what it is
expect 1 "$cli" top "$dir/cut.fst"
grep -q "cut.fst: offset [0-9]*: the trace ends inside a block" "$dir/err" ||
    fail "the torn tail is not named: $(cat "$dir/err")"
expect 1 "$cli" top "$dir/corrupt.fst"
grep -q "corrupt.fst: offset [0-9]*: block checksum mismatch: skipped [0-9]* bytes to the next block" \
    "$dir/err" || fail "the corrupt block is not named: $(cat "$dir/err")"
echo "damage_test: ok"
