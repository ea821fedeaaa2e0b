#!/usr/bin/env bash
# record_test.sh - `fsdpshim record` (and run -o) as a new user meets it: an
# output that cannot be written stops the run before the program starts (a
# directory that does not exist, a file where a directory should be, a %
# the shim does not expand); an existing directory gets the default name in
# it; a name the shim itself cannot create is said as such, not as "no
# process used the GPU"; a library that is no shared object is refused
# before the loader would ignore it; a program killed by a signal is named.
#
#   record_test.sh FSDPSHIM TRACE_PROG SIM_DIR
name=record_test
cli=$1 prog=$2 sim=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../runtime/cli_common.sh"
unset NVTX_INJECTION64_PATH FSDPSHIM_NVTX_CHAIN FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# refused STATUS WHAT ARGS...: exit STATUS, one line on stderr holding WHAT,
# and the program never ran (trace_prog sites prints "sites: ok")
refused() {
    status=$1 says=$2
    shift 2
    expect "$status" "$cli" "$@"
    [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "'$*': not one line: $(cat "$dir/err")"
    grep -qF -- "$says" "$dir/err" || fail "'$*' does not say '$says': $(cat "$dir/err")"
    [ ! -s "$dir/out" ] || fail "'$*' ran the program: $(cat "$dir/out")"
}

# ---- where the trace goes ---------------------------------------------------
refused 1 "fsdpshim record: the trace could not be written in /nonexistent_dir: No such file or directory" \
    record -o /nonexistent_dir/t.fst -- "$prog" sites
refused 1 "the trace could not be written in $dir/missing: No such file or directory" \
    run -o missing/ -- "$prog" sites
touch plain
refused 1 "the trace could not be written in $dir/plain: Not a directory" \
    record -o plain/t.fst -- "$prog" sites
refused 2 "-o 'r-%q.fst': %q is not %h (host), %p (pid), %r (rank) or %% (a %)" \
    record -o 'r-%q.fst' -- "$prog" sites
refused 2 "-o 'r-%': a lone % at the end" run --trace -o 'r-%' -- "$prog" sites
[ -z "$(ls r-* 2>/dev/null)" ] || fail "a file of a refused pattern: $(ls r-*)"

# an existing directory, with or without its slash: the default name in it
mkdir traces
for o in traces traces/; do
    expect 0 "$cli" record -o "$o" -- "$prog" sites
    f=$(sed -n "s|.*trace: \($dir/traces/fsdpshim-[^ ]*-[0-9]*\.fst\) ([0-9]* bytes)$|\1|p" "$dir/err")
    [ -n "$f" ] && [ -f "$f" ] || fail "-o $o: no trace in the directory: $(cat "$dir/err")"
    rm "$f"
done
[ -z "$(ls traces.* 2>/dev/null)" ] || fail "a trace beside the directory: $(ls traces.*)"

# a name only the program's process can make (its pid): the shim cannot
# create it, and the launcher says so
expect 0 "$cli" record -o 'per-%p/t.fst' -- "$prog" sites
grep -qE "^fsdpshim\[[0-9]+\]: the trace could not be written: $dir/per-[0-9]+/t.fst: No such file or directory$" \
    "$dir/err" || fail "the shim's failure is not said: $(cat "$dir/err")"
grep -q "no process of the run used the GPU" "$dir/err" && fail "the launcher blames the GPU: $(cat "$dir/err")"

# ---- the library ---------------------------------------------------------------
echo 'int x;' >some.c
FSDPSHIM_LIB=$dir/some.c refused 1 "FSDPSHIM_LIB=$dir/some.c: not a shared library" run -- "$prog" sites
FSDPSHIM_LIB=$dir/some.c refused 1 "not a shared library" record -- "$prog" sites
refused 1 "--lib $(type -P true): not a shared library" run --lib "$(type -P true)" -- "$prog" sites

# ---- a program killed by a signal ------------------------------------------------
# (in a sanitizer build its preloaded runtime would catch the SIGSEGV)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0 \
    expect 139 "$cli" record -- sh -c 'kill -SEGV $$'
grep -qE "^fsdpshim\[[0-9]+\]: the program was killed by signal 11 \(SIGSEGV, Segmentation fault\)(, core dumped)?; exit status 139$" \
    "$dir/err" || fail "SIGSEGV is not named: $(cat "$dir/err")"
expect 130 "$cli" record -- sh -c 'kill -INT $$'
grep -q "killed by signal" "$dir/err" && fail "an interrupt is named, as no shell does: $(cat "$dir/err")"
echo "record_test: ok"
