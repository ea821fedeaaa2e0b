# medians.awk - the median of each figure of a raw file of gpu_bench.sh
# (lines "KEY VALUE", a key once per round), one line per key:
#
#     KEY MEDIAN MIN MAX N
#
# Input sorted by key (sort -s -k1,1), as gpu_bench.sh and dryrun_table.sh
# feed it; lines with no value (a run that printed nothing) are skipped.
$2 == "" { next }
$1 != key { if (key != "") flush(); key = $1; n = 0 }
{ v[++n] = $2 + 0 }
END { if (key != "") flush() }
function flush(   i, j, t, med) {
    for (i = 1; i <= n; i++)
        for (j = i + 1; j <= n; j++)
            if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    printf "%s %.4f %.4f %.4f %d\n", key, med, v[1], v[n], n
}
