#!/usr/bin/env bash
# check_run.sh - runs one job of the torch tests and checks what it printed.
#
#   check_run.sh --ranks N [--train] [--shim MIN] [--adapter] [--over-host] -- CMD...
#
# CMD (the runner and its program) must exit 0; its output is passed through.
#   --train       each rank 0..N-1 printed train_fsdp's memory line, and
#                 rank 0 its last step's loss line
#   --shim MIN    the job runs with FSDPSHIM_LOG=info, and the shim's exit
#                 line of each rank r (its device r) says it served at least
#                 MIN allocations: PyTorch's tensors, not only the dozen
#                 segments PyTorch's own allocator would ask for
#   --adapter     each rank's PyTorch took fsdpshim's adapter as its allocator
#                 (the shim's line at install, FSDPSHIM_LOG=info)
#   --tracker     with --adapter: each rank's segment events go to PyTorch's
#                 allocator trace trackers (PyTorch 2.15's default NCCL process
#                 group attaches one, for its buffer registration)
#   --over-host   the devices' peaks (the peak_bytes column of `fsdpshim sim`'s
#                 report) add up to
#                 more than this machine's memory: a dry run of a job that
#                 could not run here with data
#   --own-device PROBE
#                 PROBE (libfs_ctx_probe.so, ctx_probe.c) is preloaded after
#                 everything else, and at exit each rank r of the N holds a
#                 context on device r alone, the launcher on none: one device
#                 per rank, and nothing of the job (the shim included)
#                 touches another rank's device
set -uo pipefail

ranks=1 train=0 shim_min=0 over_host=0 probe= adapter=0 tracker=0
while [ $# -gt 0 ]; do
    case $1 in
        --ranks) ranks=$2; shift 2 ;;
        --train) train=1; shift ;;
        --shim) shim_min=$2; shift 2 ;;
        --over-host) over_host=1; shift ;;
        --adapter) adapter=1; shift ;;
        --tracker) tracker=1; shift ;;
        --own-device) probe=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "check_run.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[ "$shim_min" -gt 0 ] || [ "$adapter" = 1 ] && export FSDPSHIM_LOG=info
[ -n "$probe" ] && export LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$probe"

out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}

failed=0
fail() { echo "check_run.sh: FAILED: $*"; failed=1; }

[ "$rc" -eq 0 ] || fail "the job exited $rc"
if [ "$train" = 1 ]; then
    grep -Eq '^train_fsdp: step [0-9]+ loss ' "$out" || fail "rank 0 printed no step"
fi
for ((r = 0; r < ranks; r++)); do
    if [ "$adapter" = 1 ]; then
        grep -Eq "^fsdpshim\[[0-9]+ rank $r\]: PyTorch's allocator: fsdpshim's adapter, built for " "$out" ||
            fail "rank $r: PyTorch did not take fsdpshim's adapter"
        if [ "$tracker" = 1 ]; then
            grep -Eq "^fsdpshim\[[0-9]+ rank $r\]: segment events go to PyTorch's allocator trace trackers" "$out" ||
                fail "rank $r: no allocator trace tracker attached"
        fi
    fi
    if [ "$train" = 1 ]; then
        grep -Eq "^train_fsdp: rank $r: max_memory_allocated=[0-9]+ max_memory_reserved=[0-9]+ peak_device_used=[1-9][0-9]*\$" "$out" ||
            fail "rank $r printed no memory line"
    fi
    if [ "$shim_min" -gt 0 ]; then
        served=$(sed -nE "s/^fsdpshim\[[0-9]+ rank $r\]: device $r: ([0-9]+) allocations served by [0-9]+ device allocations.*/\1/p" "$out" | head -n 1)
        if [ -z "$served" ]; then
            fail "no exit line of the shim for rank $r (device $r)"
        elif [ "$served" -lt "$shim_min" ]; then
            fail "the shim served $served allocations on rank $r, fewer than $shim_min"
        fi
    fi
done
if [ -n "$probe" ]; then
    # ctx_probe: pid P rank R local_rank L contexts on devices: D...
    for ((r = 0; r < ranks; r++)); do
        line=$(grep -E "^ctx_probe: pid [0-9]+ rank [0-9]+ local_rank $r contexts on devices:" "$out" | head -n 1)
        held=${line#*devices:}
        if [ -z "$line" ]; then
            fail "no ctx_probe line for local rank $r"
        elif [ "$held" != " $r" ]; then
            fail "local rank $r holds contexts on devices${held:- (none)}, not on device $r alone"
        fi
    done
    # processes that are no rank (torchrun's launcher): no context at all
    launcher=$(sed -nE 's/^ctx_probe: pid [0-9]+ rank - local_rank - contexts on devices:(.+)$/\1/p' "$out" | head -n 1)
    [ -z "$launcher" ] || fail "the launcher holds contexts on devices$launcher"
fi
if [ "$over_host" = 1 ]; then
    host=$(awk '/^MemTotal:/ {printf "%.0f", $2 * 1024}' /proc/meminfo)
    peaks=$(awk '$1 == "fsdpshim" && $2 == "sim:" && $4 ~ /^[0-9]+$/ && $5 ~ /^[0-9]+$/ {print $8}' "$out" |
        awk '{s += $1} END {printf "%.0f", s}')
    echo "check_run.sh: device peaks add up to $peaks bytes; this machine has $host"
    awk -v p="$peaks" -v h="$host" 'BEGIN {exit !(p > h)}' || fail "the devices' peaks do not exceed the host's memory"
fi
[ "$failed" = 0 ] && echo "check_run.sh: ok"
exit "$failed"
