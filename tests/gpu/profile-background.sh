#!/usr/bin/env bash
# Where the GPU mesh background spends its time at 8192 x 8192 (box 64,
# filter 3): every kernel's duration and instruction count (ncu, one stage
# run), then the full ncu sections and the per-SASS-line source counters of
# mesh_stats and mesh_interp as CSV. On the GPU machine, from the repository
# root: . .gpu-bundle/env.sh && tests/gpu/profile-background.sh OUTDIR
set -u
OUT=${1:-/tmp/skyfind-prof}
B=${SKYFIND_BUNDLE:?source .gpu-bundle/env.sh first}/bin/tests/bench/bench_background
mkdir -p "$OUT"
# the bench's checks run the stage (and its halves) first: skip to a timed run
ncu --metrics gpu__time_duration.sum,sm__inst_executed.sum -k regex:"mesh_" --launch-skip 12 \
    --launch-count 8 "$B" --sizes 8192 --repeat 1 2>&1 |
    grep -E "^  [a-z ]*mesh_[a-z]+|duration|inst_executed" | sed 's/(\(ms\|mi\|sp\)_args).*\|(const.*//'
for k in mesh_stats mesh_interp; do
    ncu --set full --import-source yes -k regex:$k --launch-skip 1 --launch-count 1 -o "$OUT/$k" \
        "$B" --sizes 8192 --repeat 1 >/dev/null 2>&1
    ncu -i "$OUT/$k.ncu-rep" --page details 2>&1 | grep -E "Duration|Issued Ipc|Achieved Occ|Warp Cycles Per Issued|DRAM Throughput|Executed Ipc A"
    ncu -i "$OUT/$k.ncu-rep" --page source --print-source sass --csv >"$OUT/$k.sass.csv" 2>/dev/null
done
