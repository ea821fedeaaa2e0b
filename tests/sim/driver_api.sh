#!/bin/sh
# driver_api.sh - the simulated driver (libcuda.so.1) against the toolkit's
# cuda.h, for the families a driver-level program needs: memory (cuMem*,
# copies cuMemcpy*, sets cuMemset*), streams (cuStream*), events
# (cuEvent*), contexts (cuCtx*), pointer attributes (cuPointer*), modules
# (cuModule*) and launches (cuLaunch*).
#
# Every function cuda.h declares in those families, as a program compiles
# against it (preprocessed, so under the ABI names cuda.h maps the base
# names to: cuMemsetD8 is cuMemsetD8_v2), and again as a per-thread default
# stream build compiles against it (cuMemsetD8_v2_ptds), must be exported
# by the library and be what its cuGetProcAddress answers for the base name:
# at the CUDA version that introduced that ABI (cudaTypedefs.h's
# PFN_<base>_v<version>, counted oldest first: the unversioned name is the
# first ABI, _v2 the second), at this toolkit's version, and, for the newest
# ABI, never for an older version; the _ptsz/_ptds forms under
# CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM. The static runtime, CuPy,
# Numba, JAX and NCCL reach the driver only that way. Out of scope, each
# with its reason, is the short list below; a name listed there that the
# library does export fails the test, so the list only shrinks.
#
# Usage: driver_api.sh CC CUDA_INCLUDE_DIR LIBCUDA DRIVER_LOOKUP
set -eu
export LC_ALL=C # one sort order for sort and comm

cc=$1
include=$2
libcuda=$3
lookup=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name (the ABI symbol, without _ptsz/_ptds) and why the sim leaves it out
cat >"$work/excluded" <<'EOF'
cuMemcpyAtoA_v2 CUDA arrays: the sim has none (no cuArrayCreate, textures or surfaces)
cuMemcpyAtoD_v2 CUDA arrays
cuMemcpyAtoH_v2 CUDA arrays
cuMemcpyAtoHAsync_v2 CUDA arrays
cuMemcpyDtoA_v2 CUDA arrays
cuMemcpyHtoA_v2 CUDA arrays
cuMemcpyHtoAAsync_v2 CUDA arrays
cuMemMapArrayAsync CUDA arrays (sparse)
cuModuleGetTexRef texture references, deprecated, and the sim has no textures
cuModuleGetSurfRef surface references, deprecated, and the sim has no surfaces
cuMemAdvise_v2 managed memory placement: the sim's managed memory is host memory, nothing migrates
cuMemPrefetchAsync_v2 managed memory placement
cuMemPrefetchBatchAsync managed memory placement
cuMemDiscardBatchAsync managed memory placement
cuMemDiscardAndPrefetchBatchAsync managed memory placement
cuMemRangeGetAttribute managed memory placement (what the hints above set)
cuMemRangeGetAttributes managed memory placement
cuStreamAttachMemAsync managed memory placement
cuMemPoolExportToShareableHandle pool IPC: the runtime's pools have no shareable backing
cuMemPoolImportFromShareableHandle pool IPC
cuMemPoolExportPointer pool IPC
cuMemPoolImportPointer pool IPC
cuStreamGetAttribute stream attributes (L2 access window, sync policy, memory sync domains): not kept by the sim's streams
cuStreamSetAttribute stream attributes
cuStreamCopyAttributes stream attributes
cuCtxRecordEvent an event over every stream of a context: the model's events record one stream
cuCtxWaitEvent an event over every stream of a context
cuCtxAttach deprecated since CUDA 4.0 (cuCtxPushCurrent/cuCtxPopCurrent)
cuCtxDetach deprecated since CUDA 4.0
cuLaunch deprecated execution control (cuFuncSetBlockShape, cuParamSet*)
cuLaunchGrid deprecated execution control
cuLaunchGridAsync deprecated execution control
cuLaunchCooperativeKernelMultiDevice deprecated since CUDA 11.3
EOF
awk '{print $1}' "$work/excluded" | sort -u >"$work/excluded.names"

family='^cu(Mem|Stream|Event|Ctx|Pointer|Module|Launch)'

# The functions a build declares, by their symbols.
declared() {
    echo '#include <cuda.h>' | "$cc" -E -P "$@" -I "$include" -x c - | tr '\n' ' ' |
        grep -oE 'CUresult +cu[A-Za-z0-9_]+ *\(' | sed -E 's/^CUresult +//; s/ *\($//' |
        grep -E "$family" | sort -u
}
declared >"$work/plain"
declared -DCUDA_API_PER_THREAD_DEFAULT_STREAM | grep -E '_pt(sz|ds)$' >"$work/pt" || :
if [ ! -s "$work/plain" ]; then
    echo "FAIL no function of the families found in $include/cuda.h"
    exit 1
