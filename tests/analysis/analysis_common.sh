# analysis_common.sh - sourced by the analyzer's tests, each run as
# `TEST.sh FSDPSHIM TRACE_PROG SIM_DIR` with `name` set: the CLI tests'
# scratch directory and helpers (expect, fail), no tracing settings from the
# caller, the simulated device, and trace_prog's source for its SITE_ lines.
cli=$1 prog=$2 sim=$3
. "$here/../integration/runtime/cli_common.sh"
unset NVTX_INJECTION64_PATH FSDPSHIM_NVTX_CHAIN FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
src=$here/../integration/trace/trace_prog.c
