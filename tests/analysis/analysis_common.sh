# analysis_common.sh - sourced by the analyzer's tests, each run as
# `TEST.sh FSDPSHIM TRACE_PROG SIM_DIR` with `name` set: the CLI tests'
# scratch directory and helpers (expect, fail), no tracing settings from the
# caller, the simulated device, trace_prog's source for its SITE_ lines,
# and $cli running programs under PyTorch's segment sizes (below).
cli=$1 prog=$2 sim=$3
. "$here/../integration/runtime/cli_common.sh"
unset NVTX_INJECTION64_PATH FSDPSHIM_NVTX_CHAIN FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
export LD_LIBRARY_PATH=$sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
src=$here/../integration/trace/trace_prog.c

# The fixtures' figures (trace_prog's scenarios: 20 MiB segments filled,
# holes left, soft OOMs) were written for PyTorch's segment sizes, so every
# program these tests run or record does so under segment_growth:pytorch
# (docs/configuration.md), put before whatever --conf the test gives: $cli
# is a wrapper that adds it; every other command goes to fsdpshim unchanged.
real_cli=$cli
cli=$dir/fsdpshim-pytorch-growth
cat >"$cli" <<WRAP
#!/usr/bin/env bash
case "\$1" in run | record) ;; *) exec "$real_cli" "\$@" ;; esac
args=("\$1") conf=segment_growth:pytorch given=
shift
while [ \$# -gt 0 ] && [ "\$1" != -- ]; do
    if [ "\$1" = --conf ]; then args+=(--conf "\$conf,\$2") given=1; shift 2; continue; fi
    args+=("\$1")
    shift
done
[ -n "\$given" ] || args+=(--conf "\$conf")
exec "$real_cli" "\${args[@]}" "\$@"
WRAP
chmod +x "$cli"
