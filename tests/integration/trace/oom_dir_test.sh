#!/usr/bin/env bash
# oom_dir_test.sh - where a plain run's out-of-memory snapshots go: not the
# working directory (a user who asked for no trace found 36 files there
# after an hour), but $TMPDIR/fsdpshim-UID, mode 0700, named in the OOM
# line, keeping the newest 32 snapshot files and nothing else touched.
#
#   oom_dir_test.sh FSDPSHIM TRACE_PROG SIM_DIR
name=oom_dir_test
cli=$1 prog=$2 sim=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset FSDPSHIM_TRACE FSDPSHIM_OOM_DIR
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TMPDIR=$dir/tmp
mkdir -p "$dir/tmp" "$dir/work"
cd "$dir/work" || exit 1
snaps=$TMPDIR/fsdpshim-$(id -u)

# the first: the directory is made, mode 0700
FSDPSHIM_SIM_MEM=62M expect 0 "$cli" run -- "$prog" oom
[ -d "$snaps" ] || fail "no $snaps: $(cat "$dir/err")"
[ "$(stat -c %a "$snaps")" = 700 ] || fail "$snaps has mode $(stat -c %a "$snaps")"
grep -q "; snapshot: $snaps/fsdpshim-oom-.*\.fst$" "$dir/err" ||
    fail "the OOM line does not name a file in $snaps: $(cat "$dir/err")"
[ -z "$(ls "$dir/work")" ] || fail "files in the working directory: $(ls "$dir/work")"

# 40 older snapshots and a file of the user's: the oldest go, the rest stay
rm -f "$snaps"/*
for i in $(seq 1 40); do
    touch -d "@$((1577836800 + 60 * i))" "$snaps/fsdpshim-oom-old-$i.fst" # 2020, a minute apart
done
echo mine >"$snaps/notes.txt"
FSDPSHIM_SIM_MEM=62M expect 0 "$cli" run -- "$prog" oom
new=$(sed -n 's/.*; snapshot: \(.*\)$/\1/p' "$dir/err" | head -1)
[ -f "$new" ] || fail "the new snapshot is not there: $(cat "$dir/err")"
n=$(find "$snaps" -name 'fsdpshim-*.fst' | wc -l)
[ "$n" -eq 32 ] || fail "$n snapshot files kept, not 32: $(ls "$snaps")"
[ ! -e "$snaps/fsdpshim-oom-old-9.fst" ] || fail "an old snapshot that should have gone is still there"
[ -e "$snaps/fsdpshim-oom-old-10.fst" ] || fail "the newest 31 older ones should stay: $(ls "$snaps")"
[ -e "$snaps/notes.txt" ] || fail "a file that is no snapshot was removed"
[ -z "$(ls "$dir/work")" ] || fail "files in the working directory: $(ls "$dir/work")"

# FSDPSHIM_OOM_DIR still wins
mkdir "$dir/mine"
FSDPSHIM_OOM_DIR=$dir/mine FSDPSHIM_SIM_MEM=62M expect 0 "$cli" run -- "$prog" oom
grep -q "; snapshot: $dir/mine/fsdpshim-oom-.*\.fst$" "$dir/err" || fail "FSDPSHIM_OOM_DIR: $(cat "$dir/err")"
echo "oom_dir_test: ok"
