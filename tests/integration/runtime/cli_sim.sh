#!/bin/sh
# cli_sim.sh - `fsdpshim sim`: the program runs on the simulated device with
# the options it was given, its exit status comes back, and the report gives
# each process's peak per device (the peak, not the sum of allocations), its
# rank, a dry run of more memory than the machine has, refusals, the trace
# files of a traced run named at the end, usage errors.
#   cli_sim.sh FSDPSHIM SIM_PEAK
cli=$(readlink -f "$1") prog=$(readlink -f "$2")
name=cli_sim
. "$(dirname "$0")/cli_common.sh"
unset FSDPSHIM_SIM_DEVICES FSDPSHIM_SIM_MEM FSDPSHIM_SIM_DATA FSDPSHIM_SIM_REPORT FSDPSHIM_SIM_DIR RANK

# report_peak DEVICE RANK: the peak_bytes column of that row of $dir/err
report_peak() {
    awk -v d="$1" -v r="$2" '$1 == "fsdpshim" && $2 == "sim:" && $3 == r && $5 == d {print $8}' \
        "$dir/err"
}

# ---- usage ----------------------------------------------------------------
expect 2 "$cli" sim
expect 2 "$cli" sim --devices 65 -- true
expect 2 "$cli" sim --devices x -- true
expect 2 "$cli" sim --mem 12X -- true
grep -q "12X" "$dir/err" || fail "a bad --mem is not named"
expect 2 "$cli" sim --bogus -- true
expect 0 "$cli" sim --help
expect 0 "$cli" help sim
expect 127 "$cli" sim -- /nonexistent/program
expect 1 env FSDPSHIM_SIM_DIR=/nonexistent "$cli" sim -- true

# ---- natively: the peak of one process, its status and rank --------------
mib=1048576
expect 3 env RANK=5 "$cli" sim --native --devices 4 --mem 64M -- "$prog" 2 $((8 * mib)) 3
[ "$(report_peak 2 5)" = $((8 * mib)) ] || { cat "$dir/err" >&2; fail "native peak is not 8 MiB"; }
grep -q "1 process on devices of 64.0 MiB, without the shim" "$dir/err" ||
    fail "the header does not give the capacity and the route"
grep -q "peak 8.0 MiB ($((8 * mib)) bytes) on device 2, rank 5" "$dir/err" || fail "no peak line"
grep -q "out of memory" "$dir/err" && fail "an out-of-memory line without a refusal"

# ---- two ranks: one row each; a process that used no device is no row -----
expect 0 "$cli" sim --native -- sh -c \
    "RANK=0 '$prog' 0 $((2 * mib)) 0 & RANK=1 '$prog' 1 $((6 * mib)) 0 & '$prog' 0 0 0 & wait"
grep -q "sim: 2 processes on" "$dir/err" || fail "a process that used no device is counted"
[ "$(report_peak 0 0)" = $((2 * mib)) ] && [ "$(report_peak 1 1)" = $((6 * mib)) ] ||
    { cat "$dir/err" >&2; fail "two ranks are not reported apart"; }
grep -q "peak 6.0 MiB .* on device 1, rank 1" "$dir/err" || fail "the job's peak is not rank 1's"

# ---- under the shim: same program, the shim's route is named ------------
expect 0 env RANK=0 "$cli" sim --mem 1G -- "$prog" 0 $((8 * mib)) 0
grep -q "under the shim" "$dir/err" || fail "the shim's route is not named"
peak=$(report_peak 0 0)
[ -n "$peak" ] && [ "$peak" -ge $((8 * mib)) ] || fail "under the shim the peak is '$peak'"

# ---- traced: each process's trace named at the end, as `record` names them --
expect 0 env FSDPSHIM_TRACE="$dir/t-%p.fst" "$cli" sim --conf trace:events -- sh -c \
    "RANK=0 '$prog' 0 $mib 0 & RANK=1 '$prog' 1 $mib 0 & wait"
sed -n "s|^fsdpshim sim: trace: \($dir/t-[0-9]*\.fst\) ([0-9]* bytes)\$|\1|p" "$dir/err" >"$dir/named"
[ "$(wc -l <"$dir/named")" -eq 2 ] || fail "not two traces named: $(cat "$dir/err")"
[ "$(ls "$dir"/t-*.fst | sort)" = "$(sort "$dir/named")" ] || fail "named: $(cat "$dir/named")"
tail -1 "$dir/err" | grep -q "^fsdpshim sim: trace: " || fail "the traces are not named last"
rm -f "$dir"/t-*.fst
# from FSDPSHIM_CONF too; a run with tracing off names none, nor does one
# without the shim
expect 0 env RANK=0 FSDPSHIM_TRACE="$dir/t-%p.fst" FSDPSHIM_CONF=trace:stacks "$cli" sim -- \
    "$prog" 0 $mib 0
grep -q "^fsdpshim sim: trace: $dir/t-[0-9]*\.fst" "$dir/err" || fail "FSDPSHIM_CONF: $(cat "$dir/err")"
expect 0 env RANK=0 "$cli" sim --conf trace:off -- "$prog" 0 $mib 0
! grep -q "trace" "$dir/err" || fail "an untraced run names traces: $(cat "$dir/err")"
expect 0 env RANK=0 "$cli" sim --native --conf trace:events -- "$prog" 0 $mib 0
! grep -q "trace" "$dir/err" || fail "a native run names traces: $(cat "$dir/err")"
# inside `fsdpshim record` the outer launcher names the file, once
expect 0 env RANK=0 "$cli" record -o "$dir/r-%p.fst" -- "$cli" sim -- "$prog" 0 $mib 0
[ "$(grep -c "trace: $dir/r-[0-9]*\.fst" "$dir/err")" -eq 1 ] || fail "under record: $(cat "$dir/err")"
! grep -q "^fsdpshim sim: trace" "$dir/err" || fail "under record, sim named it: $(cat "$dir/err")"

# ---- refusals: the device says how much it was asked for --------------------
expect 10 env RANK=0 "$cli" sim --native --mem 4M -- "$prog" 0 $((6 * mib)) 0
grep -q "out of memory: device 0 of rank 0 .* refused 1 allocation, the largest 6.0 MiB" \
    "$dir/err" || fail "a refused allocation is not reported"

# ---- a dry run: 48 GiB set in full on a 64 GiB device moves no bytes ------
expect 0 env RANK=0 "$cli" sim --native --no-data --mem 64G -- "$prog" 0 $((48 << 30)) 0 set
grep -q "dry run" "$dir/err" || fail "the dry run is not named"
[ "$(report_peak 0 0)" = $((48 << 30)) ] || fail "the dry run's peak is not 48 GiB"

# ---- a signal: 128 + N, and the report still comes ------------------------
# (1 MiB takes a 2 MiB page of the device: docs/sim.md, "Device memory")
expect 143 "$cli" sim --native -- sh -c "RANK=0 '$prog' 0 $mib 0; kill -TERM \$\$"
[ "$(report_peak 0 0)" = $((2 * mib)) ] || fail "no report after the job was killed"
exit 0