fi

# Every ABI version of every base name: "base version", and the per-thread
# ones "base version pt", from the typedefs; the ABIs only the driver's
# own build declares (the 32-bit ones) count for the numbering, not for
# the checks.
sed -n '1,/__CUDA_API_VERSION_INTERNAL/p' "$include/cudaTypedefs.h" |
    grep -oE 'PFN_cu[A-Za-z0-9]+_v[0-9]+(_pt(sz|ds))?\)' |
    sed -E 's/^PFN_//; s/\)$//; s/_v([0-9]+)_pt(sz|ds)$/ \1 pt/; s/_v([0-9]+)$/ \1/' |
    sort -u >"$work/public.versions"
grep -oE 'PFN_cu[A-Za-z0-9]+_v[0-9]+\)' "$include/cudaTypedefs.h" |
    sed -E 's/^PFN_//; s/\)$//; s/_v([0-9]+)$/ \1/' | sort -k1,1 -k2,2n -u >"$work/all.versions"

failed=0
nm -D --defined-only "$libcuda" | awk '{print $NF}' | sort -u >"$work/exported"

# Out of scope, but exported: the list is stale.
stale=$(comm -12 "$work/excluded.names" "$work/exported")
if [ -n "$stale" ]; then
    echo "FAIL libcuda.so.1 exports functions the excluded list still names (remove them):"
    echo "$stale" | sed 's/^/  /'
    failed=1
fi

# The symbols to check, their per-thread forms with theirs.
cat "$work/plain" "$work/pt" | while read -r sym; do
    name=$(echo "$sym" | sed -E 's/_pt(sz|ds)$//')
    grep -qx "$name" "$work/excluded.names" || echo "$sym"
done | sort -u >"$work/checked"
missing=$(comm -23 "$work/checked" "$work/exported")
if [ -n "$missing" ]; then
    echo "FAIL cuda.h declares functions libcuda.so.1 does not export:"
    echo "$missing" | sed 's/^/  /'
    failed=1
fi

# The cuGetProcAddress queries (driver_lookup --abi). The k-th ABI of a base
# name (oldest first, counting every version) is base, base_v2, base_v3...
toolkit=$(grep -m1 -E '^#define CUDA_VERSION [0-9]+' "$include/cuda.h" | awk '{print $3}')
awk -v toolkit="$toolkit" '
    FILENAME == ARGV[1] { n[$1]++; v[$1, n[$1]] = $2; next }       # all.versions, sorted
    FILENAME == ARGV[2] { if ($3 == "pt") pt[$1] = 1; next }        # public.versions
    FILENAME == ARGV[3] { exported[$1] = 1; next }
    {
        sym = $1; flag = "legacy"
        if (sym ~ /_pt(sz|ds)$/) { flag = "ptds"; sym = substr(sym, 1, length(sym) - 5) }
        base = sym; k = 1
        if (match(sym, /_v[0-9]+$/)) { base = substr(sym, 1, RSTART - 1); k = substr(sym, RSTART + 2) + 0 }
        if (!(base in n)) { print "nover " $1; next }
        if (k > n[base]) { print "noabi " $1; next }
        mine = v[base, k]; newest = k == n[base]
        if (flag == "legacy") {
            print base, mine, "legacy", $1
            if (newest) {
                print base, toolkit, "legacy", $1
                # just before it: the previous ABI where the sim has it
                # (the 32-bit ones it has not), never this one
                prev = k == 2 ? base : base "_v" (k - 1)
                print base, mine - 1, "legacy", (k > 1 && prev in exported ? prev : "!" $1)
                # a base without a per-thread form: the flag changes nothing
                if (!(base in pt)) print base, toolkit, "ptds", $1
            }
        } else if (newest) {
            print base, toolkit, "ptds", $1
        } else {
            print base, v[base, k + 1] - 1, "ptds", $1
        }
    }' "$work/all.versions" "$work/public.versions" "$work/exported" "$work/checked" \
    >"$work/queries"
if grep -q '^no' "$work/queries"; then
    echo "FAIL cudaTypedefs.h gives no ABI version for:"
    grep '^no' "$work/queries" | sed 's/^nover /  (no version) /; s/^noabi /  (no such ABI) /'
    failed=1
fi
grep -v '^no' "$work/queries" >"$work/abi" || :
if ! out=$("$lookup" --abi "$libcuda" <"$work/abi"); then
    echo "FAIL cuGetProcAddress does not answer these as cuda.h and cudaTypedefs.h say:"
    echo "$out"
    failed=1
fi

total=$(wc -l <"$work/checked")
excluded=$(wc -l <"$work/excluded.names")
queries=$(wc -l <"$work/abi")
echo "driver_api: $total functions of cuda.h's families checked ($queries lookups), $excluded out of scope"
exit $failed
