#!/usr/bin/env bash
# live_tmux.sh - the interactive `fsdpshim top --live PID` as a user meets
# it, in a detached tmux session (a real terminal) against a running
# live_prog: after a second the screen shows the process's figures on the
# alternate screen with the cursor hidden; q ends it with status 0 and the
# terminal sane (main screen, cursor shown, canonical mode and echo back);
# Ctrl-C does the same; and the view ends by itself when the process does.
# Skipped (77) without tmux (Debian's tmux; scripts/deps.sh installs it).
#
#   live_tmux.sh FSDPSHIM LIVE_PROG
name=live_tmux
cli=$1 prog=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
command -v tmux >/dev/null || { echo "$name: no tmux: skipped"; exit 77; }
unset FSDPSHIM_TRACE RANK LOCAL_RANK WORLD_SIZE TMUX
sock=fsdpshim-live-$$
tmux_() { tmux -L "$sock" "$@"; }
progpid=
cleanup() {
    tmux_ kill-server 2>/dev/null
    rm -f "$dir/ready"
    [ -n "$progpid" ] && kill -9 "$progpid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

screen() { tmux_ capture-pane -p -t live; }
flag() { tmux_ display-message -p -t live "#{$1}"; }
# until SECONDS CMD...: CMD succeeds within SECONDS
until_ok() {
    local n=$(($1 * 20))
    shift
    for _ in $(seq "$n"); do "$@" && return 0; sleep 0.05; done
    return 1
}
shows() { screen | grep -q -- "$1"; }
# whether a child of this shell has ended (a zombie until it is waited for)
ended() {
    local state
    state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
    [ -z "$state" ] || [ "$state" = Z ]
}
# the shell in the pane is back at its prompt, after COMMAND exited with STATUS
prompt_after() { screen | grep -q "^EXIT=$1\$"; }

# PyTorch's segment sizes, as live_test.sh's figures
"$cli" run --conf segment_growth:pytorch -- "$prog" hold "$dir/ready" >"$dir/prog.out" 2>"$dir/prog.err" &
progpid=$!
until_ok 10 test -s "$dir/ready" || fail "live_prog never got ready: $(cat "$dir/prog.err")"

# A plain shell in a 120x40 terminal, its prompt one we can find.
tmux_ -f /dev/null new-session -d -s live -x 120 -y 40 \
    "env -i PATH=$PATH TERM=screen HOME=$dir PS1='$ ' bash --norc --noprofile"
tmux_ set-option -t live remain-on-exit on >/dev/null
until_ok 5 shows '^\$' || fail "no shell prompt: $(screen)"

# run_view KEYS: starts the view, checks its screen, sends KEYS, checks the
# view ended with status 0 and left the terminal as it found it
run_view() {
    tmux_ send-keys -t live "printf '\\033[H\\033[2J'; $cli top --live $progpid; echo EXIT=\$?" Enter
    sleep 1
    until_ok 5 shows "^PID $progpid  rank ?  live_prog  updated" ||
        fail "the view does not show the process: $(screen)"
    shows '^ *0  *13.0 MiB  *14.0 MiB  *22.0 MiB' || fail "device 0's figures are not shown: $(screen)"
    shows '^ *1  *6.0 MiB  *6.0 MiB' || fail "device 1's figures are not shown: $(screen)"
    shows 'cached free by stream: legacy 8.0 MiB, 0x[0-9a-f]* 1.0 MiB' ||
        fail "the streams' cached bytes are not shown: $(screen)"
    shows "every 0.5 s (q quits)" || fail "no header: $(screen)"
    [ "$(flag alternate_on)" = 1 ] || fail "the view is not on the alternate screen"
    [ "$(flag cursor_flag)" = 0 ] || fail "the cursor is not hidden in the view"
    first=$(screen | grep -o 'updated [0-9.]* s ago')
    tmux_ send-keys -t live "$@"
    until_ok 5 prompt_after 0 || fail "the view did not end with status 0 on $*: $(screen)"
    [ "$(flag alternate_on)" = 0 ] || fail "still on the alternate screen after $*"
    [ "$(flag cursor_flag)" = 1 ] || fail "the cursor is still hidden after $*"
    shows "every 0.5 s" && fail "the view's screen was not taken away after $*: $(screen)"
    # canonical mode and echo are back: stty says so, and a typed line echoes
    tmux_ send-keys -t live "stty -a | tr ' ;' '\n\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\n' ' '; echo" Enter
    until_ok 5 shows '^icanon echo *$' || fail "the terminal is not sane after $*: $(screen)"
    [ -n "$first" ] || fail "no update time shown"
}
run_view q
run_view C-c

# The view ends by itself when the process it shows does.
tmux_ send-keys -t live "printf '\\033[H\\033[2J'; $cli top --live -d 0.2 $progpid; echo EXIT=\$?" Enter
until_ok 5 shows "^PID $progpid " || fail "the view does not show the process: $(screen)"
rm "$dir/ready"
until_ok 20 ended "$progpid" || fail "live_prog did not end"
wait "$progpid" || fail "live_prog exited $?"
progpid=
until_ok 5 prompt_after 0 || fail "the view did not end with the process: $(screen)"
shows "fsdpshim top: the process ended" || fail "no word of the process's end: $(screen)"
[ "$(flag alternate_on)" = 0 ] || fail "still on the alternate screen after the process ended"
echo "$name: ok"
