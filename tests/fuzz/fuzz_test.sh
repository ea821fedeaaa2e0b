#!/usr/bin/env bash
# fuzz_test.sh - the reader's fuzz target for a bounded time (README.md):
# seeds recorded from trace_prog on the simulated device (a program's
# sites, an OOM with its snapshot, leaks, several threads) and written by
# fuzz_seeds, with the inputs of crashes found before (regressions/, which
# libFuzzer runs first, as every seed), then libFuzzer from them for
# FSDPSHIM_FUZZ_SECONDS (60). Any
# crash, leak, sanitizer report or input slower than 10 s fails the test;
# its input is kept in ARTIFACTS for `reader_fuzz FILE` to replay.
#
#   fuzz_test.sh FSDPSHIM TRACE_PROG SIM_DIR FUZZ_SEEDS READER_FUZZ ARTIFACTS
name=fuzz_test
cli=$1 prog=$2 sim=$3 seeds=$4 fuzz=$5 artifacts=$6
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../integration/runtime/cli_common.sh"
unset NVTX_INJECTION64_PATH FSDPSHIM_NVTX_CHAIN FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
seconds=${FSDPSHIM_FUZZ_SECONDS:-60}

mkdir "$dir/seeds" "$dir/corpus" "$dir/oom"
for mode in sites leak fragment "flood 2 200"; do
    # shellcheck disable=SC2086 # the mode's words are trace_prog's arguments
    expect 0 "$cli" run --trace -o "$dir/seeds/${mode%% *}.fst" -- "$prog" $mode
done
FSDPSHIM_SIM_MEM=64M FSDPSHIM_OOM_DIR=$dir/oom expect 0 "$cli" run --trace -o "$dir/seeds/oom.fst" -- "$prog" oom
cp "$dir"/oom/*.fst "$dir/seeds/" || fail "the OOM wrote no snapshot"
expect 0 "$seeds" "$dir/seeds"
cp "$here"/regressions/*.fst "$dir/seeds/"
echo "fuzz_test: $(ls "$dir/seeds" | wc -l) seeds, fuzzing for $seconds s"

mkdir -p "$artifacts"
# -close_fd_mask=2: the commands' warnings, not libFuzzer's reports (it
# keeps its own stderr, and the sanitizers', apart)
"$fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=2 \
    -dict="$here/trace.dict" -artifact_prefix="$artifacts/" -print_final_stats=1 \
    "$dir/corpus" "$dir/seeds" 2>"$dir/fuzz.log"
rc=$?
if [ "$rc" -ne 0 ]; then
    cat "$dir/fuzz.log"
    fail "reader_fuzz exited $rc: its input is in $artifacts (replay: $fuzz FILE)"
fi
tail -12 "$dir/fuzz.log"
echo "fuzz_test: ok"
