#!/usr/bin/env bash
# dryrun_table.sh - the dry run set against the GPU: for every training job
# both raw files hold, the simulated device's prediction (gpu_bench.sh
# --predict, run here before the GPU session) beside the GPU's measurement
# (gpu_bench.sh on the GPU, its raw.txt), for PyTorch's max reserved and the
# device peak that NVML shows, each with the error in percent:
#
#     job  route  figure  predicted  measured [min - max]  error
#
# error = (predicted - measured) / measured: negative where the dry run
# promises less memory than the job took. Both files may hold several rounds
# of a job; each side is its median (medians.awk).
#
#   dryrun_table.sh PREDICTED_RAW MEASURED_RAW
#
# Exit status 2 on usage, 1 when the two files share no training figure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 2 ] && [ -r "$1" ] && [ -r "$2" ] || {
    echo "usage: dryrun_table.sh PREDICTED_RAW MEASURED_RAW (raw files of gpu_bench.sh --predict and of a GPU run)" >&2
    exit 2
}
med() { sort -s -k1,1 "$1" | awk -f "$here/medians.awk"; }

# the two sides' medians, then the joined rows; trainJOB.ROUTE.FIGURE keys only
join -j1 <(med "$1" | sort -k1,1) <(med "$2" | sort -k1,1) | awk '
    $1 ~ /^train[^.]*\.[a-z_]+\.(max_reserved_MiB|peak_device_MiB)$/ {
        split($1, k, ".")
        # fields: key, then MEDIAN MIN MAX N of each side
        pred = $2; meas = $6
        if (meas <= 0) next
        rows[++n] = sprintf("%-11s %-13s %-16s %10.1f %10.1f [%.1f - %.1f] %+8.2f%%", k[1], k[2],
                            k[3] == "peak_device_MiB" ? "device peak" : "max reserved",
                            pred, meas, $7, $8, 100 * (pred - meas) / meas)
    }
    END {
        if (!n) { print "dryrun_table: the two files share no training figure" > "/dev/stderr"; exit 1 }
        printf "%-11s %-13s %-16s %10s %10s %17s %9s\n", "job", "route", "figure (MiB)", "predicted", "measured", "[range]", "error"
        for (i = 1; i <= n; i++) print rows[i]
    }'
