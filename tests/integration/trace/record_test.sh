#!/usr/bin/env bash
# record_test.sh - `fsdpshim record` (and run -o) as a new user meets it: an
# output that cannot be written stops the run before the program starts (a
# directory that does not exist, a file where a directory should be, a %
# the shim does not expand); valgrind's escapes (%p, %q{VAR}, %%) expanded
# in each process, and no process's trace replaced by another's of the same
# run; an existing directory gets the default name in it; a name the shim itself cannot create is said as such, not as "no
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
refused 2 "-o 'r-%x.fst': %x is not %h (host), %p (pid), %r (rank), %q{VAR} (an environment variable) or %% (a %)" \
    record -o 'r-%x.fst' -- "$prog" sites
refused 2 "-o 'r-%q.fst': %q takes an environment variable's name in braces" \
    record -o 'r-%q.fst' -- "$prog" sites
refused 2 "-o 'r-%q{RANK.fst': %q takes an environment variable's name in braces, as %q{SLURM_JOB_ID} (no closing brace)" \
    record -o 'r-%q{RANK.fst' -- "$prog" sites
refused 2 "%q takes an environment variable's name" record -o 'r-%q{}.fst' -- "$prog" sites
refused 2 "%q takes an environment variable's name" record -o 'r-%q{1X}.fst' -- "$prog" sites
refused 2 "-o 'r-%': a lone % at the end" run --trace -o 'r-%' -- "$prog" sites
# %% is one piece: the % it writes starts no escape
refused 2 "%y is not %h" record -o 'r-%%%y.fst' -- "$prog" sites
[ -z "$(ls r-* 2>/dev/null)" ] || fail "a file of a refused pattern: $(ls r-*)"

# ---- valgrind's escapes: %p, %q{VAR}, %% -------------------------------------
# traces_named NAME...: the launcher named exactly these files, each there
traces_named() {
    local named want
    named=$(sed -n "s|^fsdpshim\[[0-9]*\]: trace: $dir/\(.*\) ([0-9]* bytes)$|\1|p" "$dir/err" | sort)
    want=$(printf '%s\n' "$@" | sort)
    [ "$named" = "$want" ] || fail "traces named: '$named', not '$want': $(cat "$dir/err")"
    for f in "$@"; do [ -s "$dir/$f" ] || fail "$f was not written"; done
}
# each process expands %q{VAR} from its own environment, %p its own pid, and
# %% is a %, never the start of %p
TAG=launcher expect 0 "$cli" record -o 'q-%q{TAG}-%%p.fst' -- \
    sh -c "TAG=one '$prog' sites & TAG=two '$prog' sites; wait"
traces_named q-one-%p.fst q-two-%p.fst
expect 0 "$cli" record -o 'p-%p.fst' -- sh -c "'$prog' sites & echo \$! >pid1; wait; '$prog' sites & echo \$! >pid2; wait"
traces_named "p-$(cat pid1).fst" "p-$(cat pid2).fst"
# a variable the process lacks is empty, and said
expect 0 "$cli" record -o 'u-%q{FSDPSHIM_TEST_UNSET}.fst' -- env -u FSDPSHIM_TEST_UNSET "$prog" sites
traces_named u-.fst
grep -q "has %q{FSDPSHIM_TEST_UNSET}, but FSDPSHIM_TEST_UNSET is not set in this process" "$dir/err" ||
    fail "an unset variable is not said: $(cat "$dir/err")"
# without %p, two processes of one run in turn keep both traces: the second
# gets .PID (as %p names it), as one that runs beside the first does
expect 0 "$cli" record -o 'same.fst' -- sh -c "'$prog' sites; '$prog' sites & echo \$! >pid2; wait"
traces_named same.fst "same.fst.$(cat pid2)"
# while a later run replaces what an earlier run left
expect 0 "$cli" record -o 'same.fst' -- "$prog" sites
traces_named same.fst

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
    TSAN_OPTIONS=${TSAN_OPTIONS:+$TSAN_OPTIONS:}handle_segv=0 \
    expect 139 "$cli" record -- sh -c 'kill -SEGV $$'
grep -qE "^fsdpshim\[[0-9]+\]: the program was killed by signal 11 \(SIGSEGV, Segmentation fault\)(, core dumped)?; exit status 139$" \
    "$dir/err" || fail "SIGSEGV is not named: $(cat "$dir/err")"
expect 130 "$cli" record -- sh -c 'kill -INT $$'
grep -q "killed by signal" "$dir/err" && fail "an interrupt is named, as no shell does: $(cat "$dir/err")"
echo "record_test: ok"
