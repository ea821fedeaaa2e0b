#!/usr/bin/env bash
# live_test.sh - `fsdpshim top --live` on running programs (live_prog.c, on
# the simulated device, started by `fsdpshim run`): the page's figures are
# what the program holds, the page is mode 0600 and the user's, it goes when
# the process ends (exit, SIGTERM; after SIGKILL the reader or the next
# process that makes a page removes it), a fork child has a page of its
# own, live:false makes none, --live without PID lists every process,
# another user's page is refused, and the command's errors are one line
# with their exit status. Then minifsdp's two ranks (processes), named by
# their communicators, with the all-gather rate limiter's waits.
#
#   live_test.sh FSDPSHIM LIVE_PROG MINIFSDP
name=live_test
cli=$1 prog=$2 minifsdp=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset FSDPSHIM_TRACE RANK LOCAL_RANK WORLD_SIZE
uid=$(id -u)
pids=()
stop_all() {
    rm -f "$dir"/ready*
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$dir"
}
trap stop_all EXIT

page() { echo "/dev/shm/fsdpshim-$uid-$1"; }
# start TAG [CONF] [fork]: live_prog under the shim (`run` execs it: $! is
# its pid); its pid in $pid and its stream in $stream once it holds its memory.
# The figures below are PyTorch's segment sizes' (segment_growth:pytorch):
# 4 MiB blocks sharing a 20 MiB segment leave cached free bytes to show.
start() {
    local tag=$1 conf=${2:-} mode=${3:-}
    rm -f "$dir/ready.$tag" "$dir/ready.$tag.child"
    FSDPSHIM_TRACE="$dir/$tag-%p.fst" "$cli" run --conf "segment_growth:pytorch${conf:+,$conf}" -- \
        "$prog" hold "$dir/ready.$tag" $mode >"$dir/$tag.out" 2>"$dir/$tag.err" &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 200); do
        if [ -s "$dir/ready.$tag" ] && { [ -z "$mode" ] || [ -s "$dir/ready.$tag.child" ]; }; then
            read -r ready stream <"$dir/ready.$tag"
            [ "$ready" = "$pid" ] || fail "$tag: live_prog is $ready, not $pid"
            return
        fi
        kill -0 "$pid" 2>/dev/null || fail "$tag: live_prog died: $(cat "$dir/$tag.err")"
        sleep 0.05
    done
    fail "$tag: live_prog never got ready"
}
# finish PID WHAT: waits up to 20 s for the program (a child of this shell)
# to end, then returns its status: a hang fails the test, naming WHAT
finish() {
    local state
    for _ in $(seq 400); do
        state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
        if [ -z "$state" ] || [ "$state" = Z ]; then
            wait "$1"
            return
        fi
        sleep 0.05
    done
    fail "$2 (pid $1) did not end"
}
# gone FILE: waits up to 5 s for FILE to disappear
gone() {
    for _ in $(seq 100); do [ -e "$1" ] || return 0; sleep 0.05; done
    return 1
}
# top_until PID CHECK...: `top --live PID --once` into $dir/out, again until
# CHECK succeeds (the page is rewritten every 50 ms, its sites counted less
# often when that is slow: a later update has every allocation the program
# made before it said it was ready)
top_until() {
    local p=$1 end=$((SECONDS + 20))
    shift
    # up to 20 s: a sanitized build on a loaded machine (ctest -j) updates
    # a page slowly (3 s were once not enough for a fork child's under ASan)
    while [ "$SECONDS" -lt "$end" ]; do
        expect 0 "$cli" top --live "$p" --once
        "$@" && return
        sleep 0.05
    done
}
sites() { grep -Ec ' in +[0-9]+ blocks?  +' "$dir/out"; }
three_sites() { [ "$(sites)" -eq 3 ]; }
# an update begun before the program was ready may walk the sites after its
# last allocation (on device 1) but have read the devices' figures before it
settled() { three_sites && [ -n "$(field 1 1)" ]; }
shows() { grep -q -- "$1" "$dir/out"; }
# field DEV N: the Nth "NUMBER UNIT" column of device DEV's row in $dir/out
# (1 allocated, 2 its peak, 3 reserved, 4 its peak, 5 pending, 6 cached free)
field() {
    awk -v dev="$1" -v n="$2" '$1 == dev && $3 ~ /B$/ { print $(2 * n) " " $(2 * n + 1); exit }' "$dir/out"
}

# ---- the figures: what live_prog holds ------------------------------------
RANK=3 WORLD_SIZE=4 start main trace:stacks
top_until "$pid" settled
grep -q "^PID $pid  rank 3/4  live_prog  updated [0-9.]* s ago, trace:stacks$" "$dir/out" ||
    fail "no process line: $(cat "$dir/out")"
