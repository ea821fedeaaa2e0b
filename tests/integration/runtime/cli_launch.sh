#!/bin/sh
# cli_launch.sh - `fsdpshim run` as a new user meets it: programs run as a
# shell runs them (exit codes 126/127, the child's own status, files without
# #!, a file of the working directory), the library found by --lib /
# FSDPSHIM_LIB from a copied CLI, --version, and the commands that are not
# built yet refused with status 3. The PyTorch route: cli_torch.sh.
#   cli_launch.sh FSDPSHIM LIBFSDPSHIM VERSION
cli=$(readlink -f "$1") lib=$(readlink -f "$2") version=$3
name=cli_launch
. "$(dirname "$0")/cli_common.sh"

# ---- exit codes as a shell gives them ------------------------------------
expect 127 "$cli" run -- /nonexistent/program
expect 127 "$cli" run -- no-such-command-here
grep -q "command not found" "$dir/err" || fail "no 'command not found' line"
printf 'echo hi\n' >plain.sh
expect 126 "$cli" run -- ./plain.sh
grep -q "Permission denied" "$dir/err" || fail "no 'Permission denied' line"
mkdir adir
expect 126 "$cli" run -- ./adir
printf '#!/nonexistent/interpreter\n' >badinterp
chmod +x badinterp
expect 126 "$cli" run -- ./badinterp
expect 7 "$cli" run -- sh -c 'exit 7'
# an executable without #! runs under /bin/sh, its status is its own
printf 'exit 5\n' >noshebang
chmod +x noshebang
expect 5 "$cli" run -- ./noshebang
# a bare name that PATH lacks: the file of the working directory
printf 'exit 4\n' >tool
chmod +x tool
expect 4 "$cli" run tool

# ---- the library: --lib, FSDPSHIM_LIB, a copied CLI ----------------------
show='echo "$LD_PRELOAD"'
mkdir copy
cp "$cli" copy/fsdpshim
expect 1 copy/fsdpshim run -- true
grep -q "FSDPSHIM_LIB" "$dir/err" || fail "a copied CLI does not say how to name the library"
out=$(FSDPSHIM_LIB=$lib copy/fsdpshim run -- sh -c "$show") || fail "FSDPSHIM_LIB refused"
[ "$out" = "$lib" ] || fail "FSDPSHIM_LIB: LD_PRELOAD='$out'"
cp "$lib" copy/libother.so
out=$(copy/fsdpshim run --lib copy/libother.so -- sh -c "$show") || fail "--lib refused"
[ "$out" = "$dir/copy/libother.so" ] || fail "--lib: LD_PRELOAD='$out'"
out=$(FSDPSHIM_LIB=/nonexistent "$cli" run --lib="$lib" -- sh -c "$show") || fail "--lib= refused"
[ "$out" = "$lib" ] || fail "--lib does not win over FSDPSHIM_LIB: '$out'"
expect 1 "$cli" run --lib /nonexistent/libfsdpshim.so -- true

# ---- version, help, commands not built yet --------------------------------
out=$("$cli" --version)
[ "$out" = "fsdpshim $version" ] || fail "--version printed '$out'"
for c in dump top leaks timeline diff report; do
    expect 0 "$cli" help $c
    expect 0 "$cli" $c --help
    files=x
    [ $c = diff ] && files="x y" # diff takes two
    expect 1 "$cli" $c $files
    grep -q "x: cannot open" "$dir/err" || fail "$c of a missing file: $(cat "$dir/err")"
done
# replay needs a configuration to try before its traces
expect 0 "$cli" help replay
expect 0 "$cli" replay --help
expect 1 "$cli" replay --conf expandable_segments:true x
grep -q "x: cannot open" "$dir/err" || fail "replay of a missing file: $(cat "$dir/err")"
# export needs a format before its traces
expect 0 "$cli" help export
expect 0 "$cli" export --help
expect 1 "$cli" export --folded x
grep -q "x: cannot open" "$dir/err" || fail "export of a missing file: $(cat "$dir/err")"
expect 1 "$cli" export --perfetto -o "$dir/x.pftrace" x
grep -q "x: cannot open" "$dir/err" || fail "export --perfetto of a missing file: $(cat "$dir/err")"
# attach and detach (tests/integration/cupti/attach_test.sh): described, and
# a process that does not exist is bad input
for c in attach detach; do
    expect 1 "$cli" $c 999999999
    grep -q "no process 999999999" "$dir/err" || fail "'$c' of a missing process: $(cat "$dir/err")"
    expect 0 "$cli" help $c
    expect 0 "$cli" $c --help
done
# tracing, whatever the spelling: a program that never uses the GPU writes
# no trace, and the launcher says so
for spelling in "record" "run --trace" "run -o t.fst" "run -ot.fst" "run --output=t.fst"; do
    expect 0 "$cli" $spelling -- true
    grep -q "no trace was written" "$dir/err" || fail "'$spelling' did not say no trace was written"
done
[ ! -e t.fst ] || fail "a trace file appeared for a program without CUDA"
# record's own usage on its usage errors
expect 2 "$cli" record --bogus -- true
grep -q "usage: fsdpshim record" "$dir/err" || fail "record --bogus prints another usage"
expect 2 "$cli" record
echo "cli_launch: ok"
