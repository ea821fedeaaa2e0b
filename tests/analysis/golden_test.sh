#!/usr/bin/env bash
# golden_test.sh - the analyzer's output on a fixed set of traces, byte for
# byte: every command (dump, top by each grouping, leaks, timeline, diff,
# report and its HTML page, each export format, replay) is run on the
# committed traces in golden/traces/ (recorded by golden/record.sh) and its
# stdout, stderr and exit status compared with golden/expected/NAME.out.
# Binary outputs (the memviz pickle, the Perfetto protobuf) are compared by
# size and SHA-256. This is the check that a refactor of analysis/ changed
# nothing a user sees; a change meant to alter the output updates expected/
# in the same commit (`golden_test.sh FSDPSHIM --update`, then read the diff).
# Words renamed on purpose are mapped by golden/renames.sed, applied to the
# expected text before comparing; the trace format's field names change
# only with a format version (a new recording), never through that map.
#
#   golden_test.sh FSDPSHIM [--update]
set -uo pipefail
cli=$(realpath "$1") update=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
golden=$here/golden
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export FSDPSHIM_ANALYSIS_THREADS=1 LC_ALL=C
unset FSDPSHIM_TRACE FSDPSHIM_TRACE_LIST
cd "$golden/traces" || exit 1

mf=(mf-0.fst mf-1.fst mf-2.fst mf-3.fst)
small=(sites.fst leak.fst fragment.fst backward_thread.fst oom.fst oom_streams.fst)
torch=(torch-0.fst torch-1.fst)
all=("${small[@]}" "${mf[@]}" "${torch[@]}")
ns=--no-symbols

# NAME ARGS...: one case; "@OUT" in ARGS is a file whose bytes are compared
# by size and digest (binary formats) or appended (text).
cases() {
    run dump.all dump --all "${small[@]}" "${mf[@]}"
    run dump.torch dump --no-stacks torch-1.fst
    for by in stack frame annotation python; do
        run "top.$by" top --by "$by" -n 20 $ns "${all[@]}"
        run "leaks.$by" leaks --by "$by" -n 0 $ns "${all[@]}"
        run "diff.$by" diff --by "$by" -n 0 $ns torch-0.fst torch-1.fst
        run "report.$by" report --by "$by" -n 8 $ns "${all[@]}"
    done
    for sort in count total temporary; do
        run "top.sort-$sort" top --sort "$sort" -n 20 $ns "${all[@]}"
    done
    run top.full-stacks top --by python --full-stacks -n 0 $ns "${torch[@]}"
    run leaks.fail leaks --fail $ns leak.fst
    run timeline timeline "${all[@]}"
    run timeline.narrow timeline --intervals 7 --width 13 "${mf[@]}"
    run diff.mf diff --sort total -n 0 $ns mf-0.fst mf-3.fst
    for t in oom.fst oom_streams.fst fragment.fst; do
        run "report.${t%.fst}" report $ns "$t"
    done
    run report.html report -n 3 $ns --html @OUT "${all[@]}"
    run export.folded export --folded $ns "${all[@]}"
    for w in total count; do
        run "export.folded-$w" export --folded --weight "$w" --by python $ns "${torch[@]}"
    done
    run export.chrome export --chrome $ns "${all[@]}"
    run export.perfetto export --perfetto $ns -o @OUT "${all[@]}"
    for at in peak end 0.5; do
        run "export.memviz-$at" export --memviz --at "$at" $ns -o @OUT torch-0.fst
    done
    run export.memviz-small export --memviz $ns -o @OUT oom.fst
    run replay replay --conf expandable_segments:true --conf max_split_size_mb:32 \
        --conf garbage_collection_threshold:0.5 $ns "${all[@]}"
    run replay.mem replay --conf cross_stream_reuse:none --mem 64M $ns oom.fst oom_streams.fst
}

failed=0 count=0
run() {
    local name=$1 got=$scratch/$1.out exp=$golden/expected/$1.out
    shift
    local args=() a bin=
    for a in "$@"; do
        if [ "$a" = @OUT ]; then bin=$scratch/$name.bin a=$bin; fi
        args+=("$a")
    done
    "$cli" "${args[@]}" >"$scratch/stdout" 2>"$scratch/stderr"
    local rc=$?
    {
        echo "## fsdpshim $*"
        sed "s|$scratch|OUT|g" "$scratch/stdout"
        echo "## stderr"
        sed "s|$scratch|OUT|g" "$scratch/stderr"
        echo "## exit $rc"
        if [ -n "$bin" ]; then
            echo "## file: $(stat -c %s "$bin" 2>/dev/null || echo missing) bytes," \
                "sha256 $(sha256sum <"$bin" 2>/dev/null | cut -c1-64)"
        fi
    } >"$got"
    count=$((count + 1))
    if [ "$update" = --update ]; then
        cp "$got" "$exp"
        return
    fi
    if [ ! -f "$exp" ]; then
        echo "golden: $name: no expected output (golden_test.sh FSDPSHIM --update)" >&2
        failed=$((failed + 1))
        return
    fi
    sed -f "$golden/renames.sed" "$exp" >"$scratch/expected"
    if ! cmp -s "$scratch/expected" "$got"; then
        echo "golden: $name differs from expected/$name.out:" >&2
        diff "$scratch/expected" "$got" | head -20 >&2
        failed=$((failed + 1))
    fi
}

[ "$update" = --update ] && mkdir -p "$golden/expected" && rm -f "$golden/expected"/*.out
cases
if [ "$update" = --update ]; then
    echo "golden: $count outputs written to $golden/expected"
    exit 0
fi
[ "$failed" -eq 0 ] || { echo "golden: $failed of $count outputs differ" >&2; exit 1; }
extra=$(ls "$golden/expected" | grep -c .)
[ "$extra" -eq "$count" ] ||
    { echo "golden: expected/ holds $extra outputs, the cases $count" >&2; exit 1; }
echo "golden: $count outputs identical"