[ "$(field 0 1)" = "13.0 MiB" ] || fail "device 0 allocated '$(field 0 1)', not 13.0 MiB: $(cat "$dir/out")"
[ "$(field 0 2)" = "14.0 MiB" ] || fail "device 0 peak '$(field 0 2)', not 14.0 MiB"
[ "$(field 1 1)" = "6.0 MiB" ] || fail "device 1 allocated '$(field 1 1)', not 6.0 MiB"
[ "$(field 1 2)" = "6.0 MiB" ] || fail "device 1 peak '$(field 1 2)', not 6.0 MiB"
# 3 x 4 MiB share one 20 MiB segment, the 1 MiB blocks one 2 MiB segment
[ "$(field 0 3)" = "22.0 MiB" ] || fail "device 0 reserved '$(field 0 3)', not 22.0 MiB"
awk '$1 == 0 && $3 ~ /B$/ { exit !($(NF - 2) == 2 && $(NF - 1) == 4 && $NF == 0) }' "$dir/out" ||
    fail "device 0: not 2 segments, 4 live blocks, 0 OOMs: $(grep '^ *0 ' "$dir/out")"
grep -q "cached free by stream: legacy 8.0 MiB, $stream 1.0 MiB$" "$dir/out" ||
    fail "not 8 MiB cached on the legacy stream and 1 MiB on $stream: $(cat "$dir/out")"
grep -q "rate limiter: 0 waits" "$dir/out" || fail "no rate-limiter line"
grep -Eq "^ +12.0 MiB in +3 blocks  alloc_big \(live_prog\)$" "$dir/out" ||
    fail "the site alloc_big does not hold 12 MiB in 3 blocks: $(cat "$dir/out")"
three_sites || fail "not 3 sites: $(cat "$dir/out")"
[ "$(grep -c '^    [0-9] ' "$dir/out")" -eq 2 ] || fail "not 2 devices shown"

# ---- the page: mode, owner, and the page readers see without a terminal ----
[ "$(stat -c '%a %u' "$(page "$pid")")" = "600 $uid" ] ||
    fail "page mode and owner $(stat -c '%a %u' "$(page "$pid")"), not 600 $uid"
expect 0 "$cli" top --live "$pid" # stdout is a file: one snapshot
grep -q "^PID $pid " "$dir/out" || fail "without --once and a terminal: no snapshot"

