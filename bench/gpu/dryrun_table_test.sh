#!/usr/bin/env bash
# dryrun_table_test.sh - dryrun_table.sh on the raw files of 2026-11-27 (the
# dry run's predictions on the sim, the H100's measurements, both kept in
# bench/gpu/results/): every job both hold gets its rows, the errors are
# (predicted - measured) / measured of the medians, a figure the GPU did not
# measure (max reserved with no caching: 0) has no row, and bad input gets
# its exit status and message.
#
#   dryrun_table_test.sh DRYRUN_TABLE RESULTS_DIR
set -uo pipefail
table=$1 results=$2
fail() { echo "dryrun_table_test: $*" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$table" "$results/2026-11-27-sim-predicted.raw" "$results/2026-11-27-h100-run5.raw" >"$out/t" ||
    fail "exit $?"
cat "$out/t"
row() { grep -E "^$1 +$2 +$3 " "$out/t"; }
# job route figure predicted measured error, as computed by hand from the raw files
check() {
    local r
    r=$(row "$1" "$2" "$3") || fail "no row for $1 $2 $3"
    echo "$r" | awk -v p="$4" -v m="$5" -v e="$6" '{ exit !($(NF - 5) == p && $(NF - 4) == m && $NF == e) }' ||
        fail "$1 $2 $3: '$r', expected predicted $4 measured $5 error $6"
}
check train2 native "max reserved" 8826.0 8826.0 +0.00%
check train2 native "device peak" 8826.6 10556.8 -16.39%
# the sim's two FSDP1 runs under the shim (8264, 8068) give their median
check train1 shim "max reserved" 8166.0 8995.0 -9.22%
! row train2 nocache "max reserved" >/dev/null || fail "a row for a figure the GPU did not measure"
[ "$(grep -c '^train' "$out/t")" -eq 12 ] || fail "$(grep -c '^train' "$out/t") rows, expected 12"

"$table" "$results/2026-11-27-sim-predicted.raw" >/dev/null 2>"$out/err"
[ $? -eq 2 ] && grep -q usage "$out/err" || fail "one argument: not a usage error"
printf 'pair.shim_async.4096 90\n' >"$out/other.raw"
"$table" "$results/2026-11-27-sim-predicted.raw" "$out/other.raw" >/dev/null 2>"$out/err"
[ $? -eq 1 ] && grep -q 'share no training figure' "$out/err" || fail "no shared figure: not exit 1"
echo "dryrun_table_test: ok"