# ---- normal exit: the page goes -------------------------------------------
rm "$dir/ready.main"
finish "$pid" live_prog || fail "live_prog exited $?"
gone "$(page "$pid")" || fail "the page outlived a normal exit"
expect 1 "$cli" top --live "$pid" --once
[ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q "process $pid has no fsdpshim statistics page (no such process)" "$dir/err" ||
    fail "an ended process: $(cat "$dir/err")"

# ---- a umask that would open the page to others, and trace:off ----------------
umask 000
start umask
umask 077
[ "$(stat -c '%a' "$(page "$pid")")" = 600 ] || fail "umask 000: page mode $(stat -c '%a' "$(page "$pid")")"
expect 0 "$cli" top --live "$pid" --once
grep -q "sites: not kept" "$dir/out" || fail "trace:off: sites shown: $(cat "$dir/out")"
grep -q "rank ?" "$dir/out" || fail "no RANK: a rank shown"

# ---- SIGTERM: the default action removes the page -----------------------------
kill -TERM "$pid"
gone "$(page "$pid")" || fail "the page outlived SIGTERM"

# ---- a fork child's own page, and --live without PID ------------------------
# (LIVE_NO_FORK=1, the ASan build: no fork child, see CMakeLists.txt)
if [ "${LIVE_NO_FORK:-}" = 1 ]; then
    start fork
    parent=$pid child=
else
    start fork "" fork
    parent=$pid child=$(cat "$dir/ready.fork.child")
    [ -e "$(page "$child")" ] || fail "the fork child has no page"
    top_until "$child" shows '^ *0 '
    [ "$(field 0 1)" = "2.0 MiB" ] || fail "the child's page shows '$(field 0 1)', not its own 2.0 MiB"
    [ "$(grep -c '^    [0-9] ' "$dir/out")" -eq 1 ] || fail "the child shows more than its device 0"
fi
start other
# (other tests' processes may be running too: ctest -j)
expect 0 "$cli" top --live --once
grep -q "^fsdpshim top --live: [0-9]* processes$" "$dir/out" || fail "no header: $(head -1 "$dir/out")"
for p in "$pid" $child "$parent"; do
    grep -q "^PID $p " "$dir/out" || fail "--live without PID does not list $p: $(cat "$dir/out")"
done
if [ -n "$child" ]; then
    rm -f "$dir/ready.fork.child"
    gone "$(page "$child")" || fail "the fork child's page outlived it"
fi

# ---- SIGKILL: the page stays until a reader, or a process making its own
# page, finds its process gone (under ctest -j another test's process may
# get there first: what is checked is that the page goes) ------------------
kill -KILL "$pid"
finish "$pid" "the killed live_prog"
expect 0 "$cli" top --live --once
grep -q "^PID $pid " "$dir/out" && fail "a killed process is listed"
grep -q "^PID $parent " "$dir/out" || fail "the running process is not listed"
[ -e "$(page "$pid")" ] && fail "the reader left the page of a killed process"
start killed
killed=$pid
kill -KILL "$killed"
finish "$killed" "the killed live_prog"
start sweeper
[ -e "$(page "$killed")" ] && fail "a new process left the page of a killed one"
rm -f "$dir/ready.fork" "$dir/ready.sweeper"
finish "$pid" "the sweeping live_prog" || fail "live_prog exited $?"
finish "$parent" "the fork parent" || fail "the fork parent exited $?"
gone "$(page "$parent")" || fail "the fork parent's page outlived it"

# ---- live:false: no page -----------------------------------------------------
start off live:false
[ -e "$(page "$pid")" ] && fail "live:false made a page"
expect 1 "$cli" top --live "$pid" --once
grep -q "process $pid has no fsdpshim statistics page (not running under the shim" "$dir/err" ||
    fail "live:false: $(cat "$dir/err")"
rm "$dir/ready.off"
finish "$pid" "live_prog with live:false"

# ---- another user's process ---------------------------------------------------
expect 1 "$cli" top --live $$ --once # this shell: not under the shim
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "not one line: $(cat "$dir/err")"
if [ "$uid" -eq 0 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
    start mine
    chmod 755 "$dir"
    setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
        "$cli" top --live "$pid" --once >"$dir/out" 2>"$dir/err"
    got=$?
    [ "$got" -eq 1 ] || fail "another user's page: exit $got"
    grep -q "process $pid belongs to another user (uid 0): its statistics page is readable only by that user" "$dir/err" ||
        fail "another user's page: $(cat "$dir/err")"
    # a user with no process under the shim
    setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups \
        "$cli" top --live --once >"$dir/out" 2>"$dir/err"
    got=$?
    [ "$got" -eq 1 ] && grep -q "no process of this user runs the shim" "$dir/err" ||
        fail "a user without processes: exit $got: $(cat "$dir/err")"
    rm "$dir/ready.mine"
    finish "$pid" live_prog
fi

# ---- minifsdp: two ranks, the rate limiter ----------------------------------------
"$cli" run --conf ag_limit:1 -- "$minifsdp" --ranks 2 --layers 4 --numel 50000 --steps 4096 \
    >"$dir/minifsdp.out" 2>&1 &
pid=$!
pids+=("$pid")
seen=
# the view of this job's two ranks alone: other tests' jobs may run beside
ours() { awk '/^PID / { keep = / rank [01]\/2  minifsdp / } keep' "$dir/out"; }
for _ in $(seq 100); do
    "$cli" top --live --once >"$dir/out" 2>"$dir/err" # none yet: status 1
    if grep -q "^PID [0-9]*  rank 0/2  minifsdp " "$dir/out" &&
        grep -q "^PID [0-9]*  rank 1/2  minifsdp " "$dir/out" &&
        [ "$(ours | grep -c 'rate limiter: [1-9][0-9]* waits\?')" -eq 2 ]; then
        seen=1
        break
    fi
    sleep 0.1
done
[ -n "$seen" ] || fail "minifsdp: not two ranks with rate-limiter waits: $(cat "$dir/out")"
# the ranks are processes minifsdp forked: each ends by SIGTERM's default action
ranks=$(sed -n 's/^PID \([0-9]*\)  rank [01]\/2 .*/\1/p' "$dir/out")
kill -TERM $ranks
finish "$pid" minifsdp
for p in $ranks; do gone "$(page "$p")" || fail "minifsdp rank $p: the page outlived SIGTERM"; done

# ---- usage --------------------------------------------------------------------
expect 2 "$cli" top --live abc
expect 2 "$cli" top --live -d 0
expect 0 "$cli" top --live --help
grep -q "usage: fsdpshim top --live" "$dir/out" || fail "no --live usage"
echo "$name: ok"
